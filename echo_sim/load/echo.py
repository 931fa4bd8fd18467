"""Loader for echo_trace directories (``docs/trace-format.md``: trace.json[.gz], meta.json, dag.gml).

This is the loader that meets big traces (64 ranks, 10^6 events), so it skips the
per-event :meth:`TraceBuilder.add` call: each file's events are parsed a batch at a time and
become numpy columns (:mod:`echo_sim.load.echo_columns`), and the per-rank tables are
concatenated in rank order (each already sorted by time). The result is the same
:class:`~echo_sim.trace.model.Trace` the builder would produce. Module layout: meta.json in
:mod:`echo_sim.load.echo_meta`, dag.gml in :mod:`echo_sim.load.gml`.

Times: each file's ``ts`` are µs since its ``baseTimeNanoseconds`` (else meta.json's
``base_time_ns``, else 0 for older files holding absolute Unix µs). Ranks written with
different bases are put on the earliest one (``ts += (base_r − min base) / 1000``, exact
integer ns), so the Trace's times are µs since that base and cross-rank alignment holds.

Steps: the trace keeps the steps every rank completed (:func:`echo_sim.trace.steps.complete_steps`);
ranks that stopped at different steps (a crash) keep their common complete steps, with a
warning in ``Trace.notes``.
"""

from __future__ import annotations

import gc
import multiprocessing as mp
import os
import sys
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

import numpy as np

from echo_sim.errors import TraceFormatError
from echo_sim.load.echo_columns import CAT_BY_LABEL, ColumnBuilder, Interner, RankTable, occurrences
from echo_sim.load.echo_meta import base_ns, meta_steps, rank_info, read_meta
from echo_sim.load.gml import LazyDags, check_dag, read_dag
from echo_sim.load.jsonio import read_trace_event_chunks
from echo_sim.load.sources import RankSource
from echo_sim.trace.model import MAX_WORLD_SIZE, Cat, Counters, Events, RankInfo, Trace
from echo_sim.trace.steps import complete_steps

__all__ = ["CAT_BY_LABEL", "COMBINED_FORMAT_PREFIX", "RankPart", "default_workers", "load_echo", "occurrences",
           "read_dag", "read_rank"]


COMBINED_FORMAT_PREFIX = "echo-combined"
"""``otherData.format`` of a trace written by :func:`echo_sim.analysis.combine.combine`."""


@dataclass
class RankPart:
    """One rank directory read in isolation (picklable: a worker process returns it).

    Ids in ``table`` index this part's own ``names``/``kinds``/``groups``/``series``; the
    parent remaps them to the trace-wide interned lists.
    """

    info: RankInfo
    table: RankTable
    names: list[str]
    kinds: list[str]
    groups: list[tuple[int, ...]]
    series: list[str]
    dag_file: Path | None  # checked dag.gml, read on demand
    base_ns: int = 0  # the file's baseTimeNanoseconds: its ts are µs since then
    combined: bool = False  # split from a combined trace (pid = rank)


def read_rank(index: int, src: RankSource) -> list[RankPart]:
    """Read one echo rank directory (meta.json, trace.json[.gz], dag.gml): one part, or one
    per rank for a trace ``echo_sim combine`` wrote (``otherData.format`` echo-combined)."""
    # Speed shortcut: the cyclic GC would scan the ~10^5 fresh containers orjson creates
    # per batch again and again (it halves parse time); nothing here builds cycles.
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        return _read_rank(index, src)
    finally:
        if was_enabled:
            gc.enable()


def _read_rank(index: int, src: RankSource) -> list[RankPart]:
    meta = read_meta(src)
    names, kinds, groups, series = Interner(), Interner(), Interner(), Interner()
    cols = ColumnBuilder(src.trace_file, 0, names, kinds, groups, series)

    def consume(events: list[Any]) -> None:
        if not all(isinstance(e, dict) for e in events):
            bad = next(i for i, e in enumerate(events) if not isinstance(e, dict))
            raise TraceFormatError(f"{src.trace_file}: malformed event: traceEvents[{bad}] "
                                   "is not an object")
        cols.add(events)

    top = read_trace_event_chunks(src.trace_file, consume, cols.reset)
    other = top.get("otherData") if isinstance(top.get("otherData"), dict) else {}
    other = other or {}
    info = rank_info(src, meta, other, index)
    info.file_meta = {k: other[k] for k in ("rank", "world_size") if k in other}
    if "baseTimeNanoseconds" in top:
        info.file_meta["baseTimeNanoseconds"] = top["baseTimeNanoseconds"]
    cols.rank = info.rank
    table = cols.finish()
    is_marker = (table.cols["cat"] == int(Cat.STEP)) & (table.cols["step"] >= 0)
    info.file_meta["step_markers"] = np.unique(table.cols["step"][is_marker]).tolist()
    base = base_ns(src, top, meta)
    if src.dag_file is not None:
        check_dag(src.dag_file)  # read in full only when an analysis asks (LazyDags)
    lists = (names.values(), kinds.values(), groups.values(), series.values())
    if str(other.get("format", "")).startswith(COMBINED_FORMAT_PREFIX):
        shift = other.get("base_time_ns", 0)
        if type(shift) is not int or not 0 <= shift < 1 << 63:
            raise TraceFormatError(f"{src.trace_file}: otherData.base_time_ns is "
                                   f"{shift!r}, expected a non-negative integer (ns)")
        return _split_combined(src, info, table, cols, lists, base + shift)
    return [RankPart(info, table, *lists, src.dag_file, base)]


def _split_combined(src: RankSource, info: RankInfo, table: RankTable, cols: ColumnBuilder,
                    lists: tuple[list[Any], list[Any], list[Any], list[Any]],
                    base: int) -> list[RankPart]:
    """A trace ``echo_sim combine`` wrote (pid = rank) split back into its ranks."""
    pid = cols.pid
    if pid.size and (pid.min() < 0 or pid.max() >= MAX_WORLD_SIZE):
        raise TraceFormatError(f"{src.trace_file}: combined trace with pid "
                               f"{int(pid.min() if pid.min() < 0 else pid.max())}, expected "
                               f"ranks 0..{MAX_WORLD_SIZE - 1}")
    ranks = np.unique(pid).tolist()
    world = max(info.world_size, (max(ranks) + 1) if ranks else 1)
    bounds = np.searchsorted(pid, ranks + [MAX_WORLD_SIZE]).tolist()
    parts = []
    for k, r in enumerate(ranks):
        lo, hi = bounds[k], bounds[k + 1]
        sub = {c: v[lo:hi].copy() for c, v in table.cols.items()}
        sub["rank"][:] = r
        comm = {row - lo: a for row, a in table.comm_args.items() if lo <= row < hi}
        keep = cols.counter_pid == r
        counters = (table.counters[0][keep], table.counters[1][keep], table.counters[2][keep])
        rinfo = RankInfo(rank=r, world_size=world, host=info.host, device=info.device,
                         backend=info.backend, source=f"{src.trace_file} (pid {r})",
                         meta={"format": COMBINED_FORMAT_PREFIX, "combined": True})
        parts.append(RankPart(rinfo, RankTable(sub, comm, counters), *lists, None, base,
                              combined=True))
    return parts


def _rebase(parts: list[RankPart]) -> None:
    """Put every rank on the earliest base: ts += (base_r − min base), exact integer ns
    turned into µs once, so cross-rank alignment survives ranks with different bases."""
    if not parts:
        return
    base0 = min(p.base_ns for p in parts)
    for p in parts:
        if p.base_ns != base0:
            shift_us = (p.base_ns - base0) / 1000.0
            p.table.cols["ts_us"] = p.table.cols["ts_us"] + shift_us
            ts, sid, val = p.table.counters
            p.table.counters = (ts + shift_us, sid, val)


def _read_rank_star(job: tuple[int, RankSource]) -> list[RankPart]:
    return read_rank(*job)


def _spawn_safe() -> bool:
    """Whether spawned workers can start: spawn re-runs the main script in every child, so
    a script without an ``if __name__ == "__main__"`` guard would run again (and fail).
    ``python -m`` modules, interactive sessions and guarded scripts are safe."""
    main = sys.modules.get("__main__")
    if main is None or getattr(main, "__spec__", None) is not None:
        return True
    path = getattr(main, "__file__", None)
    if not path:
        return True
    try:
        src = Path(path).read_text(errors="ignore")
    except OSError:
        return False
    return "__main__" in src


def default_workers(sources: Sequence[RankSource]) -> int:
    """Processes to parse with: 1 for small traces, else up to one per core (max 8).

    Parsing JSON is CPU-bound and per file, so big multi-rank traces scale with cores;
    below 64 MiB of trace files the process start-up (~0.3 s) is not worth it.
    """
    if len(sources) < 4 or not _spawn_safe():
        return 1
    total = 0
    for s in sources:
        try:
            total += s.trace_file.stat().st_size
        except OSError:
            continue
    if total < (64 << 20):
        return 1
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cores = os.cpu_count() or 1
    return max(1, min(cores, 8, len(sources)))


def _remap(ids: np.ndarray, local: list[Any], glob: Interner, dtype: type) -> np.ndarray:
    if not local or ids.size == 0:
        return ids
    lookup: np.ndarray = np.asarray(glob.many(local), dtype=dtype)
    out = ids.copy()
    ok = ids >= 0
    out[ok] = lookup[ids[ok]]
    return out


def load_echo(sources: Sequence[RankSource], *, source: str = "",
              wrap: Callable[[Iterable[Any]], Iterable[Any]] = iter,
              workers: int | None = None) -> Trace:
    """Read echo rank directories into one :class:`Trace`.

    ``wrap`` adds a progress bar over the ranks; ``workers`` parse ranks in that many
    processes (``None``: :func:`default_workers`).
    """
    n_workers = default_workers(sources) if workers is None else max(1, workers)
    jobs = list(enumerate(sources))
    pool: ProcessPoolExecutor | None = None
    if n_workers > 1:
        # spawn, not fork: the caller may hold threads (tqdm, torch) that fork would copy
        pool = ProcessPoolExecutor(n_workers, mp_context=mp.get_context("spawn"))
        parts_iter: Iterable[list[RankPart]] = pool.map(_read_rank_star, jobs)
    else:
        parts_iter = (read_rank(i, s) for i, s in jobs)
    names, kinds, groups, series = Interner(), Interner(), Interner(), Interner()
    parts: list[RankPart] = []
    ranks: dict[int, RankInfo] = {}
    try:
        for part in (p for got in wrap(parts_iter) for p in got):
            info = part.info
            if info.rank in ranks:
                raise TraceFormatError(
                    f"{info.source}: rank {info.rank} appears twice "
                    f"(also in {ranks[info.rank].source})"
                )
            ranks[info.rank] = info
            cols = part.table.cols
            cols["name"] = _remap(cols["name"], part.names, names, np.int32)
            cols["kind"] = _remap(cols["kind"], part.kinds, kinds, np.int32)
            cols["group"] = _remap(cols["group"], part.groups, groups, np.int32)
            ts, sid, val = part.table.counters
            part.table.counters = (ts, _remap(sid, part.series, series, np.int32), val)
            parts.append(part)
    finally:
        if pool is not None:
            pool.shutdown(cancel_futures=True)
    parts.sort(key=lambda p: p.info.rank)
    _rebase(parts)
    tables = [p.table for p in parts]
    n_rows = [len(t.cols["ts_us"]) for t in tables]
    # column by column, freeing each rank's copy as it goes (peak: one column twice)
    table = Events.empty()
    if tables:
        table = Events(**{f.name: np.concatenate([t.cols.pop(f.name) for t in tables])
                          for f in fields(Events)})
    comm_args: dict[int, dict[str, Any]] = {}
    offset = 0
    for t, n in zip(tables, n_rows, strict=True):
        for row, a in t.comm_args.items():
            comm_args[offset + row] = a
        offset += n
    counters = Counters(
        np.concatenate([np.full(len(p.table.counters[0]), p.info.rank, np.int32)
                        for p in parts] or [np.zeros(0, np.int32)]),
        np.concatenate([t.counters[0] for t in tables] or [np.zeros(0)]),
        np.concatenate([t.counters[1] for t in tables] or [np.zeros(0, np.int32)]),
        np.concatenate([t.counters[2] for t in tables] or [np.zeros(0)]),
    )
    step_sets = _step_sets(table)
    for p in parts:
        step_sets.setdefault(p.info.rank, [])
    partial, complete = _meta_step_claims(parts)
    steps, notes = complete_steps(step_sets, partial=partial, complete=complete, source=source)
    n_combined = sum(p.combined for p in parts)
    if n_combined:
        notes.insert(0, f"{source}: a combined trace (echo_sim combine): read back as its "
                        f"{n_combined} ranks (pid = rank)")
    dags = LazyDags({p.info.rank: p.dag_file for p in parts if p.dag_file is not None})
    trace = Trace(
        events=table, names=names.values(), ranks=dict(sorted(ranks.items())),
        steps=steps, groups=groups.values(), kinds=kinds.values(),
        counters=counters, counter_names=series.values(), dags=dags, comm_args=comm_args,
        source_format="echo", source=source, notes=notes,
    )
    if notes:
        trace.keep_steps(steps)
    return trace


def _step_sets(ev: Events) -> dict[int, list[int]]:
    """Steps each rank holds events of (one int64 key per (rank, step))."""
    keep = ev.step >= 0
    keys = np.unique((ev.rank[keep].astype(np.int64) << 32) | ev.step[keep].astype(np.int64))
    out: dict[int, list[int]] = {}
    for r, s in zip((keys >> 32).tolist(), (keys & 0xFFFFFFFF).tolist(), strict=True):
        out.setdefault(int(r), []).append(int(s))
    return out


def _meta_step_claims(parts: list[RankPart]) -> tuple[dict[int, list[int]], dict[int, list[int]]]:
    """Per rank, meta.json's ``partial_steps`` and ``steps`` (ranks without them left out)."""
    partial: dict[int, list[int]] = {}
    complete: dict[int, list[int]] = {}
    for p in parts:
        where = Path(p.info.source)
        got = meta_steps(p.info.meta, "partial_steps", where)
        if got is not None:
            partial[p.info.rank] = got
        done = meta_steps(p.info.meta, "steps", where)
        if done is not None and got is not None:
            complete[p.info.rank] = done
    return partial, complete
