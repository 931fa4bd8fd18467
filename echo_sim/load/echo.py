"""Loader for echo_trace directories (``docs/trace-format.md``: trace.json[.gz], meta.json, dag.gml).

This is the loader that meets big traces (64 ranks, 10^6 events), so it skips the
per-event :meth:`TraceBuilder.add` call: each file's events become Python lists one
column at a time (list comprehensions over the parsed dicts) and then numpy arrays, and
the per-rank tables are concatenated in rank order (each already sorted by time). The
result is the same :class:`~echo_sim.trace.model.Trace` the builder would produce.

Times: each file's ``ts`` are µs since its ``baseTimeNanoseconds`` (else meta.json's
``base_time_ns``, else 0 for older files holding absolute Unix µs). Ranks written with
different bases are put on the earliest one (``ts += (base_r − min base) / 1000``, exact
integer ns), so the Trace's times are µs since that base and cross-rank alignment holds.
"""

from __future__ import annotations

import gc
import html
import multiprocessing as mp
import os
import re
import sys
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import networkx as nx
import numpy as np

from echo_sim.errors import TraceFormatError
from echo_sim.load.discover import RankSource
from echo_sim.load.jsonio import read_json, read_trace_events
from echo_sim.trace.model import (
    COLLECTIVES,
    Cat,
    Counters,
    Events,
    RankInfo,
    Trace,
)
from echo_sim.trace.validate import common_steps

__all__ = ["CAT_BY_LABEL", "default_workers", "load_echo", "occurrences", "read_dag", "read_rank"]

CAT_BY_LABEL: dict[str, int] = {
    "FW": int(Cat.FW), "BW": int(Cat.BW), "Comm": int(Cat.COMM), "UPDATE": int(Cat.UPDATE),
    "step": int(Cat.STEP), "STEP": int(Cat.STEP),
}
_COLL_INDEX = {c: i for i, c in enumerate(COLLECTIVES)}
_EMPTY: dict[str, Any] = {}
# Comm args that have their own column; the rest stay in Trace.comm_args.
_COMM_COLUMNS = frozenset({"step", "occ", "collective", "bytes", "group_ranks", "seq", "peer"})


class _Interner:
    """str/tuple -> dense int, shared across all ranks of one load."""

    def __init__(self) -> None:
        self.ids: dict[Any, int] = {}

    def many(self, keys: Iterable[Any]) -> list[int]:
        d = self.ids
        sd = d.setdefault
        return [sd(k, len(d)) for k in keys]

    def one(self, key: Any) -> int:
        return self.ids.setdefault(key, len(self.ids))

    def values(self) -> list[Any]:
        return list(self.ids)


def occurrences(step: np.ndarray, name: np.ndarray) -> np.ndarray:
    """0-based occurrence of each row's name within its step, rows in time order (one rank)."""
    n = step.shape[0]
    if n == 0:
        return np.zeros(0, np.int32)
    key = step.astype(np.int64) * (int(name.max()) + 1) + name.astype(np.int64)
    order = np.argsort(key, kind="stable")
    k = key[order]
    start = np.ones(n, dtype=bool)
    start[1:] = k[1:] != k[:-1]
    first = np.maximum.accumulate(np.where(start, np.arange(n), 0))
    occ = np.empty(n, np.int32)
    occ[order] = np.arange(n) - first
    return occ


class _RankTable:
    """Columns of one rank's events, time-sorted, plus its Comm args and counters."""

    def __init__(self, cols: dict[str, np.ndarray], comm_args: dict[int, dict[str, Any]],
                 counters: tuple[np.ndarray, np.ndarray, np.ndarray]) -> None:
        self.cols = cols
        self.comm_args = comm_args
        self.counters = counters


def _columns(f: Path, rank: int, events: list[Any], names: _Interner, kinds: _Interner,
             groups: _Interner, series: _Interner) -> _RankTable:
    """Turn one file's parsed events into sorted numpy columns (see module docstring)."""
    try:
        return _columns_unchecked(f, rank, events, names, kinds, groups, series)
    except TraceFormatError:
        raise
    except (KeyError, TypeError, ValueError, AttributeError, OverflowError) as e:
        raise TraceFormatError(f"{f}: malformed event: {_first_bad(events) or e}") from None


def _first_bad(events: list[Any]) -> str:
    """Slow pass that names the first malformed event (only run after a failure)."""
    for i, e in enumerate(events):
        if not isinstance(e, dict):
            return f"traceEvents[{i}] is a {type(e).__name__}, expected an object"
        ph = e.get("ph")
        if ph not in ("X", "C"):
            continue
        for key in ("name", "ts") + (("dur",) if ph == "X" else ()):
            if key not in e:
                return f"traceEvents[{i}] ({ph}) has no '{key}'"
        if not isinstance(e["name"], str):
            return f"traceEvents[{i}]: 'name' is not a string"
        for key in ("ts", "dur"):
            v = e.get(key, 0)
            if isinstance(v, bool) or not isinstance(v, (int, float)):
                return f"traceEvents[{i}]: '{key}' is {v!r}, expected a number"
        args = e.get("args", {})
        if not isinstance(args, dict):
            return f"traceEvents[{i}]: 'args' is not an object"
        for key, v in args.items():
            if key in ("step", "occ", "bytes", "seq", "peer", "param_bytes", "in_bytes",
                       "out_bytes") and (isinstance(v, bool) or not isinstance(v, int)):
                return f"traceEvents[{i}]: args.{key} is {v!r}, expected an integer"
    return ""


def _columns_unchecked(f: Path, rank: int, events: list[Any], names: _Interner,
                       kinds: _Interner, groups: _Interner, series: _Interner) -> _RankTable:
    xs = [e for e in events if e.get("ph") == "X"]
    cs = [e for e in events if e.get("ph") == "C"]
    name_list = [e["name"] for e in xs]
    if not all(type(n) is str for n in name_list):
        raise TypeError("event name is not a string")
    n = len(xs)
    ts = np.asarray([e["ts"] for e in xs], dtype=np.float64)
    dur = np.asarray([e["dur"] for e in xs], dtype=np.float64)
    tid = np.asarray([e.get("tid", 0) for e in xs], dtype=np.int32)
    args = [e.get("args") or _EMPTY for e in xs]
    cat = np.asarray([CAT_BY_LABEL.get(e.get("cat"), 5) for e in xs], dtype=np.int8)
    step = np.asarray([a.get("step", -1) for a in args], dtype=np.int32)
    occ = np.asarray([a.get("occ", -1) for a in args], dtype=np.int32)
    # intern through a per-file lookup of the (few) distinct values: one dict hit per row
    name_lut = dict.fromkeys(name_list, 0)
    for key in name_lut:
        name_lut[key] = names.one(key)
    name = np.asarray(list(map(name_lut.__getitem__, name_list)), dtype=np.int32)
    types = [a.get("type") for a in args]
    kind_lut = {t: (kinds.one(t) if isinstance(t, str) and t else -1)
                for t in dict.fromkeys(types)}
    kind = np.asarray(list(map(kind_lut.__getitem__, types)), dtype=np.int32)
    param_bytes = np.asarray([a.get("param_bytes", 0) for a in args], dtype=np.int64)
    in_bytes = np.asarray([a.get("in_bytes", 0) for a in args], dtype=np.int64)
    out_bytes = np.asarray([a.get("out_bytes", 0) for a in args], dtype=np.int64)
    flops = np.asarray([a.get("flops", 0.0) for a in args], dtype=np.float64)
    coll = np.full(n, -1, np.int16)
    nbytes = np.zeros(n, np.int64)
    group = np.full(n, -1, np.int32)
    seq = np.full(n, -1, np.int64)
    peer = np.full(n, -1, np.int32)
    comm_rows = np.flatnonzero(cat == int(Cat.COMM)).tolist()
    comm_args: dict[int, dict[str, Any]] = {}
    group_lut: dict[tuple[Any, ...], int] = {}
    for i in comm_rows:
        a = args[i]
        c = a.get("collective")
        coll[i] = _COLL_INDEX.get(c, -1) if isinstance(c, str) else -1
        nbytes[i] = a.get("bytes", 0)
        g = a.get("group_ranks")
        if g is not None:
            raw = tuple(g)
            gid = group_lut.get(raw)
            if gid is None:
                gid = group_lut[raw] = groups.one(tuple(sorted(int(r) for r in raw)))
            group[i] = gid
        seq[i] = a.get("seq", -1)
        peer[i] = a.get("peer", -1)
        extra = {k: v for k, v in a.items() if k not in _COMM_COLUMNS}
        if extra:
            comm_args[i] = extra
    order = np.argsort(ts, kind="stable")
    cols: dict[str, np.ndarray] = {
        "rank": np.full(n, rank, np.int32), "step": step, "cat": cat, "name": name, "tid": tid,
        "ts_us": ts, "dur_us": dur, "occ": occ, "coll": coll, "nbytes": nbytes,
        "group": group, "seq": seq, "peer": peer, "kind": kind, "param_bytes": param_bytes,
        "in_bytes": in_bytes, "out_bytes": out_bytes, "flops": flops,
    }
    cols = {k: v[order] for k, v in cols.items()}
    if n and (cols["occ"] < 0).any():
        missing = cols["occ"] < 0
        cols["occ"][missing] = occurrences(cols["step"], cols["name"])[missing]
    inverse = np.empty(n, np.int64)
    inverse[order] = np.arange(n)
    comm_args = {int(inverse[i]): a for i, a in comm_args.items()}
    c_ts: list[float] = []
    c_series: list[int] = []
    c_value: list[float] = []
    for e in cs:
        t = e["ts"]
        for key, v in (e.get("args") or _EMPTY).items():
            c_ts.append(t)
            c_series.append(series.one(key))
            c_value.append(v)
    counters = (np.asarray(c_ts, np.float64), np.asarray(c_series, np.int32),
                np.asarray(c_value, np.float64))
    return _RankTable(cols, comm_args, counters)


# --------------------------------------------------------------------------- dag.gml
def read_dag(path: Path) -> nx.DiGraph:
    """Read a ``dag.gml`` as a DiGraph keyed by node label; reject unreadable or cyclic ones.

    Three parsers, fastest first: one regex pass for the exact layout of the trace contract
    (``networkx.write_gml`` of nodes with ``cat``/``dur_us``/``step``: ~10x faster than
    networkx, which matters at 64 ranks x 4,000 nodes), a line parser for any flat
    networkx layout, and ``networkx.parse_gml`` for everything else.
    """
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise TraceFormatError(f"{path}: unreadable dag.gml ({e})") from None
    g = _contract_gml(text)
    if g is not None:
        return g
    g = _fast_gml(text)
    if g is None:
        try:
            parsed = nx.parse_gml(text, label="label")
        except (nx.NetworkXError, ValueError, KeyError, IndexError, TypeError) as e:
            msg = " ".join(str(e).split())[:160]
            raise TraceFormatError(f"{path}: unreadable dag.gml ({msg})") from None
        if not parsed.is_directed():
            raise TraceFormatError(f"{path}: dag.gml is not a directed graph (add 'directed 1')")
        g = nx.DiGraph(parsed)
    if not nx.is_directed_acyclic_graph(g):
        _raise_cycle(path, g)
    return g


def _raise_cycle(path: Path, g: nx.DiGraph) -> None:
    cycle = nx.find_cycle(g)
    path_s = " -> ".join(str(u) for u, _ in cycle[:4])
    raise TraceFormatError(f"{path}: dag.gml has a cycle ({path_s} -> ...), expected a DAG")


_NODE_RE = re.compile(
    r'node \[\s+id (\d+)\s+label "([^"&\n]*)"\s+cat "([^"&\n]*)"\s+dur_us (\S+)\s+'
    r"step (-?\d+)\s+\]")
_EDGE_RE = re.compile(r"edge \[\s+source (\d+)\s+target (\d+)\s+\]")


def _contract_gml(text: str) -> nx.DiGraph | None:
    """The contract's own layout in one regex pass; None when the text holds anything else."""
    if "directed 1" not in text:
        return None
    nodes = _NODE_RE.findall(text)
    edges = _EDGE_RE.findall(text)
    if (len(nodes) != text.count("node [") or len(edges) != text.count("edge [")
            or text.count("[") != 1 + len(nodes) + len(edges)):
        return None
    try:
        labels = {int(i): label for i, label, _, _, _ in nodes}
        attrs = [(label, {"cat": cat, "dur_us": float(dur), "step": int(step)})
                 for _, label, cat, dur, step in nodes]
        pairs = [(int(u), int(v)) for u, v in edges]
        named = [(labels[u], labels[v]) for u, v in pairs]
    except (ValueError, KeyError):
        return None
    if len(labels) != len(nodes) or len({a[0] for a in attrs}) != len(nodes):
        return None
    if not _acyclic(len(nodes), [(u, v) for u, v in pairs], list(labels)):
        return None  # let the general path name the cycle
    g = nx.DiGraph()
    g.add_nodes_from(attrs)
    g.add_edges_from(named)
    return g


def _acyclic(n: int, edges: list[tuple[int, int]], ids: list[int]) -> bool:
    """Kahn's algorithm over integer ids (a DAG check without building a networkx graph)."""
    pos = {i: k for k, i in enumerate(ids)}
    indeg = [0] * n
    out: list[list[int]] = [[] for _ in range(n)]
    for u, v in edges:
        a, b = pos[u], pos[v]
        out[a].append(b)
        indeg[b] += 1
    ready = [k for k in range(n) if indeg[k] == 0]
    seen = 0
    while ready:
        k = ready.pop()
        seen += 1
        for b in out[k]:
            indeg[b] -= 1
            if indeg[b] == 0:
                ready.append(b)
    return seen == n


def _gml_value(v: str) -> Any:
    if v.startswith('"'):
        if len(v) < 2 or not v.endswith('"'):
            raise ValueError(v)
        s = v[1:-1]
        return html.unescape(s) if "&" in s else s
    try:
        return int(v)
    except ValueError:
        return float(v)


def _fast_gml(text: str) -> nx.DiGraph | None:
    """Parse networkx's own flat GML layout; None when the text is anything else."""
    lines = text.split("\n")
    g = nx.DiGraph()
    ids: dict[int, Any] = {}
    edges: list[tuple[int, int, dict[str, Any]]] = []
    block: dict[str, Any] | None = None
    kind = ""
    depth = 0
    directed = False
    try:
        for raw in lines:
            s = raw.strip()
            if not s:
                continue
            if block is not None:
                if s == "]":
                    if kind == "node":
                        nid = block.pop("id")
                        label = block.pop("label", nid)
                        if nid in ids or label in g:
                            return None
                        ids[nid] = label
                        g.add_node(label, **block)
                    else:
                        edges.append((block.pop("source"), block.pop("target"), block))
                    block = None
                    continue
                key, _, val = s.partition(" ")
                if not val or val.endswith("[") or key in block:
                    return None
                block[key] = _gml_value(val)
            elif s in ("node [", "edge ["):
                block, kind = {}, s[:4]
            elif s == "graph [":
                depth += 1
            elif s == "]":
                depth -= 1
            elif s == "directed 1":
                directed = True
            else:
                key, _, val = s.partition(" ")
                if not val or val.endswith("["):
                    return None
                g.graph[key] = _gml_value(val)
    except (ValueError, KeyError):
        return None
    if block is not None or depth != 0 or not directed:
        return None
    try:
        g.add_edges_from((ids[u], ids[v], a) for u, v, a in edges)
    except KeyError:
        return None
    g.graph.pop("directed", None)
    return g


# --------------------------------------------------------------------------- loader
def _meta(src: RankSource) -> dict[str, Any]:
    if src.meta_file is None:
        return {}
    meta = read_json(src.meta_file)
    if not isinstance(meta, dict):
        raise TraceFormatError(f"{src.meta_file}: expected a JSON object")
    return meta


def _int_field(d: dict[str, Any], key: str, default: int, where: Path) -> int:
    v = d.get(key, default)
    if v is None:
        return default
    if isinstance(v, bool) or not isinstance(v, int) or v < 0:
        raise TraceFormatError(f"{where}: '{key}' is {v!r}, expected a non-negative integer")
    return v


def _rank_info(src: RankSource, meta: dict[str, Any], other: dict[str, Any],
               index: int) -> RankInfo:
    where = src.meta_file or src.trace_file
    info = {**other, **meta}
    rank = _int_field(info, "rank", index, where)
    world = _int_field(info, "world_size", 1, where)
    offset = info.get("clock_offset_us", 0.0)
    if isinstance(offset, bool) or not isinstance(offset, (int, float)):
        raise TraceFormatError(f"{where}: 'clock_offset_us' is {offset!r}, expected a number")
    return RankInfo(
        rank=rank, world_size=max(world, rank + 1),
        local_rank=_int_field(info, "local_rank", 0, where),
        node_rank=_int_field(info, "node_rank", 0, where),
        host=str(info.get("host", "")), device=str(info.get("device", "cpu")),
        backend=str(info.get("backend", "")), clock_offset_us=float(offset),
        source=str(src.directory or src.trace_file), meta=meta,
    )


@dataclass
class _RankPart:
    """One rank directory read in isolation (picklable: a worker process returns it).

    Ids in ``table`` index this part's own ``names``/``kinds``/``groups``/``series``; the
    parent remaps them to the trace-wide interned lists.
    """

    info: RankInfo
    table: _RankTable
    names: list[str]
    kinds: list[str]
    groups: list[tuple[int, ...]]
    series: list[str]
    dag: nx.DiGraph | None
    base_ns: int = 0  # the file's baseTimeNanoseconds: its ts are µs since then


def read_rank(index: int, src: RankSource) -> _RankPart:
    """Read one echo rank directory (meta.json, trace.json[.gz], dag.gml)."""
    # Speed shortcut: the cyclic GC would scan the ~10^5 fresh containers orjson creates
    # per file again and again (it halves parse time); nothing here builds cycles.
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        return _read_rank(index, src)
    finally:
        if was_enabled:
            gc.enable()


def _read_rank(index: int, src: RankSource) -> _RankPart:
    meta = _meta(src)
    events, top = read_trace_events(src.trace_file)
    other = top.get("otherData") if isinstance(top.get("otherData"), dict) else {}
    info = _rank_info(src, meta, other or {}, index)
    base_ns = _base_ns(src, top, meta)
    if not all(isinstance(e, dict) for e in events):
        raise TraceFormatError(f"{src.trace_file}: malformed event: {_first_bad(events)}")
    names, kinds, groups, series = _Interner(), _Interner(), _Interner(), _Interner()
    table = _columns(src.trace_file, info.rank, events, names, kinds, groups, series)
    del events, top
    dag = read_dag(src.dag_file) if src.dag_file is not None else None
    return _RankPart(info, table, names.values(), kinds.values(), groups.values(),
                     series.values(), dag, base_ns)


def _base_ns(src: RankSource, top: dict[str, Any], meta: dict[str, Any]) -> int:
    """``baseTimeNanoseconds`` of trace.json, else ``base_time_ns`` of meta.json, else 0
    (traces written before the key existed carry absolute Unix µs)."""
    for where, d, key in ((src.trace_file, top, "baseTimeNanoseconds"),
                          (src.meta_file or src.trace_file, meta, "base_time_ns")):
        if key in d:
            v = d[key]
            if isinstance(v, bool) or not isinstance(v, int) or v < 0:
                raise TraceFormatError(f"{where}: '{key}' is {v!r}, expected a non-negative "
                                       "integer (Unix ns)")
            return v
    return 0


def _rebase(parts: list[_RankPart]) -> None:
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


def _read_rank_star(job: tuple[int, RankSource]) -> _RankPart:
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


def _remap(ids: np.ndarray, local: list[Any], glob: _Interner, dtype: type) -> np.ndarray:
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
        parts_iter: Iterable[_RankPart] = pool.map(_read_rank_star, jobs)
    else:
        parts_iter = (read_rank(i, s) for i, s in jobs)
    names, kinds, groups, series = _Interner(), _Interner(), _Interner(), _Interner()
    parts: list[_RankPart] = []
    ranks: dict[int, RankInfo] = {}
    try:
        for part in wrap(parts_iter):
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
    table = Events.concat([Events(**t.cols) for t in tables])
    comm_args: dict[int, dict[str, Any]] = {}
    offset = 0
    for t in tables:
        for row, a in t.comm_args.items():
            comm_args[offset + row] = a
        offset += len(t.cols["ts_us"])
    counters = Counters(
        np.concatenate([np.full(len(p.table.counters[0]), p.info.rank, np.int32)
                        for p in parts] or [np.zeros(0, np.int32)]),
        np.concatenate([t.counters[0] for t in tables] or [np.zeros(0)]),
        np.concatenate([t.counters[1] for t in tables] or [np.zeros(0, np.int32)]),
        np.concatenate([t.counters[2] for t in tables] or [np.zeros(0)]),
    )
    step_sets = {p.info.rank: _steps_of(p.table.cols["step"]) for p in parts}
    dags = {p.info.rank: p.dag for p in parts if p.dag is not None}
    return Trace(
        events=table, names=names.values(), ranks=dict(sorted(ranks.items())),
        steps=common_steps(step_sets, source), groups=groups.values(), kinds=kinds.values(),
        counters=counters, counter_names=series.values(), dags=dags, comm_args=comm_args,
        source_format="echo", source=source,
    )


def _steps_of(step: np.ndarray) -> list[int]:
    u = np.unique(step)
    return [int(s) for s in u[u >= 0]]
