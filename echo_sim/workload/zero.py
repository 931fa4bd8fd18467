"""DeepSpeed ZeRO-1 and ZeRO-2: the partitioned optimizer of ``DeepSpeedZeroOptimizer``.

Rajbhandari et al. 2020 ("ZeRO", §5.1-5.2 and §7.2.1): with ``N_d`` data-parallel ranks,
ZeRO-1 (``P_os``) partitions the optimizer states, ZeRO-2 (``P_os+g``) also the gradients;
each rank updates only its ``1/N_d`` partition of the parameters, so the optimizer step is
``UPDATE / N_d`` (``make_plan``). Per step the gradients are reduce-scattered (``Ψ``
elements) and the updated parameters all-gathered (``Ψ``): ``2Ψ``, the volume of DDP's one
all-reduce (a ring all-reduce is a reduce-scatter plus an all-gather,
:mod:`echo_sim.cost.collectives`). ZeRO-3 is :mod:`echo_sim.workload.fsdp`.

What DeepSpeed does (``deepspeed/runtime/zero/stage_1_and_2.py``, ``runtime/utils.py``),
with its ``zero_optimization`` defaults (``runtime/zero/config.py``):

* gradients are copied, in the order backward produces them, into an "ipg" bucket of
  ``reduce_bucket_size`` elements (default ``5e8``); a bucket is reduced when the next
  gradient would overflow it, the rest after backward. ZeRO-2 reduces from backward hooks
  on **every** micro-batch (its gradients are kept only as the rank's partition); ZeRO-1
  accumulates whole gradients and reduces on the last micro-batch only;
* ``overlap_comm`` (default off for stages 1-2): on, the reductions run on a side stream
  behind backward (like DDP's buckets); off, on the compute stream, so each blocks the
  backward ops after it;
* the reduction is a reduce-scatter (per-rank ``reduce`` calls, ``reduce_scatter: true``);
  with ``use_multi_rank_bucket_allreduce`` (newer DeepSpeed, default on) or
  ``reduce_scatter: false`` it is an all-reduce of the bucket (``2Ψ``, so ``3Ψ`` a step);
* after the optimizer step, ``all_gather_dp_groups`` gathers the updated 16-bit
  parameters: one ``all_gather_into_tensor`` of the whole flat group (torch >= 1.13 has it;
  ``allgather_bucket_size`` only splits the older all-gather loop), blocking before the
  next step.

Memory (:func:`~echo_sim.cost.memory_model.zero_state_bytes`): ``kΨ`` parameters,
``kΨ`` (ZeRO-1) or ``kΨ/N_d`` (ZeRO-2) gradients and ``4Ψ·(states + mixed)/N_d`` optimizer
state, plus the ipg buffers (``contiguous_gradients``, default on): ``reduce_bucket_size``
elements of the parameters' dtype, two with ``overlap_comm``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from echo_sim.errors import ConfigError
from echo_sim.workload.ops import CommHook, Op

__all__ = ["DEEPSPEED_REDUCE_BUCKET_ELEMS", "ZERO_STAGES", "ZeroSpec", "apply_zero",
           "zero_buckets", "zero_spec"]

ZERO_STAGES: tuple[int, ...] = (0, 1, 2, 3)
DEEPSPEED_REDUCE_BUCKET_ELEMS = 500_000_000
"""DeepSpeed's ``zero_optimization.reduce_bucket_size`` default (elements)."""


@dataclass(frozen=True, kw_only=True)
class ZeroSpec:
    """ZeRO-1/2 as DeepSpeed runs it (module docstring).

    ``reduce_bucket_elems``: ``reduce_bucket_size`` (elements); ``overlap_comm``: reductions
    behind backward; ``grad_collective``: ``reduce_scatter`` (ZeRO paper) or ``all_reduce``
    (DeepSpeed's ``use_multi_rank_bucket_allreduce`` / ``reduce_scatter: false``);
    ``source``: where the settings came from (said in simulate's notes).
    """

    stage: int
    reduce_bucket_elems: int = DEEPSPEED_REDUCE_BUCKET_ELEMS
    overlap_comm: bool = False
    grad_collective: str = "reduce_scatter"
    source: str = "DeepSpeed's defaults"

    def __post_init__(self) -> None:
        if self.stage not in (1, 2):
            raise ConfigError(f"zero_stage={self.stage!r}: ZeroSpec models stages 1 and 2 "
                              "(3 is FSDP)")
        if not isinstance(self.reduce_bucket_elems, int) or self.reduce_bucket_elems < 1:
            raise ConfigError(f"reduce_bucket_size={self.reduce_bucket_elems!r} must be an "
                              "integer >= 1")
        if self.grad_collective not in ("reduce_scatter", "all_reduce"):
            raise ConfigError(f"grad_collective={self.grad_collective!r}; valid: "
                              "reduce_scatter, all_reduce")

    def ipg_buffer_bytes(self, elem_bytes: int, grad_bytes: float, *, is_cpu: bool) -> float:
        """Bytes of the ipg gradient buffers: ``reduce_bucket_size · elem_bytes`` each, two
        with ``overlap_comm``. On a CPU target only the touched part is resident (the pages
        of an untouched ``torch.empty`` are never faulted in): at most ``grad_bytes``."""
        one = float(self.reduce_bucket_elems) * elem_bytes
        if is_cpu:
            one = min(one, grad_bytes)
        return one * (2 if self.overlap_comm else 1)

    def describe(self) -> str:
        """One line for simulate's notes."""
        how = ("overlapping backward (overlap_comm)" if self.overlap_comm else
               "on the compute stream (overlap_comm off)")
        when = "every micro-batch" if self.stage == 2 else "the last micro-batch"
        return (f"DeepSpeed ZeRO-{self.stage}: gradients {self.grad_collective.replace('_', '-')}"
                f" in {self.reduce_bucket_elems:,}-element buckets (reduce_bucket_size) on "
                f"{when}, {how}; optimizer step on 1/dp of the parameters; updated "
                f"parameters all-gathered after it ({self.source})")


def _flag(value: Any) -> bool | None:
    return value if isinstance(value, bool) else None


def zero_spec(stage: int, training: Mapping[str, Any] | None = None) -> ZeroSpec:
    """The :class:`ZeroSpec` of ``stage`` (1 or 2), with the settings meta.json's DeepSpeed
    ``training.zero_config`` records (``reduce_bucket_size``, ``overlap_comm``,
    ``reduce_scatter``, ``use_multi_rank_bucket_allreduce``), DeepSpeed's defaults for the
    rest (``5e8`` elements, ``overlap_comm`` off, reduce-scatter)."""
    cfg = training.get("zero_config") if training else None
    if not isinstance(cfg, Mapping) or str((training or {}).get("framework")) != "deepspeed":
        return ZeroSpec(stage=stage)
    taken: list[str] = []
    kw: dict[str, Any] = {}
    bucket = cfg.get("reduce_bucket_size")
    if isinstance(bucket, (int, float)) and not isinstance(bucket, bool) and bucket >= 1:
        kw["reduce_bucket_elems"] = int(bucket)
        taken.append("reduce_bucket_size")
    if _flag(cfg.get("overlap_comm")) is not None:
        kw["overlap_comm"] = cfg["overlap_comm"]
        taken.append("overlap_comm")
    rs, multi = _flag(cfg.get("reduce_scatter")), _flag(cfg.get("use_multi_rank_bucket_allreduce"))
    if rs is False or (rs is not False and multi is True):
        kw["grad_collective"] = "all_reduce"
    if rs is not None or multi is not None:
        taken += [k for k, v in (("reduce_scatter", rs),
                                 ("use_multi_rank_bucket_allreduce", multi)) if v is not None]
    source = (f"{', '.join(taken)} from meta.json training.zero_config, DeepSpeed's defaults "
              "for the rest" if taken else "DeepSpeed's defaults")
    return ZeroSpec(stage=stage, source=source, **kw)


def zero_buckets(sizes: Sequence[float], cap_bytes: float) -> list[list[int]]:
    """Indices of ``sizes`` (gradient bytes in ready order) grouped as DeepSpeed's ipg
    bucket groups them: a bucket is reduced *before* adding a gradient that would overflow
    it (``elements_in_ipg_bucket + numel > reduce_bucket_size``), so a bucket passes the cap
    only when one gradient alone does."""
    out: list[list[int]] = []
    cur: list[int] = []
    acc = 0.0
    for i, s in enumerate(sizes):
        if cur and acc + s > cap_bytes:
            out.append(cur)
            cur, acc = [], 0.0
        cur.append(i)
        acc += s
    if cur:
        out.append(cur)
    return out


def apply_zero(bw: Sequence[Op], params: Sequence[tuple[str, float]], spec: ZeroSpec, *,
               elem_bytes: int) -> list[CommHook]:
    """Gradient-reduction and parameter all-gather hooks of one (virtual) stage.

    ``bw``: the stage's backward ops in execution order; ``params``: (name, bytes this rank
    holds) in registration order, as for :func:`~echo_sim.workload.data_parallel.
    apply_data_parallel`. A bucket is issued after the backward op that makes its last
    gradient ready (DeepSpeed issues it one gradient later, when the next would overflow
    it: the same point up to one op). The all-gather (phase ``"U"``) is issued after the
    optimizer step and blocks the end of the step.
    """
    if not bw or not params:
        return []
    pos = {o.module: k for k, o in enumerate(bw)}
    last = len(bw) - 1

    def ready(name: str) -> int:
        mod = name.rsplit(".", 1)[0] if "." in name else ""
        while mod:
            if mod in pos:
                return pos[mod]
            mod = mod.rsplit(".", 1)[0] if "." in mod else ""
        return last

    # gradient-ready order; one module's weight and bias keep reverse registration order
    order = sorted(range(len(params)), key=lambda i: (ready(params[i][0]), -i))
    sizes = [float(params[i][1]) for i in order]
    when = "all" if spec.stage == 2 else "last"
    hooks: list[CommHook] = []
    for k, b in enumerate(zero_buckets(sizes, float(spec.reduce_bucket_elems) * elem_bytes)):
        nbytes = int(sum(sizes[i] for i in b))
        at = max(ready(params[order[i]][0]) for i in b)
        if nbytes <= 0:
            continue
        hooks.append(CommHook(
            name=f"zero.grads{k}", collective=spec.grad_collective, nbytes=nbytes, group="dp",
            channel="comm_dp", phase="B",
            issue=bw[at if spec.stage == 2 or spec.overlap_comm else last].index,
            wait=-1 if spec.overlap_comm else -2, when=when, chain=True))
    total = int(sum(sizes))
    if total > 0:
        hooks.append(CommHook(name="zero.params", collective="all_gather", nbytes=total,
                              group="dp", channel="comm_dp", phase="U", issue=-1, wait=-2,
                              when="last", chain=True))
    return hooks
