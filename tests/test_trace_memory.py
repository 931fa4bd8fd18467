"""Memory sampler: the RSS reader, the thread's start/stop, per-step peaks, NVML mapping."""

from __future__ import annotations

import os
import time

import numpy as np
import psutil
import pytest

from echo_trace.recorder import Recorder
from echo_trace.timing.memory import DEFAULT_INTERVAL_MS, MemorySampler, _StatmRss, nvml_index
from tests.marks import needs_cuda, without_cuda


def _rec() -> Recorder:
    rec = Recorder()
    rec.recording = True
    rec.new_step(0)
    return rec


@pytest.mark.skipif(not os.path.exists("/proc/self/statm"), reason="Linux /proc only")
def test_statm_rss_matches_psutil() -> None:
    read = _StatmRss()
    try:
        blob = bytearray(64 << 20)  # touch 64 MiB so RSS moves between the two reads
        blob[:: 4096] = b"x" * len(blob[:: 4096])
        ours, theirs = read(), psutil.Process().memory_info().rss
        assert abs(ours - theirs) <= 4 << 20 and ours >= len(blob)
    finally:
        read.close()


def test_thread_samples_until_stopped_and_restarts() -> None:
    rec = _rec()
    s = MemorySampler(rec, interval_ms=2.0)
    s.start()
    s.start()  # idempotent: one thread
    deadline = time.monotonic() + 20.0
    while len(rec.events) < 3 and time.monotonic() < deadline:
        time.sleep(0.01)
    s.stop()
    s.stop()
    n = len(rec.events)
    assert n >= 3 and all(r[0] == "C" and r[1] == "memory" for r in rec.events)
    assert all(r[8]["rss_bytes"] > 0 for r in rec.events)
    time.sleep(0.02)
    assert len(rec.events) == n  # the thread is gone
    s.start()  # the wake-up lock was left free
    deadline = time.monotonic() + 20.0
    while len(rec.events) == n and time.monotonic() < deadline:
        time.sleep(0.01)
    s.close()
    assert len(rec.events) > n and rec.enabled


def test_zero_interval_means_boundary_samples_only() -> None:
    rec = _rec()
    s = MemorySampler(rec, interval_ms=0)
    s.start()
    assert s._thread is None
    first = s.sample()["rss_bytes"]
    s.sample()
    peaks = s.take_peaks()
    assert peaks["peak_rss_bytes"] >= first > 0
    assert set(peaks) == {"peak_rss_bytes", "minor_faults", "major_faults"}
    assert set(s.take_peaks()) == {"minor_faults", "major_faults"}  # reset for the next step
    rec.recording = False
    s.sample()  # outside the window: peaks only, no event
    assert len(rec.events) == 2 and s.take_peaks()["peak_rss_bytes"] > 0
    s.close()


def test_step_page_faults_count_the_fresh_pages_a_step_touches() -> None:
    """Between two step boundaries the sampler reports the process's page faults: a step that
    writes every page of 64 MiB of fresh anonymous memory takes at least one fault per page
    it maps in (per 2 MiB where transparent huge pages back it), a step that allocates
    nothing next to none. The memory is mapped directly: a tensor from malloc can land in
    heap pages an earlier test in this worker touched and freed (once a freed 30 MiB block
    has raised glibc's mmap threshold, its heap grows and is kept: after three rounds of
    twelve 30 MiB tensors, a 64 MiB tensor took no fault at all; in CI it once took none)."""
    import mmap

    s = MemorySampler(_rec(), interval_ms=0)
    s.take_peaks()
    idle = s.take_peaks()
    fresh = mmap.mmap(-1, 64 << 20)
    x = np.frombuffer(fresh, dtype=np.uint8)
    x[::mmap.PAGESIZE] = 1  # one byte written in every page
    touched = s.take_peaks()
    assert int(x[-mmap.PAGESIZE]) == 1
    del x
    fresh.close()
    assert touched["minor_faults"] >= (64 << 20) // (2 << 20)
    assert touched["minor_faults"] > 8 * max(idle["minor_faults"], 1)
    assert idle["major_faults"] >= 0 and touched["major_faults"] >= 0
    s.close()


def test_default_interval_is_long_enough_not_to_contend() -> None:
    assert 50.0 <= DEFAULT_INTERVAL_MS <= 100.0


def test_nvml_index_mapping() -> None:
    assert nvml_index(1, None) == 1 and nvml_index(1, "") == 1
    assert nvml_index(1, "3,2") == 2
    assert nvml_index(0, "GPU-abc, GPU-def") == "GPU-abc"
    assert nvml_index(5, "0,1") == 5  # beyond the list: as is


@without_cuda
def test_allocator_peaks_fall_back_to_samples_once(caplog) -> None:
    """With the real torch.cuda API but no usable allocator (a CPU build), the per-step
    peaks say they were sampled, with one warning, and capture stays on."""
    import logging


    caplog.set_level(logging.WARNING, logger="echo_trace")
    rec = _rec()
    s = MemorySampler(rec, interval_ms=0, cuda_device=0)
    s.sample()
    first = s.take_peaks()
    second = s.take_peaks()
    assert first["peak_source"] == "sampled" == second["peak_source"]
    assert first["peak_rss_bytes"] > 0
    assert sum("allocator peaks unavailable" in r.message for r in caplog.records) == 1
    assert rec.enabled
    s.close()


@pytest.mark.gpu
@needs_cuda
def test_cuda_step_peak_is_the_allocator_peak() -> None:
    """A transient 256 MiB tensor freed before any sample: the sampler never sees it, the
    allocator's peak (reset at each step boundary) does, and the next step starts afresh."""
    import torch

    rec = _rec()
    s = MemorySampler(rec, interval_ms=0, cuda_device=torch.cuda.current_device())
    s.take_peaks()  # step boundary
    base = torch.cuda.memory_allocated()
    x = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
    del x
    torch.cuda.synchronize()
    s.sample()
    peaks = s.take_peaks()
    assert peaks["peak_source"] == "allocator"
    assert peaks["peak_cuda_allocated_bytes"] >= base + (256 << 20)
    assert peaks["peak_cuda_reserved_bytes"] >= peaks["peak_cuda_allocated_bytes"]
    s.sample()
    assert s.take_peaks()["peak_cuda_allocated_bytes"] < base + (256 << 20)
    s.close()


def test_close_without_waiting_releases_the_descriptor() -> None:
    rec = _rec()
    s = MemorySampler(rec, interval_ms=1.0)
    s.start()
    time.sleep(0.01)
    s.close(wait=False)  # returns at once; the thread closes the descriptor as it ends
    deadline = time.monotonic() + 20.0
    while getattr(s._rss, "_fd", -1) != -1 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert getattr(s._rss, "_fd", -1) == -1 and rec.enabled
