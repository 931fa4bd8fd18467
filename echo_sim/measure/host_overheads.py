"""Microbenchmarks of the CPU-side costs a gloo job pays that a one-process trace cannot show.

Run inside :mod:`echo_sim.measure.profile_comm`'s worker processes (the process group is
up; every rank calls :func:`measure_host_overheads` at once) when the backend is gloo on CPU.
Each quantity is measured as many short samples (one call each, well under a scheduler
time slice, so that on a loaded host some run unpreempted), kept raw, so that
:mod:`echo_sim.cost.cpu_overheads` takes the fastest wall-time sample (or the median of
thread CPU times, which other load does not inflate) as the intrinsic cost and reports the
spread:

* ``contention_alone_us`` / ``contention_busy_us``: the same fixed compute on rank 0 while
  the other ranks block in a collective, then on every rank at once — interleaved round by
  round, so that host load drifting during the measurement hits both alike (the work:
  ``contention_work_products`` matrix products, about 5 ms alone, the same in either
  profiling mode; recorded by :mod:`echo_sim.measure.profile_comm`);
* ``tp_block_fw_cpu_us`` / ``tp_block_bw_cpu_us`` and ``tp_block_plain_fw_cpu_us`` /
  ``tp_block_plain_bw_cpu_us`` at the activation sizes ``tp_act_bytes`` (sample ``i`` is
  size ``i % len(tp_act_bytes)``): forward and backward of a transformer MLP block on
  three-dimensional activations ``(batch, seq, hidden)`` (:data:`TP_SHAPES`) —
  ``x + fc2(gelu(fc1(layer_norm(x))))``, ``x`` requiring grad as a model's residual
  stream does — with ``fc1`` column- and ``fc2`` row-parallel (``parallelize_module`` with
  ``ColwiseParallel`` / ``RowwiseParallel``) on the **world** device mesh: DTensor's
  dispatch, sharding propagation and redistribution, the collectives' issue (the
  forward's all-reduce after ``fc2``, the backward's of ``fc1``'s input gradient) and the
  waits' bookkeeping, as in a Megatron-style job — against the plain block of the local
  shard's shapes. An isolated Linear pair on two-dimensional input that needs no gradient
  misses part of that: no input-gradient all-reduce, fewer DTensor ops per ``linear``; in
  the example GPT's, a Llama's and BERT's tensor-parallel steps it gave ~0.55-0.8x the
  per-Linear cost measured inside the model, the block 0.9-1.2x
  (``benchmarks/tp_host_cost.py``). Each sample is the calling thread's **CPU time**
  (``time.thread_time``): a peer wait blocks the thread and does not enter it, and
  neither does preemption by other load;
* ``tp_block_optim_cpu_us`` / ``tp_block_plain_optim_cpu_us``: one per-parameter-loop
  AdamW step (``foreach=False``, as a job with DTensor and plain parameters runs it) over
  each block's parameters right after its backward — the way a job meets its optimizer,
  caches as the backward left them (back to back, the same step costs ~0.7x as much per
  DTensor parameter); ``tp_block_dtensor_params`` DTensor parameters of the sharded block's
  (the LayerNorm's two stay plain);
* ``optim_plain_loop_cpu_us`` / ``optim_dtensor_loop_cpu_us`` /
  ``optim_plain_foreach_cpu_us`` / ``optim_dtensor_foreach_cpu_us``: one AdamW step over
  :data:`OPTIM_PARAMS` small parameters, per-parameter (``foreach=False``) or multi-tensor
  (``foreach=True``), plain or DTensor (``Shard(0)`` on the world mesh), thread CPU time;
* ``fsdp_fw_cpu_us`` / ``fsdp_bw_cpu_us`` per FSDP2 unit at the configurations
  :data:`FSDP_CONFIGS` (units of transformer MLP blocks, as the DDP and tensor-parallel
  samples use; ``fsdp_params`` / ``fsdp_unit_bytes`` / ``fsdp_blocks`` list each one's
  parameters, unsharded bytes and blocks per unit; profiles without ``fsdp_blocks`` measured
  units of Linears) against the plain model: FSDP2's per-unit hooks, copy-in /
  copy-out, buffer allocation, the collectives' issue and DTensor parameter swaps on the
  world mesh (median thread CPU time of FSDP2 minus that of plain, per unit: one value per
  rank and configuration);
* ``ddp_fw_cpu_us`` / ``ddp_bw_cpu_us`` per model at the configurations :data:`DDP_CONFIGS`
  (stacks of transformer MLP blocks, as the tensor-parallel samples use; ``ddp_params`` /
  ``ddp_bytes`` / ``ddp_blocks`` list each one's parameters, bytes and blocks; profiles
  without ``ddp_blocks`` measured stacks of Linears) against the plain model:
  ``DistributedDataParallel``'s forward pre-processing, its reducer's per-parameter
  autograd hooks, the gradients' copies into and out of the flat buckets and the
  all-reduces' issue (median thread CPU time of DDP minus that of plain: one value per rank
  and configuration; the all-reduces themselves run on gloo's thread);
* ``sync_work_us`` / ``sync_us``: a 4 KiB all-reduce (slowest rank's clock) right after 0,
  1 or 2 runs of the contention work on every rank (:data:`SYNC_ROUNDS_FACTOR` times the
  other quantities' rounds), against that rank's work time — how
  the wait at a synchronisation grows with the compute before it;
* ``chain_gap_us`` / ``chain_work_us`` (``chain_work_fractions``: the levels, in turn):
  the ranks' arrival gap (the latest rank's start
  less the earliest's, on the host clock the processes share) at each of a chain of
  :data:`CHAIN_BYTES` all-reduces with no barrier between them, each after
  :data:`CHAIN_WORK_FRACTIONS` of the contention work on every rank (its longest rank's
  time): the way a job meets its synchronisations, one after the other with its compute
  between. On a host whose ranks fill the cores one rank often leaves a collective late and
  stays late through the next compute (2-process FSDP2 jobs on a 2-core VM: correlation
  0.78-0.92 between a collective's exit gap and the next one's arrival gap, mean gaps
  ~0.55 ms whatever the compute between), which the 4 KiB probe after a barrier misses. The
  same on every rank (:data:`CONFIG_KEYS`); recorded where ``measure_host_overheads`` is
  given the work's products;
* ``overlap_bytes`` / ``overlap_comm_alone_us`` / ``overlap_comm_busy_us`` /
  ``overlap_work_alone_us`` / ``overlap_work_busy_us``: an all-reduce of
  :data:`OVERLAP_BYTES` alone, and issued asynchronously right before the contention work
  on every rank (its completion time stamped by a callback on its future, as DDP's bucket
  all-reduces run while backward computes), against the work alone and the work with the
  all-reduce in flight — how much a collective and the compute slow each other when they
  share the cores (one value per round and size, this rank's clock);
* ``copy_bytes_per_us``: memcpy bandwidth of a 4 MiB ``copy_`` (FSDP2's copy-in / copy-out
  move the bytes of every gathered unit on the compute thread).

The one place besides :mod:`echo_sim.measure.profile_comm` that imports torch.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import Any

__all__ = ["CONFIG_KEYS", "DDP_CONFIGS", "DEFAULT_ROUNDS", "FSDP_CONFIGS", "FSDP_UNITS",
           "OPTIM_PARAMS", "OVERLAP_BYTES", "SYNC_ROUNDS_FACTOR", "TP_SHAPES", "ddp_block_params",
           "ddp_samples", "fsdp_samples", "measure_host_overheads", "optimizer_samples",
           "tp_block_samples"]

OPTIM_PARAMS = 4  # parameters in the optimizer microbenchmark
# lists that describe the measured configurations, the same on every rank: kept once
CONFIG_KEYS = frozenset({"tp_act_bytes", "tp_block_dtensor_params", "fsdp_params",
                         "fsdp_unit_bytes", "fsdp_blocks", "ddp_params", "ddp_bytes",
                         "ddp_blocks", "chain_gap_us", "chain_work_us",
                         "chain_work_fractions"})
CHAIN_BYTES = 1 << 20  # the chained all-reduce: a layer's gradients or parameters
# shares of the contention work (~5 ms alone) before each chained all-reduce, in turn:
# back to back, a small FSDP2 unit's compute, a large one's, a DDP backward's
CHAIN_WORK_FRACTIONS = (0.0, 0.25, 0.75, 2.0)
FSDP_UNITS = 2  # fully_shard units in the FSDP2 microbenchmark
# (MLP blocks per unit, their hidden width): a per-unit, a per-parameter and a per-byte part
# over the range of a transformer layer's 6-24 parameters and 0.1-2 MiB (Linear units of 2-6
# parameters, the microbenchmark before 2026-11-27, priced a 16-parameter BERT layer by a
# slope extrapolated threefold: its price moved 22-30 % between profiles)
FSDP_CONFIGS = ((1, 64), (4, 64), (1, 256), (2, 128))
# (MLP blocks, their hidden width) of the DDP microbenchmark's model: a per-call, a
# per-parameter and a per-byte part (the reducer hooks each parameter and copies every
# gradient byte twice, while the bucket all-reduces run on gloo's thread beside the backward)
DDP_CONFIGS = ((2, 64), (8, 64), (2, 256), (4, 128))
OVERLAP_BYTES = (64 << 10, 1 << 20, 8 << 20)  # all-reduce sizes of the overlap rounds
# (batch, seq, hidden) of the tensor-parallel MLP block: a per-call and a per-byte part of
# DTensor's cost (8 KiB and 512 KiB of float32 activation)
TP_SHAPES = ((1, 64, 32), (8, 128, 128))
DEFAULT_ROUNDS = 15  # samples per quantity: each short (< ~1 ms), so that some escape preemption
# rounds of the rank-skew probe per contention round: its waits are bimodal (a halted vCPU
# wakes in milliseconds), so the slope against the work before them needs many samples (on
# a 2-core VM, profiles of 15 rounds gave slopes of 0 to 0.20 us/us and predictions that
# moved ±15 % with them; with 240 rounds the predictions of one trace moved ±3-5 %)
SYNC_ROUNDS_FACTOR = 16
_HIDDEN = 32  # small shapes: the overheads measured here are per call, not per byte
_TOKENS = 64


def _time_us(fn: Callable[[], Any]) -> float:
    t0 = time.perf_counter()
    fn()
    return (time.perf_counter() - t0) * 1e6


def _contention(rank: int, rounds: int, work: Callable[[], Any]) -> tuple[list[float],
                                                                           list[float]]:
    import torch
    import torch.distributed as dist

    alone: list[float] = []
    busy: list[float] = []
    flag = torch.zeros(1)
    for _ in range(rounds):
        dist.barrier()
        if rank == 0:
            t0 = time.perf_counter()
            work()
            alone.append((time.perf_counter() - t0) * 1e6)
        dist.broadcast(flag, 0)  # the others wait here while rank 0 works alone
        dist.barrier()
        t0 = time.perf_counter()
        work()
        busy.append((time.perf_counter() - t0) * 1e6)
    return alone, busy


def _sync_wait(rounds: int, work: Callable[[], Any]) -> dict[str, list[float]]:
    """A 4 KiB all-reduce after 0, 1 or 2 runs of ``work`` on every rank: the all-reduce's
    time on the slowest rank's clock against the work before it (rank skew vs compute)."""
    import torch
    import torch.distributed as dist

    x = torch.ones(1024)
    out: dict[str, list[float]] = {"sync_work_us": [], "sync_us": []}
    for _ in range(rounds):
        for calls in (0, 1, 2):
            dist.barrier()
            t0 = time.perf_counter()
            for _ in range(calls):
                work()
            t1 = time.perf_counter()
            dist.all_reduce(x)
            took = torch.tensor([(time.perf_counter() - t1) * 1e6], dtype=torch.float64)
            dist.all_reduce(took, op=dist.ReduceOp.MAX)  # a run ends with its slowest rank
            out["sync_work_us"].append((t1 - t0) * 1e6)
            out["sync_us"].append(float(took[0]))
    return out


def _chain(rounds: int, products: Callable[[int], Any], reps: int) -> dict[str, list[float]]:
    """The chained all-reduces of the module docstring (``chain_gap_us`` /
    ``chain_work_us``): ``rounds`` times, for each of :data:`CHAIN_WORK_FRACTIONS` in turn,
    that share of the work's ``reps`` products, then a :data:`CHAIN_BYTES` all-reduce with
    no barrier before it. Collective: every rank must call it."""
    import torch
    import torch.distributed as dist

    from echo_sim.measure.work import rank_spread

    x = torch.ones(CHAIN_BYTES // 4)
    dist.all_reduce(x)  # warm the connection for this size
    plan = [max(0, round(f * reps)) for f in CHAIN_WORK_FRACTIONS]
    dist.barrier()  # the chain starts together; nothing in it waits for a barrier again
    starts, works = [], []
    for _ in range(rounds):
        for n in plan:
            t0 = time.perf_counter()
            products(n)
            t1 = time.perf_counter()
            dist.all_reduce(x)
            starts.append(t1 * 1e6)
            works.append((t1 - t0) * 1e6)
    gaps = rank_spread(torch.tensor(starts, dtype=torch.float64))
    work = torch.tensor(works, dtype=torch.float64)
    dist.all_reduce(work, op=dist.ReduceOp.MAX)  # the same lists on every rank
    return {"chain_gap_us": gaps.tolist(), "chain_work_us": work.tolist(),
            "chain_work_fractions": list(CHAIN_WORK_FRACTIONS)}


def _overlap(rounds: int, work: Callable[[], Any]) -> dict[str, list[float]]:
    """An all-reduce alone, the work alone, then both at once (module docstring)."""
    import torch
    import torch.distributed as dist

    keys = ("overlap_bytes", "overlap_comm_alone_us", "overlap_comm_busy_us",
            "overlap_work_alone_us", "overlap_work_busy_us")
    out: dict[str, list[float]] = {k: [] for k in keys}
    bufs = [torch.ones(nbytes // 4) for nbytes in OVERLAP_BYTES]
    for x in bufs:
        dist.all_reduce(x)  # warm the connection for this size
    for _ in range(rounds):  # round-robin over the sizes, like profile-comm's timed runs
        for nbytes, x in zip(OVERLAP_BYTES, bufs, strict=True):

            def reduce(x: Any = x) -> None:
                dist.all_reduce(x)

            dist.barrier()
            comm_alone = _time_us(reduce)
            dist.barrier()
            work_alone = _time_us(work)
            dist.barrier()
            done: list[float] = []
            t0 = time.perf_counter()
            handle = dist.all_reduce(x, async_op=True)
            stamped = handle.get_future().then(
                lambda _, done=done: done.append(time.perf_counter()))
            work()
            t1 = time.perf_counter()
            handle.wait()
            stamped.wait()
            for k, v in zip(keys, (nbytes, comm_alone, (done[0] - t0) * 1e6, work_alone,
                                   (t1 - t0) * 1e6), strict=True):
                out[k].append(float(v))
    return out


def _mlp_block(nn: Any, hidden: int, width: int) -> Any:
    """``x + fc2(gelu(fc1(layer_norm(x))))``: a transformer MLP block (``fc1``/``fc2`` by
    those names, for ``parallelize_module``)."""
    import torch.nn.functional as F

    class MlpBlock(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.norm = nn.LayerNorm(hidden)
            self.fc1 = nn.Linear(hidden, width)
            self.fc2 = nn.Linear(width, hidden)

        def forward(self, x: Any) -> Any:
            return x + self.fc2(F.gelu(self.fc1(self.norm(x))))

    return MlpBlock()


def _cpu_us(fn: Callable[[], Any]) -> float:
    """The calling thread's CPU time of ``fn()`` (µs): blocked waits do not count."""
    c0 = time.thread_time()
    fn()
    return (time.thread_time() - c0) * 1e6


def _fw_bw_cpu(model: Any, x: Any) -> tuple[float, float]:
    """Thread CPU µs of ``model(x)`` and of its backward, after a barrier (the ranks in
    step, as a job's tensor-parallel or FSDP2 peers)."""
    import torch.distributed as dist

    dist.barrier()
    got: list[Any] = []
    f = _cpu_us(lambda: got.append(model(x)))
    b = _cpu_us(lambda: got[0].sum().backward())
    return f, b


def tp_block_samples(mesh: Any, reps: int) -> dict[str, list[float]]:
    """The tensor-parallel MLP block's samples of the module docstring (``tp_block_*``,
    ``tp_act_bytes``), ``reps`` rounds on ``mesh``; collective: every rank of it calls."""
    import torch
    from torch import nn
    from torch.distributed.tensor import DTensor
    from torch.distributed.tensor.parallel import (
        ColwiseParallel,
        RowwiseParallel,
        parallelize_module,
    )

    n = mesh.size()
    keys = ("tp_block_fw_cpu_us", "tp_block_bw_cpu_us", "tp_block_optim_cpu_us",
            "tp_block_plain_fw_cpu_us", "tp_block_plain_bw_cpu_us",
            "tp_block_plain_optim_cpu_us")
    out: dict[str, list[float]] = {k: [] for k in (*keys, "tp_act_bytes")}
    cases = []
    for shape in TP_SHAPES:
        h = shape[-1]
        x = torch.randn(*shape, requires_grad=True)
        width = -(-4 * h // n) * n  # 4h, rounded up to shard evenly over the n ranks
        tp = parallelize_module(_mlp_block(nn, h, width), mesh,
                                {"fc1": ColwiseParallel(), "fc2": RowwiseParallel()})
        local = _mlp_block(nn, h, width // n)
        cases.append((x, [(tp, torch.optim.AdamW(tp.parameters(), foreach=False), "tp_block"),
                          (local, torch.optim.AdamW(local.parameters(), foreach=False),
                           "tp_block_plain")]))
        out["tp_act_bytes"].append(float(x.numel() * x.element_size()))
    # every size's sharded block holds the same parameters: counted once
    out["tp_block_dtensor_params"] = [float(sum(isinstance(q, DTensor)
                                                for q in cases[0][1][0][0].parameters()))]

    for i in range(reps + 1):  # interleaved, so that drift hits both alike; sizes round-robin
        for x, models in cases:
            for model, opt, pre in models:
                f, b = _fw_bw_cpu(model, x)
                u = _cpu_us(opt.step)
                if i:  # the first round warms caches, sharding propagation, optimizer state
                    out[f"{pre}_fw_cpu_us"].append(f)
                    out[f"{pre}_bw_cpu_us"].append(b)
                    out[f"{pre}_optim_cpu_us"].append(u)
    return out


def optimizer_samples(mesh: Any, reps: int) -> dict[str, list[float]]:
    """The back-to-back optimizer samples of the module docstring (``optim_*``), ``reps``
    rounds on ``mesh``."""
    import torch
    from torch.distributed.tensor import Shard, distribute_tensor

    shapes = [(_HIDDEN, _HIDDEN)] * OPTIM_PARAMS
    plain = [torch.nn.Parameter(torch.randn(s)) for s in shapes]
    dt = [torch.nn.Parameter(distribute_tensor(torch.randn(s), mesh, [Shard(0)]))
          for s in shapes]
    for p in (*plain, *dt):
        p.grad = torch.ones_like(p)
    opts = {
        "optim_plain_loop_cpu_us": torch.optim.AdamW(plain, foreach=False),
        "optim_dtensor_loop_cpu_us": torch.optim.AdamW(dt, foreach=False),
        "optim_plain_foreach_cpu_us": torch.optim.AdamW(plain, foreach=True),
        "optim_dtensor_foreach_cpu_us": torch.optim.AdamW(dt, foreach=True),
    }
    out: dict[str, list[float]] = {k: [] for k in opts}
    for opt in opts.values():
        opt.step()  # builds the state
    for _ in range(reps):
        for k, opt in opts.items():
            out[k].append(_cpu_us(opt.step))
    return out


def fsdp_samples(mesh: Any, reps: int) -> dict[str, list[float]]:
    """The FSDP2 samples of the module docstring (``fsdp_*``), ``reps`` rounds on ``mesh``:
    :data:`FSDP_UNITS` ``fully_shard`` units (then the root) of ``blocks`` transformer MLP
    blocks of width ``hidden`` each, per ``(blocks, hidden)`` of :data:`FSDP_CONFIGS`, on
    ``(8, tokens / 8, hidden)`` input that needs grad, against the plain model, gradients
    set to None after each sample; collective: every rank of ``mesh`` calls."""
    import torch
    from torch import nn
    from torch.distributed.fsdp import fully_shard

    out: dict[str, list[float]] = {k: [] for k in ("fsdp_fw_cpu_us", "fsdp_bw_cpu_us",
                                                   "fsdp_params", "fsdp_unit_bytes",
                                                   "fsdp_blocks")}
    for blocks, h in FSDP_CONFIGS:
        x = torch.randn(8, _block_tokens(h) // 8, h, requires_grad=True)

        def build(blocks: int = blocks, h: int = h) -> Any:
            return nn.Sequential(*(nn.Sequential(*(_mlp_block(nn, h, 4 * h)
                                                   for _ in range(blocks)))
                                   for _ in range(FSDP_UNITS)))

        sharded = build()
        for unit in sharded:
            fully_shard(unit, mesh=mesh)
        fully_shard(sharded, mesh=mesh)
        med = _wrapped_minus_plain(sharded, build(), x, reps)
        # the root holds no parameters of its own, so every unit costs alike
        params, nbytes = ddp_block_params(blocks, h)
        out["fsdp_fw_cpu_us"].append(med[0] / FSDP_UNITS)
        out["fsdp_bw_cpu_us"].append(med[1] / FSDP_UNITS)
        out["fsdp_params"].append(float(params))
        out["fsdp_unit_bytes"].append(float(nbytes))
        out["fsdp_blocks"].append(float(blocks))
    return out


def _block_tokens(hidden: int) -> int:
    """Tokens of the MLP-block microbenchmarks' input: enough compute beside the hooks
    that gloo's thread shares the cores with it, as in a job."""
    return 256 if hidden <= 64 else 512


def _wrapped_minus_plain(wrapped: Any, plain: Any, x: Any, reps: int) -> tuple[float, float]:
    """Median thread CPU µs of forward and of backward of ``wrapped`` minus ``plain`` (at
    least 0), ``reps`` samples of each interleaved after one untimed call (it builds
    caches and buckets); gradients set to None after each sample, as ``zero_grad`` does."""
    samples: dict[str, list[float]] = {"f1": [], "b1": [], "f0": [], "b0": []}
    for i in range(reps + 1):
        for model, tag in ((wrapped, "1"), (plain, "0")):
            f, b = _fw_bw_cpu(model, x)
            model.zero_grad(set_to_none=True)
            x.grad = None
            if i:
                samples["f" + tag].append(f)
                samples["b" + tag].append(b)
    med = {k: statistics.median(v) for k, v in samples.items()}
    return max(med["f1"] - med["f0"], 0.0), max(med["b1"] - med["b0"], 0.0)


def ddp_block_params(blocks: int, hidden: int) -> tuple[int, int]:
    """(parameter tensors, bytes) of ``blocks`` float32 MLP blocks of width ``hidden``
    (:func:`_mlp_block` with a 4·hidden inner width: LayerNorm, two Linears, their biases)."""
    return 6 * blocks, 4 * blocks * (2 * hidden + 8 * hidden * hidden + 5 * hidden)


def ddp_samples(reps: int) -> dict[str, list[float]]:
    """The DDP samples of the module docstring (``ddp_*``), ``reps`` rounds over the world
    group: DDP minus plain at :data:`DDP_CONFIGS`, stacks of transformer MLP blocks on
    ``(8, tokens / 8, hidden)`` input that needs grad, gradients set to None after each
    sample. Measured inside real DDP steps (``benchmarks/ddp_host_cost.py``), stacks of two
    to eight Linears on 64 tokens of 2-D input (the microbenchmark before 2026-11-27: almost
    no compute beside the reducer while gloo's thread all-reduces) priced the backward of the
    examples' GPT, BERT and the Llama at a third to a half of its cost; the blocks come
    within 0.74-1.43 of it."""
    import torch
    from torch import nn

    out: dict[str, list[float]] = {k: [] for k in ("ddp_fw_cpu_us", "ddp_bw_cpu_us",
                                                   "ddp_params", "ddp_bytes", "ddp_blocks")}
    for blocks, h in DDP_CONFIGS:
        x = torch.randn(8, _block_tokens(h) // 8, h, requires_grad=True)

        def build(blocks: int = blocks, h: int = h) -> Any:
            return nn.Sequential(*(_mlp_block(nn, h, 4 * h) for _ in range(blocks)))

        fw, bw = _wrapped_minus_plain(nn.parallel.DistributedDataParallel(build()), build(),
                                      x, reps)
        params, nbytes = ddp_block_params(blocks, h)
        out["ddp_fw_cpu_us"].append(fw)
        out["ddp_bw_cpu_us"].append(bw)
        out["ddp_params"].append(float(params))
        out["ddp_bytes"].append(float(nbytes))
        out["ddp_blocks"].append(float(blocks))
    return out


def _copy_bw(reps: int) -> list[float]:
    import torch

    n = 1 << 20  # float32: 4 MiB
    src, dst = torch.ones(n), torch.empty(n)
    dst.copy_(src)
    return [4.0 * n / _time_us(lambda: dst.copy_(src)) for _ in range(reps)]


def measure_host_overheads(rank: int, nproc: int, work: Callable[[], Any], *,
                           rounds: int = DEFAULT_ROUNDS,
                           products: Callable[[int], Any] | None = None,
                           reps: int = 0) -> dict[str, list[float]]:
    """Every quantity of the module docstring as a list of samples (this rank's): ``rounds``
    samples of each (the rank-skew probes :data:`SYNC_ROUNDS_FACTOR` times that).

    ``work``: the fixed compute for the contention rounds (``busy_us`` of matrix products);
    ``products(n)`` runs ``n`` of its ``reps`` products (the chained all-reduces' shares of
    it; without them no chain is measured). Collective: every rank must call it.
    """
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh

    alone, busy = _contention(rank, rounds, work)
    out: dict[str, list[float]] = {"contention_alone_us": alone, "contention_busy_us": busy}
    out.update(_sync_wait(SYNC_ROUNDS_FACTOR * rounds, work))
    if products is not None and reps > 0:
        out.update(_chain(SYNC_ROUNDS_FACTOR * rounds // 2, products, reps))
    out.update(_overlap(rounds, work))
    # the world mesh: tensor parallelism over every profiled rank, as the job's
    world = init_device_mesh("cpu", (nproc,))
    out.update(tp_block_samples(world, rounds))
    out.update(optimizer_samples(world, rounds))
    out.update(fsdp_samples(world, rounds))
    out.update(ddp_samples(rounds))
    out["copy_bytes_per_us"] = _copy_bw(rounds)
    dist.barrier()
    return out
