"""Tensor parallelism, the Megatron-LM pattern (Shoeybi et al. 2019, §3).

Within a transformer block the first Linear of attention and MLP (``qkv`` / ``fc1``) is
column-parallel and the second (``proj`` / ``fc2``) row-parallel; the ops between them
(attention core, activation) run on the column shard. The token embedding and the output
head are vocab-parallel. So, with ``tp`` ranks:

* sharded ops (column, row, vocab, inner) take ``1/tp`` of their measured time, and hold
  ``1/tp`` of their parameters; layer norms, residual adds and position embeddings are
  replicated and keep their time;
* forward: one all-reduce of the row-parallel output (``out_bytes``) after ``proj`` and
  after ``fc2`` — Megatron's ``g`` operator; one after the vocab-parallel embedding;
* backward: one all-reduce of the input gradient (the column op's ``in_bytes``) after the
  backward of every column op — Megatron's ``f`` operator, which each ColumnParallelLinear
  applies to its own input (as DTensor's ``ColwiseParallel`` does); one after the head's;

i.e. 2 + 2 all-reduces per block and step with fused ``qkv`` / ``fc1``, 2 + 5 with separate
q/k/v and gate/up projections (a Llama's). With activation recomputation the forward
all-reduces run again in backward. All of them block the compute stream.

Which modules take which role: :func:`~echo_sim.workload.tp_plan.tp_placement` at extraction
— the model's own structure (:mod:`echo_sim.workload.tp_structure`: nn.Linear and HF Conv1D,
fused or separate q/k/v, GQA, gated MLPs, post- or pre-norm), or the transformers
``tp_plan`` the trace recorded — or a plan the user gives (:func:`apply_tp_plan`, ``--tp-plan``).

Models without this pattern whose trace says its layers split by output channels (CNNs
from TrioSim) take role ``channel`` instead: :mod:`echo_sim.workload.channel_parallel`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from echo_sim.errors import ConfigError
from echo_sim.workload.channel_parallel import channel_hooks
from echo_sim.workload.ops import CommHook, Op, Workload, assign_roles
from echo_sim.workload.tp_plan import TpPlan, plan_roles
from echo_sim.workload.tp_structure import placement_summary

__all__ = ["SHARDED_ROLES", "apply_tp_plan", "check_tensor_parallel", "tp_factors", "tp_hooks",
           "tp_param_bytes", "traced_tp_workload"]

SHARDED_ROLES: frozenset[str] = frozenset({"column", "row", "vocab", "inner", "channel"})


def check_tensor_parallel(workload: Workload, tp: int) -> None:
    """:class:`ConfigError` if ``tp > 1`` cannot shard this model: no column/row-parallel
    pair was placed (the message names, in one line, the projections left unplaced), or
    ``tp`` does not divide the attention heads, the key/value heads (GQA) or the hidden
    size the trace records."""
    if tp <= 1:
        return
    roles = {o.role for o in workload.ops if o.phase == "F"}
    if "column" not in roles or "row" not in roles:
        if "channel" in roles:  # split by output channels (echo_sim.workload.channel_parallel)
            return
        where = f" ({workload.tp_note})" if workload.tp_note else ""
        raise ConfigError(f"tp={tp}: no column/row-parallel projection pair found in the "
                          f"model{where}; give tp_plan (--tp-plan FILE) or use tp=1")
    for key in ("heads", "kv_heads", "hidden"):
        val = workload.model.get(key)
        if val and int(val) % tp:
            raise ConfigError(f"tp={tp} does not divide {key}={int(val)}")


def apply_tp_plan(workload: Workload, plan: TpPlan) -> Workload:
    """``workload`` with the roles of ``plan`` (:mod:`echo_sim.workload.tp_plan`) in place of
    the ones extraction found; ``tp_note`` says so in one line."""
    placement = plan_roles(workload.ops, plan)
    return replace(workload.with_ops(assign_roles(list(workload.ops), placement)),
                   tp_note=placement_summary(placement))


def tp_param_bytes(op: Op, tp: int) -> float:
    """Parameter bytes of ``op`` held by one tensor-parallel rank (0 for a module whose
    weight is tied to another's: ``Op.held_param_bytes``)."""
    held = op.param_bytes if op.held_param_bytes < 0 else op.held_param_bytes
    return held / tp if op.role in SHARDED_ROLES else float(held)


def tp_factors(ops: Sequence[Op], tp: int) -> tuple[list[float], list[float]]:
    """Per op (by index): factor on its measured duration and on its trailing host gap.

    The gap after an op is sharded work when it lies inside a sharded region (forward:
    after a column/inner op and before an inner/row op — the attention core between
    ``qkv`` and ``proj``; backward: the mirror image); other gaps are host overhead or
    replicated ops and keep their time.
    """
    n = max((o.index for o in ops), default=-1) + 1
    dur_f, gap_f = [1.0] * n, [1.0] * n
    if tp <= 1:
        return dur_f, gap_f
    seq = list(ops)
    for i, o in enumerate(seq):
        if o.role in SHARDED_ROLES:
            dur_f[o.index] = 1.0 / tp
        nxt = seq[i + 1] if i + 1 < len(seq) else None
        if nxt is None or nxt.phase != o.phase:
            continue
        if o.phase == "F" and o.role in ("column", "inner") and nxt.role in ("inner", "row"):
            gap_f[o.index] = 1.0 / tp
        if o.phase == "B" and o.role in ("row", "inner") and nxt.role in ("inner", "column"):
            gap_f[o.index] = 1.0 / tp
    return dur_f, gap_f


def tp_hooks(fw: Sequence[Op], bw: Sequence[Op], *, mb_scale: float,
             recompute: bool = False) -> list[CommHook]:
    """Blocking tensor-parallel all-reduces for one (virtual) stage's ops.

    ``fw`` / ``bw``: the stage's forward ops in forward order and backward ops in backward
    order; ``mb_scale``: target micro-batch ÷ traced micro-batch (activation sizes scale).
    """
    hooks: list[CommHook] = []
    by_module = {o.module: o for o in fw}
    for o in fw:
        if o.role == "row" or (o.role == "vocab" and o.kind == "Embedding"):
            hooks.append(_ar(f"tp.fw.{o.module}", o.out_bytes, mb_scale, "F", o.index))
    for o in bw:
        f = by_module.get(o.module)
        if f is None:
            continue
        if o.role == "column":
            # each column-parallel Linear all-reduces its own input gradient (Megatron's
            # ColumnParallelLinear and DTensor's ColwiseParallel alike): separate q/k/v or
            # gate/up projections pay one each, a fused qkv / fc1 one for the group
            hooks.append(_ar(f"tp.bw.{o.module}", f.in_bytes, mb_scale, "B", o.index))
        elif o.role == "vocab" and o.kind != "Embedding":
            hooks.append(_ar(f"tp.bw.{o.module}", f.in_bytes, mb_scale, "B", o.index))
        if recompute and o.role == "row" and o.module in by_module:
            hooks.append(_ar(f"tp.recompute.{o.module}", f.out_bytes, mb_scale, "B", o.index))
    return hooks + channel_hooks(fw, bw, mb_scale=mb_scale)


def _ar(name: str, nbytes: int, mb_scale: float, phase: str, issue: int) -> CommHook:
    return CommHook(name=name, collective="all_reduce", nbytes=int(round(nbytes * mb_scale)),
                    group="tp", channel="comm_tp", phase=phase, issue=issue, wait=-2)


def traced_tp_workload(workload: Workload, tp: int, traced_all_reduces: float) -> Workload:
    """A workload traced on one rank of ``tp``-way tensor parallelism, as the whole model's.

    Its column/row/inner (and vocab) ops ran on shards: their durations and sharded gaps are
    multiplied back by ``tp`` (the inverse of :func:`tp_factors`), their parameters by
    ``tp``, and the optimizer step by the whole model's parameters over the rank's, so sharding it again at any degree prices the shards the target runs (at the
    traced degree, exactly the traced times). ``traced_all_reduces``: the tensor-parallel
    all-reduces the traced rank issued per micro-batch; when they match the count of a plan
    without vocabulary parallelism (and not one with it), the traced embedding and head were
    replicated, and are kept so.
    """
    if tp <= 1:
        return workload
    ops = list(workload.ops)
    note = ""
    if any(o.role == "vocab" for o in ops):
        plain = [replace(o, role="replicated") if o.role == "vocab" else o for o in ops]
        with_vocab = len(tp_hooks([o for o in ops if o.phase == "F"],
                                  [o for o in reversed(ops) if o.phase == "B"], mb_scale=1.0))
        without = len(tp_hooks([o for o in plain if o.phase == "F"],
                               [o for o in reversed(plain) if o.phase == "B"], mb_scale=1.0))
        if round(traced_all_reduces) == without != with_vocab:
            ops = plain
            note = (f"; the traced embedding and head were replicated ({without} tensor-"
                    f"parallel all-reduces per micro-batch, as without vocabulary parallelism)")
    dur_f, gap_f = tp_factors(ops, tp)
    # the optimizer step updated the rank's shards: the whole model's is larger by the ratio
    # of its parameters to the rank's
    local = sum(o.param_bytes for o in ops if o.phase == "F")
    whole = sum(o.param_bytes * (tp if o.role in SHARDED_ROLES else 1) for o in ops
                if o.phase == "F")
    upd = whole / local if local > 0 else 1.0
    ops = [replace(o, dur_us=o.dur_us * upd, gap_us=o.gap_us * upd) if o.phase == "U" else o
           for o in ops]
    ops = [replace(o, dur_us=o.dur_us / dur_f[o.index], gap_us=o.gap_us / gap_f[o.index],
                   param_bytes=o.param_bytes * tp if o.role in SHARDED_ROLES else o.param_bytes,
                   held_param_bytes=o.held_param_bytes * tp
                   if o.role in SHARDED_ROLES and o.held_param_bytes > 0 else o.held_param_bytes)
           for o in ops]
    tp_note = (f"tensor parallelism: traced at tp={tp}, its sharded ops' times taken x{tp} as the "
               f"whole model's{note}")
    return replace(workload, ops=tuple(ops),
                   tp_note="; ".join(x for x in (workload.tp_note, tp_note) if x))
