"""Data parallelism: PyTorch DDP gradient buckets, and a parameter-server variant.

DDP (Li et al. 2020, "PyTorch Distributed", §3.2; ``torch/nn/parallel/distributed.py``):

* parameters are packed into buckets in **reverse registration order** (gradients of the
  last layers are ready first); the first bucket is capped at 1 MiB
  (``dist._DEFAULT_FIRST_BUCKET_BYTES``), the others at ``bucket_cap_mb`` = 25 MiB; a bucket
  closes once it reaches its cap (so it may pass it by one tensor);
* a bucket's all-reduce is launched when the last of its gradients is ready (the backward
  of the module that owns it) and buckets are reduced in order, one after another on the
  communication stream — overlapping the rest of backward;
* the optimizer step waits for every bucket; with gradient accumulation (``no_sync``) only
  the last micro-batch's backward reduces.

When the trace itself came from a DDP job, the buckets DDP built (``meta.json`` buckets)
are used as they are.

Post-backward (``post``; Megatron-LM's local DDP of 2021-2022, Narayanan et al. 2021 §4 and
Megatron-DeepSpeed): gradients live in one contiguous buffer that is all-reduced once, after
the last micro-batch's backward, with nothing left to overlap (overlap arrived later with
Megatron-core's ``--overlap-grad-reduce``).

Parameter server (BytePS-style push/pull, Jiang et al. 2020): each bucket is pushed
(priced as a ``reduce`` over the group) and then pulled (a ``broadcast``); pushes and pulls
use separate channels so pulls overlap later pushes; the optimizer waits for every pull.
"""

from __future__ import annotations

from collections.abc import Sequence

from echo_sim.errors import ConfigError
from echo_sim.workload.ops import CommHook, Op

__all__ = [
    "DEFAULT_BUCKET_CAP_BYTES",
    "DP_MODES",
    "FIRST_BUCKET_BYTES",
    "apply_data_parallel",
    "assign_buckets",
    "ddp_buffer_hooks",
]

DEFAULT_BUCKET_CAP_BYTES = 25 * 1024 * 1024
FIRST_BUCKET_BYTES = 1024 * 1024
DP_MODES: tuple[str, ...] = ("ddp", "ps", "post")


def assign_buckets(sizes: Sequence[int], *, cap_bytes: int = DEFAULT_BUCKET_CAP_BYTES,
                   first_bytes: int = FIRST_BUCKET_BYTES) -> list[list[int]]:
    """Indices of ``sizes`` (already in reduction order) grouped into DDP buckets."""
    buckets: list[list[int]] = []
    cur: list[int] = []
    acc = 0
    limit = min(first_bytes, cap_bytes)
    for i, s in enumerate(sizes):
        cur.append(i)
        acc += int(s)
        if acc >= limit:
            buckets.append(cur)
            cur, acc, limit = [], 0, cap_bytes
    if cur:
        buckets.append(cur)
    return buckets


def apply_data_parallel(
    bw: Sequence[Op],
    params: Sequence[tuple[str, float]],
    *,
    mode: str = "ddp",
    cap_bytes: int = DEFAULT_BUCKET_CAP_BYTES,
    traced_buckets: Sequence[tuple[int, Sequence[str]]] = (),
) -> list[CommHook]:
    """Gradient-synchronisation hooks for one (virtual) stage.

    ``bw``: the stage's backward ops in execution order; ``params``: (name, bytes held by
    this rank) of the stage's parameters in registration order; ``traced_buckets``: DDP's
    own buckets ((bytes, parameter names), in reduction order) when the trace has them (their
    bytes are re-summed from ``params``, so tensor-parallel sharding applies). Parameters whose module has no backward op are ready at the end of
    backward.
    """
    if mode not in DP_MODES:
        raise ConfigError(f"unknown data-parallel mode {mode!r}; valid: {', '.join(DP_MODES)}")
    if not bw:
        return []
    pos = {o.module: k for k, o in enumerate(bw)}
    last = len(bw) - 1

    def ready(name: str) -> int:
        mod = name.rsplit(".", 1)[0]
        while mod:
            if mod in pos:
                return pos[mod]
            mod = mod.rsplit(".", 1)[0] if "." in mod else ""
        return last

    if mode == "post":
        total = int(sum(b for _, b in params))
        return [CommHook(name="dp.grads", collective="all_reduce", nbytes=total, group="dp",
                         channel="comm_dp", phase="B", issue=bw[last].index, wait=-1,
                         when="last", chain=True)] if total > 0 else []
    groups: list[tuple[int, int]] = []  # (bytes, ready position in bw)
    names_here = {n for n, _ in params}
    if traced_buckets and all(all(p in names_here for p in ps) for _, ps in traced_buckets
                              if ps) and sum(len(ps) for _, ps in traced_buckets):
        nbytes_of = dict(params)
        for _, ps in traced_buckets:
            if ps:
                groups.append((int(sum(nbytes_of[p] for p in ps)),
                               max(ready(p) for p in ps)))
    else:
        # DDP rebuilds its buckets in gradient-ready order after the first iteration;
        # ties (one module's weight and bias) keep reverse registration order.
        order = sorted(range(len(params)), key=lambda i: (ready(params[i][0]), -i))
        sizes = [params[i][1] for i in order]
        for b in assign_buckets([int(s) for s in sizes], cap_bytes=cap_bytes):
            members = [order[i] for i in b]
            groups.append((int(sum(params[i][1] for i in members)),
                           max(ready(params[i][0]) for i in members)))
    hooks: list[CommHook] = []
    for k, (nbytes, at) in enumerate(groups):
        if nbytes <= 0:
            continue
        issue = bw[at].index
        if mode == "ddp":
            hooks.append(CommHook(name=f"ddp.bucket{k}", collective="all_reduce",
                                  nbytes=nbytes, group="dp", channel="comm_dp", phase="B",
                                  issue=issue, wait=-1, when="last", chain=True))
        else:
            hooks.append(CommHook(name=f"ps.push{k}", collective="reduce", nbytes=nbytes,
                                  group="dp", channel="comm_push", phase="B", issue=issue,
                                  wait=-3, when="last", chain=True))
            hooks.append(CommHook(name=f"ps.pull{k}", collective="broadcast", nbytes=nbytes,
                                  group="dp", channel="comm_pull", phase="B", issue=issue,
                                  wait=-1, when="last", after=len(hooks) - 1, chain=True))
    return hooks


_BATCH_NORM = ("BatchNorm1d", "BatchNorm2d", "BatchNorm3d", "SyncBatchNorm")


def ddp_buffer_hooks(fw: Sequence[Op], buffers: Sequence[int] | None = None) -> list[CommHook]:
    """DDP's buffer broadcast (``broadcast_buffers=True``, the default) before each forward.

    DDP's ``forward`` first broadcasts the module's buffers from rank 0 (torch
    ``DistributedDataParallel._sync_buffers``: every buffer, persistent or not, coalesced per
    dtype by ``dist._broadcast_coalesced``), blocking the forward. ``buffers``: the bytes of
    each buffer of this stage's modules, from the trace's ``meta.json`` (BatchNorm's running
    statistics, a transformer's position ids or masks); priced as one broadcast of their sum.
    Traces made before ``meta.json`` listed them (``None``) know BatchNorm's only: its
    ``running_mean`` and ``running_var`` (as many bytes as its ``weight`` + ``bias``
    parameters) and its int64 ``num_batches_tracked``::

        nbytes = sum over BatchNorm ops of (param_bytes + 8)

    A model without buffers broadcasts nothing (DDP skips the call).
    """
    if buffers is not None:
        nbytes = int(sum(buffers))
    else:
        nbytes = sum(o.param_bytes + 8 for o in fw if o.kind in _BATCH_NORM)
    if not fw or nbytes <= 0:
        return []
    return [CommHook(name="ddp.buffers", collective="broadcast", nbytes=nbytes, group="dp",
                     channel="comm_dp", phase="F", issue=-1, wait=fw[0].index)]
