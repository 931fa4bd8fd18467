"""What every workload module of ``benchmarks/workloads`` shares: the built job, the capture
window, the training loop and the command-line ``main``.

A workload module (``convattn``, ``hf_encoder``, ``hf_llama``, ``resnet``) defines
``parse_flags(argv)`` (a config with ``steps``, ``capture``, ``trace_dir``, ``trace_start``,
``trace_end``) and ``build_job(cfg)``, ``train`` and ``main`` (:func:`interface` makes the
three from its per-rank job maker); ``benchmarks/accuracy.py`` drives them all the same way.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch.distributed as dist

__all__ = ["Job", "RunConfig", "accumulate", "add_run_flags", "build", "capturing",
           "data_parallel_job", "deepspeed_job", "interface", "run_main", "train"]


@dataclass(frozen=True, kw_only=True)
class RunConfig:
    """The run settings every workload's config has (its model and layout fields are its
    own): samples per step, steps, and the capture window."""

    global_batch: int | None = None
    steps: int = 10
    capture: bool = False
    trace_dir: str = "traces"
    trace_start: int = 2
    trace_end: int = 8


def add_run_flags(p: argparse.ArgumentParser, unit: str) -> None:
    """The flags of :class:`RunConfig` (``unit``: what a sample is, e.g. "images")."""
    p.add_argument("--global-batch", type=int, default=None,
                   help=f"{unit} per step over all data-parallel ranks (default: "
                        "micro-batch x data-parallel degree)")
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--capture", action="store_true", help="trace with echo_trace.capture")
    p.add_argument("--trace-dir", default="traces")
    p.add_argument("--trace-start", type=int, default=2)
    p.add_argument("--trace-end", type=int, default=8)


@dataclass
class Job:
    """A built job: :meth:`step` runs one optimizer step and records its wall time (s) and,
    when ``run_step`` returns one, its loss."""

    rank: int
    world_size: int
    run_step: Callable[[int], float | None]
    step_s: list[float] = field(default_factory=list)
    losses: list[float] = field(default_factory=list)

    def step(self, index: int) -> None:
        t0 = time.perf_counter()
        loss = self.run_step(index)
        self.step_s.append(time.perf_counter() - t0)
        if loss is not None:
            self.losses.append(float(loss))


def accumulate(opt: Any, accum: int, loss_of: Callable[[int], Any]) -> float:
    """One optimizer step over ``accum`` micro-batches (``loss_of(i)``: micro-batch ``i``'s
    loss); the summed loss, each scaled by ``1/accum``."""
    opt.zero_grad(set_to_none=True)
    total = 0.0
    for i in range(accum):
        loss = loss_of(i).div(accum)
        loss.backward()
        total += float(loss.detach())
    opt.step()
    return total


def data_parallel_job(cfg: Any, rank: int, world: int, model: Any,
                      loss: Callable[[Any, int, int], Any], *, dp: int | None = None,
                      foreach: bool = True) -> Job:
    """A job of ``model`` (already wrapped for ``cfg.layout``) with AdamW: each step
    accumulates ``global_batch / (micro_batch · dp)`` micro-batches, micro-batch ``i`` of
    step ``s`` on this rank costing ``loss(model, s, first + i)``, ``first = rank · accum``
    with data parallelism and 0 without (tensor-parallel ranks see the same batch).

    ``dp``: the data-parallel degree (default: every rank unless ``cfg.layout`` is
    ``single``); ``foreach``: AdamW's multi-tensor kernels (they take no mix of DTensor and
    plain parameters)."""
    import torch

    dp = (world if cfg.layout != "single" else 1) if dp is None else dp
    gb = cfg.global_batch or cfg.micro_batch * dp
    accum = max(1, gb // (cfg.micro_batch * dp))
    first = rank * accum if dp > 1 else 0
    opt = torch.optim.AdamW(model.parameters(), foreach=foreach)

    def run_step(step: int) -> float:
        return accumulate(opt, accum, lambda i: loss(model, step, first + i))

    return Job(rank, world, run_step)


def deepspeed_job(cfg: Any, rank: int, world: int, model: Any,
                  loss: Callable[[Any, int, int], Any], *, stage: int) -> Job:
    """A DeepSpeed ZeRO-``stage`` (1 or 2) job of ``model`` on CPU over gloo, with torch's
    AdamW as DeepSpeed's client optimizer and DeepSpeed's defaults otherwise (fp32,
    ``reduce_bucket_size`` 5e8, ``overlap_comm`` off): each step runs ``global_batch /
    (micro_batch · world)`` micro-batches through ``engine.backward`` / ``engine.step``
    (DeepSpeed scales each loss by 1/accumulation and steps at the boundary), micro-batch
    ``i`` of step ``s`` on this rank costing ``loss(engine, s, rank · accum + i)``."""
    import os

    os.environ.setdefault("DS_ACCELERATOR", "cpu")
    import deepspeed
    import torch

    gb = cfg.global_batch or cfg.micro_batch * world
    accum = max(1, gb // (cfg.micro_batch * world))
    config = {"train_micro_batch_size_per_gpu": cfg.micro_batch,
              "gradient_accumulation_steps": accum, "zero_optimization": {"stage": stage}}
    opt = torch.optim.AdamW(model.parameters())
    engine, _, _, _ = deepspeed.initialize(model=model, optimizer=opt, config=config)
    first = rank * accum

    def run_step(step: int) -> float:
        total = 0.0
        for i in range(accum):
            out = loss(engine, step, first + i)
            engine.backward(out)
            engine.step()
            total += float(out.detach()) / accum
        return total

    return Job(rank, world, run_step)


def build(cfg: Any, make: Callable[[Any, int, int], Job]) -> Job:
    """``make(cfg, rank, world)``, joining the gloo process group unless ``cfg.layout`` is
    ``single``."""
    import os

    if cfg.layout == "single":
        return make(cfg, 0, 1)
    if not dist.is_initialized():
        dist.init_process_group("gloo")
    return make(cfg, dist.get_rank(), int(os.environ.get("WORLD_SIZE", "1")))


@contextlib.contextmanager
def capturing(cfg: Any) -> Iterator[None]:
    """``echo_trace.capture`` over ``cfg``'s window when ``cfg.capture``, else nothing."""
    if not cfg.capture:
        yield
        return
    import echo_trace

    with echo_trace.capture(out_dir=cfg.trace_dir, start_step=cfg.trace_start,
                            end_step=cfg.trace_end):
        yield


def train(cfg: Any, job: Job) -> Job:
    """Run ``cfg.steps`` steps of ``job`` (inside the capture window with ``cfg.capture``)."""
    with capturing(cfg):
        for i in range(cfg.steps):
            job.step(i)
    return job


def run_main(parse_flags: Callable[[Sequence[str]], Any], build_job: Callable[[Any], Job],
             argv: Sequence[str] | None = None) -> int:
    """A workload's command line: parse, build, train, report the median step on stderr."""
    cfg = parse_flags(sys.argv[1:] if argv is None else argv)
    try:
        job = train(cfg, build_job(cfg))
        if dist.is_initialized():
            dist.barrier()
        loss = f", last loss {job.losses[-1]:.3f}" if job.losses else ""
        print(f"rank {job.rank}: median step "
              f"{sorted(job.step_s)[len(job.step_s) // 2] * 1e3:.1f} ms{loss}", file=sys.stderr)
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()
    return 0


def interface(parse_flags: Callable[[Sequence[str]], Any],
              make: Callable[[Any, int, int], Job]
              ) -> tuple[Callable[[Any], Job], Callable[..., Job], Callable[..., int]]:
    """A workload module's ``build_job(cfg)`` (model, parallel wrapping and optimizer,
    joining the process group: :func:`build` of ``make``), ``train(cfg, job=None)`` (its
    steps, inside the capture window with ``--capture``) and ``main(argv=None)``."""

    def build_job(cfg: Any) -> Job:
        return build(cfg, make)

    def train_job(cfg: Any, job: Job | None = None) -> Job:
        return train(cfg, job or build_job(cfg))

    def main(argv: Sequence[str] | None = None) -> int:
        return run_main(parse_flags, build_job, argv)

    return build_job, train_job, main
