"""Attribute GPU activity to echo's module / optimizer / communication ranges (torch-free).

Inputs, all times in µs on one CPU clock (the GPU activity records of CUPTI are already
on it, as in every Kineto trace):

* :class:`Mark` — a CPU range opened and closed by echo's hooks: ``FW.<module>`` around a
  module's forward (containers included, so ranges nest), ``UPDATE.<optimizer>``,
  ``Comm.<op>``; ``STEP`` ranges give the step number.
* :class:`CpuOp` — a profiler op that carries an autograd sequence number. Forward ops have
  ``fwd_tid == 0``; ops that run a backward node (``autograd::engine::evaluate_function``)
  carry the sequence number of the forward op that created the node and ``fwd_tid > 0``.
* :class:`Launch` — a CUDA runtime/driver call (``cudaLaunchKernel``, ``cudaMemcpyAsync``...)
  with its correlation id, thread and CPU time.
* :class:`Activity` — a kernel, memcpy or memset on the GPU: stream, ts, dur, correlation id.

Rule for one activity (its launch at CPU time ``t`` on thread ``tid``):

1. the innermost :class:`Mark` around ``t`` on ``tid`` when it is a ``Comm`` or ``UPDATE``
   range (a collective's kernels, the optimizer's kernels);
2. else the innermost backward op around ``t`` on ``tid``: its sequence number names the
   forward op that created the node, and the innermost ``FW`` mark around that forward op
   gives ``BW.<module>`` (of that very call); a node created outside any module (the loss)
   gives ``BW.<root>``; a backward op without a sequence number (``AccumulateGrad`` and the
   DDP reducer's work inside it, ``seq < 0``) belongs to the backward that ran just before
   it on that thread (the one that produced the gradient);
3. else the innermost ``FW`` mark around ``t`` (so attention computed in a non-leaf parent
   lands in the parent, e.g. ``FW.h.3.attn``);
4. else the remainder: ``FW.<root>`` before the step's first backward launch,
   ``UPDATE.other`` after it. Launches outside every ``STEP`` range are outside the
   window and not counted.

Compute output: one event per run of consecutive activities of one call on one stream (its
first activity's start to its last one's end; ``busy_us``: the union of the run's activity
intervals, never more than that span: on Hopper a kernel may start before the previous one on
its stream ends), so events on a stream never overlap and the time between them, and the gaps
inside one, are GPU idle time; a parent whose own kernels come between its children's (a
residual add) gives one event per run.
Communication: one event per collective. A ``Comm``
cannot start before the work the compute stream had when the collective was enqueued (the
process group makes its stream wait on that): its ``ts`` is the later of its first kernel
and that point, and a collective without any kernel (one rank) is a 0-length event there
(at its CPU issue time when no GPU work was queued before it).
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Activity", "Attribution", "CpuOp", "GpuEvent", "Launch", "Mark", "attribute",
           "gpu_step_spans"]

OTHER_UPDATE = "UPDATE.other"


@dataclass(frozen=True, slots=True)
class Mark:
    """A CPU range from echo's hooks; ``cat`` is ``FW``, ``UPDATE``, ``Comm`` or ``STEP``."""

    name: str
    cat: str
    ts_us: float
    end_us: float
    tid: int
    args: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class CpuOp:
    """A profiler op with an autograd sequence number (``fwd_tid != 0``: a backward op;
    ``seq < 0``: a backward op whose node has none, e.g. ``AccumulateGrad``)."""

    ts_us: float
    end_us: float
    tid: int
    seq: int
    fwd_tid: int


@dataclass(frozen=True, slots=True)
class Launch:
    """A CUDA runtime/driver call that queued GPU work."""

    correlation: int
    ts_us: float
    tid: int


@dataclass(frozen=True, slots=True)
class Activity:
    """GPU work: ``kind`` is ``kernel``, ``memcpy`` or ``memset``."""

    name: str
    kind: str
    stream: int
    ts_us: float
    dur_us: float
    correlation: int
    nbytes: int = 0


@dataclass(slots=True)
class GpuEvent:
    """One contract event on the GPU clock (``ts_us``: the CPU clock of the inputs)."""

    name: str
    cat: str
    step: int
    stream: int
    ts_us: float
    end_us: float
    busy_us: float
    kernels: int
    args: dict[str, Any]

    @property
    def dur_us(self) -> float:
        return self.end_us - self.ts_us


@dataclass
class Attribution:
    """Events plus the accounting of activity time inside the window (µs)."""

    events: list[GpuEvent]
    window_us: float = 0.0  # activity time launched inside a STEP range
    attributed_us: float = 0.0  # ... of which given to a module / range (not a remainder)
    remainder_us: float = 0.0  # ... given to FW.<root> / UPDATE.other
    unlaunched_us: float = 0.0  # activity whose launch record is missing (not counted)
    #: end of the GPU work queued before the window's first step (launched before the
    #: profiler started, or before the first STEP range); None: there was none
    before_end_us: float | None = None
    by_rule: dict[str, float] = field(default_factory=dict)

    @property
    def attributed_fraction(self) -> float:
        """Share of the window's activity time given to a named event (remainder included,
        since ``FW.<root>`` / ``UPDATE.other`` are events too)."""
        if self.window_us <= 0:
            return 1.0
        return (self.attributed_us + self.remainder_us) / self.window_us


class _Innermost:
    """Innermost enclosing range lookup on one thread: ranges swept into flat segments."""

    def __init__(self, spans: list[tuple[float, float, int]]) -> None:
        # spans: (start, end, key). Sweep: at every boundary the innermost open range is
        # the open one that started last (ties: the shorter one, i.e. the inner).
        points: list[tuple[float, int, float, int]] = []
        for s, e, k in spans:
            points.append((s, 1, -e, k))
            points.append((e, 0, 0.0, k))
        points.sort()
        self.starts: list[float] = []
        self.keys: list[int] = []
        active: list[tuple[float, float, int]] = []  # (start, -end, key) in start order
        for t, kind, neg_end, k in points:
            if kind == 1:
                bisect.insort(active, (t, neg_end, k))
            else:
                for i in range(len(active) - 1, -1, -1):
                    if active[i][2] == k:
                        del active[i]
                        break
            top = active[-1][2] if active else -1
            if self.starts and self.starts[-1] == t:
                self.keys[-1] = top
            else:
                self.starts.append(t)
                self.keys.append(top)

    def at(self, t: float) -> int:
        i = bisect.bisect_right(self.starts, t) - 1
        return self.keys[i] if i >= 0 else -1


def _by_tid(items: Sequence[Any], keep: Any) -> dict[int, _Innermost]:
    spans: dict[int, list[tuple[float, float, int]]] = {}
    for i, m in enumerate(items):
        if keep(m):
            spans.setdefault(m.tid, []).append((m.ts_us, m.end_us, i))
    return {tid: _Innermost(s) for tid, s in spans.items()}


def _lookup(index: dict[int, _Innermost], tid: int, t: float) -> int:
    ix = index.get(tid)
    return -1 if ix is None else ix.at(t)


def attribute(marks: Sequence[Mark], ops: Iterable[CpuOp], launches: Iterable[Launch],
              activities: Iterable[Activity], *, root: str,
              start_us: float | None = None) -> Attribution:
    """Attribute every activity (see the module docstring); ``root`` names the remainder
    ``FW.<root>``. ``start_us``: activities launched before it (and before the first STEP
    range in any case) belong to the step before the window (see :func:`gpu_step_spans`'
    ``drained_us``). Returns the events sorted by (stream, ts)."""
    marks = list(marks)
    mark_ix = _by_tid(marks, lambda m: m.cat != "STEP")
    fw_ix = _by_tid(marks, lambda m: m.cat == "FW")
    steps = sorted((m for m in marks if m.cat == "STEP"), key=lambda m: m.ts_us)
    step_starts = [m.ts_us for m in steps]
    op_list = list(ops)
    bw_ix = _by_tid(op_list, lambda o: o.fwd_tid != 0)
    # seq -> FW mark index around the forward op that made the node (-1: none). Every op
    # records the thread's next sequence number; the one that creates the node is the
    # last to record it (later ops see seq + 1), so the latest forward op wins.
    fw_of_seq: dict[int, int] = {}
    for o in sorted(op_list, key=lambda o: o.ts_us):
        if o.fwd_tid == 0 and o.seq >= 0:
            fw_of_seq[o.seq] = _lookup(fw_ix, o.tid, o.ts_us)
    launch_of = {la.correlation: la for la in launches}
    acts = list(activities)
    acts.sort(key=lambda a: launch_of[a.correlation].ts_us if a.correlation in launch_of
              else a.ts_us)

    def step_of(t: float) -> Mark | None:
        i = bisect.bisect_right(step_starts, t) - 1
        if i >= 0 and t <= steps[i].end_us:
            return steps[i]
        return None

    out = Attribution(events=[])
    # first backward launch per step (for the remainder's name)
    first_bw: dict[int, float] = {}
    last_bw: dict[int, int] = {}  # thread -> FW mark of the last backward node run there
    resolved: list[tuple[Activity, Launch, Mark, str, int]] = []
    first_start = step_starts[0] if step_starts else float("inf")
    if start_us is not None:
        first_start = max(first_start, start_us)
    for a in acts:
        la = launch_of.get(a.correlation)
        if la is None or la.ts_us < first_start:
            if la is None:
                out.unlaunched_us += a.dur_us
            if out.before_end_us is None or a.ts_us + a.dur_us > out.before_end_us:
                out.before_end_us = a.ts_us + a.dur_us
            continue
        st = step_of(la.ts_us)
        if st is None:
            continue
        m = _lookup(mark_ix, la.tid, la.ts_us)
        if m >= 0 and marks[m].cat != "FW":
            rule, key = "range", m
        else:
            b = _lookup(bw_ix, la.tid, la.ts_us)
            if b >= 0:
                seq = op_list[b].seq
                if seq >= 0:
                    rule, key = "backward", fw_of_seq.get(seq, -1)
                    last_bw[la.tid] = key
                else:
                    rule, key = "backward", last_bw.get(la.tid, -1)
                sn = int(st.args.get("step", 0))
                first_bw[sn] = min(first_bw.get(sn, la.ts_us), la.ts_us)
                if key < 0:
                    rule = "backward_root"
            elif m >= 0:
                rule, key = "forward", m
            else:
                rule, key = "remainder", -1
        resolved.append((a, la, st, rule, key))
    return _build(out, marks, resolved, first_bw, root)


def gpu_step_spans(steps: Sequence[tuple[int, float, float]], events: Iterable[GpuEvent], *,
                   before_end_us: float | None = None, drained_us: float | None = None,
                   ) -> dict[int, tuple[float, float]]:
    """Each step's span on the GPU clock: ``{step: (start_us, end_us)}``.

    ``steps``: ``(step, cpu_start_us, cpu_end_us)`` of each STEP range (the CPU side of an
    iteration: from one optimizer-step hook to the next); ``events``: the attributed GPU
    events (their ``step`` is the step whose CPU range launched them).

    A step ends when both its CPU range and its GPU work are done:
    ``end = max(cpu_end, last GPU end of the step)`` (a GPU-bound step ends with its last
    kernel, the optimizer's included; a launch-bound one with its CPU range). It starts
    where the previous step ended, ``start = end(step - 1)``, so steps tile the timeline and
    the time between one step's GPU work and the next step's (data loading, host work)
    belongs to the later step. The window's first step, whose predecessor's GPU work was
    launched before the profiler started and so is not seen, starts when that work is known
    to be done: at the end of the host's first wait for the device inside it, before its
    first forward (``drained_us``: a ``torch.cuda.synchronize()`` or ``loss.item()`` of the
    loop, which returns once the GPU is idle), else when the GPU work queued before it
    (``before_end_us``) finished, and never before its CPU start. The window-opening work
    done on the host before that wait (the profiler's start) then stays out of the step, as
    the training script's own timer sees it.
    """
    last: dict[int, float] = {}
    for ev in events:
        if ev.end_us > last.get(ev.step, float("-inf")):
            last[ev.step] = ev.end_us
    spans: dict[int, tuple[float, float]] = {}
    prev: tuple[int, float] | None = None  # (step, end) of the previous step
    for step, t0, t1 in sorted(steps, key=lambda s: s[1]):
        end = max(t1, last.get(step, t1))
        if prev is not None and prev[0] == step - 1:
            start = min(prev[1], end)
        else:
            start = max([t0] + [t for t in (before_end_us, drained_us) if t is not None])
            start = min(start, end)
            drained_us = None  # the first step's only
        spans[step] = (start, end)
        prev = (step, end)
    return spans


def _build(out: Attribution, marks: Sequence[Mark],
           resolved: list[tuple[Activity, Launch, Mark, str, int]],
           first_bw: dict[int, float], root: str) -> Attribution:
    groups: dict[tuple[str, int, int, int], GpuEvent] = {}
    sync_t: list[float] = []  # launch times of compute work, with running max end
    sync_end: list[float] = []
    comm_firsts: dict[tuple[str, int, int, int], Mark] = {}
    runs: list[GpuEvent] = []
    last_run: dict[int, tuple[tuple[str, int, int], GpuEvent]] = {}  # stream -> open run
    for a, la, st, rule, key in sorted(resolved, key=lambda r: r[1].ts_us):
        sn = int(st.args.get("step", 0))
        end = a.ts_us + a.dur_us
        out.window_us += a.dur_us
        out.by_rule[rule] = out.by_rule.get(rule, 0.0) + a.dur_us
        if rule == "remainder":
            out.remainder_us += a.dur_us
            fb = first_bw.get(sn)
            name, cat, args = ((f"FW.{root}", "FW", {"module": root, "remainder": True})
                               if fb is None or la.ts_us < fb
                               else (OTHER_UPDATE, "UPDATE", {"remainder": True}))
        elif rule == "backward_root":
            out.attributed_us += a.dur_us
            name, cat, args = f"BW.{root}", "BW", {"module": root, "remainder": True}
        else:
            out.attributed_us += a.dur_us
            mk = marks[key]
            if rule == "backward":
                name, cat = "BW." + mk.name.removeprefix("FW."), "BW"
            else:
                name, cat = mk.name, mk.cat
            args = mk.args
        if cat == "Comm":  # one event per collective, whatever its streams
            gk = (name, key, -1, sn)
            ev = groups.get(gk)
            if ev is None:
                groups[gk] = GpuEvent(name, cat, sn, a.stream, a.ts_us, end, a.dur_us, 1, args)
                comm_firsts[gk] = marks[key]
            else:
                ev.ts_us = min(ev.ts_us, a.ts_us)
                ev.end_us = max(ev.end_us, end)
                ev.busy_us += a.dur_us
                ev.kernels += 1
            continue
        sync_t.append(la.ts_us)
        sync_end.append(max(end, sync_end[-1]) if sync_end else end)
        # compute: one event per run of consecutive activities of one call on a stream
        rk = (name, key if rule != "remainder" else -1, sn)
        prev = last_run.get(a.stream)
        if prev is not None and prev[0] == rk:
            ev = prev[1]
            # busy: the union of the run's activities (on Hopper a kernel may start before
            # the previous one on its stream ends: programmatic dependent launch)
            ev.busy_us += max(0.0, end - max(a.ts_us, ev.end_us))
            ev.end_us = max(ev.end_us, end)
            ev.kernels += 1
        else:
            ev = GpuEvent(name, cat, sn, a.stream, a.ts_us, end, a.dur_us, 1, args)
            runs.append(ev)
            last_run[a.stream] = (rk, ev)

    def ready_at(t_cpu: float) -> float | None:
        i = bisect.bisect_left(sync_t, t_cpu) - 1
        return sync_end[i] if i >= 0 else None

    # comm: never before the compute work queued ahead of it; kernel-less ones too
    for gk, mk in comm_firsts.items():
        ev = groups[gk]
        r = ready_at(mk.ts_us)
        if r is not None and r > ev.ts_us:
            ev.ts_us = min(r, ev.end_us)
    seen = {gk[1] for gk in comm_firsts}  # marks whose collective ran kernels
    comm_marks = [(i, m) for i, m in enumerate(marks) if m.cat == "Comm"]
    steps = sorted((m for m in marks if m.cat == "STEP"), key=lambda m: m.ts_us)
    for i, m in comm_marks:
        if i in seen:
            continue
        # the step the collective was issued in, as echo recorded it; a mark without one
        # takes the STEP range around its start (a c10d op matched up to the match slack
        # before echo's event, or a clock pairing off by a preemption, can start outside)
        issued = m.args.get("step")
        if not isinstance(issued, int):
            stp = next((s for s in steps if s.ts_us <= m.ts_us <= s.end_us), None)
            if stp is None:
                continue
            issued = int(stp.args.get("step", 0))
        gk = (m.name, i, -1, issued)
        r = ready_at(m.ts_us)
        if r is None:  # no GPU work queued before it: its issue time is all there is
            r = m.ts_us
        groups[gk] = GpuEvent(m.name, "Comm", gk[3], -1, r, r, 0.0, 0, m.args)
    out.events = sorted([*runs, *groups.values()], key=lambda e: (e.stream, e.ts_us, e.end_us))
    return out
