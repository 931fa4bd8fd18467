"""Tensor parallelism by output channels, for models without the Megatron pattern (CNNs).

TrioSim's ``-case 3`` splits every layer whose ``trace.csv`` row has ``tpflag=1``
(convolution, linear, embedding and their backward; seed doc §1.2) over the GPUs. echo
splits the same layers by **output channels** (Conv: ``C_out``; Linear: ``out_features``;
Embedding: the embedding dimension): each of ``tp`` ranks computes ``1/tp`` of the channels
with ``1/tp`` of the weight (Megatron's column-parallel Linear with ``gather_output=True``,
Shoeybi et al. 2019 §3, applied per layer). So, per split layer (role ``channel``):

* time and parameters: ``1/tp`` of the measured time and of the parameter bytes;
* forward: the next layer needs every channel: an **all-gather of the output**
  (``out_bytes``, the whole gathered tensor) after the layer;
* backward: a rank holds the output gradient of its channels only, so its input gradient
  is a partial sum: an **all-reduce of the input gradient** (the forward's ``in_bytes``)
  after the layer's backward — none for the model's first layer, whose input (the data)
  needs no gradient;
* every other op (batch norm, activations, pooling, the loss, the optimizer) is
  replicated and keeps its time.

Layers it cannot split: ops of other kinds (a matmul written inline, attention cores) stay
replicated, and :func:`channel_summary` names them. Backward ops are paired with their
forward layer by module, else (TrioSim names forward and backward ops differently:
``aten::conv2d`` / ``ConvolutionBackward0``) in reverse order per kind family, as autograd
runs them; a backward op left unpaired is split without its all-reduce.

Applied only when the trace says its layers split this way (the TrioSim loader's
``meta["tp_split"] = "output_channels"``, from its ``tpflag`` column) and the model has no
column/row-parallel pattern: the Megatron path (:mod:`echo_sim.workload.tensor_parallel`)
is unchanged.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from echo_sim.workload.ops import CommHook, Op, Workload

__all__ = ["CHANNEL_SPLIT", "channel_hooks", "channel_parallel", "channel_summary",
           "splittable"]

CHANNEL_SPLIT = "output_channels"
"""``meta["tp_split"]`` of a trace whose layers tensor parallelism splits by channels."""


def _family(kind: str) -> str:
    """``Conv`` for every convolution kind, else the kind itself."""
    return "Conv" if kind.startswith(("Conv", "ConvTranspose")) else kind


def splittable(op: Op) -> bool:
    """True for an op split by output channels: Conv*, Linear, Embedding (not the update)."""
    return op.phase != "U" and _family(op.kind) in ("Conv", "Linear", "Embedding")


def channel_parallel(workload: Workload) -> Workload:
    """``workload`` with its Conv / Linear / Embedding ops in role ``channel`` (module
    docstring); unchanged when it has the Megatron column/row pattern."""
    roles = {o.role for o in workload.ops if o.phase == "F"}
    if "column" in roles and "row" in roles:
        return workload
    ops = list(workload.ops)
    fw = [o for o in ops if o.phase == "F"]
    first = fw[0].index if fw else -1
    by_module: dict[str, Op] = {}
    for o in fw:
        if splittable(o) and o.role == "replicated":
            ops[o.index] = replace(o, role="channel")
            by_module.setdefault(o.module, o)
    # pair backward ops: by module when unique, else reverse order per family
    stacks: dict[str, list[Op]] = {}
    for o in fw:
        if ops[o.index].role == "channel":
            stacks.setdefault(_family(o.kind), []).append(o)
    unique = {m for m in by_module if sum(1 for f in fw if f.module == m) == 1}
    for o in ops:
        if o.phase != "B" or not splittable(o) or o.role not in ("replicated", "channel"):
            continue
        stack = stacks.get(_family(o.kind), [])
        f = by_module.get(o.module) if o.module in unique else None
        if f is None and stack:
            f = stack.pop()
        elif f is not None and f in stack:
            stack.remove(f)
        if f is None:
            ops[o.index] = replace(o, role="channel", in_bytes=0)
            continue
        grad_in = 0 if f.index == first else f.in_bytes
        ops[o.index] = replace(o, role="channel", fw=f.index, in_bytes=grad_in,
                               param_bytes=o.param_bytes or f.param_bytes)
    return workload.with_ops(ops)


def channel_summary(workload: Workload) -> str:
    """One line: how many layers are split by channels and which kinds stay replicated."""
    fw = [o for o in workload.ops if o.phase == "F"]
    split = [o for o in fw if o.role == "channel"]
    kinds = sorted({o.kind for o in split})
    left = sorted({o.kind or o.module for o in fw if o.role == "replicated"
                   and o.dur_us > 0})
    return (f"tensor parallel by output channels: {len(split)} layer(s) split "
            f"({', '.join(kinds) or 'none'}), all-gather of each output, all-reduce of each "
            f"input gradient; replicated: {', '.join(left[:8]) or 'nothing'}"
            + (f" (+{len(left) - 8} more)" if len(left) > 8 else ""))


def channel_hooks(fw: Sequence[Op], bw: Sequence[Op], *, mb_scale: float) -> list[CommHook]:
    """Blocking collectives of the channel-split ops of one (virtual) stage.

    ``fw`` / ``bw``: the stage's forward ops in forward order and backward ops in backward
    order; ``mb_scale``: target ÷ traced micro-batch (activation sizes scale with it).
    """
    hooks: list[CommHook] = []
    for o in fw:
        if o.role == "channel" and o.out_bytes > 0:
            hooks.append(_hook(f"tp.fw.gather.{o.index}", "all_gather", o.out_bytes,
                               mb_scale, "F", o.index))
    for o in bw:
        if o.role == "channel" and o.in_bytes > 0:
            hooks.append(_hook(f"tp.bw.reduce.{o.index}", "all_reduce", o.in_bytes,
                               mb_scale, "B", o.index))
    return hooks


def _hook(name: str, collective: str, nbytes: int, mb_scale: float, phase: str,
          issue: int) -> CommHook:
    return CommHook(name=name, collective=collective, nbytes=int(round(nbytes * mb_scale)),
                    group="tp", channel="comm_tp", phase=phase, issue=issue, wait=-2)
