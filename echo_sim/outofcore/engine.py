"""``statistic``, ``collect`` and ``stragglers`` of a store, out of core.

Two engines give the same results (``compare`` too: :func:`compare_store`):

* ``memory``: :func:`~echo_sim.load.load_trace` reads the whole trace into one
  :class:`~echo_sim.trace.model.Trace` and the analyses run over it (any trace; memory
  grows with the trace: about :data:`MEMORY_BYTES_PER_EVENT` bytes per event at peak);
* ``duckdb`` (a store only): per-(rank, step) figures one part at a time
  (:mod:`echo_sim.outofcore.cells`, in processes or on Ray) and the cross-rank figures as
  DuckDB queries (:mod:`echo_sim.outofcore.queries`), assembled by the very functions the
  memory path ends with (``statistics_from_cells``, ``collected_from_cells``,
  ``report_from_cells``): memory is one part's and the queries', not the trace's.

``auto`` picks ``duckdb`` for a store whose memory-path estimate passes
:data:`AUTO_MEMORY_FRACTION` of the available memory or which holds at least
:data:`AUTO_DUCKDB_EVENTS` events, ``memory`` otherwise (every non-store path).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from echo_sim.analysis.collect import Collected, collected_from_cells
from echo_sim.analysis.compare import Comparison, comparison_from_sides
from echo_sim.analysis.statistic import PARTS, Statistics, statistics_from_cells
from echo_sim.analysis.stragglers import StragglerReport, report_from_cells
from echo_sim.errors import ConfigError, EchoError
from echo_sim.outofcore.cells import Cells, store_cells
from echo_sim.outofcore.queries import StoreDB, connect
from echo_sim.store import (
    StoreInfo,
    Workers,
    cpu_count,
    is_store,
    parse_workers,
    read_store_info,
)

__all__ = [
    "AUTO_DUCKDB_EVENTS",
    "AUTO_MEMORY_FRACTION",
    "ENGINES",
    "MEMORY_BYTES_PER_EVENT",
    "available_memory_bytes",
    "choose_engine",
    "collect_store",
    "compare_store",
    "statistic_store",
    "stragglers_store",
]

ENGINES: tuple[str, ...] = ("auto", "memory", "duckdb")
"""Valid ``engine`` values."""
MEMORY_BYTES_PER_EVENT = 600
"""Peak bytes per event of the memory path (loaded Trace ~150 B plus the analyses'
temporaries; measured by ``benchmarks/scale_out.py``)."""
AUTO_MEMORY_FRACTION = 0.5
"""``auto`` leaves the memory path when its estimate passes this share of free memory."""
AUTO_DUCKDB_EVENTS = 2_000_000
"""``auto`` takes the duckdb engine for stores of this many events or more (faster there:
no full load, parts in parallel)."""


def available_memory_bytes() -> int | None:
    """MemAvailable of /proc/meminfo (bytes), None where unknown."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return int(os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"))
    except (ValueError, OSError, AttributeError):
        return None


def choose_engine(path: str | Path, engine: str = "auto") -> str:
    """``"memory"`` or ``"duckdb"`` for the trace at ``path`` (module docstring)."""
    if engine not in ENGINES:
        raise ConfigError(f"engine={engine!r}: choose from {', '.join(ENGINES)}")
    if engine == "memory":
        return engine
    store = is_store(path)
    if engine == "duckdb":
        if not store:
            raise ConfigError(f"engine='duckdb' reads a trace store and {path} is none: "
                              f"convert it first (python -m echo_sim convert {path} --to DIR)")
        return engine
    if not store:
        return "memory"
    n = read_store_info(path).num_events
    free = available_memory_bytes()
    too_big = free is not None and n * MEMORY_BYTES_PER_EVENT > AUTO_MEMORY_FRACTION * free
    return "duckdb" if too_big or n >= AUTO_DUCKDB_EVENTS else "memory"


def _steps(info: StoreInfo, db: StoreDB) -> np.ndarray:
    """The analysed steps, as :func:`~echo_sim.analysis.statistic.captured_steps` picks."""
    if info.steps:
        return np.asarray(sorted(info.steps), np.int64)
    seen = db.seen_steps()
    return seen if seen.size else np.asarray([-1], np.int64)


def _open(path: str | Path, workers: Workers | None) -> tuple[StoreInfo, StoreDB, Workers]:
    info = read_store_info(path)
    n = len(info.parts)  # default: a process per core (at most 8) from 4 parts on
    w = parse_workers(workers, default=min(cpu_count(), n, 8) if n >= 4 else 1)
    # one DuckDB thread: its parallel sums add in a thread-dependent order, and results must
    # not depend on the worker count (the parallel part is the cells)
    return info, connect(info, threads=1), w


def _cells(info: StoreInfo, steps: np.ndarray, *, partition: bool, collect: bool,
           workers: Workers, progress: bool | None) -> Cells:
    return store_cells(info, steps, partition=partition, collect=collect, workers=workers,
                       progress=progress)


def statistic_store(path: str | Path, *, sort: str = "total", head: int | None = None,
                    workers: Workers | None = None, progress: bool | None = None) -> Statistics:
    """:func:`~echo_sim.analysis.statistic.statistic` of a store, out of core."""
    if head is not None and head < 0:
        raise EchoError(f"--head must be >= 0, got {head}")
    info, db, w = _open(path, workers)
    try:
        steps = _steps(info, db)
        cells = _cells(info, steps, partition=True, collect=False, workers=w, progress=progress)
        iters = cells.figures["iteration_us"]
        step_total = float(iters[np.isfinite(iters)].sum())
        ops = db.op_stats(cells.steps, step_total)
    finally:
        db.close()
    return statistics_from_cells(ops, ranks=cells.ranks, steps=cells.steps, iters=iters,
                                 per_cat={k: cells.figures[k] for k in PARTS}, sort=sort,
                                 head=head)


_COLLECT_KEYS = ("iteration_us", "fwbw_us", "compute_us", "comm_us", "overlapped_us",
                 "exposed_us")


def collect_store(path: str | Path, *, workers: Workers | None = None,
                  progress: bool | None = None) -> Collected:
    """:func:`~echo_sim.analysis.collect.collect` of a store, out of core."""
    info, db, w = _open(path, workers)
    try:
        steps = _steps(info, db)
    finally:
        db.close()
    cells = _cells(info, steps, partition=False, collect=True, workers=w, progress=progress)
    return collected_from_cells(cells.ranks, cells.steps,
                                {k: cells.figures[k] for k in _COLLECT_KEYS})


def stragglers_store(path: str | Path, *, threshold_us: float | None = None,
                     max_collectives: int | None = 100, workers: Workers | None = None,
                     progress: bool | None = None) -> StragglerReport:
    """:func:`~echo_sim.analysis.stragglers.stragglers` of a store, out of core."""
    if threshold_us is not None and not threshold_us >= 0:
        raise EchoError(f"--threshold-us must be >= 0, got {threshold_us}")
    info, db, w = _open(path, workers)
    try:
        steps = _steps(info, db)
        cells = _cells(info, steps, partition=False, collect=True, workers=w,
                       progress=progress)
        late = db.lateness(cells.ranks, cells.steps, max_collectives=max_collectives)
    finally:
        db.close()
    collected = collected_from_cells(cells.ranks, cells.steps,
                                     {k: cells.figures[k] for k in _COLLECT_KEYS})
    return report_from_cells(cells.ranks, cells.steps, iters=cells.figures["iteration_us"],
                             compute=cells.figures["compute_us"], late=late,
                             iteration_us=collected.iteration_time_us, threshold_us=threshold_us)


def _iteration(cells: Cells, ranks: Sequence[int] | None) -> float:
    """The job's iteration time (``collect``'s) over ``ranks`` of the cells (None: all)."""
    keep = (np.ones(cells.ranks.size, bool) if ranks is None
            else np.isin(cells.ranks, np.asarray(list(ranks), np.int64)))
    n = cells.steps.size
    flat = {k: cells.figures[k].reshape(-1, n)[keep].ravel() for k in _COLLECT_KEYS}
    return collected_from_cells(cells.ranks[keep], cells.steps, flat).iteration_time_us


def compare_store(path_a: str | Path, path_b: str | Path, *,
                  ranks_a: Sequence[int] | None = None, ranks_b: Sequence[int] | None = None,
                  sort: str = "diff", head: int | None = None, label_a: str = "A",
                  label_b: str = "B", workers: Workers | None = None,
                  progress: bool | None = None) -> Comparison:
    """:func:`~echo_sim.analysis.compare.compare` of two stores (or two rank sets of one),
    out of core: each side's operator counts and totals as a DuckDB query, its iteration
    time from the cells."""
    sides = []
    for path, ranks in ((path_a, ranks_a), (path_b, ranks_b)):
        info, db, w = _open(path, workers)
        try:
            if ranks is not None:
                bad = sorted(set(ranks) - set(info.ranks))
                if bad:
                    raise EchoError(f"rank(s) {bad} not in trace {path}; it has ranks "
                                    f"{info.ranks}")
            steps = _steps(info, db)
            side = db.side(steps, ranks)
        finally:
            db.close()
        cells = _cells(info, steps, partition=False, collect=True, workers=w,
                       progress=progress)
        sides.append((side, _iteration(cells, ranks)))
    (sa, ia), (sb, ib) = sides
    return comparison_from_sides(sa, sb, iteration_a_us=ia, iteration_b_us=ib, sort=sort,
                                 head=head, label_a=label_a, label_b=label_b)
