"""Collectives priced as the traced job met them: a communication profile read off a
multi-rank trace's own ``Comm`` events.

A profile from ``profile-comm`` times collectives on ranks that do nothing else; the job
meets them while its ranks compute, share cores with the collective's threads and queue
behind each other's buckets. Where the trace holds several ranks, each collective instance
(matched across ranks by :func:`echo_sim.trace.graph.match_instances`) says what it cost
there::

    time_us = median over members r of (end_r - max(start_r, busy_r))

where ``busy_r`` is when the rank's earlier collectives of the same group and kind (still in
flight when this one was issued) ended: what the collective cost a typical member from its
arrival, or from when its channel came free, to completion. The slowdown by concurrent
compute and the wait for the later members are kept; the queueing behind the rank's own
earlier collectives is not, because the simulator queues a group's collectives on one
channel itself. (Until 2026-11-28 it was kept, and counted twice: a 2-process DDP job with a
straggler rank, whose fast rank issued both buckets early and waited in both at once, came
out +41 %.) The wait is rank skew: the simulator runs one
representative rank whose compute is a typical rank's, while a synchronisation ends when the
slowest member arrives; for two members the median wait is half their arrival gap, which is
the expected gap between the slower and the typical one (E[max(X0, X1)] - E[X] =
E|X0 - X1| / 2). A send/recv pair costs ``recv end - max(send start, recv start)``: the
pipeline's waits for its peer stage are the schedule's, which the simulator makes itself.

Per (op, group size, bytes) the samples' mean is kept (a step pays the expected cost of its
many collectives, not the typical one: on a shared host a few of them wait milliseconds for
a descheduled thread), all of them scaled by (median ÷ mean) of the per-step sums, so that
a step's collectives add up to the median step's, as the compute ops' medians are rescaled
(:mod:`echo_sim.workload.ops`); kept as a
:class:`~echo_sim.cost.comm_profile.CommProfile` with the same interpolation.

``simulate`` uses it at the layout the trace ran, on the hardware it ran on (another layout
is priced by one model for all its collectives). :class:`TracedFirst` prices a collective
from that profile when the trace holds the op over
a group of that size at a size within a factor of :data:`REACH` of the traced ones, else
from the model it wraps (a measured ``--comm-profile`` or the cluster's alpha-beta).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any

import numpy as np

from echo_sim.cost.comm_profile import CommProfile
from echo_sim.trace.graph import match_instances
from echo_sim.trace.model import COLLECTIVES, Trace

__all__ = ["REACH", "TracedFirst", "queued_us", "traced_comm_profile"]

REACH = 2.0  # sizes within [smallest / REACH, largest · REACH] of the traced ones are covered
_SEND, _RECV = COLLECTIVES.index("send"), COLLECTIVES.index("recv")


def queued_us(trace: Trace, comm: np.ndarray) -> np.ndarray:
    """Per row of ``comm`` (Comm rows), the µs of its own span (``dur_us`` at most) that the
    same rank's collectives of the same group and kind (all-reduce, all-gather, ...) issued
    before it were still in flight: the time it queued behind them on that rank, as the
    simulator queues them on one channel (DDP's buckets on ``comm_dp``, FSDP's all-gathers
    on ``comm_ag`` apart from its reduce-scatters; :mod:`echo_sim.workload.build`). Waiting
    behind a collective of another kind stays in its time: the simulator would run those
    side by side. 0 for send/recv and ungrouped rows."""
    ev = trace.events
    out = np.zeros(comm.shape[0], dtype=np.float64)
    if comm.size == 0:
        return out
    coll = ev.coll[comm]
    grp = ev.group[comm].astype(np.int64)
    ok = (grp >= 0) & (coll >= 0) & (coll != _SEND) & (coll != _RECV)
    idx = np.flatnonzero(ok)
    if idx.size == 0:
        return out
    rank = ev.rank[comm][idx].astype(np.int64)
    start = ev.ts_us[comm][idx]
    dur = ev.dur_us[comm][idx]
    kind = coll[idx].astype(np.int64)
    order = np.lexsort((start, kind, grp[idx], rank))  # by rank, group, kind, issue time
    key = np.stack([rank[order], grp[idx][order], kind[order]], axis=1)
    cut = np.flatnonzero(np.any(key[1:] != key[:-1], axis=1)) + 1
    for part in np.split(order, cut):
        ends = start[part] + dur[part]
        busy = np.concatenate(([-np.inf], np.maximum.accumulate(ends)[:-1]))
        out[idx[part]] = np.clip(busy - start[part], 0.0, dur[part])
    return out


def traced_comm_profile(trace: Trace) -> CommProfile | None:
    """The profile of ``trace``'s own matched collectives (None: fewer than two ranks, or no
    instance with every member traced)."""
    ev = trace.events
    comm = trace.comm_rows()
    comm = comm[ev.step[comm] >= 0]
    if len(trace.ranks) < 2 or comm.size == 0:
        return None
    inst, is_p2p, complete = match_instances(trace, comm)
    start, end = ev.ts_us[comm], ev.ts_us[comm] + ev.dur_us[comm]
    own = ev.dur_us[comm] - queued_us(trace, comm)
    samples: dict[tuple[str, int], dict[int, list[float]]] = defaultdict(lambda: defaultdict(list))
    per_step: dict[int, float] = defaultdict(float)
    order = np.argsort(inst, kind="stable")
    bounds = np.flatnonzero(np.diff(inst[order])) + 1
    for part in np.split(order, bounds):
        i = int(inst[part[0]])
        if not complete[i] or part.size < 2:
            continue
        rows = comm[part]
        coll = ev.coll[rows]
        last = float(start[part].max())
        if is_p2p[i]:
            recv = part[coll == _RECV]
            if recv.size != 1:
                continue
            op, n, t = "send", 2, float(end[recv[0]]) - last
        else:
            c = int(coll[0])
            if c < 0:
                continue
            op = COLLECTIVES[c]
            g = int(ev.group[rows[0]])
            n = len(trace.groups[g]) if g >= 0 else part.size
            t = float(np.median(own[part]))  # own durations, less their queueing
        if t > 0 or (t == 0 and not is_p2p[i]):  # 0: hidden under the rank's earlier ones
            samples[(op, n)][int(ev.nbytes[rows[0]])].append(t)
            per_step[int(ev.step[rows[0]])] += t
    if not samples:
        return None
    # means add up to the mean step's communication; rescaled to the median step's, as the
    # compute ops are (echo_sim.workload.ops)
    sums = list(per_step.values())
    scale = float(np.median(sums) / np.mean(sums)) if sums and np.mean(sums) > 0 else 1.0
    infos = list(trace.ranks.values())
    hosts = {i.host or f"node{i.node_rank}" for i in infos}
    first = infos[0]
    return CommProfile(
        backend=first.backend or str(first.meta.get("backend", "")), device=first.device,
        host=first.host, world_size=max(i.world_size for i in infos),
        samples={k: [(s, float(np.mean(ts)) * scale) for s, ts in sorted(v.items())]
                 for k, v in samples.items()},
        nodes=len(hosts), iters=sum(len(ts) for v in samples.values() for ts in v.values()),
        source="the trace's own collectives")


class TracedFirst:
    """A collective model: the trace's own collectives where they cover the call (op, group
    size, a size within :data:`REACH` of the traced ones, one host as traced), else
    ``inner`` (:class:`~echo_sim.cost.collectives.CommModel`)."""

    def __init__(self, traced: CommProfile, inner: Any) -> None:
        self.traced, self.inner = traced, inner

    def traced_covers(self, op: str, nbytes: int, ranks: Sequence[int]) -> bool:
        key = ("send" if op in ("send", "recv", "p2p") else op, len(set(ranks)))
        pts = self.traced.samples.get(key)
        if not pts or len(set(ranks)) < 2:
            return False
        return pts[0][0] / REACH <= nbytes <= pts[-1][0] * REACH

    def covered(self, op: str, ranks: Sequence[int]) -> bool:
        covered = getattr(self.inner, "covered", None)
        return bool(covered(op, ranks)) if covered is not None else False

    def spread(self, op: str, nbytes: int, ranks: Sequence[int]) -> np.ndarray | None:
        """``inner``'s run-to-run spread of the calls it prices; None for the trace's own
        (their times are the job's, stalls included)."""
        inner = getattr(self.inner, "spread", None)
        if inner is None or self.traced_covers(op, nbytes, ranks):
            return None
        return inner(op, nbytes, ranks)

    def time_us(self, op: str, nbytes: int, ranks: Sequence[int], *,
                concurrent: int = 1) -> float:
        if self.traced_covers(op, nbytes, ranks):
            key = "send" if op in ("send", "recv", "p2p") else op
            return self.traced.time_us(key, len(set(ranks)), int(nbytes))
        return float(self.inner.time_us(op, nbytes, ranks, concurrent=concurrent))

    def links(self, ranks: Sequence[int]) -> list[str]:
        return list(self.inner.links(ranks))

    def describe(self) -> str:
        """One line for simulate's ``models``."""
        parts = []
        for (op, n), pts in sorted(self.traced.samples.items()):
            lo, hi = pts[0][0], pts[-1][0]
            size = _size(lo) if lo == hi else f"{_size(lo)}-{_size(hi)}"
            parts.append(f"{op}/{n} at {size}")
        return (f"the trace's own collectives ({self.traced.iters} instances: "
                f"{', '.join(parts)}; mean time as the ranks met them, scaled to the median step) where they "
                f"cover the call, else ")


def _size(n: float) -> str:
    for unit, k in (("MB", 1e6), ("KB", 1e3)):
        if n >= k:
            return f"{n / k:.3g} {unit}"
    return f"{n:.0f} B"
