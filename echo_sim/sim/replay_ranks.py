"""Per-rank breakdown of a replay (what ``replay --pretty``, dPRO's switch, prints).

For every rank, means per replayed step, in microseconds:

* ``measured_us`` / ``replayed_us``: the span of the rank's replayed events in a step
  (leaf FW/BW/UPDATE and Comm), first start to last end, measured and replayed (the
  per-step table widens the replayed span by the measured head and tail of the ``STEP``
  marker; this one does not, so both columns here span the same events);
* ``compute_us``: replayed operator time on its compute stream (Σ end − start of leaf
  FW/BW/UPDATE events, what-if scales applied, host delays excluded);
* ``host_delay_us``: Σ measured host delays replayed before its operators;
* ``comm_us``: Σ replayed durations of its ``Comm`` events as the rank saw them (issue to
  completion, waiting for peers included; overlapping operations each count);
* ``comm_channels``: the rank's communication channels (:mod:`echo_sim.sim.comm_channels`).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from echo_sim.sim.comm_channels import channel_keys
from echo_sim.sim.replay import TASK_COMPUTE, ReplayResult

__all__ = ["RankLine", "format_rank_lines", "rank_lines"]


@dataclass(frozen=True)
class RankLine:
    """One rank of a replay, means per step (µs); see the module doc."""

    rank: int
    measured_us: float
    replayed_us: float
    compute_us: float
    host_delay_us: float
    comm_us: float
    comm_channels: int

    def to_dict(self) -> dict[str, Any]:
        return {k: round(v, 3) if isinstance(v, float) else v for k, v in asdict(self).items()}


def _mean(xs: list[float]) -> float:
    return float(np.mean(xs)) if xs else float("nan")


def rank_lines(res: ReplayResult) -> list[RankLine]:
    """The per-rank breakdown of ``res`` (ranks in order)."""
    tr, deps = res.trace, res.deps
    ev = tr.events
    start, end = res.row_start_us, res.row_end_us
    steps = deps.steps
    nsteps = max(len(steps), 1)
    comp_delay = np.zeros(len(ev))
    is_comp = res.task_kind == TASK_COMPUTE
    comp_delay[res.task_row[is_comp]] = res.task_delay_us[is_comp]
    chan = channel_keys(tr, deps.comm, res.comm_queues)
    out = []
    for rank in sorted(int(r) for r in np.unique(ev.rank[np.concatenate([deps.compute,
                                                                           deps.comm])])):
        comp = deps.compute[ev.rank[deps.compute] == rank]
        mine = ev.rank[deps.comm] == rank
        comm = deps.comm[mine]
        measured, replayed = [], []
        for s in steps:
            rows = np.concatenate([comp[ev.step[comp] == s], comm[ev.step[comm] == s]])
            if rows.size == 0:
                continue
            measured.append(float((ev.ts_us[rows] + ev.dur_us[rows]).max()
                                  - ev.ts_us[rows].min()))
            replayed.append(float(np.nanmax(end[rows]) - np.nanmin(start[rows])))
        out.append(RankLine(
            rank=rank, measured_us=_mean(measured), replayed_us=_mean(replayed),
            compute_us=float(np.nansum(end[comp] - start[comp])) / nsteps,
            host_delay_us=float(comp_delay[comp].sum()) / nsteps,
            comm_us=float(np.nansum(end[comm] - start[comm])) / nsteps,
            comm_channels=int(np.unique(chan[mine]).size)))
    return out


def format_rank_lines(lines: list[RankLine]) -> str:
    """A fixed-width table of :func:`rank_lines` (times in ms)."""
    head = (f"{'rank':>6} {'measured ms':>12} {'replayed ms':>12} {'compute ms':>11} "
            f"{'host delay ms':>14} {'comm ms':>9} {'channels':>9}")
    rows = [f"{x.rank:>6} {x.measured_us / 1e3:>12.3f} {x.replayed_us / 1e3:>12.3f} "
            f"{x.compute_us / 1e3:>11.3f} {x.host_delay_us / 1e3:>14.3f} "
            f"{x.comm_us / 1e3:>9.3f} {x.comm_channels:>9}" for x in lines]
    return "\n".join(["per rank (means per step):", head, *rows])
