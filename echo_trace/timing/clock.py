"""Clocks: local timing, the trace clock shared by all ranks, and CUDA event timing.

* Local times are ``time.perf_counter_ns() / 1000`` microseconds (:meth:`Recorder.now_us`).
* :class:`ClockMap` maps them to Unix time (pairing ``perf_counter_ns`` with ``time_ns`` at
  capture start, in integer ns) plus ``offset_us``, the offset to rank 0's clock measured
  by :func:`sync_clock` with a collective at the first captured step. Trace files carry
  ``ts`` in µs relative to ``trace_base_ns`` (Kineto's ``baseTimeNanoseconds``): rank 0's
  Unix clock at sync floored to the second, the same on every rank of the job; with no
  process group, this process's capture start floored to the second. Small relative
  values keep sub-µs precision in float64 (Unix-epoch µs are only exact to 0.25 µs).
* :class:`CpuTimer` / :class:`CudaTimer` turn (start, end) time points into ``X`` events.
  The CUDA timer records one ``torch.cuda.Event`` per time point and resolves them at step
  end (one wait on the last event per step, never a synchronize per op).
"""

from __future__ import annotations

import hashlib
import logging
import socket
import statistics
import time
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from echo_trace.recorder import COMPUTE_TID, Recorder

__all__ = ["NS_PER_S", "ClockMap", "CpuTimer", "CudaTimer", "pair_clocks", "sync_clock"]

log = logging.getLogger("echo_trace")

#: Repeats of barrier + all_gather; the median offset is kept.
SYNC_REPEATS = 5
#: How long a rank waits for every peer to reach clock sync before skipping it (s).
SYNC_RENDEZVOUS_TIMEOUT_S = 60.0
NS_PER_S = 1_000_000_000


def pair_clocks(tries: int = 8) -> tuple[int, int]:
    """``(time.time_ns(), time.perf_counter_ns())`` at one instant: of ``tries`` bracketed
    reads (``perf, unix, perf``), the tightest, its Unix read set against the midpoint of
    its perf-counter reads. A single read preempted between its two perf-counter calls
    (milliseconds on a loaded host) would put every mapped time off by up to half that gap."""
    best_gap, best = -1, (0, 0)
    for _ in range(tries):
        p0 = time.perf_counter_ns()
        u = time.time_ns()
        p1 = time.perf_counter_ns()
        if best_gap < 0 or p1 - p0 < best_gap:
            best_gap, best = p1 - p0, (u, (p0 + p1) // 2)
    return best


class ClockMap:
    """Local perf-counter µs → Unix time (+ ``offset_us`` to rank 0's clock) → trace ``ts``."""

    def __init__(self) -> None:
        unix_ns, perf_ns = pair_clocks()
        #: Unix ns minus perf-counter ns at capture start (exact integer).
        self.base_ns = unix_ns - perf_ns
        #: Offset to add to this rank's Unix clock to read rank 0's (µs).
        self.offset_us = 0.0
        self.sync_method = "none"
        #: ``ts`` 0 of the trace files (Unix ns, whole second): capture start until synced.
        self.trace_base_ns = unix_ns // NS_PER_S * NS_PER_S

    @property
    def base_us(self) -> float:
        """Unix µs minus perf-counter µs at capture start."""
        return self.base_ns / 1000.0

    def unix_ns(self, perf_ns: int) -> int:
        """A ``perf_counter_ns`` reading on this host's Unix clock (ns, exact)."""
        return perf_ns + self.base_ns

    def unix_us(self, local_us: float) -> float:
        """Local µs mapped to this host's Unix clock (no cross-rank offset)."""
        return local_us + self.base_us

    def aligned_us(self, local_us: float) -> float:
        """Local µs on rank 0's Unix clock."""
        return local_us + self.base_us + self.offset_us

    def shift_us(self) -> float:
        """What to add to a local µs time to get its trace ``ts`` (µs since
        ``trace_base_ns`` on rank 0's clock). Computed in integer ns, then one division,
        so it stays exact to well under a ns for any realistic uptime."""
        return (self.base_ns - self.trace_base_ns) / 1000.0 + self.offset_us


def _sync_device(dist: Any) -> Any:
    import torch

    backend = str(dist.get_backend())
    if "nccl" in backend and "gloo" not in backend and torch.cuda.is_available():
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")


def _rendezvous(dist: Any, tag: str, rank: int, world: int) -> bool:
    """True when every rank reached this point (via the default store, bounded wait).

    Issuing a collective that a peer never joins would hang the job or shift the group's
    sequence numbers; the store check keeps a rank whose capture is off (or that never
    opened the window) from doing that to the others.
    """
    from torch.distributed import distributed_c10d as c10d

    store = c10d._get_default_store()
    store.set(f"echo_trace/{tag}/{rank}", "1")
    keys = [f"echo_trace/{tag}/{r}" for r in range(world)]
    try:
        store.wait(keys, timedelta(seconds=SYNC_RENDEZVOUS_TIMEOUT_S))
    except RuntimeError as e:  # timeout: some rank is not capturing
        log.warning("echo_trace: not every rank reached clock sync within %.0f s (%s); "
                    "clocks left unaligned", SYNC_RENDEZVOUS_TIMEOUT_S, e)
        return False
    return True


def sync_clock(clock: ClockMap, tag: str) -> None:
    """Align ``clock`` with rank 0: set ``offset_us``, ``sync_method`` and ``trace_base_ns``.

    When a process group exists: ``SYNC_REPEATS`` × (barrier; read the Unix clock; all_gather
    the readings as int64 ns), median of (rank 0 reading − own reading). The error is the
    barrier's release skew. Ranks on rank 0's host share its kernel clock and get exactly 0
    (the measurement would only add skew). Every rank takes rank 0's first reading, floored
    to the second, as ``trace_base_ns``. Else (no group, one rank, or a peer that never
    arrives) ``offset_us`` stays 0, ``sync_method`` ``"none"`` and the base this process's
    capture start.
    """
    import torch
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized()):
        return
    world = dist.get_world_size()
    if world < 2:
        return
    rank = dist.get_rank()
    if not _rendezvous(dist, tag, rank, world):
        return
    device = _sync_device(dist)
    barrier_kw: dict[str, Any] = {}
    if device.type == "cuda":
        barrier_kw["device_ids"] = [device.index]
    host = _host_id()
    diffs: list[float] = []
    same_host = False
    base_ns: int | None = None
    for _ in range(SYNC_REPEATS):
        dist.barrier(**barrier_kw)
        mine_ns = clock.unix_ns(time.perf_counter_ns())
        buf = torch.tensor([mine_ns, host], dtype=torch.int64, device=device)
        out = [torch.zeros_like(buf) for _ in range(world)]
        dist.all_gather(out, buf)
        r0 = out[0].tolist()
        diffs.append((int(r0[0]) - mine_ns) / 1000.0)
        same_host = int(r0[1]) == host
        if base_ns is None:
            base_ns = int(r0[0]) // NS_PER_S * NS_PER_S
    assert base_ns is not None
    clock.trace_base_ns = base_ns
    clock.sync_method = "all_gather"
    # one kernel clock: the measured offset would only add barrier skew
    clock.offset_us = 0.0 if same_host else float(statistics.median(diffs))


def _host_id() -> int:
    """A signed 64-bit id of this host (blake2b of the host name)."""
    digest = hashlib.blake2b(socket.gethostname().encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little", signed=True)


class CpuTimer:
    """Time points are local µs floats; events go straight into the recorder."""

    timer_name = "perf_counter"

    def __init__(self, rec: Recorder) -> None:
        self.rec = rec
        self.now: Callable[[], Any] = Recorder.now_us

    def emit(self, name: str, cat: str, start: Any, end: Any, args: dict[str, Any] | None,
             tid: int = COMPUTE_TID, extra: dict[str, Any] | None = None) -> None:
        """Record a slice of the current step (``args`` may be shared: never mutated;
        ``extra`` holds the per-call values, see :meth:`Recorder.record`)."""
        self.rec.record(name, cat, start, end - start, args, extra, tid)

    def point_us(self, point: Any) -> float:
        return float(point)

    def flush(self) -> None:
        """Nothing pending on the CPU path."""

    def anchor(self) -> None:
        """Nothing to anchor on the CPU path."""


class _CudaPoint:
    __slots__ = ("cpu_us", "event")

    def __init__(self, cpu_us: float, event: Any) -> None:
        self.cpu_us = cpu_us
        self.event = event


class CudaTimer:
    """Time points carry a CUDA event; ``flush()`` at step end turns them into GPU times.

    GPU times are placed on the local clock through an anchor event recorded right after
    the previous flush waited for the GPU (queue empty, so the anchor runs at once):
    ``ts_us = anchor_cpu_us + anchor.elapsed_time(ev) * 1000``.
    """

    timer_name = "cuda_event"

    def __init__(self, rec: Recorder) -> None:
        import torch

        self.rec = rec
        self._event_cls = torch.cuda.Event
        self._pending: list[tuple[str, str, _CudaPoint, _CudaPoint, dict[str, Any] | None,
                                  dict[str, Any] | None, int, int]] = []
        self._anchor: _CudaPoint | None = None
        self.anchor()

    def now(self) -> _CudaPoint:
        ev = self._event_cls(enable_timing=True)
        ev.record()
        return _CudaPoint(Recorder.now_us(), ev)

    def anchor(self) -> None:
        """Wait for the GPU once, then record the reference event for the next step."""
        import torch

        torch.cuda.synchronize()
        self._anchor = self.now()

    def emit(self, name: str, cat: str, start: _CudaPoint, end: _CudaPoint,
             args: dict[str, Any] | None, tid: int = COMPUTE_TID,
             extra: dict[str, Any] | None = None) -> None:
        """Queue a slice until :meth:`flush` (same arguments as :meth:`CpuTimer.emit`)."""
        self._pending.append((name, cat, start, end, args, extra, tid, self.rec.step))

    def point_us(self, point: _CudaPoint) -> float:
        anchor = self._anchor
        if anchor is None:
            return point.cpu_us
        return anchor.cpu_us + anchor.event.elapsed_time(point.event) * 1000.0

    def flush(self) -> None:
        """Resolve this step's events after one wait for the GPU, then re-anchor."""
        import torch

        pending, self._pending = self._pending, []
        torch.cuda.synchronize()
        for name, cat, start, end, args, extra, tid, step in pending:
            t0 = self.point_us(start)
            t1 = self.point_us(end)
            # queued in emit order, so the occurrences numbered at write time stay right
            self.rec.complete(name, cat, t0, t1 - t0, args, tid=tid, step=step, extra=extra)
        self._anchor = self.now()
