"""Where a collective's time goes: queued behind the rank's own earlier collectives, waiting
for the last member, the transfer, returning late.

Each collective instance is matched across its members by (process group, ``seq``)
(:func:`echo_sim.trace.graph.match_instances`; send/recv and instances with a member missing
from the trace are left out). Member ``r``'s slice runs from ``s_r`` to ``e_r``; its
collectives of the same group and kind issued before it were in flight until ``busy_r``
(:func:`echo_sim.cost.trace_comm.queued_us`), so it had the channel from
``a_r = max(s_r, busy_r)``::

    queued_r   = a_r - s_r                  behind the rank's own earlier collectives
    wait_r     = max_m a_m - a_r            member r waiting for the last one to arrive
    transfer   = min_m e_m - max_m a_m      last arrival to the first member's completion
    lag_r      = e_r - min_m e_m            member r returning after the first one did
    own_r      = e_r - a_r = wait_r + transfer + lag_r

``queued`` is not in ``own``: it is time the rank's earlier collectives already hold (DDP's
buckets issued back to back, or a fast rank's buckets all waiting for a straggler's), and
counting it again would add one wait per bucket. (Until 2026-11-28 it was in ``own`` and
``wait``: a 2-process DDP job with a straggler showed a typical member 59 ms a step in
collectives, where its ranks' steps were 66 ms and their compute 58 and 8 ms.)

``own`` is what the collective costs member ``r``. Averaged over members it is what a
synchronous job pays per collective: for two ranks, the transfer plus half the arrival gap
plus half the exit gap. A large ``lag`` means a member's thread came back late after the data
had arrived: a descheduled thread, or a virtual CPU woken late. On such a host the transfers
are heavy-tailed: their mean runs well above their median, and a step pays the mean.

Per (collective, group size, bytes) over the captured steps: instances per step; the mean
over members and instances of ``own``, ``wait`` and ``lag``; the transfer's mean, median and
90th percentile; ``stalled``, the fraction of instances whose transfer is at least
:data:`~echo_sim.cost.comm_profile.STALL_US` over the median (the measure ``profile-comm``
reports for its own runs, so the job's and the profile's stall rates compare directly); the
cost per step, Σ own / members / steps. The starts and ends must be on
one clock: ranks of one host, or traces whose clocks were aligned. A negative transfer
(a member finished before the last one arrived) says they are not, or that the collective
does not synchronise its members; such instances are counted (``negative``). Units: µs.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from echo_sim.cost.comm_profile import STALL_US
from echo_sim.cost.trace_comm import queued_us
from echo_sim.errors import EchoError
from echo_sim.trace.graph import match_instances
from echo_sim.trace.model import COLLECTIVES, Trace

__all__ = ["CollectiveAnatomy", "CommAnatomy", "comm_anatomy"]


@dataclass(frozen=True)
class CollectiveAnatomy:
    """One (collective, group size, bytes): how its members' time splits (module docstring)."""

    collective: str
    group_size: int
    nbytes: int
    instances: int
    per_step: float  # instances per captured step
    own_mean_us: float  # = wait_mean_us + transfer_mean_us + lag_mean_us
    wait_mean_us: float
    transfer_mean_us: float
    transfer_median_us: float
    transfer_p90_us: float
    lag_mean_us: float
    per_step_us: float  # Σ own / members / steps: what a typical member pays per step
    negative: int  # instances whose transfer is < 0
    stalled: float = 0.0  # fraction of instances with transfer >= median + STALL_US
    queued_mean_us: float = 0.0  # behind the rank's own earlier collectives; not in own


@dataclass(frozen=True)
class CommAnatomy:
    """What :func:`comm_anatomy` returns; ``to_dict`` is the ``--json`` form."""

    steps: int
    rows: list[CollectiveAnatomy]  # costliest per step first

    @property
    def total(self) -> dict[str, float]:
        """Per step, summed over every row: own, wait, transfer and lag, and the queueing
        left out of own (µs)."""
        out = {"own_us": 0.0, "wait_us": 0.0, "transfer_us": 0.0, "lag_us": 0.0,
               "queued_us": 0.0}
        for r in self.rows:
            k = r.per_step
            out["queued_us"] += r.queued_mean_us * k
            out["own_us"] += r.own_mean_us * k
            out["wait_us"] += r.wait_mean_us * k
            out["transfer_us"] += r.transfer_mean_us * k
            out["lag_us"] += r.lag_mean_us * k
        return out

    def to_dict(self) -> dict[str, Any]:
        return {"steps": self.steps, "per_step": self.total,
                "collectives": [asdict(r) for r in self.rows]}


def comm_anatomy(trace: Trace) -> CommAnatomy:
    """The anatomy of ``trace``'s matched collectives over its captured steps.

    Raises :class:`EchoError` when the trace holds fewer than two ranks or no collective
    with every member traced."""
    ev = trace.events
    comm = trace.comm_rows()
    comm = comm[ev.step[comm] >= 0]
    if np.unique(ev.rank).size < 2:
        raise EchoError(f"{trace.source or 'trace'}: one rank; a collective's anatomy needs "
                        f"the traces of its members (give the directory of every rank)")
    inst, p2p, complete = match_instances(trace, comm)
    keep = complete[inst] & ~p2p[inst] if comm.size else np.zeros(0, bool)
    rows, inst = comm[keep], inst[keep]
    if rows.size == 0:
        raise EchoError(f"{trace.source or 'trace'}: no collective with every member traced")
    _, inst = np.unique(inst, return_inverse=True)
    n = int(inst.max()) + 1
    queued = queued_us(trace, rows)
    s, e = ev.ts_us[rows] + queued, ev.ts_us[rows] + ev.dur_us[rows]
    s_max, e_min = np.full(n, -np.inf), np.full(n, np.inf)
    np.maximum.at(s_max, inst, s)
    np.minimum.at(e_min, inst, e)
    members = np.bincount(inst, minlength=n)
    wait, lag = s_max[inst] - s, e - e_min[inst]
    transfer = e_min - s_max  # per instance
    first = np.zeros(n, np.int64)
    first[inst[::-1]] = rows[::-1]  # a representative row per instance
    nbytes = np.zeros(n, np.int64)
    np.maximum.at(nbytes, inst, ev.nbytes[rows].astype(np.int64))
    steps = int(np.unique(ev.step[rows]).size)
    key_of = [(int(ev.coll[first[i]]), int(members[i]), int(nbytes[i])) for i in range(n)]
    by_key: dict[tuple[int, int, int], list[int]] = {}
    for i, k in enumerate(key_of):
        by_key.setdefault(k, []).append(i)
    out: list[CollectiveAnatomy] = []
    for (coll, size, nb), ids in by_key.items():
        sel = np.isin(inst, ids)
        t = transfer[ids]
        own = float(np.mean(e[sel] - s[sel]))
        out.append(CollectiveAnatomy(
            collective=COLLECTIVES[coll] if coll >= 0 else "", group_size=size, nbytes=nb,
            instances=len(ids), per_step=len(ids) / steps, own_mean_us=own,
            wait_mean_us=float(np.mean(wait[sel])), transfer_mean_us=float(np.mean(t)),
            transfer_median_us=float(np.median(t)),
            transfer_p90_us=float(np.percentile(t, 90)), lag_mean_us=float(np.mean(lag[sel])),
            per_step_us=own * len(ids) / steps, negative=int(np.sum(t < 0)),
            stalled=float(np.mean(t >= np.median(t) + STALL_US)),
            queued_mean_us=float(np.mean(queued[sel]))))
    out.sort(key=lambda r: (-r.per_step_us, r.collective, r.nbytes))
    return CommAnatomy(steps=steps, rows=out)
