"""``convert``: any trace echo reads, written once as the columnar store.

echo rank directories (the format of big jobs) are converted streaming: each rank is
parsed alone (:func:`echo_sim.load.echo.read_rank`, in ``workers`` processes or on Ray),
its ids moved onto the trace-wide tables, checked (times, DAG) and handed to the
:class:`~echo_sim.store.write.StoreWriter`, which writes a part every
``rows_per_part`` events: memory holds a part and the workers' ranks in flight, whatever
the number of ranks. What needs every rank (the steps complete on all of them, the
earliest time base) is kept as small per-rank facts and written to ``store.json`` at the
end. Other formats (Kineto, ByteProfile/dPRO, TrioSim, Aceso) are loaded whole by their
loader first (they need cross-rank work: clock alignment, rank numbering) and then written
part by part. Either way :func:`~echo_sim.store.read.load_store` gives back the Trace that
``load_trace`` gives for the original.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from echo_sim.errors import TraceFormatError
from echo_sim.load import discover, load_trace
from echo_sim.load.echo import RankPart, read_rank
from echo_sim.load.echo_columns import Interner
from echo_sim.load.echo_meta import meta_steps
from echo_sim.load.gml import read_dag
from echo_sim.load.sources import RankSource
from echo_sim.progress import Progress
from echo_sim.store.parallel import Workers, cpu_count, ordered_map, parse_workers
from echo_sim.store.schema import StoreInfo, require_pyarrow
from echo_sim.store.write import (
    DEFAULT_ROWS_PER_PART,
    RankRows,
    StoreWriter,
    dag_rows,
    rank_rows_of,
)
from echo_sim.trace.model import Events, Trace
from echo_sim.trace.outfiles import output_tree
from echo_sim.trace.steps import complete_steps
from echo_sim.trace.validate import check_times, raise_fatal, validate

__all__ = ["ConvertSummary", "convert", "default_convert_workers", "write_trace_store"]


@dataclass(frozen=True)
class ConvertSummary:
    """What :func:`convert` wrote."""

    store: StoreInfo
    ranks: int
    events: int
    parts: int
    workers: Workers

    def to_dict(self) -> dict[str, Any]:
        return {"output": str(self.store.root), "source": self.store.source,
                "source_format": self.store.source_format, "ranks": self.ranks,
                "events": self.events, "parts": self.parts, "steps": self.store.steps,
                "notes": self.store.notes, "workers": self.workers}


def default_convert_workers(sources: list[RankSource]) -> int:
    """One process per core (at most 8) for 8 ranks or more, else 1 (start-up ~0.3 s)."""
    return max(1, min(cpu_count(), 8, len(sources))) if len(sources) >= 8 else 1


def _parse_rank(job: tuple[int, RankSource]) -> list[tuple[RankPart, Any]]:
    """Worker: one echo rank directory, with its DAG as rows (picklable)."""
    parts = read_rank(*job)
    return [(p, dag_rows(read_dag(p.dag_file)) if p.dag_file is not None else None)
            for p in parts]


def _remap(ids: np.ndarray, local: list[Any], glob: Interner) -> np.ndarray:
    if not local or ids.size == 0:
        return ids
    lookup = np.asarray(glob.many(local), dtype=ids.dtype)
    out = ids.copy()
    ok = ids >= 0
    out[ok] = lookup[ids[ok]]
    return out


def _convert_echo(sources: list[RankSource], writer: StoreWriter, *, source: str,
                  workers: Workers, progress: bool | None) -> dict[str, Any]:
    names, kinds, groups, series = Interner(), Interner(), Interner(), Interner()
    seen: dict[int, str] = {}
    step_sets: dict[int, list[int]] = {}
    partial: dict[int, list[int]] = {}
    complete: dict[int, list[int]] = {}
    n_combined = 0
    with Progress(len(sources), "converting", unit="rank", enabled=progress) as bar:
        for got in ordered_map(_parse_rank, list(enumerate(sources)), workers):
            for part, dag in got:
                info = part.info
                if info.rank in seen:
                    raise TraceFormatError(f"{info.source}: rank {info.rank} appears twice "
                                           f"(also in {seen[info.rank]})")
                seen[info.rank] = info.source
                cols = part.table.cols
                cols["name"] = _remap(cols["name"], part.names, names)
                cols["kind"] = _remap(cols["kind"], part.kinds, kinds)
                cols["group"] = _remap(cols["group"], part.groups, groups)
                ts, sid, val = part.table.counters
                check = Trace(events=Events(**cols), names=names.values(), ranks={},
                              steps=[])
                raise_fatal(validate(check, (check_times,)), source)
                st = cols["step"]
                step_sets[info.rank] = np.unique(st[st >= 0]).astype(int).tolist()
                where = Path(info.source)
                got_partial = meta_steps(info.meta, "partial_steps", where)
                if got_partial is not None:
                    partial[info.rank] = got_partial
                    done = meta_steps(info.meta, "steps", where)
                    if done is not None:
                        complete[info.rank] = done
                n_combined += part.combined
                writer.add_rank(RankRows(info, cols, part.table.comm_args,
                                         (ts, _remap(sid, part.series, series), val), dag,
                                         part.base_ns))
            bar.update(1)
    steps, notes = complete_steps(step_sets, partial=partial, complete=complete, source=source)
    if n_combined:
        notes.insert(0, f"{source}: a combined trace (echo_sim combine): read back as its "
                        f"{n_combined} ranks (pid = rank)")
    return {"names": names.values(), "kinds": kinds.values(), "groups": groups.values(),
            "counter_names": series.values(), "steps": steps, "drop_other_steps": bool(notes),
            "notes": notes}


def convert(path: str | Path, out: str | Path, *, overwrite: bool = False,
            workers: Workers | None = None, progress: bool | None = None,
            rows_per_part: int = DEFAULT_ROWS_PER_PART) -> ConvertSummary:
    """Write the trace at ``path`` (any format :func:`~echo_sim.load.load_trace` reads) as a
    store under ``out`` (made when absent; existing files replaced only with ``overwrite``;
    nothing left behind on failure). ``workers``: processes parsing echo ranks, or ``"ray"``
    (None: :func:`default_convert_workers`). ``rows_per_part``: events per part file.
    """
    require_pyarrow()
    fmt, sources = discover(path)
    w = parse_workers(workers, default=default_convert_workers(sources))
    with output_tree(out, overwrite=overwrite) as tree:
        writer = StoreWriter(tree, source=str(path), source_format=fmt,
                             rows_per_part=rows_per_part)
        if fmt == "echo":
            tables = _convert_echo(sources, writer, source=str(path), workers=w,
                                   progress=progress)
        else:
            tables = _write_trace(load_trace(path, progress=progress), writer,
                                  progress=progress)
        info = writer.finish(**tables)
    return ConvertSummary(store=info, ranks=sum(len(p.ranks) for p in info.parts),
                          events=info.num_events, parts=len(info.parts), workers=w)


def _write_trace(trace: Trace, writer: StoreWriter, *, progress: bool | None) -> dict[str, Any]:
    ranks = sorted(set(trace.ranks) | set(np.unique(trace.events.rank).tolist()))
    with Progress(len(ranks), "converting", unit="rank", enabled=progress) as bar:
        for rank in ranks:
            writer.add_rank(rank_rows_of(trace, rank))
            bar.update(1)
    return {"names": trace.names, "kinds": trace.kinds, "groups": trace.groups,
            "counter_names": trace.counter_names, "steps": trace.steps,
            "drop_other_steps": False, "notes": trace.notes}


def write_trace_store(trace: Trace, out: str | Path, *, overwrite: bool = False,
                      rows_per_part: int = DEFAULT_ROWS_PER_PART) -> StoreInfo:
    """Write an in-memory :class:`Trace` (a simulated timeline, a synthetic trace) as a
    store under ``out``; :func:`~echo_sim.store.read.load_store` gives it back."""
    require_pyarrow()
    with output_tree(out, overwrite=overwrite) as tree:
        writer = StoreWriter(tree, source=trace.source, source_format=trace.source_format,
                             rows_per_part=rows_per_part)
        return writer.finish(**_write_trace(trace, writer, progress=False))

