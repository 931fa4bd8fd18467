"""A :class:`Trace` back to files: Chrome Trace Event dicts, Perfetto JSON, echo directories.

* :func:`chrome_events` turns rows of a trace into Chrome Trace Event dicts following
  ``docs/trace-format.md``: ``pid`` = global rank, ``tid`` 0 compute, 1 steps, ``100 + k``
  communication lane k (an operation takes the lowest lane free at its issue time, so slices on
  one lane never overlap), ``M`` events naming each process and thread, ``C`` memory counters.
* :func:`write_chrome` writes the object form atomically, gzipped when the name ends ``.gz``.
* :func:`write_echo_dirs` writes one ``<node_rank>_<local_rank>/`` directory per rank
  (``trace.json``, ``meta.json``, ``dag.gml``), so a simulated timeline is an echo trace that
  every analysis reads.

Times in the files are microseconds rounded to 3 decimals; start and end are rounded (not
start and duration), so slices nested in memory stay nested in the file.
"""

from __future__ import annotations

import enum
import gzip as gzip_mod
import heapq
import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import networkx as nx
import numpy as np
import orjson

from echo_sim.trace.model import CAT_NAMES, COLLECTIVES, Cat, RankInfo, Trace
from echo_sim.trace.outfiles import atomic_write, output_tree
from echo_trace import contract

__all__ = ["RUN_PID_STRIDE", "Track", "chrome_events", "side_by_side", "step_dags", "write_chrome",
           "write_echo_dirs"]

FORMAT = "echo-trace/1"


class Track(enum.IntEnum):
    """Thread ids (``tid``) of the trace contract; lanes count up from COMM and SPILL."""

    COMPUTE = contract.COMPUTE_TID
    STEPS = contract.STEP_TID
    SPILL = 10  # compute slices that partially overlap an earlier one (never in echo_trace)
    COMM = contract.COMM_TID_BASE  # communication lane k is COMM + k


TID_COMPUTE, TID_STEPS, TID_SPILL, TID_COMM = (int(t) for t in Track)

_CAT_LABEL = {int(c): CAT_NAMES[int(c)] for c in Cat}
_CAT_LABEL[int(Cat.STEP)] = "step"
_COMPUTE = (int(Cat.FW), int(Cat.BW), int(Cat.UPDATE))


def _echo_version() -> str:
    from echo_sim import __version__

    return __version__


# ---------------------------------------------------------------------------- tracks
def _comm_lanes(ts: list[float], end: list[float]) -> list[int]:
    """Lowest free lane per operation, in issue order (inputs sorted by ``ts``)."""
    free: list[int] = []
    busy: list[tuple[float, int]] = []
    lanes: list[int] = []
    n_lanes = 0
    for s, e in zip(ts, end, strict=True):
        while busy and busy[0][0] <= s:
            heapq.heappush(free, heapq.heappop(busy)[1])
        if free:
            lane = heapq.heappop(free)
        else:
            lane = n_lanes
            n_lanes += 1
        heapq.heappush(busy, (e, lane))
        lanes.append(lane)
    return lanes


def _nest_lanes(ts: list[float], end: list[float]) -> list[int]:
    """Lane per slice so that slices on one lane nest or follow each other (sorted by ts).

    Lane 0 is the compute track; a slice that starts inside an open slice but ends after it
    (impossible for real module spans, possible in a hand-made timeline) moves to a spill lane.
    """
    stacks: list[list[float]] = []
    lanes: list[int] = []
    for s, e in zip(ts, end, strict=True):
        for k, stack in enumerate(stacks):
            while stack and stack[-1] <= s:
                stack.pop()
            if not stack or e <= stack[-1]:
                stack.append(e)
                lanes.append(k)
                break
        else:
            stacks.append([e])
            lanes.append(len(stacks) - 1)
    return lanes


def _tracks(trace: Trace, rows: np.ndarray, ts: np.ndarray, end: np.ndarray) -> np.ndarray:
    """The contract's ``tid`` for each row (rows sorted by rank then ts)."""
    ev = trace.events
    cat = ev.cat[rows]
    rank = ev.rank[rows]
    tid = ev.tid[rows].astype(np.int64)
    tid[cat == Cat.STEP] = TID_STEPS
    is_comm = cat == Cat.COMM
    is_compute = np.isin(cat, _COMPUTE)
    cuts = np.flatnonzero(np.diff(rank)) + 1  # rows are rank-sorted: one slice per rank
    for lo, hi in zip(np.r_[0, cuts].tolist(), np.r_[cuts, rank.size].tolist(), strict=True):
        for mask, assign, base in ((is_comm, _comm_lanes, TID_COMM),
                                   (is_compute, _nest_lanes, None)):
            idx = lo + np.flatnonzero(mask[lo:hi])
            if idx.size == 0:
                continue
            idx = idx[np.argsort(ts[idx], kind="stable")]
            lanes = np.asarray(assign(ts[idx].tolist(), end[idx].tolist()), dtype=np.int64)
            if base is None:  # compute: lane 0 -> tid 0, spill lanes -> TID_SPILL + k
                tid[idx] = np.where(lanes == 0, TID_COMPUTE, TID_SPILL + lanes - 1)
            else:
                tid[idx] = base + lanes
    return tid


def _thread_name(tid: int) -> str:
    if tid == TID_COMPUTE:
        return "compute"
    if tid == TID_STEPS:
        return "steps"
    if tid >= TID_COMM:
        return f"comm {tid - TID_COMM}"
    if tid >= TID_SPILL:
        return f"compute overlap {tid - TID_SPILL}"
    return f"track {tid}"


# ---------------------------------------------------------------------------- events
def chrome_events(trace: Trace, *, rows: np.ndarray | None = None,
                  highlight: set[int] | None = None) -> list[dict]:
    """Rows of ``trace`` (default: all) as Chrome Trace Event dicts, metadata first.

    ``highlight``: rows drawn in red (``cname: "terrible"``) with ``args.critical = true``.
    Memory counters (``C`` events) are included when ``rows`` is None.
    """
    ev = trace.events
    if rows is None:
        rows = np.arange(len(ev))
        with_counters = True
    else:
        rows = np.asarray(rows, dtype=np.int64)
        rows = rows[np.lexsort((ev.ts_us[rows], ev.rank[rows]))]
        with_counters = False
    highlight = highlight or set()
    ts_r = np.round(ev.ts_us[rows], 3)
    end_r = np.round(ev.ts_us[rows] + ev.dur_us[rows], 3)
    dur_r = np.round(np.maximum(end_r - ts_r, 0.0), 3)
    tids = _tracks(trace, rows, ts_r, end_r)
    # args.busy_us only where the trace said less than the span (GPU kernel runs)
    busy_r = np.where(ev.busy_us[rows] < ev.dur_us[rows], np.round(ev.busy_us[rows], 3),
                      np.nan).tolist()

    col = {c: getattr(ev, c)[rows].tolist() for c in (
        "rank", "step", "cat", "name", "occ", "coll", "nbytes", "group", "seq", "peer", "kind",
        "param_bytes", "in_bytes", "out_bytes", "flops")}
    modules = [n.split(".", 1)[1] if "." in n else n for n in trace.names]
    labels = [_CAT_LABEL.get(c, "OTHER") for c in range(max(_CAT_LABEL) + 1)]
    groups = [list(g) for g in trace.groups]
    fw, bw, upd, comm = int(Cat.FW), int(Cat.BW), int(Cat.UPDATE), int(Cat.COMM)
    out: list[dict] = []
    for (row, rank, step, cat, name, occ, coll, nbytes, group, seq, peer, kind, pbytes, ibytes,
         obytes, flops, ts, dur, tid, busy) in zip(
            rows.tolist(), col["rank"], col["step"], col["cat"], col["name"], col["occ"],
            col["coll"], col["nbytes"], col["group"], col["seq"], col["peer"], col["kind"],
            col["param_bytes"], col["in_bytes"], col["out_bytes"], col["flops"],
            ts_r.tolist(), dur_r.tolist(), tids.tolist(), busy_r, strict=True):
        args: dict[str, Any] = {"step": step, "occ": occ}
        if busy == busy:  # not NaN
            args["busy_us"] = busy
        if cat == fw or cat == bw:
            args["module"] = modules[name]
            if kind >= 0:
                args["type"] = trace.kinds[kind]
            args["param_bytes"] = pbytes
            if cat == fw:
                args["in_bytes"] = ibytes
                args["out_bytes"] = obytes
                if flops > 0:
                    args["flops"] = flops
        elif cat == upd:
            args["param_bytes"] = pbytes
        elif cat == comm:
            if coll >= 0:
                args["collective"] = COLLECTIVES[coll]
            args["bytes"] = nbytes
            if group >= 0:
                args["group_ranks"] = list(groups[group])
            args["seq"] = seq
            if peer >= 0:
                args["peer"] = peer
            extra = trace.comm_args.get(row)
            if extra:
                for key, value in extra.items():
                    args.setdefault(key, value)
        e: dict[str, Any] = {"name": trace.names[name], "cat": labels[cat], "ph": "X", "ts": ts,
                             "dur": dur, "pid": rank, "tid": tid, "args": args}
        if row in highlight:
            e["cname"] = "terrible"
            args["critical"] = True
        out.append(e)
    used: dict[int, set[int]] = {}
    if rows.size:
        pairs = np.unique(np.stack([ev.rank[rows].astype(np.int64), tids], axis=1), axis=0)
        for r, t in pairs.tolist():
            used.setdefault(r, set()).add(t)

    if with_counters:
        out.extend(_counter_events(trace))
        for r in trace.ranks:
            used.setdefault(r, set())
    return _metadata(trace, used) + out


def _counter_events(trace: Trace) -> list[dict]:
    c = trace.counters
    if len(c) == 0:
        return []
    merged: dict[tuple[int, float], dict[str, float]] = {}
    for r, t, s, v in zip(c.rank.tolist(), np.round(c.ts_us, 3).tolist(), c.series.tolist(),
                          c.value.tolist(), strict=True):
        merged.setdefault((r, t), {})[trace.counter_names[s]] = v
    return [{"name": "memory", "cat": "memory", "ph": "C", "ts": t, "pid": r, "tid": 0,
             "args": a} for (r, t), a in sorted(merged.items())]


def _metadata(trace: Trace, used: dict[int, set[int]]) -> list[dict]:
    out: list[dict] = []
    for rank in sorted(used):
        info = trace.ranks.get(rank)
        label = f"rank {rank} ({info.host})" if info and info.host else f"rank {rank}"
        out.append({"name": "process_name", "ph": "M", "pid": rank, "tid": 0,
                    "args": {"name": label}})
        out.append({"name": "process_sort_index", "ph": "M", "pid": rank, "tid": 0,
                    "args": {"sort_index": rank}})
        for tid in sorted(used[rank] | {TID_COMPUTE, TID_STEPS}):
            out.append({"name": "thread_name", "ph": "M", "pid": rank, "tid": tid,
                        "args": {"name": _thread_name(tid)}})
            out.append({"name": "thread_sort_index", "ph": "M", "pid": rank, "tid": tid,
                        "args": {"sort_index": tid}})
    return out


def side_by_side(runs: list[tuple[str, list[dict]]]) -> list[dict]:
    """Several runs' events in one trace: run ``i``'s rank ``r`` becomes process
    ``i * RUN_PID_STRIDE + r`` named ``"<label>: rank r (host)"``, runs stacked in order.

    ``runs``: (label, events from :func:`chrome_events`) per run. One run is returned as is.
    """
    if len(runs) == 1:
        return runs[0][1]
    out: list[dict] = []
    for i, (label, events) in enumerate(runs):
        base = i * RUN_PID_STRIDE
        for e in events:
            e = dict(e, pid=base + int(e["pid"]))
            if e.get("ph") == "M" and e["name"] == "process_name":
                e["args"] = {"name": f"{label}: {e['args']['name']}"}
            elif e.get("ph") == "M" and e["name"] == "process_sort_index":
                e["args"] = {"sort_index": e["pid"]}
            out.append(e)
    return out


RUN_PID_STRIDE = 1_000_000
"""Process-id offset between runs in :func:`side_by_side` (larger than any world size)."""


# ---------------------------------------------------------------------------- files
def _encoded(name: str, data: bytes) -> bytes:
    """``data`` gzipped when the file ``name`` ends ``.gz``."""
    return gzip_mod.compress(data, compresslevel=6) if name.endswith(".gz") else data


def _chrome_doc(events: list[dict], other_data: dict | None) -> bytes:
    return _dumps({"traceEvents": events, "displayTimeUnit": "ms",
                   "otherData": other_data or {}})


def _dumps(obj: Any) -> bytes:
    opts = orjson.OPT_SERIALIZE_NUMPY | orjson.OPT_NON_STR_KEYS
    try:
        return orjson.dumps(obj, option=opts, default=str)
    except TypeError:  # a non-UTF-8 file name (surrogate escapes) somewhere in the object
        return orjson.dumps(_utf8(obj), option=opts, default=str)


def _utf8(obj: Any) -> Any:
    """``obj`` with every str made valid UTF-8: undecodable bytes of file names become U+FFFD."""
    if isinstance(obj, str):
        return obj.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
    if isinstance(obj, dict):
        return {_utf8(k): _utf8(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_utf8(v) for v in obj]
    return obj


def write_chrome(path: str | Path, events: list[dict], *, other_data: dict | None = None,
                 overwrite: bool = False) -> Path:
    """Write ``{"traceEvents": events, "displayTimeUnit": "ms", "otherData": ...}``.

    Gzipped when ``path`` ends ``.gz``; atomic and link-safe (:mod:`echo_sim.trace.outfiles`).
    Raises :class:`~echo_sim.trace.outfiles.OutputError` when ``path`` exists and
    ``overwrite`` is false, or is not a regular file, or its directory does not exist, or it
    cannot be written.
    """
    p = Path(path)
    return atomic_write(p, _encoded(p.name, _chrome_doc(events, other_data)),
                        overwrite=overwrite)


# ---------------------------------------------------------------------------- dag.gml
def _node_id(name: str, occ: int) -> str:
    return name if occ == 0 else f"{name}#{occ}"


def step_dags(trace: Trace, step: int, ranks: Iterable[int]) -> dict[int, nx.DiGraph]:
    """``dag.gml`` graphs of one step for ``ranks``, rebuilt by :func:`echo_sim.trace.graph.build_deps`
    (the contract's rules; one pass over the trace for all ranks)."""
    from echo_sim.trace.graph import build_deps

    ev = trace.events
    deps = build_deps(trace, [step], use_dags=False)
    want = set(ranks)
    graphs = {r: nx.DiGraph() for r in want}

    def nid(r: int) -> str:
        return _node_id(trace.names[int(ev.name[r])], int(ev.occ[r]))

    nodes = np.concatenate([deps.compute, deps.comm]).astype(np.int64)
    nodes = nodes[np.argsort(ev.ts_us[nodes], kind="stable")]
    last_update: dict[int, int] = {}
    for r in nodes.tolist():
        rank = int(ev.rank[r])
        if rank not in want:
            continue
        cat = int(ev.cat[r])
        graphs[rank].add_node(nid(r), cat=CAT_NAMES[cat], dur_us=float(ev.dur_us[r]),
                              step=int(step))
        if cat == Cat.UPDATE:
            last_update[rank] = r
    for u, v in zip(deps.src.tolist(), deps.dst.tolist(), strict=True):
        ru = int(ev.rank[u])
        if ru in want and ru == int(ev.rank[v]):
            graphs[ru].add_edge(nid(u), nid(v))
    for rank, r in last_update.items():  # rule 5: the sink after the last UPDATE
        graphs[rank].add_node(contract.NEXT_STEP, cat=contract.SINK_CAT, dur_us=0.0,
                              step=int(step))
        graphs[rank].add_edge(nid(r), contract.NEXT_STEP)
    return graphs


# ---------------------------------------------------------------------------- echo dirs
def _rank_dirs(trace: Trace, ranks: Iterable[int]) -> dict[int, str]:
    """``<node_rank>_<local_rank>`` per rank; ``0_<rank>`` for all when those collide."""
    infos = {r: trace.ranks.get(r, RankInfo(rank=r)) for r in ranks}
    names = {r: f"{i.node_rank}_{i.local_rank}" for r, i in infos.items()}
    if len(set(names.values())) != len(names):
        names = {r: f"0_{r}" for r in infos}
    return names


def _meta(trace: Trace, rank: int, info: RankInfo, dirname: str, trace_file: str,
          num_events: int, world_size: int) -> dict[str, Any]:
    node, local = (int(x) for x in dirname.split("_"))
    meta: dict[str, Any] = dict(info.meta)
    steps = sorted({int(s) for s in trace.events.step[trace.rank_rows(rank)] if s >= 0}
                   & set(trace.steps)) if trace.steps else []
    meta.update({
        "format": FORMAT, "echo_version": _echo_version(),
        "rank": rank, "local_rank": local, "node_rank": node, "world_size": world_size,
        "backend": info.backend or meta.get("backend", ""), "device": info.device,
        "host": info.host, "steps": steps, "clock_offset_us": info.clock_offset_us,
        "trace_file": trace_file, "num_events": num_events,
        "dropped_events": meta.get("dropped_events", 0),
        "disabled_reason": meta.get("disabled_reason"),
    })
    meta.setdefault("step_source", "user" if trace.source_format != "echo" else "optimizer")
    return meta


def write_echo_dirs(trace: Trace, out_dir: str | Path, *, overwrite: bool = False,
                    gzip: bool = False) -> list[Path]:
    """One ``<node_rank>_<local_rank>/`` directory per rank under ``out_dir``; returns them.

    Each holds ``trace.json`` (``.gz`` with ``gzip``), ``meta.json`` and ``dag.gml`` (the
    loader's graph from ``trace.dags``, else rebuilt by :func:`step_dags` for the rank's last
    captured step). Written by :func:`~echo_sim.trace.outfiles.output_tree`: ``out_dir`` is
    made when absent (its parent must exist), a link planted as ``out_dir``, a rank directory
    or a file is refused, and every file is put in place only once all are written. Raises
    :class:`~echo_sim.trace.outfiles.OutputError` before writing anything if a file exists
    and ``overwrite`` is false (or is not a regular file).
    """
    out = Path(out_dir)
    ranks = sorted(set(np.unique(trace.events.rank).tolist()) | set(trace.ranks))
    dirs = _rank_dirs(trace, ranks)
    trace_file = "trace.json.gz" if gzip else "trace.json"
    with output_tree(out, overwrite=overwrite) as tree:
        for name in dirs.values():  # refuse before any work
            for f in (trace_file, "meta.json", "dag.gml"):
                tree.check(f"{name}/{f}")
        world_size = max(trace.world_size, len(ranks))
        dags = _rebuilt_dags(trace, [r for r in ranks if r not in trace.dags])
        counters: dict[int, list[dict]] = {}
        for e in _counter_events(trace):
            counters.setdefault(e["pid"], []).append(e)
        for rank in ranks:
            name = dirs[rank]
            info = trace.ranks.get(rank, RankInfo(rank=rank, world_size=world_size))
            rows = trace.rank_rows(rank)
            events = chrome_events(trace, rows=rows)
            events.extend(counters.get(rank, []))
            doc = _chrome_doc(events, {"format": FORMAT, "rank": rank, "world_size": world_size,
                                       "echo_version": _echo_version()})
            tree.write(f"{name}/{trace_file}", _encoded(trace_file, doc))
            meta = _meta(trace, rank, info, name, trace_file, int(rows.size), world_size)
            tree.write(f"{name}/meta.json", json.dumps(meta, indent=1, default=str).encode())
            dag = trace.dags.get(rank, dags.get(rank, nx.DiGraph()))
            text = "\n".join(nx.generate_gml(dag, stringizer=str)) + "\n"
            tree.write(f"{name}/dag.gml", text.encode())
    return [out / dirs[rank] for rank in ranks]


def _rebuilt_dags(trace: Trace, ranks: list[int]) -> dict[int, nx.DiGraph]:
    """Each rank's graph of its last captured step (ranks grouped by that step)."""
    ev = trace.events
    by_step: dict[int, list[int]] = {}
    captured = set(trace.steps)
    for rank in ranks:
        seen = set(np.unique(ev.step[trace.rank_rows(rank)]).tolist()) & captured
        if seen:
            by_step.setdefault(max(seen), []).append(rank)
    out: dict[int, nx.DiGraph] = {}
    for step, group in by_step.items():
        out.update(step_dags(trace, step, group))
    return out
