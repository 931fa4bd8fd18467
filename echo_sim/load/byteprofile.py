"""Loader for ByteProfile (BytePS fork) and dPRO trace directories.

Layout and naming follow the published tools (``/work/shared/reference/formats.md``): one
directory per GPU (``<rank>_<local_rank>/`` or dPRO's ``host<i>/<gpu>/``) holding
``bps_trace_*.json`` or ``trace.json[.gz]`` and ``dag.gml``; Chrome ``X`` events named
``FW.<op>``, ``BW.<op>``, ``Comm.<tensor>[.<sub-op>]``, ``UPDATE...``, ``I/O...``; the
dependencies of an event are ``args.arg0..argN`` (``args.name`` is the node itself).

What the format does not say, and what this loader assumes:

* Steps: dPRO's rule — a new step starts when the category switches back to ``I/O`` or
  ``FW`` from any other category. Steps are numbered 0, 1, ... per rank.
* Clocks are unsynchronised wall clocks. Alignment is dPRO's default rule: the first
  ``Sync`` (else the first ``Comm``) timestamp of every rank is averaged per host and each
  host is shifted by the difference of its mean to host 0's. The shift is kept in
  ``RankInfo.clock_offset_us`` and the rule in ``RankInfo.meta["clock_alignment"]``.
* Communication: the ``tid: "total"`` event of a tensor is its Comm event when present,
  else the span of its sub-ops (their durations go to ``comm_args["sub_ops"]``). BytePS
  push/pull and Horovod NCCL all-reduce are both an all-reduce over every rank. Byte counts
  are not in the format (0). ``seq`` numbers (step, tensor) in sorted order, identical on
  every rank that holds the same tensors.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import networkx as nx
import numpy as np

from echo_sim.errors import TraceFormatError
from echo_sim.load.gml import read_dag
from echo_sim.load.jsonio import read_trace_events
from echo_sim.load.sources import RankSource
from echo_sim.textsafe import safe_text
from echo_sim.trace.model import Cat, RankInfo, Trace, TraceBuilder
from echo_sim.trace.steps import complete_steps
from echo_sim.trace.validate import MAX_TIME_US

__all__ = ["CLOCK_RULE", "SUB_OPS", "comm_lanes", "load_byteprofile", "split_comm_name"]

SUB_OPS = frozenset({
    # BytePS queue stages
    "COORDINATE_REDUCE", "REDUCE", "COPYD2H", "PCIE_REDUCE", "COORDINATE_PUSH", "PUSH",
    "PULL", "COPYH2D", "COORDINATE_BROADCAST", "BROADCAST",
    # Horovod / NCCL sub-ops (fine and coarse)
    "Sync", "QUEUE", "MEMCPY_IN_FUSION_BUFFER", "NCCL_ALLREDUCE", "MEMCPY_OUT_FUSION_BUFFER",
    "NEGOTIATE_ALLREDUCE", "ALLREDUCE",
})
CLOCK_RULE = ("dPRO default: each host shifted by the difference of the mean of its ranks' "
              "first Sync (else first Comm) timestamp to host 0's")

_IO, _NONE = 10, 11  # pseudo-categories for the step rule (not stored)


def split_comm_name(name: str) -> tuple[str, str]:
    """``"Comm.grad_1.PUSH"`` -> ``("grad_1", "PUSH")``; no known sub-op -> ``(tensor, "")``."""
    body = name[5:] if name.startswith("Comm.") else name
    head, _, last = body.rpartition(".")
    if head and last in SUB_OPS:
        return head, last
    return body, ""


def _category(name: str) -> int:
    prefix = name.split(".", 1)[0]
    if prefix == "FW":
        return int(Cat.FW)
    if prefix == "BW":
        return int(Cat.BW)
    if prefix == "Comm":
        return int(Cat.COMM)
    if prefix.startswith("UPDATE"):
        return int(Cat.UPDATE)
    if prefix in ("I/O", "IO", "I-O"):
        return _IO
    return _NONE


def comm_lanes(starts: Sequence[float], ends: Sequence[float]) -> list[int]:
    """Lowest free lane per interval (intervals in start order), so a lane never overlaps."""
    lane_end: list[float] = []
    out = []
    for s, e in zip(starts, ends, strict=True):
        for k, busy_until in enumerate(lane_end):
            if busy_until <= s:
                lane_end[k] = e
                out.append(k)
                break
        else:
            lane_end.append(e)
            out.append(len(lane_end) - 1)
    return out


@dataclass
class _Op:
    name: str
    cat: int
    ts: float
    dur: float
    tid: Any
    deps: tuple[str, ...]


def _is_number(v: Any) -> bool:
    """A finite int/float (not a bool) within :data:`MAX_TIME_US` of zero."""
    try:
        return type(v) in (int, float) and abs(float(v)) <= MAX_TIME_US
    except OverflowError:  # an int beyond float64
        return False


def _parse_ops(f: Path, events: list[Any]) -> list[_Op]:
    ops = []
    for i, e in enumerate(events):
        if not isinstance(e, dict):
            raise TraceFormatError(f"{f}: traceEvents[{i}] is not an object")
        if e.get("ph") != "X":
            continue
        name: Any = e.get("name")
        ts: Any = e.get("ts")
        dur: Any = e.get("dur", 0)
        if not isinstance(name, str):
            raise TraceFormatError(f"{f}: traceEvents[{i}] has no string 'name'")
        if not (_is_number(ts) and _is_number(dur)):
            key, v = ("ts", ts) if not _is_number(ts) else ("dur", dur)
            raise TraceFormatError(f"{f}: traceEvents[{i}]: '{key}' is {safe_text(repr(v)[:40])}, "
                                   f"expected a finite number within {MAX_TIME_US:.0f} us")
        args = e.get("args") or {}
        if not isinstance(args, dict):
            raise TraceFormatError(f"{f}: traceEvents[{i}]: 'args' is not an object")
        deps = tuple(str(v) for k, v in sorted(args.items())
                     if re.fullmatch(r"arg\d+", k) and isinstance(v, str))
        ops.append(_Op(name, _category(name), float(ts), float(dur), e.get("tid"), deps))
    return ops


def _steps(ops: list[_Op]) -> tuple[list[float], list[int]]:
    """dPRO's rule over non-Comm ops in time order: (step start times, step of each op)."""
    compute = sorted((o for o in ops if o.cat != int(Cat.COMM)), key=lambda o: o.ts)
    starts: list[float] = []
    prev = None
    for o in compute:
        if o.cat in (int(Cat.FW), _IO) and (prev is None or prev not in (int(Cat.FW), _IO)):
            starts.append(o.ts)
        elif prev is None:
            starts.append(o.ts)
        prev = o.cat
    if not starts and ops:
        starts = [min(o.ts for o in ops)]
    index = np.searchsorted(np.asarray(starts), [o.ts for o in ops], side="right") - 1
    return starts, [max(int(i), 0) for i in index]


def _first_sync(ops: list[_Op]) -> float | None:
    syncs = [o.ts for o in ops if o.cat == int(Cat.COMM) and split_comm_name(o.name)[1] == "Sync"]
    if syncs:
        return min(syncs)
    comms = [o.ts for o in ops if o.cat == int(Cat.COMM)]
    return min(comms) if comms else None


def _dir_ranks(d: Path | None) -> tuple[int, int]:
    """(node_rank, local_rank) from ``<node>_<local>`` or dPRO's ``host<i>/<gpu>``."""
    if d is None:
        return 0, 0
    m = re.fullmatch(r"(\d+)_(\d+)", d.name)
    if m:
        return int(m.group(1)), int(m.group(2))
    host = re.search(r"(\d+)$", d.parent.name)
    gpu = re.search(r"(\d+)$", d.name)
    return (int(host.group(1)) if host else 0), (int(gpu.group(1)) if gpu else 0)


def _deps_dag(ops: list[_Op]) -> nx.DiGraph | None:
    g = nx.DiGraph()
    for o in ops:
        g.add_node(o.name)
        g.add_edges_from((d, o.name) for d in o.deps)
    if g.number_of_edges() == 0 or not nx.is_directed_acyclic_graph(g):
        return None
    return g


def load_byteprofile(sources: Sequence[RankSource], *, source: str = "",
                     wrap: Callable[[Iterable[Any]], Iterable[Any]] = iter,
                     ) -> Trace:
    """Read ByteProfile/dPRO rank directories; global rank = order of the directories."""
    per_rank: list[tuple[RankSource, list[_Op]]] = []
    for src in wrap(sources):
        events, _ = read_trace_events(src.trace_file)
        per_rank.append((src, _parse_ops(src.trace_file, events)))
    world = len(per_rank)
    # clock alignment (see module docstring)
    first = {r: _first_sync(ops) for r, (_, ops) in enumerate(per_rank)}
    host_ts: dict[str, list[float]] = defaultdict(list)
    for r, (src, _) in enumerate(per_rank):
        t = first[r]
        if t is not None:
            host_ts[src.host].append(t)
    host_mean = {h: float(np.mean(v)) for h, v in host_ts.items()}
    ref = host_mean.get(per_rank[0][0].host) if per_rank else None
    everyone = tuple(range(world))
    ranks: list[tuple[list[float], list[int],
                      list[tuple[float, float, int, str, dict[str, float], float]]]]
    ranks = []
    for _src, ops in per_rank:
        starts, step_of = _steps(ops)
        comm: dict[tuple[int, str], list[_Op]] = defaultdict(list)
        for o, s in zip(ops, step_of, strict=True):
            if o.cat == int(Cat.COMM):
                comm[(s, split_comm_name(o.name)[0])].append(o)
        spans = []
        for (s, tensor), parts in comm.items():
            total = [o for o in parts if o.tid == "total"]
            subs = {split_comm_name(o.name)[1] or "total": o.dur for o in parts
                    if o.tid != "total"}
            t0 = total[0].ts if total else min(o.ts for o in parts)
            # the total event's own dur: ts + dur of wall-clock µs (~1.6e15) in float64 is
            # only exact to 0.25 µs
            dur = total[0].dur if total else max(o.ts + o.dur for o in parts) - t0
            spans.append((t0, t0 + dur, s, tensor, subs, dur))
        spans.sort()
        ranks.append((starts, step_of, spans))
    seq_of = {k: i for i, k in enumerate(sorted({(x[2], x[3]) for _, _, sp in ranks
                                                 for x in sp}))}
    b = TraceBuilder("byteprofile", source)
    step_sets: dict[int, list[int]] = {}
    for r, ((src, ops), (starts, step_of, spans)) in enumerate(zip(per_rank, ranks, strict=True)):
        mean = host_mean.get(src.host)
        shift = (ref - mean) if ref is not None and mean is not None else 0.0
        node, local = _dir_ranks(src.directory)
        b.ranks[r] = RankInfo(rank=r, world_size=world, local_rank=local, node_rank=node,
                              host=src.host, clock_offset_us=shift,
                              source=str(src.directory or src.trace_file),
                              meta={"clock_alignment": CLOCK_RULE, "format": "byteprofile"})
        step_sets[r] = sorted(set(step_of))
        for o, s in zip(ops, step_of, strict=True):
            if o.cat == int(Cat.COMM):
                continue
            cat = Cat.OTHER if o.cat in (_IO, _NONE) else Cat(o.cat)
            b.add(rank=r, name=o.name, cat=cat, ts_us=o.ts + shift, dur_us=o.dur, step=s,
                  tid=0 if cat != Cat.OTHER else 2)
        step_end = starts[1:] + [max(o.ts + o.dur for o in ops)] if starts else []
        for s, (t0, t1) in enumerate(zip(starts, step_end, strict=True)):
            b.add(rank=r, name="STEP", cat=Cat.STEP, ts_us=t0 + shift, dur_us=t1 - t0,
                  step=s, tid=1)
        lanes = comm_lanes([x[0] for x in spans], [x[1] for x in spans])
        for (t0, _, s, tensor, subs, dur), lane in zip(spans, lanes, strict=True):
            b.add(rank=r, name=f"Comm.{tensor}", cat=Cat.COMM, ts_us=t0 + shift,
                  dur_us=dur, step=s, tid=100 + lane, collective="all_reduce",
                  group_ranks=everyone, seq=seq_of[(s, tensor)],
                  comm_args={"sub_ops": subs} if subs else None)
        if src.dag_file is not None:
            b.dags[r] = read_dag(src.dag_file)
        else:
            g = _deps_dag(ops)
            if g is not None:
                b.dags[r] = g
    steps, notes = complete_steps(step_sets, source=source)
    trace = b.build(steps=steps)
    if notes:
        trace.notes.extend(notes)
        trace.keep_steps(steps)
    return trace
