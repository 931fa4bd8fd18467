"""Writing the trace store one rank at a time (bounded memory: one rank group at a time).

:class:`StoreWriter` takes ranks in any order (:meth:`StoreWriter.add_rank`), each with
its event columns already on the store's global ids, buffers them until a part holds
``rows_per_part`` events, and writes that part's Parquet files through an
:class:`~echo_sim.trace.outfiles.OutputTree` (nothing replaced without ``overwrite``; a
failed conversion leaves nothing behind). :meth:`StoreWriter.finish` writes the tables and
``store.json`` (:mod:`echo_sim.store.schema`).
"""

from __future__ import annotations

import io
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import orjson

from echo_sim.store.schema import (
    EVENT_COLUMNS,
    STORE_FILE,
    PartInfo,
    StoreInfo,
    event_schema,
    require_pyarrow,
)
from echo_sim.trace.model import RankInfo, Trace
from echo_sim.trace.outfiles import OutputTree

__all__ = ["DEFAULT_ROWS_PER_PART", "RankRows", "StoreWriter", "dag_rows", "rank_rows_of"]

DEFAULT_ROWS_PER_PART = 1_000_000
"""Events per part file: a part is the unit an out-of-core analysis holds in memory
(about 0.3 GB of numpy temporaries per 10^6 events) and the unit of parallel work."""


@dataclass
class RankRows:
    """One rank's data on the store's global ids (what :meth:`StoreWriter.add_rank` takes).

    ``cols``: the :data:`EVENT_COLUMNS` arrays, time-sorted; ``comm_args``: row (in this
    rank) → args; ``counters``: (ts_us, series id, value); ``dag``: (nodes, edges) as
    :func:`dag_rows` gives them, or None; ``base_ns``: the time base of the rank's file.
    """

    info: RankInfo
    cols: dict[str, np.ndarray]
    comm_args: dict[int, dict[str, Any]]
    counters: tuple[np.ndarray, np.ndarray, np.ndarray]
    dag: tuple[list[tuple[str, bytes]], list[tuple[str, str, bytes]]] | None = None
    base_ns: int = 0

    @property
    def rows(self) -> int:
        return int(self.cols["ts_us"].shape[0])


def dag_rows(g: Any) -> tuple[list[tuple[str, bytes]], list[tuple[str, str, bytes]]]:
    """A networkx DiGraph as (nodes: (node, attrs JSON), edges: (src, dst, attrs JSON))."""
    opt = orjson.OPT_NON_STR_KEYS | orjson.OPT_SERIALIZE_NUMPY
    nodes = [(str(n), orjson.dumps(a, default=str, option=opt)) for n, a in g.nodes(data=True)]
    edges = [(str(u), str(v), orjson.dumps(a, default=str, option=opt))
             for u, v, a in g.edges(data=True)]
    return nodes, edges


def rank_rows_of(trace: Trace, rank: int) -> RankRows:
    """One rank of an in-memory trace as :class:`RankRows` (ids stay the trace's)."""
    rows = trace.rank_rows(rank)
    lo = int(rows[0]) if rows.size else 0
    cols = {c: getattr(trace.events, c)[rows] for c in EVENT_COLUMNS}
    comm = {int(r) - lo: a for r, a in trace.comm_args.items()
            if rows.size and lo <= int(r) <= int(rows[-1])}
    k = trace.counters
    mine = k.rank == rank
    dag = dag_rows(trace.dags[rank]) if rank in trace.dags else None
    info = trace.ranks.get(rank) or RankInfo(rank=rank)
    return RankRows(info, cols, comm, (k.ts_us[mine], k.series[mine],
                                                    k.value[mine]), dag)


class StoreWriter:
    """Accumulate ranks into parts and write them under ``tree`` (see the module doc)."""

    def __init__(self, tree: OutputTree, *, source: str, source_format: str,
                 rows_per_part: int = DEFAULT_ROWS_PER_PART) -> None:
        if rows_per_part < 1:
            raise ValueError(f"rows_per_part={rows_per_part} must be >= 1")
        self.pq = require_pyarrow()
        self.tree = tree
        self.source = source
        self.source_format = source_format
        self.rows_per_part = rows_per_part
        self._pending: list[RankRows] = []
        self._pending_rows = 0
        self._parts: list[PartInfo] = []
        self._infos: dict[int, RankInfo] = {}
        self._base_ns: dict[int, int] = {}
        self._events = 0

    # ------------------------------------------------------------------ ranks in
    def add_rank(self, rr: RankRows) -> None:
        """Buffer one rank; writes a part when the buffer reaches ``rows_per_part`` rows."""
        self._infos[rr.info.rank] = rr.info
        self._base_ns[rr.info.rank] = rr.base_ns
        self._pending.append(rr)
        self._pending_rows += rr.rows
        if self._pending_rows >= self.rows_per_part:
            self.flush()

    def flush(self) -> None:
        """Write the buffered ranks as one part (ranks in rank order)."""
        if not self._pending:
            return
        import pyarrow as pa

        group = sorted(self._pending, key=lambda r: r.info.rank)
        self._pending, self._pending_rows = [], 0
        i = len(self._parts)
        names = {k: f"{k}/part-{i:05d}.parquet" for k in ("events", "counters", "comm_args",
                                                          "dags")}
        cols = {c: np.concatenate([r.cols[c] for r in group]) for c in EVENT_COLUMNS}
        self._write(names["events"], pa.Table.from_pydict(cols, schema=event_schema()))
        del cols
        offsets = np.cumsum([0] + [r.rows for r in group])
        c_rank = np.concatenate([np.full(r.counters[0].size, r.info.rank, np.int32)
                                 for r in group])
        self._write(names["counters"], pa.table({
            "rank": c_rank,
            "ts_us": np.concatenate([r.counters[0] for r in group]).astype(np.float64),
            "series": np.concatenate([r.counters[1] for r in group]).astype(np.int32),
            "value": np.concatenate([r.counters[2] for r in group]).astype(np.float64)}))
        a_rank: list[int] = []
        a_row: list[int] = []
        a_args: list[str] = []
        for r, off in zip(group, offsets[:-1].tolist(), strict=True):
            for row, args in sorted(r.comm_args.items()):
                a_rank.append(r.info.rank)
                a_row.append(off + row)
                a_args.append(orjson.dumps(args, default=str,
                                           option=orjson.OPT_NON_STR_KEYS).decode())
        self._write(names["comm_args"], pa.table({
            "rank": pa.array(a_rank, pa.int32()), "row": pa.array(a_row, pa.int64()),
            "args": pa.array(a_args, pa.string())}))
        d_rank: list[int] = []
        d_kind: list[str] = []
        d_src: list[str] = []
        d_dst: list[str | None] = []
        d_attrs: list[str] = []
        for r in group:
            if r.dag is None:
                continue
            nodes, edges = r.dag
            for n, a in nodes:
                d_rank.append(r.info.rank)
                d_kind.append("node")
                d_src.append(n)
                d_dst.append(None)
                d_attrs.append(a.decode())
            for u, v, a in edges:
                d_rank.append(r.info.rank)
                d_kind.append("edge")
                d_src.append(u)
                d_dst.append(v)
                d_attrs.append(a.decode())
        self._write(names["dags"], pa.table({
            "rank": pa.array(d_rank, pa.int32()),
            "kind": pa.array(d_kind, pa.string()).dictionary_encode(),
            "src": pa.array(d_src, pa.string()), "dst": pa.array(d_dst, pa.string()),
            "attrs": pa.array(d_attrs, pa.string())}))
        n_rows = int(offsets[-1])
        self._events += n_rows
        self._parts.append(PartInfo(index=i, ranks=tuple(r.info.rank for r in group),
                                    rows=n_rows, **names))

    def _write(self, rel: str, table: Any) -> None:
        buf = io.BytesIO()
        self.pq.write_table(table, buf, compression="zstd")
        self.tree.write(rel, buf.getvalue())

    # ------------------------------------------------------------------ the end
    def finish(self, *, names: list[str], kinds: list[str], groups: list[tuple[int, ...]],
               counter_names: list[str], steps: list[int], drop_other_steps: bool,
               notes: list[str]) -> StoreInfo:
        """Write the last part, the name tables, ranks.json and store.json."""
        import pyarrow as pa

        self.flush()
        self._write("names.parquet", pa.table({
            "id": pa.array(np.arange(len(names), dtype=np.int32)),
            "name": pa.array(names, pa.string())}))
        self._write("kinds.parquet", pa.table({
            "id": pa.array(np.arange(len(kinds), dtype=np.int32)),
            "kind": pa.array(kinds, pa.string())}))
        ranks = [asdict(self._infos[r]) for r in sorted(self._infos)]
        self.tree.write("ranks.json", orjson.dumps(
            ranks, default=str, option=orjson.OPT_NON_STR_KEYS | orjson.OPT_SERIALIZE_NUMPY))
        base0 = min(self._base_ns.values(), default=0)
        shift = {r: (b - base0) / 1000.0 for r, b in sorted(self._base_ns.items())
                 if b != base0}
        info = StoreInfo(
            root=self.tree.root, source_format=self.source_format, source=self.source,
            steps=list(steps), drop_other_steps=drop_other_steps, groups=list(groups),
            counter_names=list(counter_names), notes=list(notes), parts=list(self._parts),
            num_events=self._events, ts_shift_us=shift)
        self.tree.write(STORE_FILE, orjson.dumps(info.to_dict(), option=orjson.OPT_INDENT_2))
        return info
