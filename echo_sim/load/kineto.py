"""Loader for PyTorch profiler (Kineto) Chrome traces, one JSON (or .json.gz) per rank.

How profiler events map onto the trace model (the profiler has no notion of FW/BW):

* rank / world size: ``distributedInfo`` (else the file's position / the number of files);
  device: ``deviceProperties[0].name`` (``NVIDIA H100 80GB HBM3``; device ``cuda``, so
  ``simulate`` predicts on that GPU's preset), else ``cpu``;
  steps: the CPU-side ``ProfilerStep#N`` slices of one thread, else ``STEP<N>`` ranges (an
  event belongs to the step whose slice holds its start; with neither, the whole file is
  step 0); GPU-side mirrors (``gpu_user_annotation``) are not step bounds. Each step gets
  a ``STEP`` row spanning its slice, so iteration time = the ProfilerStep duration.
* FW: leaf ``nn.Module: <Class>_<i>`` slices (recorded with ``with_stack=True``) become
  ``FW.<Class>_<i>``; without them, top-level ``aten::`` ops of the main thread that start
  before the step's first backward function become ``FW.aten::<op>``.
* BW: ``autograd::engine::evaluate_function: <Fn>`` slices become ``BW.<Fn>``.
* UPDATE: ``Optimizer.step#<Class>.step`` becomes ``UPDATE.<Class>``.
* Comm, from the most precise source present: NCCL GPU kernels carrying ``Collective
  name`` args; else ``record_param_comms`` CPU ops; else ``c10d::<op>`` CPU ops, each
  stretched to the end of its ``gloo:<op>`` / ``nccl:<op>`` execution slice. Bytes, group
  ranks and ``seq`` come from the args when present (``In/Out msg nelems``, ``dtype``,
  ``Process Group Ranks``, ``Seq``); otherwise bytes = the largest input tensor × its dtype
  size (float32 when unknown), the group is the default process group from
  ``distributedInfo.pg_config``, and ``seq`` counts the group's collectives in issue order.
* Other top-level CPU ops become OTHER; GPU kernels / memcpys become OTHER rows on tid
  ``200 + stream``.
"""

from __future__ import annotations

import gc
import math
import re
from bisect import bisect_right
from collections import defaultdict, deque
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from echo_sim.errors import TraceFormatError
from echo_sim.load.byteprofile import comm_lanes
from echo_sim.load.jsonio import read_trace_event_chunks
from echo_sim.load.kineto_events import CPU_CATS as _CPU_CATS
from echo_sim.load.kineto_events import GPU_CATS as _GPU_CATS
from echo_sim.load.kineto_events import KinetoEvent as _Ev
from echo_sim.load.kineto_events import leaves as _leaves
from echo_sim.load.kineto_events import parse_events as _parse
from echo_sim.load.kineto_events import top_level as _top_level
from echo_sim.load.sources import RankSource
from echo_sim.textsafe import safe_text
from echo_sim.trace.model import (
    DEVICE_TID,
    MAX_STEP,
    MAX_WORLD_SIZE,
    Cat,
    RankInfo,
    Trace,
    TraceBuilder,
)
from echo_sim.trace.steps import complete_steps

__all__ = ["DTYPE_BYTES", "collective_of", "load_kineto"]

DTYPE_BYTES: dict[str, int] = {
    "float": 4, "float32": 4, "Float": 4, "double": 8, "float64": 8, "Double": 8,
    "c10::Half": 2, "Half": 2, "float16": 2, "c10::BFloat16": 2, "BFloat16": 2,
    "bfloat16": 2, "int": 4, "int32": 4, "Int": 4, "long int": 8, "int64": 8, "Long": 8,
    "signed char": 1, "int8": 1, "Char": 1, "unsigned char": 1, "uint8": 1, "Byte": 1,
    "bool": 1, "Bool": 1, "short int": 2, "int16": 2, "Short": 2,
}

# normalised spelling (lower case, no "_") -> contract collective name
_COLLECTIVE = {
    "allreduce": "all_reduce", "allreducecoalesced": "all_reduce",
    "allgather": "all_gather", "allgatherbase": "all_gather",
    "allgatherintotensor": "all_gather", "allgatherintotensorcoalesced": "all_gather",
    "allgathercoalesced": "all_gather",
    "reducescatter": "reduce_scatter", "reducescatterbase": "reduce_scatter",
    "reducescattertensor": "reduce_scatter", "reducescattertensorcoalesced": "reduce_scatter",
    "broadcast": "broadcast", "reduce": "reduce", "alltoall": "all_to_all",
    "alltoallbase": "all_to_all", "alltoallv": "all_to_all", "gather": "gather",
    "scatter": "scatter", "barrier": "barrier", "send": "send", "recv": "recv",
    "recvanysource": "recv",
}
_GPU_SIDE = frozenset({"gpu_user_annotation", "kernel", "gpu_memcpy", "gpu_memset"})
_EVAL = "autograd::engine::evaluate_function: "
_OPT = re.compile(r"^Optimizer\.step#(\w+)\.step$")
_STEP_RANGE = re.compile(r"^STEP\d+$")
_MAX_STREAM = 1 << 20  # GPU stream ids above this are not streams: they go on tid 200


def collective_of(name: str) -> str | None:
    """Contract collective name of a profiler op name (``c10d::allreduce_``, ``nccl:all_reduce``,
    ``_allgather_base``, ``ncclDevKernel_AllReduce_Sum_f32_RING_LL``), else None."""
    base = name.split("::", 1)[1] if name.startswith("c10d::") else name
    base = base.split(":", 1)[1] if base.startswith(("nccl:", "gloo:")) else base
    if base.startswith("ncclDevKernel_") or base.startswith("ncclKernel_"):
        base = base.split("_", 2)[1]
    return _COLLECTIVE.get(base.replace("_", "").lower())


def _numel(dims: Any, depth: int = 0) -> int:
    """Largest tensor (elements) in a profiler ``Input Dims`` value (nested lists)."""
    if not isinstance(dims, list) or depth > 8:
        return 0
    if dims and all(type(d) is int and 0 <= d < 1 << 40 for d in dims):
        return min(math.prod(dims), 1 << 50)
    return max((_numel(d, depth + 1) for d in dims), default=0)


def _dtype_size(types: Any) -> int | None:
    if isinstance(types, str):
        return DTYPE_BYTES.get(types)
    if isinstance(types, list):
        for t in types:
            if isinstance(t, str) and t in DTYPE_BYTES:
                return DTYPE_BYTES[t]
    return None


def _ranks_list(v: Any) -> tuple[int, ...] | None:
    if isinstance(v, str):
        v = [int(x) for x in re.findall(r"-?\d+", v)]
    if isinstance(v, list) and v and all(isinstance(x, int) for x in v):
        return tuple(sorted(v))
    return None


class _Rank:
    """One profiler file mapped onto rows for the builder."""

    def __init__(self, f: Path, index: int, evs: list[_Ev], top: dict[str, Any]) -> None:
        self.file = f
        dist = top.get("distributedInfo")
        self.dist: dict[str, Any] = dist if isinstance(dist, dict) else {}
        rank, world = self.dist.get("rank", index), self.dist.get("world_size")
        if type(rank) is not int or not 0 <= rank < MAX_WORLD_SIZE:
            raise TraceFormatError(f"{f}: distributedInfo.rank is {safe_text(repr(rank)[:40])}, "
                                   f"expected an integer 0..{MAX_WORLD_SIZE - 1}")
        if world is not None and (type(world) is not int or not 0 < world <= MAX_WORLD_SIZE):
            raise TraceFormatError(f"{f}: distributedInfo.world_size is "
                                   f"{safe_text(repr(world)[:40])}, expected an integer "
                                   f"1..{MAX_WORLD_SIZE}")
        self.rank = rank
        self.world: int | None = world
        props = top.get("deviceProperties")
        first = props[0] if isinstance(props, list) and props else None
        name = first.get("name") if isinstance(first, dict) else None
        self.device_name = safe_text(name[:200]) if isinstance(name, str) else ""
        base = top.get("baseTimeNanoseconds", 0)
        self.base_ns = base if type(base) is int and 0 <= base < 1 << 63 else 0
        self.evs = evs

    def default_group(self) -> tuple[int, ...] | None:
        for pg in self.dist.get("pg_config") or []:
            if isinstance(pg, dict) and pg.get("pg_desc") == "default_pg":
                return _ranks_list(pg.get("ranks"))
        return tuple(range(self.world)) if self.world else None


def _step_marks(evs: list[_Ev], prefix: str) -> list[tuple[float, float, int, Any]]:
    marks = []
    for e in evs:
        if e.name.startswith(prefix) and e.cat not in _GPU_SIDE:
            num = e.name[len(prefix):]
            if num.isdigit() and len(num) <= 10 and int(num) <= MAX_STEP:
                marks.append((e.ts, e.end, int(num), e.tid))
    return marks


def _steps(evs: list[_Ev]) -> tuple[list[tuple[float, float, int]], Any]:
    """Step spans of the CPU thread that records them, and that thread.

    ``ProfilerStep#N`` (``torch.profiler``'s ``prof.step()``), else ``STEP<N>`` ranges (a
    ``record_function`` around each step, as in the shared GPU recordings). Only CPU-side
    slices count: ROCm and recent CUDA profiles mirror each range as a
    ``gpu_user_annotation`` per GPU stream covering just that stream's kernels; taking
    those as step bounds halved the iteration time of a MI250 trace.
    """
    marks = _step_marks(evs, "ProfilerStep#") or _step_marks(evs, "STEP")
    marks.sort(key=lambda m: (m[0], -m[1]))
    main_tid = marks[0][3] if marks else _busiest_tid(evs)
    seen: set[int] = set()
    out = []
    for a, b, n, tid in marks:
        if tid == main_tid and n not in seen:
            seen.add(n)
            out.append((a, b, n))
    return out, main_tid


def _busiest_tid(evs: list[_Ev]) -> Any:
    count: dict[Any, int] = defaultdict(int)
    for e in evs:
        if e.cat == "cpu_op":
            count[e.tid] += 1
    return max(count, key=lambda t: count[t]) if count else None


def _comm_events(r: _Rank) -> tuple[list[_Ev], str]:
    """(Comm issue events, source kind) from the most precise source present."""
    nccl = [e for e in r.evs if e.cat == "kernel" and e.name.startswith("nccl")
            and "Collective name" in e.args]
    if nccl:
        return nccl, "kernel"
    rpc = [e for e in r.evs if e.name == "record_param_comms" and "Collective name" in e.args]
    if rpc:
        return rpc, "record_param_comms"
    return [e for e in r.evs if e.cat == "cpu_op" and e.name.startswith("c10d::")
            and collective_of(e.name)], "c10d"


def _add_rank(b: TraceBuilder, r: _Rank, shift_us: float) -> list[int]:
    """Add one rank's rows; returns its step numbers."""
    marks, main_tid = _steps(r.evs)
    starts = [m[0] for m in marks]
    ends = [m[1] for m in marks]
    nums = [m[2] for m in marks]

    def step_of(ts: float) -> int:
        if not marks:
            return 0
        i = bisect_right(starts, ts) - 1
        return nums[i] if i >= 0 and ts <= ends[i] else -1

    def add(e: _Ev, name: str, cat: Cat, tid: int, end: float | None = None,
            **kw: Any) -> None:
        # profiler ts are ~1e12 us: recompute a stretched duration to the trace's 3 decimals
        dur = e.dur if end is None else round(end - e.ts, 3)
        b.add(rank=r.rank, name=name, cat=cat, ts_us=e.ts + shift_us, dur_us=dur,
              step=step_of(e.ts), tid=tid, **kw)

    if marks:
        for a, z, n in marks:
            b.add(rank=r.rank, name="STEP", cat=Cat.STEP, ts_us=a + shift_us,
                  dur_us=round(z - a, 3), step=n, tid=1)
    elif r.evs:
        t0, t1 = min(e.ts for e in r.evs), max(e.end for e in r.evs)
        b.add(rank=r.rank, name="STEP", cat=Cat.STEP, ts_us=t0 + shift_us,
              dur_us=round(t1 - t0, 3), step=0, tid=1)
    cpu = [e for e in r.evs if e.cat in _CPU_CATS and not e.name.startswith("ProfilerStep#")
           and not _STEP_RANGE.match(e.name)]
    bw = _top_level([e for e in cpu if e.name.startswith(_EVAL)])
    opt = [e for e in cpu if _OPT.match(e.name)]
    comm, comm_kind = _comm_events(r)
    busy = sorted([(e.ts, e.end) for e in bw + opt + comm])
    busy_start = [a for a, _ in busy]
    busy_reach = list(np.maximum.accumulate([z for _, z in busy])) if busy else []
    for e in bw:
        add(e, "BW." + e.name[len(_EVAL):], Cat.BW, 0)
    for e in opt:
        m = _OPT.match(e.name)
        add(e, f"UPDATE.{m.group(1) if m else 'optimizer'}", Cat.UPDATE, 0)
    first_bw: dict[int, float] = {}
    for e in bw:
        s = step_of(e.ts)
        first_bw[s] = min(first_bw.get(s, np.inf), e.ts)

    def inside_busy(e: _Ev) -> bool:
        # some busy span starting at or before e.ts reaches e.end: O(log n), sorted once
        i = bisect_right(busy_start, e.ts) - 1
        return i >= 0 and busy_reach[i] >= e.end

    modules = [e for e in cpu if e.name.startswith("nn.Module: ")]
    if modules:
        for e in _leaves(modules):
            if not inside_busy(e):
                label = e.name[len("nn.Module: "):]
                add(e, f"FW.{label}", Cat.FW, 0, kind=re.sub(r"_\d+$", "", label))
    main_ops = [e for e in cpu if e.tid == main_tid and e.cat == "cpu_op"
                and not e.name.startswith("c10d::") and e.name != "record_param_comms"]
    for e in _top_level(main_ops):
        if inside_busy(e):
            continue
        before_bw = e.ts < first_bw.get(step_of(e.ts), np.inf)
        if not modules and before_bw:
            add(e, f"FW.{e.name}", Cat.FW, 0)
        elif not before_bw:
            add(e, e.name, Cat.OTHER, 2)
    _add_comm(b, r, comm, comm_kind, add)
    comm_ids = {id(e) for e in comm}
    for e in r.evs:
        if e.cat in _GPU_CATS and id(e) not in comm_ids:
            stream = e.tid if type(e.tid) is int and 0 <= e.tid <= _MAX_STREAM else 0
            add(e, e.name, Cat.OTHER, DEVICE_TID + stream)
    return sorted(set(nums)) if marks else [0]


def _add_comm(b: TraceBuilder, r: _Rank, comm: list[_Ev], kind: str,
              add: Callable[..., None]) -> None:
    comm = sorted(comm, key=lambda e: e.ts)
    # gloo:/nccl: execution slices, per collective type, to stretch c10d issue events
    execs: dict[str, deque[_Ev]] = defaultdict(deque)
    if kind == "c10d":
        for e in r.evs:
            if e.cat == "user_annotation" and e.name.startswith(("gloo:", "nccl:")):
                c = collective_of(e.name)
                if c:
                    execs[c].append(e)
        for c, v in execs.items():
            execs[c] = deque(sorted(v, key=lambda e: e.ts))
    default = r.default_group()
    seq_count: dict[Any, int] = defaultdict(int)
    rows = []
    for e in comm:
        a = e.args
        coll = collective_of(str(a.get("Collective name", ""))) if kind != "c10d" else None
        coll = coll or collective_of(e.name)
        end = e.end
        dtype_size = _dtype_size(a.get("dtype")) or _dtype_size(a.get("Input type"))
        nelems = max((v for v in (a.get("In msg nelems"), a.get("Out msg nelems"))
                      if type(v) is int and 0 <= v < 1 << 50), default=None)
        if kind == "c10d" and coll is not None and execs[coll]:
            x = execs[coll].popleft()
            end = max(end, x.end)
            dtype_size = _dtype_size(x.args.get("Input type")) or dtype_size
        if nelems is None:
            nelems = _numel(a.get("Input Dims"))
        group = _ranks_list(a.get("Process Group Ranks")) or default
        seq = a.get("Seq")
        if type(seq) is not int or not 0 <= seq < 1 << 62:
            seq = seq_count[group]
            seq_count[group] += 1
        rows.append((e, end, coll, nelems * (dtype_size or 4), group, seq,
                     a.get("dtype") if isinstance(a.get("dtype"), str) else None))
    lanes = comm_lanes([x[0].ts for x in rows], [x[1] for x in rows])
    for (e, end, coll, nbytes, group, seq, dtype), lane in zip(rows, lanes, strict=True):
        add(e, f"Comm.{coll or e.name}", Cat.COMM, 100 + lane, end=end, collective=coll,
            nbytes=int(nbytes), group_ranks=group, seq=int(seq),
            comm_args={"op": e.name, "source": kind, **({"dtype": dtype} if dtype else {})})


def load_kineto(sources: Sequence[RankSource], *, source: str = "",
                wrap: Callable[[Iterable[Any]], Iterable[Any]] = iter) -> Trace:
    """Read one profiler JSON per rank into one :class:`Trace`."""
    # the cyclic GC would rescan the ~10^5 fresh dicts orjson creates per file again and
    # again (a third of the load time); nothing here builds reference cycles
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        return _load_kineto(sources, source, wrap)
    finally:
        if was_enabled:
            gc.enable()


def _read_events(f: Path) -> tuple[list[_Ev], dict[str, Any]]:
    """The file's X events and top-level keys, parsed in batches whose dicts are dropped as
    they become events (a 10^6-event file: ~40% less peak memory)."""
    evs: list[_Ev] = []
    seen = [0]

    def consume(batch: list[Any]) -> None:
        evs.extend(_parse(f, batch, seen[0]))
        seen[0] += len(batch)

    def reset() -> None:
        evs.clear()
        seen[0] = 0

    top = read_trace_event_chunks(f, consume, reset)
    return evs, top


def _load_kineto(sources: Sequence[RankSource], source: str,
                 wrap: Callable[[Iterable[Any]], Iterable[Any]]) -> Trace:
    ranks: list[_Rank] = []
    for index, src in enumerate(wrap(sources)):
        evs, top = _read_events(src.trace_file)
        ranks.append(_Rank(src.trace_file, index, evs, top))
    seen: dict[int, Path] = {}
    for r in ranks:
        if r.rank in seen:
            raise TraceFormatError(f"{r.file}: rank {r.rank} appears twice (also {seen[r.rank]})")
        seen[r.rank] = r.file
    b = TraceBuilder("kineto", source)
    base0 = ranks[0].base_ns if ranks else 0
    step_sets = {}
    for r in ranks:
        shift = (r.base_ns - base0) / 1000.0
        world = r.world or len(ranks)
        device = "cuda" if r.device_name else "cpu"
        meta: dict[str, Any] = {"format": "kineto", "distributedInfo": r.dist, "device": device}
        if r.device_name:
            meta["device_name"] = r.device_name
        b.ranks[r.rank] = RankInfo(
            rank=r.rank, world_size=max(world, r.rank + 1), backend=str(r.dist.get("backend", "")),
            clock_offset_us=shift, source=str(r.file), device=device, meta=meta,
        )
        step_sets[r.rank] = _add_rank(b, r, shift)
    steps, notes = complete_steps(step_sets, source=source)
    trace = b.build(steps=steps)
    if notes:
        trace.notes.extend(notes)
        trace.keep_steps(steps)
    return trace
