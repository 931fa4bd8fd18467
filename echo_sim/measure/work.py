"""The work a measurement runs in its processes: collectives on preallocated tensors, and
fixed compute (products of small float32 matrices) calibrated to a duration.

Shared by :mod:`echo_sim.measure.profile_comm` (looped collectives, busy mode, the host
calibration) and :mod:`echo_sim.measure.comm_replay` (a job's step replayed). Imports torch
only inside its functions.
"""

from __future__ import annotations

import statistics
import time
from typing import Any

__all__ = ["BUSY_N", "BusyWork", "calibrate_busy", "make_op", "rank_spread", "to_run_clock",
           "whole_numel"]

BUSY_N = 96
"""Side of the float32 matrices the busy work multiplies (~0.2 MFLOP a product)."""


def whole_numel(nbytes: int, nproc: int) -> int:
    """float32 elements for ``nbytes``, a positive multiple of ``nproc``."""
    return max(nproc, round(nbytes / 4 / nproc) * nproc)


def make_op(op: str, numel: int, rank: int, nproc: int, device: Any, group: Any) -> Any:
    """A no-argument callable running ``op`` once over ``group`` (``nproc`` members; None:
    the world) on preallocated tensors."""
    import torch
    import torch.distributed as dist

    x = torch.ones(numel, dtype=torch.float32, device=device)
    part = torch.empty(numel // nproc, dtype=torch.float32, device=device)
    full = torch.empty(numel, dtype=torch.float32, device=device)
    gather = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
    scatter = getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor
    if op == "all_reduce":
        return lambda: dist.all_reduce(x, group=group)
    if op == "all_gather":
        return lambda: gather(full, part, group=group)  # whole output = numel
    if op == "reduce_scatter":
        return lambda: scatter(part, x, group=group)  # whole input = numel
    if op == "all_to_all":
        return lambda: dist.all_to_all_single(full, x, group=group)
    if op == "broadcast":
        return lambda: dist.broadcast(x, 0, group=group)

    def ping_pong() -> None:  # send: ranks 0 <-> 1; others idle
        if rank == 0:
            dist.send(x, 1)
            dist.recv(x, 1)
        elif rank == 1:
            dist.recv(x, 0)
            dist.send(x, 0)

    return ping_pong


class BusyWork:
    """Fixed compute work (``reps`` products of two BUSY_N² float32 matrices)."""

    def __init__(self, reps: int, alone_us: float, nproc: int, device: Any) -> None:
        import torch

        self.reps, self.alone_us, self.nproc = reps, alone_us, nproc
        self.a = torch.rand(BUSY_N, BUSY_N, device=device)
        self.b = torch.rand(BUSY_N, BUSY_N, device=device)

    def run(self) -> float:
        """Do the work once; its wall time (µs)."""
        t0 = time.perf_counter()
        self.products(self.reps)
        return (time.perf_counter() - t0) * 1e6

    def products(self, n: int) -> None:
        """Run ``n`` products of the work's matrices (``reps`` of them are the work)."""
        import torch

        for _ in range(n):
            torch.mm(self.a, self.b)


def calibrate_busy(busy_us: float, rank: int, nproc: int, device: Any) -> BusyWork:
    """Calibrate the busy work on rank 0 alone (the others wait in a barrier) to take
    ``busy_us`` µs; every rank then does the same number of products."""
    import torch
    import torch.distributed as dist

    probe = BusyWork(20, 0.0, nproc, device)
    cal = torch.zeros(2, dtype=torch.float64)
    if rank == 0:
        probe.run()  # warm-up
        per_rep = statistics.median(probe.run() for _ in range(5)) / probe.reps
        reps = max(1, round(busy_us / per_rep))
        work = BusyWork(reps, 0.0, nproc, device)
        alone = statistics.median(work.run() for _ in range(5))
        cal = torch.tensor([reps, alone], dtype=torch.float64)
    dist.broadcast(cal, 0)  # the others wait here while rank 0 runs alone
    return BusyWork(int(cal[0]), float(cal[1]), nproc, device)


def to_run_clock(times: Any, clock: str, members: int) -> None:
    """Turn every rank's own times (a float64 tensor, one per run) into the runs' times on
    ``clock``, in place on every rank: ``"last_arrival"`` the minimum over the ranks (the
    transfer alone), ``"rank_mean"`` their mean over ``members``, else the maximum (the
    slowest rank's). Collective: every rank must call it."""
    import torch.distributed as dist

    dist.all_reduce(times, op=dist.ReduceOp.SUM if clock == "rank_mean" else
                    dist.ReduceOp.MIN if clock == "last_arrival" else dist.ReduceOp.MAX)
    if clock == "rank_mean":
        times /= members


def rank_spread(stamps: Any) -> Any:
    """The latest rank's value less the earliest's, elementwise, for every rank's
    ``stamps`` (a float64 tensor of host-clock times, µs): the ranks' arrival (or exit) gap
    at each call. The processes of one host share its monotonic clock (``perf_counter`` is
    ``CLOCK_MONOTONIC``). Collective: every rank must call it; ``stamps`` is left as it was."""
    import torch.distributed as dist

    late, early = stamps.clone(), stamps.clone()
    dist.all_reduce(late, op=dist.ReduceOp.MAX)
    dist.all_reduce(early, op=dist.ReduceOp.MIN)
    return late - early
