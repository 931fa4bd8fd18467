"""Iteration time and its split into compute and communication (dPRO's ``collect``).

Per (rank, step) cell:

* ``iteration_us``: the ``STEP`` marker's duration (else the span of the cell's events);
* ``fwbw_us``: busy time covered by ``FW``/``BW`` events (union, so nested modules count once);
* ``compute_us``: busy time covered by ``FW``/``BW``/``UPDATE`` events;
* ``comm_us``: busy time covered by ``Comm`` events (union over lanes);
* ``overlapped_us`` = ``∫ compute(t)·comm(t) dt``: communication hidden behind compute on the
  same rank; ``exposed_us`` = comm_us − overlapped_us.

Busy time is the rule of :mod:`echo_sim.analysis.statistic`: each event's newly covered length
counts at its density ``busy_us / dur_us`` (GPU traces: kernel time inside a run of kernels;
1 elsewhere), so an event's idle gaps are idle. ``compute(t)``/``comm(t)`` are those
densities over time (:func:`~echo_sim.analysis.statistic.overlap_us`); with every density 1,
overlapped is ``|comm ∩ compute|`` = comm_us + compute_us − ``|comm ∪ compute|``.

Summary: ``iteration_time_us`` is the median over captured steps of the slowest rank's
iteration time in that step (the job's iteration time); per rank, mean and median.

Units: microseconds.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from echo_sim.analysis.statistic import StepGrid, step_grid
from echo_sim.trace.model import Cat, Trace

__all__ = ["Collected", "RankSummary", "StepSummary", "collect", "collect_cells",
           "collected_from_cells"]


@dataclass(frozen=True)
class RankSummary:
    """One rank over its captured steps (µs)."""

    rank: int
    steps: int
    iteration_mean_us: float
    iteration_median_us: float
    fwbw_mean_us: float
    compute_mean_us: float
    comm_mean_us: float
    overlapped_mean_us: float
    exposed_mean_us: float


@dataclass(frozen=True)
class StepSummary:
    """One captured step: the slowest rank decides the step's time (µs)."""

    step: int
    iteration_us: float  # the slowest rank's
    slowest_rank: int
    fastest_us: float
    mean_us: float  # over ranks
    median_us: float  # over ranks


@dataclass(frozen=True)
class Collected:
    """What :func:`collect` returns; ``to_dict`` is the ``--json`` form."""

    iteration_time_us: float  # median over steps of the slowest rank per step
    iteration_time_mean_us: float  # mean over steps of the slowest rank per step
    fwbw_us: float  # means over (rank, step) cells
    compute_us: float
    comm_us: float
    overlapped_us: float
    exposed_us: float
    per_rank: list[RankSummary]
    per_step: list[StepSummary]
    cells: dict[str, np.ndarray]  # (ranks × steps) arrays: iteration_us, fwbw_us, ...
    ranks: list[int]
    steps: list[int]

    def to_dict(self) -> dict[str, Any]:
        return {
            "iteration_time_us": self.iteration_time_us,
            "iteration_time_mean_us": self.iteration_time_mean_us,
            "fwbw_us": self.fwbw_us,
            "compute_us": self.compute_us,
            "comm_us": self.comm_us,
            "overlapped_us": self.overlapped_us,
            "exposed_us": self.exposed_us,
            "ranks": self.ranks,
            "steps": self.steps,
            "per_rank": [asdict(r) for r in self.per_rank],
            "per_step": [asdict(s) for s in self.per_step],
            "cells": {k: [[_num(x) for x in row] for row in v.tolist()]
                      for k, v in self.cells.items()},
        }


def _num(x: float) -> float | None:
    return None if x != x else float(x)


def _nanmean(a: np.ndarray) -> float:
    a = a[np.isfinite(a)]
    return float(a.mean()) if a.size else float("nan")


def _nanmedian(a: np.ndarray) -> float:
    a = a[np.isfinite(a)]
    return float(np.median(a)) if a.size else float("nan")


def collect_cells(trace: Trace, grid: StepGrid) -> dict[str, np.ndarray]:
    """Per cell of ``grid`` (flat, µs): ``iteration_us``, ``fwbw_us``, ``compute_us``,
    ``comm_us``, ``overlapped_us``, ``exposed_us`` (module docstring); NaN iteration where a
    rank has no events in a step."""
    comm_cats = (int(Cat.COMM),)
    compute_cats = (int(Cat.FW), int(Cat.BW), int(Cat.UPDATE))
    comm = grid.covered(trace, comm_cats)
    overlapped = np.clip(grid.overlap(trace, compute_cats, comm_cats), 0.0, comm)
    return {
        "iteration_us": grid.iteration_us,
        "fwbw_us": grid.covered(trace, (int(Cat.FW), int(Cat.BW))),
        "compute_us": grid.covered(trace, compute_cats), "comm_us": comm,
        "overlapped_us": overlapped, "exposed_us": comm - overlapped,
    }


def collect(trace: Trace) -> Collected:
    """Iteration, compute and (exposed / overlapped) communication time per rank and step."""
    grid = step_grid(trace)
    return collected_from_cells(grid.ranks, grid.steps, collect_cells(trace, grid))


def collected_from_cells(ranks: np.ndarray, steps: np.ndarray,
                         flat: dict[str, np.ndarray]) -> Collected:
    """:class:`Collected` from the per-cell figures of :func:`collect_cells` (cell
    ``rank_index * len(steps) + step_index``); the out-of-core engine computes those one
    rank group at a time and assembles them here."""
    iters = flat["iteration_us"]
    missing = ~np.isfinite(iters)
    cells = {k: np.where(missing, np.nan, v).reshape(ranks.size, steps.size)
             for k, v in flat.items()}

    g_iter = cells["iteration_us"]
    per_step: list[StepSummary] = []
    slowest = np.full(steps.size, np.nan)
    for j, s in enumerate(steps):
        col = g_iter[:, j]
        ok = np.isfinite(col)
        if not ok.any():
            continue
        i = int(np.nanargmax(col))
        slowest[j] = col[i]
        per_step.append(StepSummary(step=int(s), iteration_us=float(col[i]),
                                    slowest_rank=int(ranks[i]),
                                    fastest_us=float(col[ok].min()),
                                    mean_us=float(col[ok].mean()),
                                    median_us=float(np.median(col[ok]))))
    per_rank = [
        RankSummary(
            rank=int(r), steps=int(np.isfinite(g_iter[i]).sum()),
            iteration_mean_us=_nanmean(g_iter[i]), iteration_median_us=_nanmedian(g_iter[i]),
            fwbw_mean_us=_nanmean(cells["fwbw_us"][i]),
            compute_mean_us=_nanmean(cells["compute_us"][i]),
            comm_mean_us=_nanmean(cells["comm_us"][i]),
            overlapped_mean_us=_nanmean(cells["overlapped_us"][i]),
            exposed_mean_us=_nanmean(cells["exposed_us"][i]),
        )
        for i, r in enumerate(ranks)
    ]
    return Collected(
        iteration_time_us=_nanmedian(slowest),
        iteration_time_mean_us=_nanmean(slowest),
        fwbw_us=_nanmean(cells["fwbw_us"]),
        compute_us=_nanmean(cells["compute_us"]),
        comm_us=_nanmean(cells["comm_us"]),
        overlapped_us=_nanmean(cells["overlapped_us"]),
        exposed_us=_nanmean(cells["exposed_us"]),
        per_rank=per_rank,
        per_step=per_step,
        cells=cells,
        ranks=[int(r) for r in ranks],
        steps=[int(s) for s in steps],
    )
