"""GPU timing from CUPTI activity records through PyTorch's Kineto profiler backend.

On CUDA, :func:`make_timer` returns a :class:`KinetoTimer`: the profiler machinery under
``torch.profiler`` (``_prepare_profiler`` / ``_enable_profiler`` with CPU and CUDA
activities, no ``record_function``) runs for the capture window. echo's own hooks only mark
CPU ranges: module forwards (containers too, so ranges nest), ``UPDATE.<optimizer>``, and
the recorder's ``Comm`` events. When the window closes, :meth:`KinetoTimer.close` stops the
profiler and :func:`~echo_trace.gpu.attribute.attribute` turns every kernel, memcpy and
memset into the contract's ``FW``/``BW``/``UPDATE``/``Comm`` events on the GPU clock;
the CPU-clock ``Comm`` events of the window are replaced by their GPU-clock versions.

Clocks: Kineto times are Unix ns (its approximate clock converted with CLOCK_REALTIME);
echo's marks are ``perf_counter``. A (perf, Unix) pair taken when the profiler starts maps
one onto the other (error: a few µs at most, far below a module's CPU range).
Thread ids: a CPU op's ``device_resource_id()`` is its OS thread id, the same number as
``threading.get_native_id()`` of the thread that ran echo's hook.

Falls back to :class:`~echo_trace.clock.CudaTimer` with one warning when a profiler is
already running in the process (the user's ``torch.profiler``): only one can be active.
When the user starts one while echo's runs, echo's stops first (one warning) and that
window keeps CPU times: the user's profiler never fails because of echo.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

from echo_trace.gpu.attribute import Activity, CpuOp, GpuEvent, Launch, Mark, attribute
from echo_trace.recorder import COMM_TID_BASE, COMPUTE_TID, Recorder

__all__ = ["KinetoTimer", "inputs_from_events", "make_timer", "profiler_busy"]

log = logging.getLogger("echo_trace")

_EVAL = "autograd::engine::evaluate_function"
#: dispatcher ops of c10d collectives (``c10d::allreduce_``; functional collectives'
#: ``_c10d_functional::all_reduce``): one per operation, around its kernel launches
_COMM_OPS = ("c10d::", "_c10d_functional::")
#: mark args that are not event args; a BW event has its module's static args only
_DROP = frozenset({"step", "occ", "container"})
_BW_DROP = _DROP | {"in_bytes", "out_bytes", "flops"}
#: tid of the second busiest compute stream (then +1 per stream)
_EXTRA_STREAM_TID = 10
#: how far before echo's Comm begin its c10d op may appear (the two clocks' pairing error)
_MATCH_SLACK_US = 20.0
#: ``activity_type()`` of device events that are GPU work (as the ``cat`` of Kineto JSON)
_KINDS = {"kernel": "kernel", "gpu_memcpy": "memcpy", "gpu_memset": "memset"}


def profiler_busy() -> bool:
    """True while a profiler (``torch.profiler`` / ``autograd.profiler``) is running."""
    import torch

    return bool(torch._C._autograd._profiler_enabled())


def make_timer(rec: Recorder, *, root: str = "model") -> Any:
    """The GPU timer of a CUDA run: Kineto when it can run, else the CUDA-event timer."""
    import torch

    from echo_trace.clock import CudaTimer

    if profiler_busy():  # the user's torch.profiler is on
        log.warning("echo_trace: torch.profiler is already running; GPU times come from "
                    "CUDA events (FW/BW per module, less precise) instead of Kineto")
        return CudaTimer(rec)
    if not torch.autograd.kineto_available():
        log.warning("echo_trace: this torch has no Kineto; GPU times come from CUDA events")
        return CudaTimer(rec)
    return KinetoTimer(rec, root=root)


class KinetoTimer:
    """Marks CPU ranges during the window; GPU events are made at :meth:`close`."""

    timer_name = "kineto"
    #: ModuleTracer also marks container modules (for the innermost-module rule) and
    #: leaves out its backward hooks (backward is found through sequence numbers)
    marks_containers = True
    backward_from_sequence = True

    def __init__(self, rec: Recorder, *, root: str = "model", cuda: bool = True) -> None:
        """``root``: the remainder's module name when no module range was seen (the
        outermost module's otherwise); ``cuda=False`` profiles CPU ops only (tests)."""
        import torch
        from torch._C._profiler import (
            ProfilerActivity,
            ProfilerConfig,
            ProfilerState,
            _ExperimentalConfig,
        )

        self.rec = rec
        self.root = root
        self.now = Recorder.now_us
        self.marks: list[tuple[str, str, float, float, int, dict[str, Any]]] = []
        self._open: dict[int, list[tuple[str, float, dict[str, Any]]]] = {}
        acts = {ProfilerActivity.CPU} | ({ProfilerActivity.CUDA} if cuda else set())
        cfg = ProfilerConfig(ProfilerState.KINETO, False, False, False, False, False,
                             _ExperimentalConfig())
        torch._C._autograd._prepare_profiler(cfg, acts)
        torch._C._autograd._enable_profiler(cfg, acts)
        p0 = time.perf_counter_ns()
        u = time.time_ns()
        p1 = time.perf_counter_ns()
        #: Unix ns minus perf-counter ns while the profiler runs
        self.unix_minus_perf_ns = u - (p0 + p1) // 2
        self.running = True
        self.yielded = False  # the user's profiler took over: CPU times only
        self.capped = False  # stopped early: the window reached the event cap
        self._guarded: Any = None
        self._guard()
        self.last: Any = None  # the last Attribution (for tests and the report)
        self.comm_matched = 0  # Comm events matched to a c10d op of the profiler

    # ------------------------------------------------------------ hooks (hot path)
    def emit(self, name: str, cat: str, start: float, end: float,
             args: dict[str, Any] | None, tid: int = COMPUTE_TID,
             extra: dict[str, Any] | None = None) -> None:
        """A CPU range from echo's hooks (``BW`` ranges are dropped: backward GPU time
        is found through autograd sequence numbers instead)."""
        if cat == "BW" or self.capped:
            return
        a = dict(args) if args else {}
        if extra:
            a.update(extra)
        a["step"] = self.rec.step
        self.marks.append((name, cat, start, end, threading.get_native_id(), a))

    def open_range(self, name: str) -> None:
        """A container module's forward starts (closed by :meth:`close_range`)."""
        if self.capped:
            return
        self._open.setdefault(threading.get_native_id(), []).append((name, self.now(), {}))

    def close_range(self) -> None:
        stack = self._open.get(threading.get_native_id())
        if stack:
            name, t0, a = stack.pop()
            a["step"] = self.rec.step
            a["container"] = True
            self.marks.append((name, "FW", t0, self.now(), threading.get_native_id(), a))

    def point_us(self, point: float) -> float:
        return float(point)

    def flush(self) -> None:
        """Step end: nothing to resolve until the window closes, unless the window can
        hold no more events (the recorder dropped some, or the marks alone reach its
        ``max_events``): then the profiler stops here, so that its buffers — which grow with
        every op and kernel of the window — stay bounded by the same cap; the steps so far
        keep their GPU times, the later ones have none (one warning)."""
        if not self.running or not (self.rec.dropped or
                                    len(self.marks) >= self.rec.max_events):
            return
        self.capped = True
        log.warning("echo_trace: event cap (%d) reached at step %d; GPU timing stops here "
                    "(raise TRACE_MAX_EVENTS or narrow the step window)",
                    self.rec.max_events, self.rec.step)
        stopped = self.stop()
        if stopped is not None:
            self.resolve(*stopped)

    def anchor(self) -> None:
        """Nothing to anchor: Kineto and perf_counter are paired at start."""

    # ------------------------------------------------------------ window end
    def close(self) -> None:
        """Stop the profiler, attribute the window's GPU activity, record the events."""
        stopped = self.stop()
        if stopped is not None:
            self.resolve(*stopped)

    def stop(self) -> tuple[Any, list[Mark]] | None:
        """Stop the profiler (on the training thread); returns what :meth:`resolve` needs,
        or None when there is nothing to resolve (already stopped, or yielded)."""
        self._unguard()
        if self.yielded:
            self.yielded = False
            self._record_cpu_marks()
        if not self.running:
            return None
        import torch

        self.running = False
        return torch._C._autograd._disable_profiler(), self._marks()

    def resolve(self, result: Any, marks: list[Mark]) -> None:
        """Attribute the profiler's ``result`` and record the events: the costly part of
        :meth:`close`, which a background writer may run off the training thread once the
        window is closed (it edits ``rec.events``: run it before they are written)."""
        from echo_trace.modules import WRAPPER_TYPES

        c10d, ops, launches, acts = inputs_from_events(result.events(),
                                                       self.unix_minus_perf_ns)
        comm_rows = self._comm_marks(marks, c10d)
        # the remainder's name: the outermost module (not a DDP/FSDP/compile wrapper)
        firsts = sorted((m.ts_us, -m.end_us, m.name) for m in marks
                        if m.cat == "FW" and m.name[3:] not in WRAPPER_TYPES)
        root = firsts[0][2].removeprefix("FW.") if firsts else self.root
        out = attribute(marks, ops, launches, acts, root=root)
        self.last = out
        self._record(out.events, comm_rows)

    # ------------------------------------------------------------ the user's profiler
    def _guard(self) -> None:
        """While echo's profiler runs, a ``torch.profiler`` / ``autograd.profiler`` the user
        starts would fail ("already enabled"): their ``_prepare_trace`` first makes echo
        yield (:meth:`yield_to_user`)."""
        from torch.autograd import profiler as ap

        orig = ap.profile.__dict__.get("_prepare_trace")
        if orig is None:
            return
        timer = self

        def _prepare_trace(prof: Any, *args: Any, **kwargs: Any) -> Any:
            timer.yield_to_user()
            return orig(prof, *args, **kwargs)

        ap.profile._prepare_trace = _prepare_trace  # type: ignore[method-assign, assignment]
        self._guarded = (ap.profile, orig, _prepare_trace)

    def _unguard(self) -> None:
        if self._guarded is not None:
            owner, orig, ours = self._guarded
            self._guarded = None
            if owner.__dict__.get("_prepare_trace") is ours:
                owner._prepare_trace = orig

    def yield_to_user(self) -> None:
        """Stop echo's profiler so the user's can start; this window keeps CPU times."""
        self._unguard()
        if not self.running:
            return
        import torch

        self.running = False
        self.yielded = True
        self.timer_name = "perf_counter"  # meta.json: this window's times are CPU times
        try:
            torch._C._autograd._disable_profiler()  # results dropped
        except RuntimeError as e:
            self.rec.fail("stopping echo's profiler for the user's", e)
        log.warning("echo_trace: torch.profiler started inside the capture window; echo "
                    "stopped its GPU timing for this window: FW/UPDATE/Comm events carry CPU "
                    "times and BW events are missing")

    def _record_cpu_marks(self) -> None:
        """After :meth:`yield_to_user`: leaf FW and UPDATE ranges as CPU-clock events."""
        for name, cat, t0, t1, _tid, a in self.marks:
            if a.get("container"):
                continue
            args = {k: v for k, v in a.items() if k != "step"}
            self.rec.complete(name, cat, t0, t1 - t0, args, step=a["step"])

    def _marks(self) -> list[Mark]:
        out = []
        for name, cat, t0, t1, tid, a in self.marks:
            out.append(Mark(name, cat, t0, t1, tid, a))
        for e in self.rec.events:  # STEP slices: which step a launch belongs to
            if e[0] == "X" and e[2] == "step":
                out.append(Mark("STEP", "STEP", e[4], e[4] + e[5], -1, {"step": e[6]}))
        return out

    def _comm_marks(self, marks: list[Mark], c10d: list[tuple[float, float, int]]) -> list[int]:
        """Comm marks: each recorded Comm event of the window gets the CPU range of the
        next c10d dispatcher op (``c10d::allreduce_``...) issued after it began, on that op's thread;
        returns the recorder rows they replace."""
        comm_ops: list[tuple[float, float, int]] = []
        for op in sorted(c10d):  # an op nested in another c10d op is part of it
            if not any(o[2] == op[2] and o[0] <= op[0] and op[1] <= o[1] for o in comm_ops[-4:]):
                comm_ops.append(op)
        rows = [i for i, e in enumerate(self.rec.events) if e[0] == "X" and e[2] == "Comm"]
        rows.sort(key=lambda i: self.rec.events[i][4])
        j = 0
        for i in rows:
            _, name, _, _, ts, dur, step, occ, args, _ = self.rec.events[i]
            while j < len(comm_ops) and comm_ops[j][0] < ts - _MATCH_SLACK_US:
                j += 1
            a = dict(args or {})
            a.update(step=step, occ=occ)
            if j < len(comm_ops):
                t0, t1, tid = comm_ops[j]
                j += 1
                marks.append(Mark(name, "Comm", t0, t1, tid, a))
                self.comm_matched += 1
            else:  # no c10d op seen: placed where the compute queued before it is done
                marks.append(Mark(name, "Comm", ts, ts, -1, a))
        return rows

    def _record(self, events: list[GpuEvent], comm_rows: list[int]) -> None:
        rec = self.rec
        drop = set(comm_rows)
        if drop:
            rec.events[:] = [e for i, e in enumerate(rec.events) if i not in drop]
        busy: dict[int, float] = {}
        for ev in events:
            if ev.cat != "Comm":
                busy[ev.stream] = busy.get(ev.stream, 0.0) + ev.busy_us
        # the busiest compute stream is the compute track; others get tracks of their own
        # (slices on one track must not partially overlap)
        track = {s: (COMPUTE_TID if i == 0 else _EXTRA_STREAM_TID + i - 1)
                 for i, s in enumerate(sorted(busy, key=lambda s: -busy[s]))}
        lanes: list[float] = []  # end of the last Comm on each lane
        for ev in sorted(events, key=lambda e: (e.ts_us, -e.end_us)):
            drop_keys = _BW_DROP if ev.cat == "BW" else _DROP
            args = {k: v for k, v in ev.args.items() if k not in drop_keys}
            if ev.cat in ("FW", "BW"):
                args.setdefault("module", ev.name[3:])
            args.update(busy_us=round(ev.busy_us, 3), kernels=ev.kernels, stream=ev.stream)
            if ev.cat == "Comm":
                lane = next((k for k, end in enumerate(lanes) if end <= ev.ts_us), len(lanes))
                if lane == len(lanes):
                    lanes.append(ev.end_us)
                else:
                    lanes[lane] = ev.end_us
                rec.complete(ev.name, "Comm", ev.ts_us, ev.dur_us, args,
                             tid=COMM_TID_BASE + lane, step=ev.step, occ=ev.args.get("occ"))
            else:
                rec.complete(ev.name, ev.cat, ev.ts_us, ev.dur_us, args, tid=track[ev.stream],
                             step=ev.step)


def inputs_from_events(events: Any, unix_minus_perf_ns: int,
                       ) -> tuple[list[tuple[float, float, int]], list[CpuOp], list[Launch],
                                  list[Activity]]:
    """Attribution inputs from ``_ProfilerResult.events()`` (times → local perf µs).

    CPU ops (``linked_correlation_id() == 0``) give launches (their own correlation id, start,
    OS thread), and :class:`CpuOp` when they carry a sequence number or run a backward node;
    device events of activity type ``kernel`` / ``gpu_memcpy`` / ``gpu_memset`` give
    activities, linked to the CPU op by ``linked_correlation_id()``.
    c10d dispatcher ops come first, as (start, end, thread) CPU ranges.
    """
    from torch._C._autograd import DeviceType

    off = unix_minus_perf_ns
    c10d: list[tuple[float, float, int]] = []
    ops: list[CpuOp] = []
    launches: list[Launch] = []
    acts: list[Activity] = []
    for e in events:
        t0 = (e.start_ns() - off) / 1000.0
        if e.device_type() == DeviceType.CPU:
            if e.linked_correlation_id() > 0:
                continue  # a CUDA runtime call: its op is the launch we keep
            t1 = (e.end_ns() - off) / 1000.0
            tid = int(e.device_resource_id())
            name = e.name()
            launches.append(Launch(int(e.correlation_id()), t0, tid))
            seq = int(e.sequence_nr())
            if seq >= 0:
                ops.append(CpuOp(t0, t1, tid, seq, int(e.fwd_thread_id())))
            elif name.startswith(_EVAL):
                ops.append(CpuOp(t0, t1, tid, -1, -1))
            if name.startswith(_COMM_OPS) and "wait" not in name:
                c10d.append((t0, t1, tid))
        else:  # device side: keep work, not GPU-side annotations or sync records
            kind = _KINDS.get(e.activity_type())
            if kind is not None:
                acts.append(Activity(e.name(), kind, int(e.device_resource_id()), t0,
                                     e.duration_ns() / 1000.0, int(e.linked_correlation_id())))
    return c10d, ops, launches, acts
