"""Microbenchmarks of the CPU-side costs a gloo job pays that a one-process trace cannot show.

Run inside :mod:`echo_sim.measure.profile_comm`'s worker processes (the process group is
up; every rank calls :func:`measure_host_overheads` at once) when the backend is gloo on CPU.
Each quantity is measured as many short samples (one call each, well under a scheduler
time slice, so that on a loaded host some run unpreempted), kept raw, so that
:mod:`echo_sim.cost.cpu_overheads` takes the fastest as the intrinsic cost and reports the
spread:

* ``contention_alone_us`` / ``contention_busy_us``: the same fixed compute on rank 0 while
  the other ranks block in a collective, then on every rank at once — interleaved round by
  round, so that host load drifting during the measurement hits both alike;
* ``dtensor_fw_us`` / ``dtensor_bw_us`` and ``plain_fw_us`` / ``plain_bw_us``: forward and
  backward of a column- + row-parallel Linear pair (``parallelize_module`` with
  ``ColwiseParallel`` / ``RowwiseParallel``) on a one-rank device mesh, against the plain
  Linear pair of the same shapes. One-rank mesh: DTensor's dispatch, sharding propagation
  and redistribution calls all run, but no peer wait enters the samples;
* ``optim_plain_loop_us`` / ``optim_dtensor_loop_us`` / ``optim_plain_foreach_us`` /
  ``optim_dtensor_foreach_us``: one AdamW step over :data:`OPTIM_PARAMS` small parameters,
  per-parameter (``foreach=False``) or multi-tensor (``foreach=True``), plain or DTensor;
* ``fsdp_fw_us`` / ``fsdp_bw_us`` (per FSDP2 unit) at two parameter counts per unit
  (``fsdp_params`` lists them) against the plain model: FSDP2's per-unit hooks, copy-in /
  copy-out and DTensor parameter swaps on a one-rank mesh (fastest FSDP2 minus fastest
  plain, per unit: one value per rank and parameter count);
* ``sync_work_us`` / ``sync_us``: a 4 KiB all-reduce (slowest rank's clock) right after 0,
  1 or 2 runs of the contention work on every rank, against that rank's work time — how
  the wait at a synchronisation grows with the compute before it;
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

import time
from collections.abc import Callable
from typing import Any

__all__ = ["FSDP_UNITS", "OPTIM_PARAMS", "OVERLAP_BYTES", "measure_host_overheads"]

OPTIM_PARAMS = 4  # parameters in the optimizer microbenchmark
FSDP_UNITS = 2  # fully_shard units in the FSDP2 microbenchmark
OVERLAP_BYTES = (64 << 10, 1 << 20, 8 << 20)  # all-reduce sizes of the overlap rounds
_SAMPLES = 15  # samples per quantity: each short (< ~1 ms), so that some escape preemption
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


def _pair(nn: Any, h: int) -> Any:
    return nn.Sequential(nn.Linear(h, 4 * h), nn.Linear(4 * h, h))


def _fw_bw(model: Any, x: Any, reps: int) -> tuple[list[float], list[float]]:
    fw, bw = [], []
    for i in range(reps + 1):
        t0 = time.perf_counter()
        out = model(x)
        t1 = time.perf_counter()
        out.sum().backward()
        t2 = time.perf_counter()
        if i:  # the first call builds caches
            fw.append((t1 - t0) * 1e6)
            bw.append((t2 - t1) * 1e6)
    return fw, bw


def _tensor_parallel(mesh: Any, reps: int) -> dict[str, list[float]]:
    import torch
    from torch import nn
    from torch.distributed.tensor.parallel import (
        ColwiseParallel,
        RowwiseParallel,
        parallelize_module,
    )

    x = torch.randn(_TOKENS, _HIDDEN)
    tp = parallelize_module(_pair(nn, _HIDDEN), mesh, {"0": ColwiseParallel(),
                                                      "1": RowwiseParallel()})
    plain = _pair(nn, _HIDDEN)
    out: dict[str, list[float]] = {k: [] for k in ("dtensor_fw_us", "dtensor_bw_us",
                                                   "plain_fw_us", "plain_bw_us")}
    _fw_bw(tp, x, 1)
    _fw_bw(plain, x, 1)
    for _ in range(reps):  # interleaved, so that load drift hits both alike
        (f,), (b,) = _fw_bw(tp, x, 1)
        out["dtensor_fw_us"].append(f)
        out["dtensor_bw_us"].append(b)
        (f,), (b,) = _fw_bw(plain, x, 1)
        out["plain_fw_us"].append(f)
        out["plain_bw_us"].append(b)
    return out


def _optimizer(mesh: Any, reps: int) -> dict[str, list[float]]:
    import torch
    from torch.distributed.tensor import Shard, distribute_tensor

    shapes = [(_HIDDEN, _HIDDEN)] * OPTIM_PARAMS
    plain = [torch.nn.Parameter(torch.randn(s)) for s in shapes]
    dt = [torch.nn.Parameter(distribute_tensor(torch.randn(s), mesh, [Shard(0)]))
          for s in shapes]
    for p in (*plain, *dt):
        p.grad = torch.ones_like(p)
    opts = {
        "optim_plain_loop_us": torch.optim.AdamW(plain, foreach=False),
        "optim_dtensor_loop_us": torch.optim.AdamW(dt, foreach=False),
        "optim_plain_foreach_us": torch.optim.AdamW(plain, foreach=True),
        "optim_dtensor_foreach_us": torch.optim.AdamW(dt, foreach=True),
    }
    out: dict[str, list[float]] = {k: [] for k in opts}
    for opt in opts.values():
        opt.step()  # builds the state
    for _ in range(reps):
        for k, opt in opts.items():
            out[k].append(_time_us(opt.step))
    return out


def _fsdp(mesh: Any, reps: int) -> dict[str, list[float]]:
    import torch
    from torch import nn
    from torch.distributed.fsdp import fully_shard

    x = torch.randn(_TOKENS, _HIDDEN)
    out: dict[str, list[float]] = {"fsdp_fw_us": [], "fsdp_bw_us": [], "fsdp_params": []}
    for linears in (1, 3):  # 2 and 6 parameters per unit: per-unit and per-parameter parts

        def build(linears: int = linears) -> Any:
            return nn.Sequential(*(nn.Sequential(*(nn.Linear(_HIDDEN, _HIDDEN)
                                                   for _ in range(linears)))
                                   for _ in range(FSDP_UNITS)))

        sharded = build()
        for unit in sharded:
            fully_shard(unit, mesh=mesh)
        fully_shard(sharded, mesh=mesh)
        plain = build()
        f1, b1 = _fw_bw(sharded, x, reps)
        f0, b0 = _fw_bw(plain, x, reps)
        # fastest samples: the intrinsic cost (see echo_sim.cost.cpu_overheads); the root
        # holds no parameters of its own, so every unit costs alike
        out["fsdp_fw_us"].append(max(min(f1) - min(f0), 0.0) / FSDP_UNITS)
        out["fsdp_bw_us"].append(max(min(b1) - min(b0), 0.0) / FSDP_UNITS)
        out["fsdp_params"].append(2.0 * linears)
    return out


def _copy_bw(reps: int) -> list[float]:
    import torch

    n = 1 << 20  # float32: 4 MiB
    src, dst = torch.ones(n), torch.empty(n)
    dst.copy_(src)
    return [4.0 * n / _time_us(lambda: dst.copy_(src)) for _ in range(reps)]


def measure_host_overheads(rank: int, nproc: int, work: Callable[[], Any], *,
                           rounds: int = 15) -> dict[str, list[float]]:
    """Every quantity of the module docstring as a list of samples (this rank's).

    ``work``: the fixed compute for the contention rounds (``busy_us`` of matrix products).
    Collective: every rank must call it.
    """
    import torch.distributed as dist
    from torch.distributed.device_mesh import DeviceMesh

    alone, busy = _contention(rank, rounds, work)
    out: dict[str, list[float]] = {"contention_alone_us": alone, "contention_busy_us": busy}
    out.update(_sync_wait(rounds, work))
    out.update(_overlap(rounds, work))
    # one-rank meshes: each rank measures on its own, at the same time as the others (so
    # the host is as shared as in the job); groups are created collectively
    solo = [dist.new_group([r]) for r in range(nproc)]
    mesh = DeviceMesh.from_group(solo[rank], "cpu")
    reps = _SAMPLES
    out.update(_tensor_parallel(mesh, reps))
    out.update(_optimizer(mesh, reps))
    out.update(_fsdp(mesh, reps))
    out["copy_bytes_per_us"] = _copy_bw(reps)
    dist.barrier()
    return out
