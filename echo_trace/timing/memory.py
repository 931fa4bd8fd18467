"""Memory: a background sampler for the timeline, and per-step peaks for the STEP events.

Timeline: every ``interval_ms`` (and at every step boundary) a thread reads host RSS and,
on CUDA, ``torch.cuda.memory_allocated/reserved`` of the capture's device and the
device's NVML ``used`` bytes (``pynvml`` from ``nvidia-ml-py``, imported lazily; the CUDA
index is mapped to the NVML index through ``CUDA_VISIBLE_DEVICES``), as ``memory`` counter
events. Missing NVML just leaves that counter out. An error in the thread disables
capture once (``Recorder.fail``) and ends the thread; training is untouched.

Per-step peaks (``STEP`` args, bytes): on CUDA the caching allocator's own high-water
marks, exact whatever the sampling period (a 50 ms sampler missed 15-69 % of the peak on
an H100): ``peak_cuda_allocated_bytes = torch.cuda.max_memory_allocated`` and
``peak_cuda_reserved_bytes = torch.cuda.max_memory_reserved`` since the previous step
boundary, where :meth:`MemorySampler.take_peaks` calls
``torch.cuda.reset_peak_memory_stats`` (so inside the window a user's own
``max_memory_allocated`` also counts from the last step boundary). ``peak_nvml_used_bytes``
(whole device, other processes included) and ``peak_rss_bytes`` are the highest samples
of the step (the sampler's and the boundaries'); ``peak_source`` says which of the two
the CUDA peaks came from (``"allocator"``; ``"sampled"`` if the allocator's counters
failed). ``minor_faults`` / ``major_faults``: the process's page faults during the step
(``getrusage(RUSAGE_SELF)`` at both step boundaries, Unix only): a minor fault is a fresh
4 KiB page mapped in, which is what memory the allocator handed back to the system between
steps costs when it is touched again (on a 2-core VM, ~1.5 µs each; glibc's adaptive
``malloc`` thresholds make how many a process takes per step depend on its history).

Cost: the thread must take the GIL from the training loop at every wake-up, so the
default period (:data:`DEFAULT_INTERVAL_MS`) is long, and one sample is short: on Linux
RSS is one ``pread`` of ``/proc/self/statm`` on a descriptor kept open (about 1 µs;
psutil's ``memory_info().rss``, the fallback elsewhere, opens and parses the file each
time; ``memory_full_info`` is far too slow to sample).
"""

from __future__ import annotations

import logging
import os
import threading
from typing import Any

from echo_trace.recorder import Recorder

__all__ = ["DEFAULT_INTERVAL_MS", "MemorySampler", "nvml_index"]

log = logging.getLogger("echo_trace")

#: Sampling period of ``echo_trace.capture()`` (ms): a wake-up every 10 ms cost the GPT
#: example several % of its step time on a busy 2-core machine; step boundaries are
#: sampled anyway.
DEFAULT_INTERVAL_MS = 50.0


def nvml_index(cuda_index: int, visible: str | None) -> int | str:
    """NVML device for CUDA device ``cuda_index`` given ``CUDA_VISIBLE_DEVICES``.

    Returns an int index, or a UUID string when the variable lists UUIDs (``GPU-...``).
    """
    if visible is None or not visible.strip():
        return cuda_index
    items = [v.strip() for v in visible.split(",") if v.strip()]
    if cuda_index >= len(items):
        return cuda_index
    item = items[cuda_index]
    return int(item) if item.isdigit() else item


def _nvml_handle(cuda_index: int) -> Any:
    """An NVML handle for the device, or None when NVML is unavailable."""
    try:
        import pynvml  # nvidia-ml-py
    except ImportError:
        return None
    try:
        pynvml.nvmlInit()
        which = nvml_index(cuda_index, os.environ.get("CUDA_VISIBLE_DEVICES"))
        if isinstance(which, int):
            return pynvml.nvmlDeviceGetHandleByIndex(which)
        return pynvml.nvmlDeviceGetHandleByUUID(which)
    except Exception as e:  # noqa: BLE001 - NVML is optional
        log.info("echo_trace: NVML unavailable (%s); nvml_used_bytes not sampled", e)
        return None


class _StatmRss:
    """Resident set size from ``/proc/self/statm`` (field 2, pages), one ``pread`` each."""

    def __init__(self) -> None:
        self._fd = os.open("/proc/self/statm", os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
        self._page = os.sysconf("SC_PAGE_SIZE")
        self()  # fails here, not in the thread, where the file cannot be read

    def __call__(self) -> int:
        return int(os.pread(self._fd, 128, 0).split(None, 2)[1]) * self._page

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


def _rss_reader() -> tuple[Any, Any]:
    """``(read_rss_bytes, close)``: statm on Linux, psutil elsewhere."""
    try:
        statm = _StatmRss()
        return statm, statm.close
    except (OSError, ValueError, IndexError, AttributeError):
        import psutil

        proc = psutil.Process()
        return (lambda: int(proc.memory_info().rss)), (lambda: None)


def page_faults() -> tuple[int, int] | None:
    """(minor, major) page faults of this process so far; None where ``resource`` is
    missing (Windows). One ``getrusage`` call, about a microsecond."""
    try:
        import resource
    except ImportError:
        return None
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return int(ru.ru_minflt), int(ru.ru_majflt)


class MemorySampler:
    """Samples memory every ``interval_ms`` while recording; tracks per-step peaks (bytes)."""

    def __init__(self, rec: Recorder, *, interval_ms: float, cuda_device: int | None = None
                 ) -> None:
        self.rec = rec
        self.interval_s = interval_ms / 1000.0
        self.cuda_device = cuda_device
        self._rss, self._close = _rss_reader()
        self._wake = threading.Lock()
        self._thread: threading.Thread | None = None
        self._peaks: dict[str, float] = {}
        self._lock = threading.Lock()
        self._nvml: Any = None
        self._cuda: Any = None
        self._warned_allocator = False
        self._close_at_exit = False
        self._faults = page_faults()
        if cuda_device is not None:
            import torch

            self._cuda = torch.cuda
            self._nvml = _nvml_handle(cuda_device)

    def sample(self) -> dict[str, float]:
        """Read the counters now, record them (when recording) and update the peaks."""
        vals: dict[str, float] = {"rss_bytes": self._rss()}
        if self._cuda is not None:
            dev = self.cuda_device
            vals["cuda_allocated_bytes"] = int(self._cuda.memory_allocated(dev))
            vals["cuda_reserved_bytes"] = int(self._cuda.memory_reserved(dev))
            if self._nvml is not None:
                import pynvml

                vals["nvml_used_bytes"] = int(pynvml.nvmlDeviceGetMemoryInfo(self._nvml).used)
        rec = self.rec
        if rec.enabled and rec.recording:
            rec.counter("memory", rec.now_us(), dict(vals))
        with self._lock:
            peaks = self._peaks
            for k, v in vals.items():
                if v > peaks.get(k, -1):
                    peaks[k] = v
        return vals

    def take_peaks(self) -> dict[str, Any]:
        """STEP args for the step just ended (``peak_rss_bytes``, ...; see the module doc)
        and a new step begins: the sampled peaks and, on CUDA, the allocator's peak
        counters start again from now."""
        with self._lock:
            peaks, self._peaks = self._peaks, {}
        out: dict[str, Any] = {}
        for src, dst in (("rss_bytes", "peak_rss_bytes"),
                         ("cuda_allocated_bytes", "peak_cuda_allocated_bytes"),
                         ("cuda_reserved_bytes", "peak_cuda_reserved_bytes"),
                         ("nvml_used_bytes", "peak_nvml_used_bytes")):
            if src in peaks:
                out[dst] = peaks[src]
        if self._cuda is not None:
            out.update(self._allocator_peaks())
        faults, before = page_faults(), self._faults
        self._faults = faults
        if faults is not None and before is not None:
            out["minor_faults"] = faults[0] - before[0]
            out["major_faults"] = faults[1] - before[1]
        return out

    def _allocator_peaks(self) -> dict[str, Any]:
        """The allocator's peaks since the last call, then a reset (CUDA only)."""
        cuda, dev = self._cuda, self.cuda_device
        try:
            allocated = int(cuda.max_memory_allocated(dev))
            reserved = int(cuda.max_memory_reserved(dev))
            cuda.reset_peak_memory_stats(dev)
        except Exception as e:  # noqa: BLE001 - keep the sampled peaks
            if not self._warned_allocator:
                self._warned_allocator = True
                log.warning("echo_trace: CUDA allocator peaks unavailable (%s); per-step "
                            "peaks are sampled", e)
            return {"peak_source": "sampled"}
        return {"peak_cuda_allocated_bytes": allocated, "peak_cuda_reserved_bytes": reserved,
                "peak_source": "allocator"}

    def _run(self) -> None:
        # a timed acquire of a lock that stop() releases: one wake-up per period (a bare
        # lock is cheaper to wait on than threading.Event, which builds a lock per wait)
        wake, interval_s, rec = self._wake, self.interval_s, self.rec
        try:
            while not wake.acquire(True, interval_s):
                if not rec.enabled:
                    return
                try:
                    self.sample()
                except Exception as e:  # noqa: BLE001 - the sampler must never hurt the job
                    rec.fail("memory sampler", e)
                    return
            wake.release()  # woken by stop(): leave the lock free for a later start()
        finally:
            with self._lock:
                if self._close_at_exit:  # close(wait=False) left the descriptor to us
                    self._close_at_exit = False
                    self._close()

    def start(self) -> None:
        """Start the thread (idempotent; interval 0 means no thread, samples at boundaries)."""
        if self._thread is not None or self.interval_s <= 0:
            return
        self._wake.acquire()  # held while the thread runs
        self._thread = threading.Thread(target=self._run, name="echo_trace-memory", daemon=True)
        self._thread.start()

    def stop(self, timeout_s: float = 1.0) -> None:
        """Stop and join the thread (idempotent); samples at boundaries still work."""
        t, self._thread = self._thread, None
        if t is None:
            return
        self._wake.release()
        if t is not threading.current_thread():
            t.join(timeout_s)

    def close(self, *, wait: bool = True) -> None:
        """Stop the thread and release the statm descriptor (idempotent). ``wait=False``
        does not join the thread (the step that closes the window must not wait for its
        wake-up): the thread releases the descriptor itself as it ends."""
        if wait:
            self.stop()
            self._close()
            return
        with self._lock:
            t, self._thread = self._thread, None
            if t is not None and t.is_alive():
                self._close_at_exit = True
        if t is None:
            self._close()
            return
        self._wake.release()
        if not self._close_at_exit:
            self._close()
