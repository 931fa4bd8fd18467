"""Stretch collectives and compute that overlap on a shared CPU host (a second pass).

The engine gives every task a fixed duration. On a host whose cores the ranks
oversubscribe, a collective in flight while its ranks compute (DDP's bucket all-reduces
during backward, FSDP2's prefetched gathers) and that compute slow each other: gloo's
communication thread and the compute threads share the cores
(:func:`echo_sim.cost.cpu_overheads.comm_overlap`, processor sharing). Given a first
schedule, :func:`stretch_overlaps` rewrites the durations in place:

* the collectives are re-timed in their first-schedule order: each starts when its
  predecessors (re-timed collectives among them) and its channels are done; one of
  alone-time ``d`` starting at ``t0`` progresses at rate ``1/s_comm(S)``
  while a member rank's compute stream is busy and at rate 1 while it is idle; its new
  duration is the time until ``d`` of progress on its slowest simulated member (compute
  that started after the collective's first-schedule end is not counted: it waited for
  the collective, or for what the collective delays);
* a compute task overlapping the (new) interval of a collective on its rank for ``o`` µs
  gains ``o · (s_work(S) - 1)``, at most ``dur · (max s_work - 1)``.

Only collectives are stretched: the microbenchmark computes on every member, as a
data-parallel collective's members do; a pipeline send's receiver waits idle instead.
One pass, first order: the second schedule is not iterated to a fixed point.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable

from echo_sim.cost.cpu_overheads import CommOverlap
from echo_sim.sim.engine import Schedule
from echo_sim.workload.build import Built

__all__ = ["progress_end", "stretch_overlaps"]


def progress_end(t0: float, work_us: float, busy: list[tuple[float, float]],
                 stretch: float, ends: list[float] | None = None) -> float:
    """When ``work_us`` of progress started at ``t0`` is done, at rate ``1/stretch`` inside
    the ``busy`` intervals (sorted, disjoint (start, end) µs) and rate 1 outside them.
    ``ends``: the intervals' ends, when the caller has them already."""
    left, t = work_us, t0
    k = bisect.bisect_right(ends if ends is not None else [b for _, b in busy], t0)
    for a, b in busy[k:]:
        if a > t:
            if left <= a - t:
                return t + left
            left -= a - t
            t = a
        cap = (b - t) / stretch
        if left <= cap:
            return t + left * stretch
        left -= cap
        t = b
    return t + left


def stretch_overlaps(built: Built, sched: Schedule, overlap: CommOverlap,
                     alone_us: Callable[[str, int, tuple[int, ...]], float] | None = None
                     ) -> int:
    """Rewrite ``built.graph``'s durations as the module says; returns the tasks changed.

    ``alone_us(collective, nbytes, group)``: the collective's own transfer time; the rest of
    its duration (a synchronisation wait, e.g. rank skew) is spent waiting before the
    transfer and is not stretched. Default: the whole duration is transfer.
    """
    g = built.graph
    start, end = sched.start_us, sched.end_us
    busy: dict[int, list[tuple[float, float]]] = {}
    for r in built.ranks:
        ts = [t for t in built.compute_tasks.get(r, []) if end[t] > start[t]]
        busy[r] = sorted((float(start[t]), float(end[t])) for t in ts)
    starts = {r: [a for a, _ in iv] for r, iv in busy.items()}
    ends = {r: [b for _, b in iv] for r, iv in busy.items()}
    comms = sorted(built.comm_info, key=lambda c: (start[c], c))
    is_comm = set(comms)
    preds: dict[int, list[int]] = {c: [] for c in comms}
    for u, vs in enumerate(g.succ):
        for v in vs:
            if v in is_comm:
                preds[v].append(u)
    # re-time the collectives in their first-schedule order against the (fixed) compute:
    # each starts when its predecessors (re-timed collectives among them) and its channels
    # are done, as the engine would start it
    new_end: dict[int, float] = {}
    free: dict[int, float] = {}
    new_dur: dict[int, float] = {}
    active: dict[int, list[tuple[float, float, float, float]]] = {r: [] for r in built.ranks}
    for c in comms:
        name, coll, nbytes, grp = built.comm_info[c]
        t0 = max([g.release_us[c], *(new_end.get(u, float(end[u])) for u in preds[c]),
                  *(free.get(r, 0.0) for r in g.resources[c])])
        d = g.dur_us[c]
        members = [r for r in dict.fromkeys(grp) if r in busy]
        t1 = t0 + d
        if len(set(grp)) >= 2 and members and not name.startswith("pp.") and d > 0:
            work = min(d, alone_us(coll, nbytes, grp)) if alone_us is not None else d
            s_c = overlap.comm(nbytes)
            # compute that started after the collective's first-schedule end waited for it
            # (or for what it delays): it cannot overlap the collective
            cut = float(end[c])
            t1 = max(progress_end(t0 + d - work, work, busy[r][:n], s_c, ends[r][:n])
                     for r in members for n in (bisect.bisect_left(starts[r], cut),))
            s_w = overlap.work(nbytes)
            if s_w > 1.0:
                for r in members:
                    active[r].append((t0, t1, s_w, cut))
        new_end[c] = t1
        for r in g.resources[c]:
            free[r] = t1
        if abs((t1 - t0) - d) > 1e-9 * max(d, 1.0):
            new_dur[c] = t1 - t0
    extra = _compute_extra(built, sched, active)
    for c, dur in new_dur.items():
        g.dur_us[c] = dur
    for t, add in extra.items():
        g.dur_us[t] += add
    return len(new_dur) + len(extra)


def _compute_extra(built: Built, sched: Schedule,
                   active: dict[int, list[tuple[float, float, float, float]]]
                   ) -> dict[int, float]:
    """Per compute task, ``overlap · (s_work - 1)`` summed over the collectives in flight on
    its rank (``(start, end, s_work, first-schedule end)``; compute that started after the
    last did not run beside it), at most ``dur · (max s_work - 1)``."""
    start, end = sched.start_us, sched.end_us
    extra: dict[int, float] = {}
    for r, spans in active.items():
        if not spans:
            continue
        spans.sort()
        cap = max(sp[2] for sp in spans) - 1.0
        span_starts = [sp[0] for sp in spans]
        for t in built.compute_tasks.get(r, []):
            a, b = float(start[t]), float(end[t])
            if b <= a:
                continue
            add = 0.0
            for x0, x1, s_w, cut in spans[:bisect.bisect_left(span_starts, b)]:
                o = min(b, x1) - max(a, x0)
                if o > 0 and a < cut:
                    add += o * (s_w - 1.0)
            if add > 0:
                extra[t] = extra.get(t, 0.0) + min(add, (b - a) * cap)
    return extra
