"""The per-operator workload of one training step, extracted from a :class:`Trace`.

:func:`extract_workload` reads one rank's compute track (``FW.*``, ``BW.*``, ``UPDATE.*``),
keeps the innermost events (leaf modules), and for every operator of one representative
step records its measured time, module path and class, parameter / input / output bytes,
forward FLOPs, the block it belongs to (``blocks.<i>.`` style names, else by structure:
:func:`structural_blocks`) and its
tensor-parallel role.

Time model of an operator (what the simulator replays for it)::

    dur_us  = measured event duration
    gap_us  = host time after the event until the next compute event starts, minus the part
              of it covered by a Comm slice of the same rank (waiting on communication is
              not compute: the simulator models it itself)
    time_us = dur_us + gap_us

The time before the first operator of a step (data loading, ``zero_grad``) and after the
last one is kept once per step in :attr:`Workload.pre_us` / :attr:`Workload.post_us`.
Per-operator values are the median over the captured steps, rescaled so that one
simulated step on the traced layout takes the median measured step time.

Also here: :class:`CommHook`, the unit by which each parallelism (data, FSDP, tensor,
pipeline) attaches communication to operators; :mod:`echo_sim.workload.build` turns the
hooks into engine tasks.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from echo_sim.errors import TraceFormatError
from echo_sim.trace.model import Cat, Trace
from echo_sim.workload.jitter import step_curve
from echo_sim.workload.leaves import step_leaves
from echo_sim.workload.tp_plan import tp_placement
from echo_sim.workload.tp_structure import (
    COLUMN_HINTS,
    HEAD_HINTS,
    ROW_HINTS,
    TOKEN_EMBEDDING_HINTS,
    Placement,
    placement_summary,
)

__all__ = [
    "CommHook",
    "Op",
    "TP_ROLES",
    "Workload",
    "assign_roles",
    "block_index",
    "structural_blocks",
    "extract_workload",
    "fold_micro_batches",
    "param_owner",
    "tp_role",
]

TP_ROLES: tuple[str, ...] = ("column", "row", "vocab", "inner", "replicated")
"""Tensor-parallel roles: column-/row-parallel Linear, vocab-parallel embedding/head,
an op on a column-parallel output before the row-parallel op (activation, attention core),
or replicated (layer norms, residual adds, position embeddings)."""

# Megatron-LM / HF / torchtitan names of the first (column-parallel) and second
# (row-parallel) Linear of attention and MLP: hints of the structural rule, which decides
# (echo_sim.workload.tp_structure).
_COLUMN = COLUMN_HINTS
_ROW = ROW_HINTS
_HEAD = HEAD_HINTS
_TOKEN_EMB = TOKEN_EMBEDDING_HINTS
_BLOCK_RE = re.compile(r"(?:^|\.)(?:blocks|layers|layer|h|block)\.(\d+)(?:\.|$)")


def block_index(module: str) -> int:
    """Index ``i`` of a ``blocks.<i>.`` (``layers.<i>.``, ``h.<i>.``) module path, else -1."""
    m = _BLOCK_RE.search(module)
    return int(m.group(1)) if m else -1


def tp_role(module: str, kind: str) -> str:
    """Megatron tensor-parallel role from the module's last path component and class alone
    (the name hints; :func:`extract_workload` places roles by the model's structure or a
    plan: :func:`~echo_sim.workload.tp_plan.tp_placement`)."""
    leaf = module.rsplit(".", 1)[-1]
    if kind == "Linear" and block_index(module) >= 0:
        if leaf in _COLUMN:
            return "column"
        if leaf in _ROW:
            return "row"
    if kind == "Linear" and leaf in _HEAD and block_index(module) < 0:
        return "vocab"
    if kind == "Embedding" and leaf in _TOKEN_EMB:
        return "vocab"
    return "replicated"


@dataclass(frozen=True, slots=True)
class Op:
    """One operator (leaf module call or optimizer step) of the representative step.

    ``phase``: "F", "B" or "U". ``fw``: for a backward op, the index of its forward op
    (-1 if none). ``saved_bytes``: for a forward op, the bytes autograd saved for backward
    that this call made (echo_trace's ``saved_activations``, at the traced micro-batch);
    -1 when the trace does not say. ``held_param_bytes``: the parameter bytes this module
    holds in memory, 0 for a module whose weight is another's (tied embeddings: the
    meta.json parameter table lists a tensor once); -1: as ``param_bytes``. ``unit``: pipeline / FSDP unit key (``blocks.<i>`` or the top-level child).
    ``flops``: forward FLOPs for F, 2x the forward FLOPs for B (grad input + grad weight).
    """

    index: int
    name: str
    phase: str
    module: str
    kind: str
    dur_us: float
    gap_us: float
    param_bytes: int = 0
    in_bytes: int = 0
    out_bytes: int = 0
    flops: float = 0.0
    block: int = -1
    unit: str = ""
    role: str = "replicated"
    fw: int = -1
    saved_bytes: int = -1
    held_param_bytes: int = -1

    @property
    def time_us(self) -> float:
        """Measured time the op holds the compute stream: ``dur_us + gap_us``."""
        return self.dur_us + self.gap_us


@dataclass(frozen=True, slots=True)
class CommHook:
    """Communication a parallelism attaches to operators of one (virtual) stage.

    ``issue``: the op index after whose end it is issued (-1: at the start of the action).
    ``wait``: the op index that cannot start before it ends; -1: the optimizer step waits
    for it; -2: blocking (the next op of the action waits, as for tensor-parallel
    all-reduces); -3: no op waits (a later hook does, through ``after``). ``phase`` ("F" or "B") says which action (forward or backward) holds the
    issue/wait ops; "U": issued after the optimizer step, the end of the step waits for it
    (ZeRO-1/2's parameter all-gather; ``issue`` and ``wait`` unused). ``when``: "all" micro-batches, "first" or "last" only. ``after``: index
    (into the same hook list) of a hook that must finish first (parameter-server pull after
    push); ``chain``: issued in order after the previous hook of the same channel.
    ``group``: "tp", "dp" or "pp".
    """

    name: str
    collective: str
    nbytes: int
    group: str
    channel: str
    phase: str
    issue: int
    wait: int
    when: str = "all"
    after: int = -1
    chain: bool = False


@dataclass(frozen=True)
class Workload:
    """The operators of one representative step of one rank, and what is known of the model.

    ``ops`` are in execution order (forward, backward, update). ``params``: (name, bytes,
    dtype) in registration order (``meta.json`` params, else one entry per module).
    ``model``: ``meta["model"]`` of a synthetic trace (layers/hidden/heads/seq/vocab), else
    what could be inferred (hidden, seq), else {}. ``tp_time_us``: measured time (µs) of
    every op (by index) on one rank of a ``tp``-way tensor-parallel group, for each profiled
    ``tp`` (an Aceso op database's ``meta["tp_time_us"]``); empty when only ``tp = 1`` was
    traced.
    """

    ops: tuple[Op, ...]
    micro_batch: int | None
    step_time_us: float
    pre_us: float
    post_us: float
    params: tuple[tuple[str, int, str], ...]
    dtype: str
    device: str
    device_name: str
    model: dict[str, Any] = field(default_factory=dict)
    buckets: tuple[tuple[int, tuple[str, ...]], ...] = ()
    # the model's buffers (name, bytes) from meta.json; None for traces made before they were
    # recorded (DDP's buffer broadcast then counts BatchNorm's, from the ops)
    buffers: tuple[tuple[str, int], ...] | None = None
    peak_memory_bytes: int = 0
    peak_memory_kind: str = ""
    # median minor page faults per captured step of the traced process (STEP
    # args.minor_faults), None when the trace does not record them
    minor_faults_per_step: float | None = None
    rank: int = 0
    steps_used: int = 1
    tp_time_us: dict[int, tuple[float, ...]] = field(default_factory=dict)
    traced_micro_batches: int = 1  # forward-backward passes per traced step (accumulation)
    # the traced rank's meta.json (with its backend): simulate reads the framework's figures
    # from it, so simulating the workload equals simulating the trace (search does the former)
    meta: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)
    tp_note: str = ""  # one line: where the tensor-parallel roles came from, what is unplaced
    # one line when the op times are the median of several traces (echo_sim.workload.pool)
    # or of a stage's ranks (echo_sim.workload.traced.typical_rank_workload)
    pool_note: str = ""
    # a multi-rank trace: (rank, its ops' µs per step) of the ranks the op times are the
    # median of, so that simulate can say when one was a straggler
    rank_busy_us: tuple[tuple[int, float], ...] = field(default=(), compare=False)
    # a pipeline-parallel trace's stages: the units (forward order) each traced stage ran
    # (echo_sim.workload.stages.join_stages); empty for a one-stage trace
    traced_stages: tuple[tuple[str, ...], ...] = ()
    # a multi-rank trace's layout (echo_sim.workload.traced_layout.TracedLayout) and its own
    # collectives (a CommProfile, echo_sim.cost.trace_comm): echo_sim.workload.traced
    traced_layout: Any = field(default=None, compare=False, repr=False)
    traced_comm: Any = field(default=None, compare=False, repr=False)
    # per traced step, its cumulative compute (µs, rescaled as the ops) at equal shares of the
    # median step (echo_sim.workload.jitter.step_curve): how the rank's compute varies from
    # step to step; empty for fewer than three steps
    step_curve_us: tuple[tuple[float, ...], ...] = field(default=(), compare=False,
                                                          repr=False)

    @property
    def fw_ops(self) -> list[Op]:
        return [o for o in self.ops if o.phase == "F"]

    @property
    def bw_ops(self) -> list[Op]:
        return [o for o in self.ops if o.phase == "B"]

    @property
    def update_ops(self) -> list[Op]:
        return [o for o in self.ops if o.phase == "U"]

    @property
    def has_blocks(self) -> bool:
        return any(o.block >= 0 for o in self.ops)

    @property
    def num_blocks(self) -> int:
        """Transformer blocks, or top-level children for models without blocks."""
        if self.has_blocks:
            return len({o.block for o in self.ops if o.block >= 0})
        return len({o.unit for o in self.ops if o.phase == "F"})

    @property
    def total_param_bytes(self) -> int:
        if self.params:
            return sum(b for _, b, _ in self.params)
        return sum(o.param_bytes for o in self.ops if o.phase == "F")

    def with_ops(self, ops: list[Op]) -> Workload:
        return replace(self, ops=tuple(ops))


# --------------------------------------------------------------------------- extraction
_PHASE = {int(Cat.FW): "F", int(Cat.BW): "B", int(Cat.UPDATE): "U"}


def _unit_of(module: str, block: int) -> str:
    if block >= 0:
        m = _BLOCK_RE.search(module)
        if m is not None:
            return module[: m.end(1)].lstrip(".")
    return module.split(".", 1)[0]


def structural_blocks(modules: Sequence[str]) -> dict[str, str]:
    """Leaf module path -> the repeated block it belongs to, for models whose block
    containers have other names than ``blocks``/``layers``/``h`` (a ResNet's
    ``stages.<i>.<j>``, a ``features.<i>`` of sub-modules).

    A leaf's block is its longest proper prefix that ends in an index (an element of a
    ``ModuleList``/``Sequential``): ``stages.1.0.conv1`` -> ``stages.1.0``, and
    ``stages.1.0.shortcut.0`` -> ``stages.1.0`` too (the leaf itself is not its own
    block). Where one candidate lies inside another, the outer one holds both. Fewer than
    two blocks: none (a plain ``Sequential`` of layers has no repeated blocks). This is
    where ``fully_shard`` goes by convention (one unit per residual / transformer block).
    """
    cand: dict[str, str] = {}
    for mod in modules:
        parts = mod.split(".")
        for k in range(len(parts) - 1, 0, -1):
            if parts[k - 1].isdigit():
                cand[mod] = ".".join(parts[:k])
                break
    roots = set(cand.values())
    out = {}
    for mod, c in cand.items():
        parts = c.split(".")
        outer = next((p for p in (".".join(parts[:k]) for k in range(1, len(parts)))
                      if p in roots), c)
        out[mod] = outer
    return out if len(set(out.values())) >= 2 else {}


def _leaf_dicts(trace: Trace, rows: np.ndarray, dur: np.ndarray, gap: np.ndarray
                ) -> list[dict[str, Any]]:
    """The leaves of one step as dicts (name, ``key`` = (name, occurrence), phase, ...)."""
    ev = trace.events
    out = []
    occ: Counter[str] = Counter()
    for i, row in enumerate(rows.tolist()):
        name = trace.name_of(row)
        k = int(ev.kind[row])
        out.append({
            "name": name, "key": (name, occ[name]), "phase": _PHASE[int(ev.cat[row])],
            "kind": trace.kinds[k] if k >= 0 else "", "dur_us": float(dur[i]),
            "gap_us": float(gap[i]),
            "param_bytes": int(ev.param_bytes[row]), "in_bytes": int(ev.in_bytes[row]),
            "out_bytes": int(ev.out_bytes[row]), "flops": float(ev.flops[row]),
        })
        occ[name] += 1
    return out


def extract_workload(trace: Trace, *, rank: int | None = None) -> Workload:
    """The per-op workload of ``rank`` (default: the lowest) over the trace's steps.

    Steps whose op sequence differs from the most common one are skipped. Raises
    :class:`TraceFormatError` when the rank has no forward/backward events.
    """
    if rank is None:
        ranks = sorted(trace.ranks) or sorted(set(np.unique(trace.events.rank).tolist()))
        if not ranks:
            raise TraceFormatError(f"trace {trace.source or '(in memory)'} has no ranks")
        rank = ranks[0]
    steps = list(dict.fromkeys(trace.steps)) or sorted({int(s) for s in trace.events.step
                                                         if s >= 0})
    lv = step_leaves(trace, rank, steps)  # every step at once: linear in the steps
    if not len(lv):
        raise TraceFormatError(f"trace {trace.source or '(in memory)'}: rank {rank} has no "
                               "FW/BW/UPDATE events inside a step; cannot simulate it")
    # A step's op sequence is its leaves' (interned) names: (name, occurrence) keys follow.
    names = trace.events.name[lv.rows]
    sigs = [names[lv.leaf_slice(i)].tobytes() for i in range(len(lv))]
    common = Counter(sigs).most_common(1)[0][0]
    used = np.asarray([i for i, sig in enumerate(sigs) if sig == common], dtype=np.int64)
    last = lv.leaf_slice(int(used[-1]))
    base = _leaf_dicts(trace, lv.rows[last], lv.dur_us[last], lv.gap_us[last])
    if not any(o["phase"] == "F" for o in base) or not any(o["phase"] == "B" for o in base):
        raise TraceFormatError(f"trace {trace.source or '(in memory)'}: rank {rank} needs "
                               "both FW and BW events to simulate training")
    at = lv.first[used][:, None] + np.arange(len(base))  # (used steps) x (ops) leaf index
    durs, gaps = lv.dur_us[at], lv.gap_us[at]
    dur, gap = np.median(durs, axis=0), np.median(gaps, axis=0)
    pre = float(np.median(lv.pre_us[used]))
    post = float(np.median(lv.post_us[used]))
    step_us = float(np.median(lv.step_us[used]))
    # Rescale so that the sum of medians equals the median of the per-step sums (medians
    # do not add); per-step sums leave out the gaps spent waiting on communication.
    # (cumsum: summed in op order, as a Python sum would)
    ops_cum = np.cumsum(durs + gaps, axis=1)
    pre_s, post_s = lv.pre_us[used][:, None], lv.post_us[used][:, None]
    explained = float(np.median(ops_cum[:, -1] + lv.pre_us[used] + lv.post_us[used]))
    total = float(dur.sum() + gap.sum()) + pre + post
    scale = explained / total if total > 0 and explained > 0 else 1.0
    # each step's cumulative compute at every boundary: 0, its lead-in, each op, its tail
    curve = step_curve(scale * np.concatenate(
        [np.zeros_like(pre_s), pre_s, pre_s + ops_cum, pre_s + ops_cum[:, -1:] + post_s],
        axis=1))
    base, dur, gap, accum = fold_micro_batches(base, dur, gap)
    fw_index: dict[str, int] = {}
    fw_info: dict[str, dict[str, Any]] = {}
    for i, o in enumerate(base):
        if o["phase"] == "F":
            mod = o["name"][3:]
            fw_index.setdefault(mod, i)
            fw_info.setdefault(mod, o)
    # blocks by name (blocks.<i>, layers.<i>, h.<i>), else by structure
    named = any(block_index(m) >= 0 for m in fw_info)
    structural = {} if named else structural_blocks(list(fw_info))
    ordinal = {b: k for k, b in enumerate(dict.fromkeys(structural.values()))}
    ops: list[Op] = []
    for i, o in enumerate(base):
        phase = o["phase"]
        mod = o["name"].split(".", 1)[1] if "." in o["name"] else o["name"]
        info = fw_info.get(mod, o) if phase == "B" else o
        kind = o["kind"] or info["kind"]
        blk = -1 if phase == "U" else (block_index(mod) if named
                                       else ordinal.get(structural.get(mod, ""), -1))
        ops.append(Op(
            index=i, name=o["name"], phase=phase, module=mod if phase != "U" else "",
            kind=kind, dur_us=float(dur[i]) * scale, gap_us=float(gap[i]) * scale,
            param_bytes=o["param_bytes"] or (info["param_bytes"] if phase == "B" else 0),
            in_bytes=info["in_bytes"] if phase != "U" else 0,
            out_bytes=info["out_bytes"] if phase != "U" else 0,
            flops=(2.0 * info["flops"] if phase == "B" else info["flops"]) if phase != "U"
            else 0.0,
            block=blk, unit="" if phase == "U" else (
                structural[mod] if mod in structural else _unit_of(mod, blk)),
            fw=fw_index.get(mod, -1) if phase == "B" else -1,
        ))
    rinfo = trace.ranks.get(rank)
    meta: dict[str, Any] = dict(rinfo.meta) if rinfo is not None else {}
    placement = tp_placement(ops, meta)
    ops = assign_roles(ops, placement)
    ops = _with_saved(ops, meta.get("saved_activations"))
    ops = _with_held_params(ops, meta.get("params") or [])
    params = tuple((str(p.get("name", "")), int(p.get("bytes", 0)), str(p.get("dtype", "")))
                   for p in meta.get("params") or [])
    if not params:
        params = tuple((o.module + ".weight", o.param_bytes, "float32") for o in ops
                       if o.phase == "F" and o.param_bytes > 0)
    dtypes = Counter(d for _, _, d in params if d)
    dtype = dtypes.most_common(1)[0][0] if dtypes else "float32"
    buckets = tuple((int(b.get("bytes", 0)), tuple(b.get("params", ())))
                    for b in meta.get("buckets") or [])
    bufs = meta.get("buffers")
    buffers = (tuple((str(b.get("name", "")), int(b.get("bytes", 0))) for b in bufs)
               if isinstance(bufs, list) else None)
    mb = meta.get("micro_batch_size")
    peak, peak_kind = _measured_peak(trace, rank, steps)
    return Workload(
        ops=tuple(ops), micro_batch=int(mb) if mb else None, step_time_us=step_us * 1.0,
        pre_us=pre * scale, post_us=post * scale, params=params, dtype=dtype,
        device=str(meta.get("device", rinfo.device if rinfo else "cpu")),
        device_name=str(meta.get("device_name", "")),
        model=_model_info(meta, ops, int(mb) if mb else None), buckets=buckets,
        buffers=buffers, peak_memory_bytes=peak, peak_memory_kind=peak_kind,
        minor_faults_per_step=_faults_per_step(trace, rank), rank=rank,
        steps_used=int(used.size), tp_time_us=_tp_times(meta.get("tp_time_us"), len(ops)),
        traced_micro_batches=accum, tp_note=placement_summary(placement),
        meta={**meta, "backend": meta.get("backend", rinfo.backend if rinfo else "")},
        step_curve_us=curve,
    )


def _tp_times(given: Any, n_ops: int) -> dict[int, tuple[float, ...]]:
    """``meta["tp_time_us"]`` ({tp: [µs per op]}) kept where it has one time per op."""
    if not isinstance(given, dict):
        return {}
    out: dict[int, tuple[float, ...]] = {}
    for tp, times in given.items():
        if str(tp).isdigit() and int(tp) > 1 and isinstance(times, list) and \
                len(times) == n_ops:
            out[int(tp)] = tuple(float(x) for x in times)
    return out


def _with_saved(ops: list[Op], saved: Any) -> list[Op]:
    """Forward ops with their measured saved bytes (meta ``saved_activations.per_call``:
    ``[module path, bytes]`` per traced call of one forward, in order, matched to the ops by
    module and occurrence; a step of several micro-batches repeats that forward). The
    model's last forward op keeps at least its ``out_bytes``: the output is live at the loss
    (held by the caller, saved by the loss outside the model)."""
    if not isinstance(saved, dict) or not saved.get("per_call"):
        return ops
    calls: dict[str, list[int]] = {}
    for path, nbytes in saved["per_call"]:
        calls.setdefault(str(path), []).append(int(nbytes))
    seen: Counter[str] = Counter()
    fw = [i for i, o in enumerate(ops) if o.phase == "F"]
    if not fw or any(len(calls.get(ops[i].module, ())) <= 0 for i in fw):
        return ops  # the measured forward and this step's differ: keep out_bytes
    out = list(ops)
    for i in fw:
        o = ops[i]
        k = seen[o.module]
        seen[o.module] += 1
        got = calls[o.module]
        nbytes = got[k % len(got)]  # the measured forward was one micro-batch of several
        if i == fw[-1]:
            nbytes = max(nbytes, o.out_bytes)
        out[i] = replace(o, saved_bytes=nbytes)
    return out


def param_owner(name: str, modules: set[str]) -> str:
    """The traced module owning parameter ``name``: the longest module-path prefix of it in
    ``modules`` ("" when none does)."""
    mod = name.rsplit(".", 1)[0] if "." in name else ""
    while mod and mod not in modules:
        mod = mod.rsplit(".", 1)[0] if "." in mod else ""
    return mod


def _with_held_params(ops: list[Op], params: list[dict[str, Any]]) -> list[Op]:
    """Ops of modules that own no tensor of the parameter table (their weight is tied to
    another module's, e.g. a language-model head sharing the token embedding) hold 0
    parameter bytes in memory. Applied only when the table's names match the traced
    modules (the ops then own every table byte their ``param_bytes`` claim)."""
    names = [str(p.get("name", "")) for p in params]
    if not names:
        return ops
    modules = {o.module for o in ops if o.phase == "F"}
    owned: Counter[str] = Counter()
    for name, p in zip(names, params, strict=True):
        mod = param_owner(name, modules)
        if mod:
            owned[mod] += int(p.get("bytes", 0))
    tied = {o.module for o in ops if o.phase == "F" and o.param_bytes > 0 and not owned[o.module]}
    mismatch = any(owned[o.module] != o.param_bytes for o in ops
                   if o.phase == "F" and o.module not in tied and o.param_bytes > 0)
    if not tied or mismatch:
        return ops
    return [replace(o, held_param_bytes=0) if o.module in tied else o for o in ops]


def fold_micro_batches(base: list[dict[str, Any]], dur: np.ndarray, gap: np.ndarray,
                       ) -> tuple[list[dict[str, Any]], np.ndarray, np.ndarray, int]:
    """One micro-batch's ops of a step that ran ``k`` identical forward-backward passes
    (gradient accumulation: HF Trainer, Lightning, DeepSpeed, ``examples/train.py`` with a
    global batch over ``dp · micro_batch``; a pipeline stage's micro-batches, whose
    forwards and backwards interleave in the schedule's order, 1F1B's F F B B ...):
    ``(ops, dur, gap, k)``, each op's time the mean of its ``k`` copies.

    The forward and backward ops between the step's first forward and its last
    forward/backward op fold when the forward ops' names are one sequence repeated ``k >= 2``
    times and the backward ops' names another repeated ``k`` times (copy ``j`` of an op is
    its ``j``-th occurrence): into one forward pass then one backward pass. Anything else
    (one pass, recomputation's extra forwards) is left as it is (``k = 1``)."""
    phases = [o["phase"] for o in base]
    fb = [i for i, p in enumerate(phases) if p in ("F", "B")]
    if not fb or phases[fb[0]] != "F":
        return base, dur, gap, 1
    first, end = fb[0], fb[-1] + 1
    if any(p not in ("F", "B") for p in phases[first:end]):
        return base, dur, gap, 1
    names = [o["name"] for o in base]
    fpos = [i for i in range(first, end) if phases[i] == "F"]
    bpos = [i for i in range(first, end) if phases[i] == "B"]
    if not bpos:
        return base, dur, gap, 1
    k = sum(1 for i in fpos if names[i] == names[fpos[0]])

    def copies(pos: list[int]) -> np.ndarray | None:
        if k < 2 or len(pos) % k:
            return None
        n = len(pos) // k
        idx = np.asarray(pos).reshape(k, n)
        one = [names[i] for i in idx[0].tolist()]
        return idx if all([names[i] for i in row.tolist()] == one for row in idx[1:]) else None

    fi, bi = copies(fpos), copies(bpos)
    if fi is None or bi is None:
        return base, dur, gap, 1
    one = np.concatenate([fi[0], bi[0]])
    d1 = np.concatenate([dur[fi].mean(axis=0), dur[bi].mean(axis=0)])
    g1 = np.concatenate([gap[fi].mean(axis=0), gap[bi].mean(axis=0)])
    folded = base[:first] + [base[i] for i in one.tolist()] + base[end:]
    return (folded, np.concatenate([dur[:first], d1, dur[end:]]),
            np.concatenate([gap[:first], g1, gap[end:]]), k)


def assign_roles(ops: list[Op], placement: Placement) -> list[Op]:
    """``ops`` with the tensor-parallel roles of ``placement`` (forward modules it does not
    name are replicated; a backward op takes its forward module's role), then the ops
    between a column- and a row-parallel op marked ``inner``."""
    out = [replace(o, role=placement.roles.get(o.module, "replicated")) if o.phase == "F"
           else replace(o, role="replicated") for o in ops]
    return _mark_inner(out)


def _mark_inner(ops: list[Op]) -> list[Op]:
    """Ops between a column- and a row-parallel Linear (forward order) work on sharded data."""
    out = list(ops)
    inside = False
    for i, o in enumerate(out):
        if o.phase != "F":
            continue
        if o.role == "column":
            inside = True
        elif o.role == "row" or o.role == "vocab" or o.block < 0:
            inside = False
        elif inside and o.role == "replicated":
            out[i] = replace(o, role="inner")
    roles = {o.module: o.role for o in out if o.phase == "F"}
    return [replace(o, role=roles.get(o.module, o.role)) if o.phase == "B" else o for o in out]


def _model_info(meta: dict[str, Any], ops: list[Op], mb: int | None) -> dict[str, Any]:
    model = dict(meta.get("model") or {})
    if "seq" not in model and mb:
        for o in ops:
            if o.phase == "F" and o.kind == "Embedding" and o.role == "vocab" and o.in_bytes:
                seq, rem = divmod(o.in_bytes, 8 * mb)  # int64 token ids (batch, seq)
                if seq >= 1 and rem == 0:
                    model["seq"] = int(seq)
                break
    for name, _shape in _param_shapes(meta):
        if "hidden" not in model and name.endswith((".qkv.weight", ".c_attn.weight")):
            model["hidden"] = int(_shape[-1])
    return model


def _param_shapes(meta: dict[str, Any]) -> list[tuple[str, list[int]]]:
    return [(str(p.get("name", "")), list(p.get("shape") or [])) for p in meta.get("params") or []
            if p.get("shape")]


def _faults_per_step(trace: Trace, rank: int) -> float | None:
    """Median of the rank's per-step minor page faults (``minor_faults`` counter, from the
    STEP markers), None when the trace has none."""
    if "minor_faults" not in trace.counter_names:
        return None
    c = trace.counters
    vals = c.value[(c.rank == rank) & (c.series == trace.counter_names.index("minor_faults"))]
    return float(np.median(vals)) if vals.size else None


def _measured_peak(trace: Trace, rank: int, steps: list[int]) -> tuple[int, str]:
    """Peak memory the trace measured (CUDA allocated, else host RSS) and which one: the
    per-step peaks of the STEP markers (``peak_cuda_allocated_bytes``: the allocator's
    ``max_memory_allocated`` of the step) when the trace has them, else the largest periodic
    sample, which can miss a short-lived peak between samples."""
    info = trace.ranks.get(rank)
    device = (info.device if info else "cpu") or "cpu"
    want = (("peak_cuda_allocated_bytes", "cuda_allocated_bytes")
            if device.startswith("cuda") else ("peak_rss_bytes", "rss_bytes"))
    for series in want:
        if series in trace.counter_names:
            sid = trace.counter_names.index(series)
            c = trace.counters
            vals = c.value[(c.rank == rank) & (c.series == sid)]
            if vals.size and vals.max() > 0:
                return int(vals.max()), series
    return 0, ""
