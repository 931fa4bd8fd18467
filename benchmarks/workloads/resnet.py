"""A small CIFAR-style ResNet (BasicBlock stages, BatchNorm), trained single / DDP / FSDP2.

A model family the simulator was never tuned on (not in ``examples/``), written by hand
(no torchvision): a 3×3 ``stem`` convolution + BatchNorm + ReLU on a 3×32×32 image, three
``stages`` of ``blocks`` BasicBlocks each (He et al. 2016: two 3×3 convolutions with
BatchNorm, a 1×1 projection shortcut where the width or stride changes) at widths
``width``, 2×``width``, 4×``width`` and strides 1, 2, 2, then global average pooling and a
linear ``head`` over 10 classes. Images are synthetic; the label is the sign pattern of the
image's mean per channel (so the loss falls).

Same interface as ``examples/train.py`` and ``benchmarks/workloads/convattn.py``
(``parse_flags`` → ``build_job`` → ``train``, per-step wall times in ``Job.step_s``), so
``benchmarks/accuracy.py`` drives it::

    torchrun --nproc_per_node 2 benchmarks/workloads/resnet.py --layout ddp --steps 10

Flags: ``--layout single|ddp|fsdp``, ``--width 16``, ``--blocks 2`` (per stage),
``--micro-batch 12``, ``--global-batch N`` (gradient accumulation: N / (micro-batch ×
data-parallel degree) micro-batches per step), ``--steps 10``, ``--capture --trace-dir D
--trace-start 2 --trace-end 8``.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

if str(Path(__file__).resolve().parents[2]) not in sys.path:  # run as a script
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from benchmarks.workloads import harness  # noqa: E402

__all__ = ["BasicBlock", "Config", "Job", "ResNet", "batch", "build_job", "build_model",
           "parse_flags", "train"]

LAYOUTS = ("single", "ddp", "fsdp")
IMAGE = 32  # 3 x 32 x 32 images
CLASSES = 10  # label: 3 bits, the sign of each channel's mean (8 of the 10 classes used)


class BasicBlock(nn.Module):
    """``relu(bn2(conv2(relu(bn1(conv1(x))))) + shortcut(x))``; the shortcut is a 1×1
    convolution + BatchNorm where the width or the stride changes, else the identity."""

    def __init__(self, c_in: int, c_out: int, stride: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(c_in, c_out, 3, stride=stride, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(c_out)
        self.conv2 = nn.Conv2d(c_out, c_out, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(c_out)
        self.shortcut: nn.Module = nn.Identity()
        if stride != 1 or c_in != c_out:
            self.shortcut = nn.Sequential(nn.Conv2d(c_in, c_out, 1, stride=stride, bias=False),
                                          nn.BatchNorm2d(c_out))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = F.relu(self.bn1(self.conv1(x)))
        return F.relu(self.bn2(self.conv2(y)) + self.shortcut(x))


class ResNet(nn.Module):
    """``stem`` → ``stages`` (3 × ``blocks`` BasicBlocks) → average pool → ``head``."""

    def __init__(self, *, width: int, blocks: int) -> None:
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, width, 3, padding=1, bias=False),
                                  nn.BatchNorm2d(width), nn.ReLU())
        stages: list[nn.Module] = []
        c_in = width
        for s, c_out in enumerate((width, 2 * width, 4 * width)):
            stage = nn.Sequential(*(BasicBlock(c_in if b == 0 else c_out, c_out,
                                               2 if (b == 0 and s) else 1)
                                    for b in range(blocks)))
            stages.append(stage)
            c_in = c_out
        self.stages = nn.Sequential(*stages)
        self.head = nn.Linear(c_in, CLASSES)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.stages(self.stem(x))
        return self.head(x.mean(dim=(2, 3)))

    def blocks(self) -> list[BasicBlock]:
        return [m for m in self.modules() if isinstance(m, BasicBlock)]


@dataclass(frozen=True, kw_only=True)
class Config(harness.RunConfig):
    """One run; built from command-line flags by :func:`parse_flags`."""

    layout: str = "single"
    width: int = 16
    blocks: int = 2
    micro_batch: int = 12

    def __post_init__(self) -> None:
        if self.layout not in LAYOUTS:
            raise ValueError(f"--layout {self.layout!r}; valid: {', '.join(LAYOUTS)}")
        for name in ("width", "blocks", "micro_batch", "steps"):
            if getattr(self, name) < 1:
                raise ValueError(f"--{name.replace('_', '-')} must be >= 1")


def parse_flags(argv: Sequence[str]) -> Config:
    p = argparse.ArgumentParser(prog="resnet.py", description=__doc__.split("\n\n")[0])
    p.add_argument("--layout", choices=LAYOUTS, default="single")
    p.add_argument("--width", type=int, default=16, help="first stage's channels (default 16)")
    p.add_argument("--blocks", type=int, default=2, help="BasicBlocks per stage (default 2)")
    p.add_argument("--micro-batch", type=int, default=12, help="images per forward")
    harness.add_run_flags(p, "images")
    a = p.parse_args(list(argv))
    return Config(**vars(a))


Job = harness.Job



def batch(n: int, step: int, index: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``n`` images and their labels for micro-batch ``index`` of ``step`` (seeded)."""
    g = torch.Generator().manual_seed(1000 * step + index)
    x = torch.randn(n, 3, IMAGE, IMAGE, generator=g)
    bits = (x.mean(dim=(2, 3)) > 0).long()  # (n, 3)
    return x, bits[:, 0] + 2 * bits[:, 1] + 4 * bits[:, 2]


def build_model(cfg: Config) -> ResNet:
    """The ResNet of ``cfg`` (seeded: every rank starts from the same weights)."""
    torch.manual_seed(0)
    return ResNet(width=cfg.width, blocks=cfg.blocks)


def _parallelize(model: ResNet, cfg: Config, world: int) -> nn.Module:
    if cfg.layout == "ddp":
        # BatchNorm's running statistics are buffers: DDP broadcasts them from rank 0
        # before every forward (broadcast_buffers=True, its default)
        return nn.parallel.DistributedDataParallel(model)
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    mesh = init_device_mesh("cpu", (world,))
    # one FSDP2 unit per BasicBlock, then the root (stem, head)
    for block in model.blocks():
        fully_shard(block, mesh=mesh)
    fully_shard(model, mesh=mesh)
    return model


def _job(cfg: Config, rank: int, world: int) -> Job:
    net = build_model(cfg)
    model: nn.Module = net if cfg.layout == "single" else _parallelize(net, cfg, world)

    def loss(model: nn.Module, step: int, index: int) -> torch.Tensor:
        x, y = batch(cfg.micro_batch, step, index)
        return F.cross_entropy(model(x), y)

    return harness.data_parallel_job(cfg, rank, world, model, loss)


# build_job(cfg), train(cfg, job=None), main(argv=None): as every workload module
build_job, train, main = harness.interface(parse_flags, _job)


if __name__ == "__main__":
    raise SystemExit(main())
