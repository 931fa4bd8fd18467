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

Falls back to :class:`~echo_trace.timing.clock.CudaTimer` with one warning when a profiler is
already running in the process (the user's ``torch.profiler``): only one can be active.
When the user starts one while echo's runs, echo's stops first (one warning) and that
window keeps CPU times: the user's profiler never fails because of echo.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable
from typing import Any

from echo_trace.gpu.adapter import missing_accessors, read_events
from echo_trace.gpu.attribute import (
    Activity,
    Attribution,
    CpuOp,
    GpuEvent,
    Launch,
    Mark,
    attribute,
    gpu_step_spans,
)
from echo_trace.recorder import COMM_TID_BASE, COMPUTE_TID, Recorder
from echo_trace.timing.clock import pair_clocks

__all__ = ["KinetoTimer", "inputs_from_events", "kineto_unusable", "make_timer",
           "profiler_busy", "resolve_window"]

log = logging.getLogger("echo_trace")

#: mark args that are not event args; a BW event has its module's static args only
_DROP = frozenset({"step", "occ", "container"})
_BW_DROP = _DROP | {"in_bytes", "out_bytes", "flops"}
#: tid of the second busiest compute stream (then +1 per stream)
_EXTRA_STREAM_TID = 10
#: how far before echo's Comm begin its c10d op may appear (the two clocks' pairing error)
_MATCH_SLACK_US = 20.0


def profiler_busy() -> bool:
    """True while a profiler (``torch.profiler`` / ``autograd.profiler``) is running."""
    import torch

    return bool(torch._C._autograd._profiler_enabled())


def kineto_unusable() -> str | None:
    """Why this torch's Kineto profiler cannot time the GPU for echo (None: it can): no
    Kineto, or an event type lacking an accessor the attribution cannot do without."""
    import torch

    if not torch.autograd.kineto_available():
        return "this torch has no Kineto"
    event_type = getattr(torch._C._autograd, "_KinetoEvent", None)
    if event_type is None:
        return "this torch has no _KinetoEvent"
    miss = missing_accessors(event_type)
    if miss:
        return f"its profiler events lack {', '.join(miss)}()"
    for name in ("_prepare_profiler", "_enable_profiler", "_disable_profiler"):
        if not hasattr(torch._C._autograd, name):
            return f"this torch has no torch._C._autograd.{name}"
    return None


def make_timer(rec: Recorder, *, root: str = "model", raw: bool = False) -> Any:
    """The GPU timer of a CUDA run: Kineto when it can run, else the CUDA-event timer (with
    one warning saying why). ``raw``: keep the profiler's events for ``kineto_raw.json.gz``."""
    from echo_trace.timing.clock import CudaTimer

    if profiler_busy():  # the user's torch.profiler is on
        log.warning("echo_trace: torch.profiler is already running; GPU times come from "
                    "CUDA events (FW/BW per module, less precise) instead of Kineto")
        return CudaTimer(rec)
    why = kineto_unusable()
    if why is not None:
        log.warning("echo_trace: Kineto cannot time the GPU (%s); GPU times come from CUDA "
                    "events (FW/BW per module, less precise)", why)
        return CudaTimer(rec)
    try:
        return KinetoTimer(rec, root=root, raw=raw)
    except (RuntimeError, TypeError, ValueError, AttributeError) as e:
        log.warning("echo_trace: the Kineto profiler did not start (%s: %s); GPU times come "
                    "from CUDA events instead", type(e).__name__, e)
        return CudaTimer(rec)


def _profiler_config() -> Any:
    """``ProfilerConfig`` for CPU ranges and device activity only: its arity grew over the
    supported torch range (a ``trace_id`` came last), so the shorter form is tried first."""
    from torch._C._profiler import ProfilerConfig, ProfilerState, _ExperimentalConfig

    base = (ProfilerState.KINETO, False, False, False, False, False, _ExperimentalConfig())
    try:
        return ProfilerConfig(*base)
    except TypeError:
        return ProfilerConfig(*base, "")


class KinetoTimer:
    """Marks CPU ranges during the window; GPU events are made at :meth:`close`."""

    timer_name = "kineto"
    #: ModuleTracer also marks container modules (for the innermost-module rule) and
    #: leaves out its backward hooks (backward is found through sequence numbers)
    marks_containers = True
    backward_from_sequence = True

    def __init__(self, rec: Recorder, *, root: str = "model", cuda: bool = True,
                 raw: bool = False) -> None:
        """``root``: the remainder's module name when no module range was seen (the
        outermost module's otherwise); ``cuda=False`` profiles CPU ops only (tests);
        ``raw``: :meth:`resolve` also keeps a recording (:attr:`raw_doc`)."""
        import torch
        from torch._C._profiler import ProfilerActivity

        self.rec = rec
        self.raw = raw
        self.root = root
        self.now = Recorder.now_us
        self.marks: list[tuple[str, str, float, float, int, dict[str, Any]]] = []
        self._open: dict[int, list[tuple[str, float, dict[str, Any]]]] = {}
        acts = {ProfilerActivity.CPU} | ({ProfilerActivity.CUDA} if cuda else set())
        cfg = _profiler_config()
        torch._C._autograd._prepare_profiler(cfg, acts)
        torch._C._autograd._enable_profiler(cfg, acts)
        #: Unix ns minus perf-counter ns while the profiler runs
        unix_ns, perf_ns = pair_clocks()  # the tightest of 8 bracketed reads
        self.unix_minus_perf_ns = unix_ns - perf_ns
        self.running = True
        self.yielded = False  # the user's profiler took over: CPU times only
        self.capped = False  # stopped early: the window reached the event cap
        self._guarded: Any = None
        self._guard()
        self.last: Any = None  # the last Attribution (for tests and the report)
        self.comm_matched = 0  # Comm events matched to a c10d op of the profiler
        #: the recording of the last :meth:`resolve` (``raw=True``): kineto_raw.json.gz
        self.raw_doc: dict[str, Any] | None = None

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

    def resolve(self, result: Any, marks: list[Mark],
                records: list[tuple[Any, ...]] | None = None,
                pause: Callable[[], None] | None = None) -> None:
        """Attribute the profiler's ``result`` and record the events: the costly part of
        :meth:`close`, which the background writer runs off the training thread once the
        window is closed, on the buffer it was handed (``records``; default: the
        recorder's own buffer; ``pause``: the writer's pacing, called regularly)."""
        from echo_trace.gpu.adapter import recording_doc

        records = self.rec.events if records is None else records
        events = result.events()
        if self.raw:
            self.raw_doc = recording_doc(events, marks, records, self.unix_minus_perf_ns,
                                         root=self.root, pause=pause)
        out, matched = resolve_window(records, events, marks,
                                      unix_minus_perf_ns=self.unix_minus_perf_ns,
                                      root=self.root, pause=pause)
        self.last = out
        self.comm_matched += matched

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


def resolve_window(records: list[tuple[Any, ...]], events: Iterable[Any], marks: list[Mark], *,
                   unix_minus_perf_ns: int, root: str = "model",
                   pause: Callable[[], None] | None = None) -> tuple[Attribution, int]:
    """The live chain after the profiler stopped, also run offline on a recording
    (:mod:`echo_trace.gpu.recording`): profiler ``events`` (live ``_KinetoEvent`` objects or
    :class:`~echo_trace.gpu.adapter.RecordedEvent`) through the adapter and the attribution
    into ``records`` (the recorder's rows, edited in place): CPU-clock ``Comm`` rows are
    replaced by their GPU-clock events, the GPU events appended, and ``STEP`` rows moved to
    the GPU clock (:func:`~echo_trace.gpu.attribute.gpu_step_spans`). ``marks`` is not
    changed. Returns the attribution and how many Comm events matched a c10d op."""
    from echo_trace.hooks.modules import WRAPPER_TYPES

    inputs = read_events(events, unix_minus_perf_ns, pause=pause)
    marks = list(marks)
    comm_rows, matched = _comm_marks(records, marks, inputs.c10d)
    # the remainder's name: the outermost module (not a DDP/FSDP/compile wrapper)
    firsts = sorted((m.ts_us, -m.end_us, m.name) for m in marks
                    if m.cat == "FW" and m.name[3:] not in WRAPPER_TYPES)
    name = firsts[0][2].removeprefix("FW.") if firsts else root
    drained = _drained(marks, inputs.syncs)
    out = attribute(marks, inputs.ops, inputs.launches, inputs.activities, root=name,
                    start_us=drained)
    _record(records, out.events, comm_rows)
    _gpu_steps(records, out, drained_us=drained)
    return out, matched


def _drained(marks: list[Mark], syncs: list[tuple[float, float]]) -> float | None:
    """End of the host's first device wait in the window's first step before its first
    forward (see :func:`~echo_trace.gpu.attribute.gpu_step_spans`), or None."""
    steps = [m for m in marks if m.cat == "STEP"]
    if not steps or not syncs:
        return None
    first = min(steps, key=lambda m: m.ts_us)
    sn = first.args.get("step")
    fw0 = min((m.ts_us for m in marks if m.cat == "FW" and m.args.get("step") == sn
               and m.ts_us >= first.ts_us), default=first.end_us)
    return min((t1 for t0, t1 in syncs if first.ts_us <= t0 and t1 <= fw0), default=None)


def _comm_marks(records: list[tuple[Any, ...]], marks: list[Mark],
                c10d: list[tuple[float, float, int]]) -> tuple[list[int], int]:
    """Comm marks: each recorded Comm event of the window gets the CPU range of the next
    c10d dispatcher op (``c10d::allreduce_``...) issued after it began, on that op's thread
    (appended to ``marks``); returns the rows they replace and how many matched an op."""
    comm_ops: list[tuple[float, float, int]] = []
    for op in sorted(c10d):  # an op nested in another c10d op is part of it
        if not any(o[2] == op[2] and o[0] <= op[0] and op[1] <= o[1] for o in comm_ops[-4:]):
            comm_ops.append(op)
    rows = [i for i, e in enumerate(records) if e[0] == "X" and e[2] == "Comm"]
    rows.sort(key=lambda i: records[i][4])
    j = matched = 0
    for i in rows:
        _, name, _, _, ts, dur, step, occ, args, _ = records[i]
        while j < len(comm_ops) and comm_ops[j][0] < ts - _MATCH_SLACK_US:
            j += 1
        a = dict(args or {})
        a.update(step=step, occ=occ)
        if j < len(comm_ops):
            t0, t1, tid = comm_ops[j]
            j += 1
            marks.append(Mark(name, "Comm", t0, t1, tid, a))
            matched += 1
        else:  # no c10d op seen: placed where the compute queued before it is done
            marks.append(Mark(name, "Comm", ts, ts, -1, a))
    return rows, matched


def _record(records: list[tuple[Any, ...]], events: list[GpuEvent], comm_rows: list[int]) -> None:
    """Replace ``comm_rows`` of ``records`` by the GPU events (rows of
    :data:`~echo_trace.recorder.RECORD_FIELDS`)."""
    drop = set(comm_rows)
    if drop:
        records[:] = [e for i, e in enumerate(records) if i not in drop]
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
            records.append(("X", ev.name, "Comm", COMM_TID_BASE + lane, ev.ts_us, ev.dur_us,
                            ev.step, ev.args.get("occ"), args, None))
        else:
            records.append(("X", ev.name, ev.cat, track[ev.stream], ev.ts_us, ev.dur_us,
                            ev.step, None, args, None))


def _gpu_steps(records: list[tuple[Any, ...]], out: Attribution, *,
               drained_us: float | None = None) -> None:
    """Move the ``STEP`` rows to the GPU clock (see
    :func:`~echo_trace.gpu.attribute.gpu_step_spans`); ``args.cpu_dur_us`` keeps the CPU
    span's length."""
    rows = [i for i, e in enumerate(records) if e[0] == "X" and e[2] == "step"]
    if not rows or not out.events:
        return
    spans = gpu_step_spans([(int(records[i][6]), float(records[i][4]),
                             float(records[i][4] + records[i][5])) for i in rows],
                           out.events, before_end_us=out.before_end_us,
                           drained_us=drained_us)
    for i in rows:
        ph, name, cat, tid, ts, dur, step, occ, args, extra = records[i]
        span = spans.get(int(step))
        if span is None:
            continue
        a = dict(args or {})
        a.update(cpu_dur_us=round(float(dur), 3), clock="gpu")
        records[i] = (ph, name, cat, tid, span[0], span[1] - span[0], step, occ, a, extra)


def inputs_from_events(events: Any, unix_minus_perf_ns: int,
                       ) -> tuple[list[tuple[float, float, int]], list[CpuOp], list[Launch],
                                  list[Activity]]:
    """The attribution inputs of ``events`` as a tuple (c10d ranges, ops, launches,
    activities): :func:`~echo_trace.gpu.adapter.read_events`."""
    got = read_events(events, unix_minus_perf_ns)
    return got.c10d, got.ops, got.launches, got.activities
