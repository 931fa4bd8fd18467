"""A model unlike examples/ for the search benchmark: an MLP-Mixer, and its real runs.

MLP-Mixer (Tolstikhin et al. 2021): images cut into patches, a linear ``stem``, then blocks
of *token mixing* (an MLP across patches, applied to the transposed activations) and
*channel mixing* (an MLP across features), each pre-norm with a residual, mean pooling and
a ``classifier``. No attention, no embeddings, a batch dimension of images: a different
operator mix from the GPT. Module names follow the Megatron convention echo_sim's tensor
parallel model reads (``blocks.<i>.tok.fc1`` / ``mlp.fc1`` column-parallel,
``...fc2`` row-parallel), so every layout of the search applies.

``python benchmarks/workloads/search_models.py --layout ddp|fsdp|tp|pp|single ...`` trains it
(under torchrun for the 2-process layouts) with torch-native DDP, FSDP2 ``fully_shard`` per
block, DTensor ``parallelize_module`` (colwise fc1, rowwise fc2) or
``torch.distributed.pipelining`` (one stage per rank, 1F1B), and writes per-step wall
times as JSON (``--time-steps``); ``--capture DIR`` traces a run with echo_trace.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from examples.models import CNNConfig, image_batch, stage_bounds  # noqa: E402

__all__ = ["LAYOUTS", "Mixer", "MixerBlock", "MixerConfig", "main", "mixer_batch"]

LAYOUTS = ("single", "ddp", "fsdp", "tp", "pp")


@dataclass(frozen=True, kw_only=True)
class MixerConfig:
    """Images ``image_size``² (3 channels) in ``patch``² patches; ``hidden`` channels."""

    image_size: int = 32
    patch: int = 4
    hidden: int = 128
    token_hidden: int = 128
    channel_hidden: int = 512
    layers: int = 4
    num_classes: int = 10

    def __post_init__(self) -> None:
        if self.image_size % self.patch:
            raise ValueError(f"image_size {self.image_size} must divide by patch {self.patch}")

    @property
    def tokens(self) -> int:
        return (self.image_size // self.patch) ** 2


class _MLP(nn.Module):
    def __init__(self, dim: int, inner: int) -> None:
        super().__init__()
        self.fc1 = nn.Linear(dim, inner)
        self.act = nn.GELU()
        self.fc2 = nn.Linear(inner, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(self.act(self.fc1(x)))


class MixerBlock(nn.Module):
    """``x + tok(ln1(x)ᵀ)ᵀ`` then ``x + mlp(ln2(x))``."""

    def __init__(self, cfg: MixerConfig) -> None:
        super().__init__()
        self.ln1 = nn.LayerNorm(cfg.hidden)
        self.tok = _MLP(cfg.tokens, cfg.token_hidden)
        self.ln2 = nn.LayerNorm(cfg.hidden)
        self.mlp = _MLP(cfg.hidden, cfg.channel_hidden)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.tok(self.ln1(x).transpose(1, 2)).transpose(1, 2)
        return x + self.mlp(self.ln2(x))


class Mixer(nn.Module):
    """``stem`` (patches -> hidden), ``blocks``, ``ln_f``, mean over patches, ``classifier``.
    A pipeline stage keeps some blocks (:meth:`keep_stage`), as examples.models.GPT does."""

    def __init__(self, cfg: MixerConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.stem: nn.Linear | None = nn.Linear(3 * cfg.patch * cfg.patch, cfg.hidden)
        self.blocks = nn.ModuleDict({str(i): MixerBlock(cfg) for i in range(cfg.layers)})
        self.ln_f: nn.LayerNorm | None = nn.LayerNorm(cfg.hidden)
        self.classifier: nn.Linear | None = nn.Linear(cfg.hidden, cfg.num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.stem is not None:
            b, c, h, w = x.shape
            p = self.cfg.patch
            x = x.reshape(b, c, h // p, p, w // p, p).permute(0, 2, 4, 1, 3, 5)
            x = self.stem(x.reshape(b, (h // p) * (w // p), c * p * p))
        for block in self.blocks.values():
            x = block(x)
        if self.ln_f is not None and self.classifier is not None:
            x = self.classifier(self.ln_f(x).mean(dim=1))
        return x

    def keep_stage(self, stage: int, num_stages: int) -> Mixer:
        lo, hi = stage_bounds(self.cfg.layers, stage, num_stages)
        for key in list(self.blocks.keys()):
            if not lo <= int(key) < hi:
                del self.blocks[key]
        if stage != 0:
            self.stem = None
        if stage != num_stages - 1:
            self.ln_f = None
            self.classifier = None
        return self


def mixer_batch(cfg: MixerConfig, batch: int, *, step: int, index: int,
                ) -> tuple[torch.Tensor, torch.Tensor]:
    """Deterministic labelled images (examples.models.image_batch) for micro-batch ``index``."""
    return image_batch(CNNConfig(image_size=cfg.image_size), batch, seed=0, step=step,
                       index=index)


# ----------------------------------------------------------------------------- runs
def _apply(model: Mixer, layout: str, world: int) -> nn.Module:
    from torch.distributed.device_mesh import init_device_mesh

    if layout == "ddp":
        from torch.nn.parallel import DistributedDataParallel

        return DistributedDataParallel(model)
    mesh = init_device_mesh("cpu", (world,))
    if layout == "fsdp":
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

    plan: dict[str, Any] = {}
    for i in model.blocks.keys():
        for mlp in ("tok", "mlp"):
            plan[f"blocks.{i}.{mlp}.fc1"] = ColwiseParallel()
            plan[f"blocks.{i}.{mlp}.fc2"] = RowwiseParallel()
    return parallelize_module(model, mesh, plan)


def _step_fn(cfg: MixerConfig, layout: str, rank: int, world: int, micro_batch: int,
             global_batch: int) -> Any:
    torch.manual_seed(0)
    model = Mixer(cfg)
    dp = world if layout in ("ddp", "fsdp") else 1
    dp_rank = rank if dp > 1 else 0
    if layout == "pp":
        from torch.distributed.pipelining import PipelineStage, Schedule1F1B

        model.keep_stage(rank, world)
        n = global_batch // micro_batch
        sched = Schedule1F1B(PipelineStage(model, rank, world, torch.device("cpu")), n,
                             loss_fn=F.cross_entropy)
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3)

        def pp_step(step: int) -> None:
            parts = [mixer_batch(cfg, micro_batch, step=step, index=m) for m in range(n)]
            opt.zero_grad(set_to_none=True)
            if rank == 0:
                sched.step(torch.cat([p[0] for p in parts]))
            elif rank == world - 1:
                sched.step(target=torch.cat([p[1] for p in parts]))
            else:
                sched.step()
            opt.step()
        return pp_step, model
    wrapped = _apply(model, layout, world) if layout != "single" else model
    accum = global_batch // (micro_batch * dp)
    opt = torch.optim.AdamW(wrapped.parameters(), lr=1e-3, foreach=layout != "tp")

    def step_fn(step: int) -> None:
        opt.zero_grad(set_to_none=True)
        for m in range(accum):
            last = m == accum - 1
            ctx: contextlib.AbstractContextManager[Any] = contextlib.nullcontext()
            if layout == "ddp" and not last:
                ctx = wrapped.no_sync()  # type: ignore[operator]
            if layout == "fsdp":
                wrapped.set_requires_gradient_sync(last)  # type: ignore[operator]
            x, y = mixer_batch(cfg, micro_batch, step=step, index=dp_rank * accum + m)
            with ctx:
                (F.cross_entropy(wrapped(x), y) / accum).backward()
        opt.step()
    return step_fn, wrapped


@contextlib.contextmanager
def _capture(trace_dir: str | None, start: int, end: int) -> Iterator[None]:
    if not trace_dir:
        yield
        return
    import echo_trace

    with echo_trace.capture(out_dir=trace_dir, start_step=start, end_step=end):
        yield


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--layout", choices=LAYOUTS, default="single", help="parallel layout")
    ap.add_argument("--micro-batch", type=int, default=16, help="images per micro-batch")
    ap.add_argument("--global-batch", type=int, default=64, help="images per step")
    ap.add_argument("--steps", type=int, default=8, help="optimizer steps")
    ap.add_argument("--layers", type=int, default=4, help="mixer blocks")
    ap.add_argument("--hidden", type=int, default=128, help="channels")
    ap.add_argument("--time-steps", default=None, help="write per-step seconds (JSON) here")
    ap.add_argument("--capture", default=None, metavar="DIR", help="trace with echo_trace")
    ap.add_argument("--trace-start", type=int, default=1,
                    help="first captured step with --capture (0-based)")
    ap.add_argument("--trace-end", type=int, default=4,
                    help="step at which capture stops with --capture (exclusive)")
    a = ap.parse_args(argv)
    cfg = MixerConfig(layers=a.layers, hidden=a.hidden)
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if a.layout != "single":
        dist.init_process_group("gloo")
    rank = dist.get_rank() if dist.is_initialized() else 0
    try:
        step_fn, model = _step_fn(cfg, a.layout, rank, world, a.micro_batch, a.global_batch)
        times = []
        with _capture(a.capture, a.trace_start, a.trace_end):
            for i in range(a.steps):
                t0 = time.perf_counter()
                step_fn(i)
                times.append(time.perf_counter() - t0)
        if dist.is_initialized():
            dist.barrier()
        if a.time_steps and rank == 0:
            Path(a.time_steps).write_text(json.dumps({"layout": a.layout, "step_s": times}))
        del model, step_fn
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    rc = main()
    # Skip interpreter teardown, as profile-comm's ranks do: module-level caches (FSDP2's
    # DeviceMesh) still hold the gloo groups, and destroying them at exit aborted a rank of
    # the Mixer's FSDP2 job once (2026-11-29, exit -6) after its step times were written
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(rc)
