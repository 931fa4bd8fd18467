"""Reading the trace store back: the whole :class:`Trace`, or one part (a rank group).

:func:`load_store` gives the same :class:`~echo_sim.trace.model.Trace` the original trace's
loader gave (same rows in the same order, same ids, DAGs, comm args, counters, steps,
notes), so every command runs on a store as on the files it came from; it is what
``load_trace(DIR)`` does for a store. :func:`read_part` reads one part as a Trace of its
ranks only, with the trace-wide names and groups: the unit of out-of-core analysis.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import orjson

from echo_sim.errors import TraceFormatError
from echo_sim.store.schema import (
    EVENT_COLUMNS,
    StoreInfo,
    read_store_info,
    require_pyarrow,
)
from echo_sim.trace.model import _COLUMNS, Counters, Events, RankInfo, Trace

__all__ = ["StoreDags", "load_store", "read_names", "read_part", "read_ranks"]


def _table(info: StoreInfo, rel: str, columns: Sequence[str] | None = None) -> Any:
    pq = require_pyarrow()
    try:
        return pq.read_table(info.path(rel), columns=list(columns) if columns else None)
    except (OSError, ValueError) as e:  # pyarrow's errors derive from these
        raise TraceFormatError(f"{info.path(rel)}: unreadable store part ({e})") from None


def read_names(info: StoreInfo, table: str = "names") -> list[str]:
    """The interned names (``table="kinds"``: module class names), id order."""
    t = _table(info, f"{table}.parquet")
    col = "name" if table == "names" else "kind"
    return [str(x) for x in t.column(col).to_pylist()]


def read_ranks(info: StoreInfo) -> dict[int, RankInfo]:
    """``ranks.json`` as RankInfo per rank."""
    f = info.path("ranks.json")
    try:
        docs = orjson.loads(f.read_bytes())
        return {int(d["rank"]): RankInfo(**d) for d in docs}
    except (OSError, orjson.JSONDecodeError, KeyError, TypeError) as e:
        raise TraceFormatError(f"{f}: malformed ranks.json ({e})") from None


def _shift(info: StoreInfo, rank: np.ndarray, ts: np.ndarray) -> np.ndarray:
    """Times put on the earliest base (the echo loader's rebase, same arithmetic)."""
    if not info.ts_shift_us or ts.size == 0:
        return ts
    ts = ts.copy()
    for r, s in info.ts_shift_us.items():
        mine = rank == r
        if mine.any():
            ts[mine] = ts[mine] + s
    return ts


def _events(info: StoreInfo, rel: str, columns: Sequence[str] | None) -> dict[str, np.ndarray]:
    t = _table(info, rel, columns)
    cols = {c: t.column(c).to_numpy() for c in t.column_names}
    if "ts_us" in cols and "rank" in cols:
        cols["ts_us"] = _shift(info, cols["rank"], cols["ts_us"])
    return cols


def read_part(info: StoreInfo, index: int, *, names: list[str] | None = None,
              columns: Sequence[str] | None = None) -> Trace:
    """Part ``index`` as a Trace of its ranks: events of the analysed steps (and those
    outside any step), the trace-wide ``steps``/``groups``, ``names`` when given (else
    empty: an analysis that prints names must pass them). ``columns``: read only these
    (the rest are zeros, saving I/O and memory); no DAGs, comm args or counters."""
    part = info.parts[index]
    cols = _events(info, part.events, columns)
    n = next(iter(cols.values())).shape[0] if cols else 0
    full = {}
    for c in EVENT_COLUMNS:
        if c in cols:
            full[c] = cols[c]
        else:  # not read: a read-only constant view, no memory per row
            dt, default = _COLUMNS[c]
            full[c] = np.broadcast_to(np.asarray(default, dtype=dt), (n,))
    if "busy_us" not in cols:
        full["busy_us"] = full["dur_us"]
    ev = Events(**full)
    if info.drop_other_steps and info.steps:
        keep = (ev.step < 0) | np.isin(ev.step, np.asarray(info.steps, np.int64))
        if not keep.all():
            ev = ev.take(keep)
    return Trace(events=ev, names=names or [], ranks={r: RankInfo(rank=r) for r in part.ranks},
                 steps=list(info.steps), groups=list(info.groups),
                 source_format=info.source_format, source=str(info.root))


class StoreDags(Mapping[int, Any]):
    """rank → dependency graph (networkx DiGraph), read from the store on first use."""

    def __init__(self, info: StoreInfo, ranks_with_dag: dict[int, str]) -> None:
        self._info = info
        self._files = ranks_with_dag  # rank -> dags part file
        self._graphs: dict[int, Any] = {}

    def __getitem__(self, rank: int) -> Any:
        g = self._graphs.get(rank)
        if g is None:
            import networkx as nx
            import pyarrow.compute as pc

            t = _table(self._info, self._files[rank])
            t = t.filter(pc.equal(t.column("rank"), rank))
            g = nx.DiGraph()
            kinds = t.column("kind").to_pylist()
            src, dst = t.column("src").to_pylist(), t.column("dst").to_pylist()
            attrs = t.column("attrs").to_pylist()
            for k, u, a in zip(kinds, src, attrs, strict=True):
                if k == "node":
                    g.add_node(u, **orjson.loads(a))
            for k, u, v, a in zip(kinds, src, dst, attrs, strict=True):
                if k == "edge":
                    g.add_edge(u, v, **orjson.loads(a))
            self._graphs[rank] = g
        return g

    def __iter__(self) -> Iterator[int]:
        return iter(sorted(self._files))

    def __len__(self) -> int:
        return len(self._files)

    def __contains__(self, rank: object) -> bool:
        return rank in self._files


def load_store(path: str | Path, *, steps: Sequence[int] | None = None) -> Trace:
    """The whole store as one in-memory :class:`Trace` (see the module docstring).

    ``steps``: keep only these captured steps' events (and counters inside them), read one
    part at a time, so memory is bounded by those steps of every rank plus one part: what
    ``critical`` needs of a store of any size (its path is one step)."""
    info = read_store_info(path)
    if steps is not None:
        unknown = sorted(set(steps) - set(info.steps))
        if unknown:
            raise TraceFormatError(f"store {path} captured steps {list(info.steps)}, not "
                                   f"{unknown}")
    wanted = None if steps is None else np.asarray(sorted(set(steps)), np.int64)
    parts = sorted(info.parts, key=lambda p: min(p.ranks, default=-1))
    ev_parts: list[Events] = []
    comm_args: dict[int, dict[str, Any]] = {}
    k_parts: list[dict[str, np.ndarray]] = []
    dag_files: dict[int, str] = {}
    offset = 0
    for p in parts:
        cols = _events(info, p.events, None)
        ev = Events(**{c: cols[c] for c in EVENT_COLUMNS})
        new_row: np.ndarray | None = None
        keep = np.ones(len(ev), dtype=bool)
        bounds: tuple[float, float] | None = None
        if wanted is not None:  # keep the wanted steps' rows; comm args follow their rows
            keep = np.isin(ev.step, wanted)
            new_row = np.cumsum(keep) - 1
            if keep.any():
                bounds = (float(ev.ts_us[keep].min()), float(ev.end_us[keep].max()))
            ev = ev.take(np.flatnonzero(keep))
        ev_parts.append(ev)
        a = _table(info, p.comm_args)
        for row, args in zip(a.column("row").to_pylist(), a.column("args").to_pylist(),
                             strict=True):
            if new_row is None:
                comm_args[offset + int(row)] = orjson.loads(args)
            elif keep[int(row)]:
                comm_args[offset + int(new_row[int(row)])] = orjson.loads(args)
        offset += len(ev)
        k = _events(info, p.counters, None)
        if wanted is not None:
            inside = (np.zeros(k["ts_us"].shape, bool) if bounds is None else
                      (k["ts_us"] >= bounds[0]) & (k["ts_us"] <= bounds[1]))
            k = {c: v[inside] for c, v in k.items()}
        k_parts.append(k)
        d = _table(info, p.dags, ["rank"])
        for r in np.unique(d.column("rank").to_numpy()).tolist():
            dag_files[int(r)] = p.dags
    events = Events.concat(ev_parts)
    del ev_parts
    if events.rank.size > 1 and (np.diff(events.rank) < 0).any():  # parts interleave ranks
        order = np.argsort(events.rank, kind="stable")
        events = events.take(order)
        inverse = np.empty_like(order)
        inverse[order] = np.arange(order.size)
        comm_args = {int(inverse[r]): a for r, a in comm_args.items()}
    counters = Counters.empty()
    if k_parts:
        counters = Counters(*(np.concatenate([k[c] for k in k_parts]).astype(dt) for c, dt in
                              (("rank", np.int32), ("ts_us", np.float64),
                               ("series", np.int32), ("value", np.float64))))
    ranks = read_ranks(info)
    trace = Trace(
        events=events, names=read_names(info), ranks=dict(sorted(ranks.items())),
        steps=list(info.steps), groups=list(info.groups), kinds=read_names(info, "kinds"),
        counters=counters, counter_names=list(info.counter_names),
        dags=StoreDags(info, dag_files), comm_args=comm_args,
        source_format=info.source_format, source=str(path), notes=list(info.notes))
    if wanted is not None:
        trace.keep_steps([int(x) for x in wanted])
    elif info.drop_other_steps:
        trace.keep_steps(info.steps)
    return trace
