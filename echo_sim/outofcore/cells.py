"""Per-(rank, step) figures of a store, computed one part (rank group) at a time.

Every figure of ``statistic``'s step parts, ``collect`` and ``stragglers``' compute excess
is a function of one (rank, step) cell's events only: the busy-time sweeps of
:mod:`echo_sim.analysis.statistic` never look across ranks. So each part of a store is read
alone (:func:`echo_sim.store.read_part`), run through the very functions the in-memory
path runs (:func:`~echo_sim.analysis.statistic.step_grid`,
:func:`~echo_sim.analysis.statistic.time_partition`,
:func:`~echo_sim.analysis.collect.collect_cells`), and only its cell figures (a few floats
per cell) are kept: memory is one part's, whatever the trace's size, and parts run in
parallel (:func:`echo_sim.store.ordered_map`: processes or Ray).

Equality with the in-memory path: iteration bounds (min/max, markers) are bit-identical;
covered and overlapped times agree to float rounding (~1e-9 relative), because the sweep
lays each cell's intervals on one shared axis whose offsets depend on how many cells it
holds (one part's, not the whole trace's).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from echo_sim.analysis.collect import collect_cells
from echo_sim.analysis.statistic import PARTS, step_grid, time_partition
from echo_sim.errors import TraceFormatError
from echo_sim.progress import Progress
from echo_sim.store import StoreInfo, Workers, ordered_map, read_part, read_store_info

__all__ = ["CELL_COLUMNS", "CellJob", "Cells", "PartCells", "part_cells", "store_cells"]

CELL_COLUMNS: tuple[str, ...] = ("rank", "step", "cat", "tid", "ts_us", "dur_us", "busy_us")
"""The event columns the cell figures read."""


@dataclass(frozen=True)
class CellJob:
    """One part to compute (picklable: it travels to a worker process or a Ray task)."""

    root: str
    index: int
    steps: tuple[int, ...]
    partition: bool  # statistic's parts
    collect: bool  # collect's figures


@dataclass
class PartCells:
    """One part's cells: ``ranks`` (sorted) and, per figure, a (ranks × steps) array."""

    ranks: np.ndarray
    figures: dict[str, np.ndarray] = field(default_factory=dict)


def part_cells(job: CellJob) -> PartCells:
    """Worker: the cell figures of one part (see the module docstring)."""
    info = read_store_info(job.root)
    trace = read_part(info, job.index, columns=CELL_COLUMNS)
    trace.steps = list(job.steps)
    n_steps = len(job.steps)
    try:
        grid = step_grid(trace)
    except TraceFormatError:  # no event of this part is in a captured step
        return PartCells(np.zeros(0, np.int64))
    out: dict[str, np.ndarray] = {"iteration_us": grid.iteration_us}
    if job.partition:
        out.update(time_partition(trace, grid))
    if job.collect:
        out.update(collect_cells(trace, grid))
    return PartCells(grid.ranks, {k: np.asarray(v, np.float64).reshape(-1, n_steps)
                                  for k, v in out.items()})


@dataclass
class Cells:
    """Cell figures of the whole store: ``ranks`` × ``steps`` cells, each figure flat
    (cell ``rank_index * len(steps) + step_index``), as the in-memory grid orders them."""

    ranks: np.ndarray
    steps: np.ndarray
    figures: dict[str, np.ndarray]

    @property
    def partition(self) -> dict[str, np.ndarray]:
        """statistic's step parts, in :data:`PARTS` order."""
        return {k: self.figures[k] for k in PARTS}


def store_cells(info: StoreInfo, steps: np.ndarray, *, partition: bool, collect: bool,
                workers: Workers = 1, progress: bool | None = None) -> Cells:
    """Cell figures of every part of ``info`` over ``steps`` (see the module docstring)."""
    jobs = [CellJob(str(info.root), p.index, tuple(int(s) for s in steps), partition, collect)
            for p in info.parts]
    got: list[PartCells] = []
    with Progress(len(jobs), "analysing", unit="part", enabled=progress) as bar:
        for pc in ordered_map(part_cells, jobs, workers):
            if pc.ranks.size:
                got.append(pc)
            bar.update(1)
    if not got:
        raise TraceFormatError(f"trace {info.root} has no events in captured steps "
                               f"{steps.tolist()}")
    ranks = np.concatenate([g.ranks for g in got]).astype(np.int64)
    order = np.argsort(ranks, kind="stable")  # parts are rank groups; keep rank order
    keys = list(got[0].figures)
    figures = {k: np.concatenate([g.figures[k] for g in got])[order].ravel() for k in keys}
    return Cells(ranks[order], np.asarray(steps, np.int64), figures)
