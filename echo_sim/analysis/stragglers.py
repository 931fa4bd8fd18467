"""Ranks that arrive late at collectives, or compute longer than their peers, per step.

Collective entry lateness: collectives are matched across ranks by (process group, ``seq``)
as the trace contract prescribes; for each matched operation the entry (issue) time of every
member is compared with the earliest member's, ``late_us = ts_us − min(ts_us)``. Per
(step, rank): the largest and the mean lateness over the step's collectives.

Compute excess: busy time covered by ``FW``/``BW``/``UPDATE`` on a rank in a step (the rule of
:mod:`echo_sim.analysis.statistic`: idle gaps inside GPU kernel runs are not compute) minus
the median over ranks of the same step (negative: faster than the median).

A (step, rank) cell is a straggler when either figure exceeds ``threshold_us`` (default: 5 %
of the job's iteration time, the median over steps of the slowest rank). Send/recv pairs are
not collectives and are left out. Units: microseconds.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from echo_sim.analysis.collect import collect
from echo_sim.analysis.statistic import StepGrid, step_grid
from echo_sim.errors import EchoError
from echo_sim.trace.model import COLLECTIVES, Cat, Trace

__all__ = [
    "DEFAULT_THRESHOLD_FRACTION",
    "CellLateness",
    "CollectiveSpread",
    "Lateness",
    "RankLateness",
    "StragglerReport",
    "lateness",
    "report_from_cells",
    "stragglers",
]

DEFAULT_THRESHOLD_FRACTION = 0.05
"""Default threshold as a fraction of the iteration time."""

_P2P = (COLLECTIVES.index("send"), COLLECTIVES.index("recv"))


@dataclass(frozen=True)
class CollectiveSpread:
    """One matched collective: who entered first and last, and the gap between them."""

    step: int
    name: str
    collective: str
    group_ranks: list[int]
    seq: int
    members: int  # ranks of the group seen in the trace
    first_rank: int
    last_rank: int
    spread_us: float  # last entry − first entry


@dataclass(frozen=True)
class CellLateness:
    """One rank in one step."""

    step: int
    rank: int
    collectives: int
    max_late_us: float
    mean_late_us: float
    compute_us: float
    compute_excess_us: float  # compute_us − median over ranks of this step
    straggler: bool
    reason: str  # "collective", "compute", "collective+compute" or ""


@dataclass(frozen=True)
class RankLateness:
    """One rank over all captured steps."""

    rank: int
    times_last: int  # collectives (with a spread > 0) this rank entered last
    mean_late_us: float
    max_late_us: float
    mean_compute_excess_us: float
    straggler_steps: int


@dataclass(frozen=True)
class StragglerReport:
    """What :func:`stragglers` returns; ``to_dict`` is the ``--json`` form."""

    threshold_us: float
    iteration_time_us: float
    cells: list[CellLateness]
    ranks: list[RankLateness]
    collectives: list[CollectiveSpread]  # sorted by spread, largest first

    @property
    def flagged(self) -> list[CellLateness]:
        """Straggler cells, worst first."""
        return sorted((c for c in self.cells if c.straggler),
                      key=lambda c: (-max(c.max_late_us, c.compute_excess_us), c.step, c.rank))

    def to_dict(self) -> dict[str, Any]:
        return {"threshold_us": self.threshold_us, "iteration_time_us": self.iteration_time_us,
                "stragglers": [asdict(c) for c in self.flagged],
                "ranks": [asdict(r) for r in self.ranks],
                "cells": [asdict(c) for c in self.cells],
                "collectives": [asdict(c) for c in self.collectives]}


@dataclass(frozen=True)
class Lateness:
    """Collective entry lateness per cell of a step grid (flat, cell
    ``rank_index * len(steps) + step_index``): collectives counted, largest and mean
    lateness (µs); the matched collectives (largest spread first, at most the kept number)
    and, per rank, how many it entered last."""

    count: np.ndarray
    max_late_us: np.ndarray
    mean_late_us: np.ndarray
    spreads: list[CollectiveSpread]
    times_last: dict[int, int]


def stragglers(trace: Trace, *, threshold_us: float | None = None,
               max_collectives: int | None = 100) -> StragglerReport:
    """Per-step, per-rank collective-entry lateness and compute excess, with stragglers flagged.

    ``max_collectives``: keep the N collectives with the largest spread (None: all).
    """
    if threshold_us is not None and not threshold_us >= 0:
        raise EchoError(f"--threshold-us must be >= 0, got {threshold_us}")
    grid = step_grid(trace)
    iteration = collect(trace).iteration_time_us
    late = lateness(trace, grid, max_collectives=max_collectives)
    compute = grid.covered(trace, (int(Cat.FW), int(Cat.BW), int(Cat.UPDATE)))
    return report_from_cells(grid.ranks, grid.steps, iters=grid.iteration_us, compute=compute,
                             late=late, iteration_us=iteration, threshold_us=threshold_us)


def lateness(trace: Trace, grid: StepGrid, *, max_collectives: int | None = 100) -> Lateness:
    """:class:`Lateness` of the collectives of ``grid``'s cells (module docstring)."""
    ev = trace.events
    n = grid.n_cells
    sel = ((ev.cat[grid.rows] == Cat.COMM) & (ev.seq[grid.rows] >= 0)
           & (ev.group[grid.rows] >= 0) & ~np.isin(ev.coll[grid.rows], _P2P))
    rows, cell = grid.rows[sel], grid.group[sel]
    ts = ev.ts_us[rows]
    key = ev.group[rows].astype(np.int64) * (int(ev.seq[rows].max(initial=0)) + 1) + ev.seq[rows]
    uniq, k = np.unique(key, return_inverse=True)
    first = np.full(uniq.size, np.inf)
    np.minimum.at(first, k, ts)
    late = ts - first[k]
    cnt = np.bincount(cell, minlength=n)
    max_late = np.zeros(n)
    np.maximum.at(max_late, cell, late)
    mean_late = np.bincount(cell, weights=late, minlength=n) / np.maximum(cnt, 1)

    spreads: list[CollectiveSpread] = []
    rank_of = ev.rank[rows]
    times_last = dict.fromkeys(grid.ranks.tolist(), 0)
    if uniq.size:
        order = np.lexsort((rank_of, ts, k))
        k_s = k[order]
        starts = np.flatnonzero(np.r_[True, k_s[1:] != k_s[:-1]])
        ends = np.r_[starts[1:], k_s.size] - 1
        spread = ts[order][ends] - ts[order][starts]
        members = ends - starts + 1
        for last in rank_of[order][ends[(spread > 0) & (members > 1)]].tolist():
            times_last[int(last)] += 1
        top = np.argsort(-spread, kind="stable")
        if max_collectives is not None:
            top = top[:max_collectives]
        for t in top.tolist():
            r0 = int(rows[order][starts[t]])
            c = int(ev.coll[r0])
            spreads.append(CollectiveSpread(
                step=int(ev.step[r0]), name=trace.name_of(r0),
                collective=COLLECTIVES[c] if c >= 0 else "",
                group_ranks=list(trace.groups[int(ev.group[r0])]), seq=int(ev.seq[r0]),
                members=int(members[t]), first_rank=int(rank_of[order][starts[t]]),
                last_rank=int(rank_of[order][ends[t]]), spread_us=float(spread[t])))
    return Lateness(cnt, max_late, mean_late, spreads, times_last)


def report_from_cells(ranks: np.ndarray, steps: np.ndarray, *, iters: np.ndarray,
                      compute: np.ndarray, late: Lateness, iteration_us: float,
                      threshold_us: float | None = None) -> StragglerReport:
    """:class:`StragglerReport` from per-cell figures (flat cells, as :class:`Lateness`):
    iteration times, covered compute (µs), the lateness, and the job's iteration time
    (:func:`~echo_sim.analysis.collect.collect`); the out-of-core engine computes those one
    rank group at a time."""
    if threshold_us is not None and not threshold_us >= 0:
        raise EchoError(f"--threshold-us must be >= 0, got {threshold_us}")
    iteration = iteration_us
    if threshold_us is None:
        threshold_us = DEFAULT_THRESHOLD_FRACTION * iteration if iteration == iteration else 0.0
    cnt, max_late, mean_late = late.count, late.max_late_us, late.mean_late_us
    times_last = late.times_last

    # --- compute excess ----------------------------------------------------------------
    valid = np.isfinite(iters)
    g_compute = np.where(valid, compute, np.nan).reshape(ranks.size, steps.size)
    with np.errstate(all="ignore"):
        median = np.array([np.median(col[np.isfinite(col)]) if np.isfinite(col).any()
                           else np.nan for col in g_compute.T])
    excess = (g_compute - median[None, :]).ravel()

    cells: list[CellLateness] = []
    for g in np.flatnonzero(valid).tolist():
        i, j = divmod(g, steps.size)
        late_hit = bool(max_late[g] > threshold_us)
        comp_hit = bool(excess[g] > threshold_us)
        reason = "+".join(w for w, hit in (("collective", late_hit), ("compute", comp_hit))
                          if hit)
        cells.append(CellLateness(
            step=int(steps[j]), rank=int(ranks[i]), collectives=int(cnt[g]),
            max_late_us=float(max_late[g]), mean_late_us=float(mean_late[g]),
            compute_us=float(compute[g]), compute_excess_us=float(excess[g]),
            straggler=late_hit or comp_hit, reason=reason))

    by_rank: dict[int, list[CellLateness]] = {}
    for c in cells:
        by_rank.setdefault(c.rank, []).append(c)
    out: list[RankLateness] = []
    for r in ranks.tolist():
        mine = by_rank.get(r, [])
        n_coll = sum(c.collectives for c in mine)
        out.append(RankLateness(
            rank=r, times_last=times_last.get(r, 0),
            mean_late_us=(sum(c.mean_late_us * c.collectives for c in mine) / n_coll
                          if n_coll else 0.0),
            max_late_us=max((c.max_late_us for c in mine), default=0.0),
            mean_compute_excess_us=(sum(c.compute_excess_us for c in mine) / len(mine)
                                    if mine else 0.0),
            straggler_steps=sum(c.straggler for c in mine)))
    return StragglerReport(threshold_us=float(threshold_us), iteration_time_us=iteration,
                           cells=cells, ranks=out, collectives=late.spreads)
