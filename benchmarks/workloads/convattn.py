"""A conv + attention image classifier, trained single / DDP / FSDP2 / TP / PP on gloo or NCCL.

A model the simulator was never tuned on (not in ``examples/``): a strided convolution
stem turns a 3×32×32 image into 64 tokens, then ``blocks`` hybrid blocks — a depthwise
token-mixing ``Conv1d`` (replicated under TP), pre-norm multi-head attention (fused ``qkv``,
``proj``) and an MLP (``fc1``, ``fc2``) — then mean pooling and a linear ``head``.

Same interface as ``examples/train.py`` (``parse_flags`` → ``build_job`` → ``train``), so
``benchmarks/accuracy.py`` drives both::

    torchrun --nproc_per_node 2 benchmarks/workloads/convattn.py --layout tp --steps 10

Flags: ``--layout single|ddp|fsdp|tp|pp``, ``--blocks 4``, ``--width 96``, ``--heads 4``,
``--micro-batch 16``, ``--global-batch N`` (pp: micro-batches = N / micro-batch),
``--steps 10``, ``--capture --trace-dir D --trace-start 2 --trace-end 8``.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn

if str(Path(__file__).resolve().parents[2]) not in sys.path:  # run as a script
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from benchmarks.workloads import harness  # noqa: E402

__all__ = ["ConvAttnNet", "Job", "build_job", "parse_flags", "train"]

LAYOUTS = ("single", "ddp", "fsdp", "tp", "pp")
IMAGE = 32  # 3 x 32 x 32 images; the stem (stride 4) makes 8 x 8 = 64 tokens
CLASSES = 10


class Attention(nn.Module):
    """Multi-head self-attention; heads on this rank read from ``qkv``'s output width (TP)."""

    def __init__(self, width: int, heads: int) -> None:
        super().__init__()
        self.head_dim = width // heads
        self.qkv = nn.Linear(width, 3 * width)
        self.proj = nn.Linear(width, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, _ = x.shape
        qkv = self.qkv(x)
        h = qkv.shape[-1] // (3 * self.head_dim)
        q, k, v = qkv.view(b, t, h, 3, self.head_dim).permute(3, 0, 2, 1, 4)
        y = F.scaled_dot_product_attention(q, k, v)
        return self.proj(y.transpose(1, 2).reshape(b, t, h * self.head_dim))


class HybridBlock(nn.Module):
    """``x + mix(x)`` (depthwise Conv1d over tokens), ``x + attn(ln1(x))``, ``x + mlp(ln2(x))``."""

    def __init__(self, width: int, heads: int) -> None:
        super().__init__()
        self.mix = nn.Conv1d(width, width, kernel_size=3, padding=1, groups=width)
        self.ln1 = nn.LayerNorm(width)
        self.attn = Attention(width, heads)
        self.ln2 = nn.LayerNorm(width)
        self.mlp = nn.Sequential()
        self.mlp.add_module("fc1", nn.Linear(width, 4 * width))
        self.mlp.add_module("act", nn.GELU())
        self.mlp.add_module("fc2", nn.Linear(4 * width, width))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.mix(x.transpose(1, 2)).transpose(1, 2)
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class ConvAttnNet(nn.Module):
    """``stem`` (Conv2d stride 4 + BatchNorm + ReLU) → ``blocks`` → ``norm`` → mean → ``head``.

    A pipeline stage keeps some blocks (:meth:`keep_stage`): stage 0 the stem, the last the
    norm and head; stages in between take and return tokens ``(batch, 64, width)``.
    """

    def __init__(self, *, blocks: int, width: int, heads: int) -> None:
        super().__init__()
        self.stem: nn.Sequential | None = nn.Sequential(
            nn.Conv2d(3, width, kernel_size=4, stride=4), nn.BatchNorm2d(width), nn.ReLU())
        self.blocks = nn.ModuleDict({str(i): HybridBlock(width, heads) for i in range(blocks)})
        self.norm: nn.LayerNorm | None = nn.LayerNorm(width)
        self.head: nn.Linear | None = nn.Linear(width, CLASSES)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.stem is not None:
            x = self.stem(x).flatten(2).transpose(1, 2).contiguous()  # (b, tokens, width)
        for block in self.blocks.values():
            x = block(x)
        if self.norm is not None and self.head is not None:
            return self.head(self.norm(x).mean(dim=1))
        return x.contiguous()  # a pipeline stage sends it

    def keep_stage(self, stage: int, stages: int) -> ConvAttnNet:
        n = len(self.blocks)
        lo, hi = stage * n // stages, (stage + 1) * n // stages
        for key in list(self.blocks.keys()):
            if not lo <= int(key) < hi:
                del self.blocks[key]
        if stage:
            self.stem = None
        if stage != stages - 1:
            self.norm = None
            self.head = None
        return self


@dataclass(frozen=True, kw_only=True)
class Config(harness.RunConfig):
    layout: str = "single"
    blocks: int = 4
    width: int = 96
    heads: int = 4
    micro_batch: int = 16

    def __post_init__(self) -> None:
        if self.layout not in LAYOUTS:
            raise ValueError(f"--layout {self.layout!r}; valid: {', '.join(LAYOUTS)}")
        if self.width % self.heads:
            raise ValueError(f"--heads {self.heads} must divide --width {self.width}")
        for name in ("blocks", "micro_batch", "steps"):
            if getattr(self, name) < 1:
                raise ValueError(f"--{name.replace('_', '-')} must be >= 1")


def parse_flags(argv: Sequence[str]) -> Config:
    p = argparse.ArgumentParser(prog="convattn.py", description=__doc__.split("\n\n")[0])
    p.add_argument("--layout", choices=LAYOUTS, default="single")
    p.add_argument("--blocks", type=int, default=4)
    p.add_argument("--width", type=int, default=96)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--micro-batch", type=int, default=16)
    harness.add_run_flags(p, "images")
    a = p.parse_args(list(argv))
    return Config(**{k: v for k, v in vars(a).items()})


Job = harness.Job



def _batch(n: int, step: int, index: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(1000 * step + index)
    return torch.randn(n, 3, IMAGE, IMAGE, generator=g), torch.randint(0, CLASSES, (n,),
                                                                        generator=g)


def _model(cfg: Config) -> ConvAttnNet:
    torch.manual_seed(0)
    return ConvAttnNet(blocks=cfg.blocks, width=cfg.width, heads=cfg.heads)


def _parallelize(model: ConvAttnNet, cfg: Config, world: int) -> nn.Module:
    from torch.distributed.device_mesh import init_device_mesh

    if cfg.layout == "ddp":
        return nn.parallel.DistributedDataParallel(model)
    mesh = init_device_mesh("cpu", (world,))
    if cfg.layout == "fsdp":
        from torch.distributed.fsdp import fully_shard

        for block in model.blocks.values():
            fully_shard(block, mesh=mesh)
        fully_shard(model, mesh=mesh)
        return model
    from torch.distributed.tensor.parallel import (
        ColwiseParallel,
        RowwiseParallel,
        parallelize_module,
    )

    if cfg.heads % world:
        raise ValueError(f"--heads {cfg.heads} must divide by the TP degree {world}")
    plan: dict[str, Any] = {}
    for i in model.blocks.keys():
        plan.update({f"blocks.{i}.attn.qkv": ColwiseParallel(),
                     f"blocks.{i}.attn.proj": RowwiseParallel(),
                     f"blocks.{i}.mlp.fc1": ColwiseParallel(),
                     f"blocks.{i}.mlp.fc2": RowwiseParallel()})
    return parallelize_module(model, mesh, plan)


def _dp_job(cfg: Config, rank: int, world: int) -> Job:
    model: nn.Module = _model(cfg)
    dp = world if cfg.layout in ("ddp", "fsdp") else 1
    if cfg.layout != "single":
        model = _parallelize(model, cfg, world)  # type: ignore[arg-type]
    gb = cfg.global_batch or cfg.micro_batch * dp
    accum = max(1, gb // (cfg.micro_batch * dp))
    # foreach kernels take no mix of DTensor and plain parameters (tp keeps some plain)
    opt = torch.optim.AdamW(model.parameters(), foreach=cfg.layout != "tp")

    def run_step(step: int) -> None:
        opt.zero_grad(set_to_none=True)
        for i in range(accum):
            x, y = _batch(cfg.micro_batch, step, (rank if dp > 1 else 0) * accum + i)
            F.cross_entropy(model(x), y).div(accum).backward()
        opt.step()

    return Job(rank, world, run_step)


def _pp_job(cfg: Config, rank: int, world: int) -> Job:
    from torch.distributed.pipelining import PipelineStage, Schedule1F1B

    model = _model(cfg).keep_stage(rank, world)
    gb = cfg.global_batch or cfg.micro_batch * world
    stage = PipelineStage(model, rank, world, torch.device("cpu"))
    schedule = Schedule1F1B(stage, gb // cfg.micro_batch, loss_fn=F.cross_entropy)
    opt = torch.optim.AdamW(model.parameters())

    def run_step(step: int) -> None:
        x, y = _batch(gb, step, 0)
        opt.zero_grad(set_to_none=True)
        if rank == 0:
            schedule.step(x)
        elif rank == world - 1:
            schedule.step(target=y)
        else:
            schedule.step()
        opt.step()

    return Job(rank, world, run_step)


def build_job(cfg: Config) -> Job:
    """Build the model, its parallel wrapping and optimizer (joins the process group)."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if cfg.layout == "single":
        return _dp_job(cfg, 0, 1)
    if not dist.is_initialized():
        dist.init_process_group("gloo")
    rank = dist.get_rank()
    return _pp_job(cfg, rank, world) if cfg.layout == "pp" else _dp_job(cfg, rank, world)


def train(cfg: Config, job: Job | None = None) -> Job:
    """Run ``cfg.steps`` steps (inside ``echo_trace.capture`` with ``--capture``)."""
    return harness.train(cfg, job or build_job(cfg))


def main(argv: Sequence[str] | None = None) -> int:
    return harness.run_main(parse_flags, build_job, argv)


if __name__ == "__main__":
    raise SystemExit(main())
