"""Fully sharded data parallelism: ZeRO-3 / PyTorch FSDP2 (``fully_shard``).

Rajbhandari et al. 2020 (ZeRO, §5.3) and Zhao et al. 2023 (PyTorch FSDP, §3): every
rank holds ``1/dp`` of each unit's parameters, gradients and optimizer state. Units are the
transformer blocks (``fully_shard(block)``) — or, for models without blocks, the top-level
children — plus the root (everything outside the blocks: embeddings, final norm, head).

Per step and micro-batch (``reshard_after_forward=True``, FSDP2's default):

* forward: all-gather each unit's parameters (the gathered size, nccl-tests convention)
  before its first op; the root is gathered once at the start and stays unsharded
  through backward (FSDP2 keeps the root's parameters after forward);
* backward: all-gather each block unit again before its backward;
* after a unit's backward: reduce-scatter its gradients (last micro-batch only, as with
  ``set_requires_gradient_sync(False)`` during accumulation); the optimizer waits for all.

Overlap (``overlap=True``, CUDA streams): the all-gather of the next unit is issued when the
current unit's all-gather is (FSDP2's implicit forward prefetch as the CPU runs ahead;
explicit backward prefetch), on its own channel, and reduce-scatters run on another
channel behind later backward compute. ``overlap=False`` models a CPU (gloo) job: FSDP2
calls the collectives synchronously (``async_op=False`` without streams), so every
all-gather and reduce-scatter blocks compute. With pipeline parallelism parameters are not
resharded after forward (torchtitan's setting): one all-gather per step, none in backward.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from echo_sim.workload.ops import CommHook, Op

__all__ = ["apply_fsdp", "fsdp_units"]

ROOT = "<root>"


def fsdp_units(ops: Sequence[Op], has_blocks: bool) -> dict[str, list[Op]]:
    """FSDP unit key -> its ops (in the given order); ops outside blocks form ``<root>``."""
    units: dict[str, list[Op]] = {}
    for o in ops:
        key = o.unit if (o.block >= 0 or not has_blocks) else ROOT
        units.setdefault(key, []).append(o)
    return units


def apply_fsdp(
    fw: Sequence[Op],
    bw: Sequence[Op],
    *,
    has_blocks: bool,
    param_bytes: Callable[[Op], float],
    overlap: bool,
    reshard_after_forward: bool = True,
) -> list[CommHook]:
    """All-gather / reduce-scatter hooks for one (virtual) stage.

    ``fw``: forward ops in forward order; ``bw``: backward ops in backward order;
    ``param_bytes``: bytes of an op's parameters this rank would hold unsharded by FSDP
    (already divided by tensor parallelism).
    """
    hooks: list[CommHook] = []
    fw_units = fsdp_units(fw, has_blocks)
    bw_units = fsdp_units(bw, has_blocks)
    size = {u: int(sum(param_bytes(o) for o in ops)) for u, ops in fw_units.items()}
    when_f = "all" if reshard_after_forward else "first"
    pos_f = {o.index: k for k, o in enumerate(fw)}
    pos_b = {o.index: k for k, o in enumerate(bw)}

    def before(seq: Sequence[Op], pos: dict[int, int], op: Op) -> int:
        k = pos[op.index]
        return seq[k - 1].index if k > 0 else -1

    # forward all-gathers
    if size.get(ROOT, 0) > 0:
        hooks.append(_hook(f"fsdp.ag.fw.{ROOT}", "all_gather", size[ROOT], "F", -1,
                           fw_units[ROOT][0].index, when_f, overlap))
    order = [u for u in fw_units if u != ROOT]
    prev_issue = -1
    for u in order:
        first = fw_units[u][0]
        issue = before(fw, pos_f, first)
        if size[u] > 0:
            hooks.append(_hook(f"fsdp.ag.fw.{u}", "all_gather", size[u], "F",
                               prev_issue if overlap else issue, first.index, when_f, overlap))
        prev_issue = issue
    # backward all-gathers (the root stays gathered)
    if reshard_after_forward:
        prev_issue = -1
        for u in [u for u in bw_units if u != ROOT]:
            first = bw_units[u][0]
            issue = before(bw, pos_b, first)
            if size.get(u, 0) > 0:
                hooks.append(_hook(f"fsdp.ag.bw.{u}", "all_gather", size[u], "B",
                                   prev_issue if overlap else issue, first.index, "all",
                                   overlap))
            prev_issue = issue
    # reduce-scatters after each unit's last backward op
    for u, ops in sorted(bw_units.items(), key=lambda kv: pos_b[kv[1][-1].index]):
        if size.get(u, 0) > 0:
            hooks.append(CommHook(
                name=f"fsdp.rs.{u}", collective="reduce_scatter", nbytes=size[u], group="dp",
                channel="comm_rs" if overlap else "comm_dp", phase="B", issue=ops[-1].index,
                wait=-1 if overlap else -2, when="last", chain=True))
    return hooks


def _hook(name: str, coll: str, nbytes: int, phase: str, issue: int, wait: int, when: str,
          overlap: bool) -> CommHook:
    return CommHook(name=name, collective=coll, nbytes=nbytes, group="dp",
                    channel="comm_ag" if overlap else "comm_dp", phase=phase, issue=issue,
                    wait=wait, when=when, chain=True)
