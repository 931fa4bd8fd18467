"""One training script for every parallel layout echo traces.

Run it as a plain script or under torchrun::

    python examples/train.py --layout single --model gpt --steps 6 --print-losses
    torchrun --nproc_per_node 2 examples/train.py --layout ddp --steps 6
    TRACE_ON=1 TRACE_START_STEP=2 TRACE_END_STEP=5 torchrun --nproc_per_node 2 \\
        examples/train.py --layout fsdp          # traced with no code change
    python examples/train.py --capture --trace-dir traces   # traced with echo_trace.capture

Layouts (gloo on CPU, NCCL when CUDA is available), one small function each:
``single`` (one process), ``ddp`` (DistributedDataParallel), ``fsdp`` (FSDP2
``fully_shard`` per block, then the root), ``tp`` (DTensor ``parallelize_module``:
``qkv``/``fc1`` colwise, ``proj``/``fc2`` rowwise), ``pp`` (``torch.distributed.pipelining``:
one ``PipelineStage`` per rank, ``Schedule1F1B`` over micro-batches). Every step ends
with an AdamW ``optimizer.step()``, which is what echo_trace counts as a step.

Without ``--capture`` this is a plain training script: echo_trace is imported only when
``--capture`` is given. Flags: ``--help``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import json
import os
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn

if __package__ in (None, ""):  # run as a script: make ``examples`` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from examples.models import (  # noqa: E402
    GPT,
    CNNConfig,
    GPTConfig,
    SmallCNN,
    image_batch,
    token_batch,
)

__all__ = [
    "LAYOUTS", "MODELS", "Job", "TrainConfig", "apply_ddp", "apply_fsdp", "apply_tp",
    "build_job", "main", "parse_flags", "train",
]

LAYOUTS = ("single", "ddp", "fsdp", "tp", "pp")
MODELS = ("gpt", "cnn")


@dataclass(frozen=True, kw_only=True)
class TrainConfig:
    """Everything one run needs; built from command-line flags by :func:`parse_flags`.

    ``global_batch`` is samples per optimizer step over all data-parallel ranks; it must be
    a multiple of ``micro_batch`` × data-parallel degree (the quotient is the number of
    gradient-accumulation micro-batches, or pipeline micro-batches for ``pp``). ``None``
    picks one micro-batch per data-parallel rank (``pp``: one micro-batch per stage).
    ``micro_batch`` ``None`` picks the model's default (GPT 8 sequences, CNN 32 images),
    sized so one step takes a few tens of milliseconds on one CPU thread.
    """

    layout: str = "single"
    model: str = "gpt"
    steps: int = 6
    micro_batch: int | None = None
    global_batch: int | None = None
    layers: int = 4
    hidden: int = 128
    heads: int = 4
    seq: int = 64
    vocab: int = 256
    width: int = 32
    image_size: int = 32
    lr: float = 3e-3
    seed: int = 0
    capture: bool = False
    trace_dir: str = "traces"
    trace_start: int = 2
    trace_end: int = 5
    print_losses: bool = False
    time_steps: str | None = None

    def __post_init__(self) -> None:
        if self.layout not in LAYOUTS:
            raise ValueError(f"--layout {self.layout!r}: choose one of {', '.join(LAYOUTS)}")
        if self.model not in MODELS:
            raise ValueError(f"--model {self.model!r}: choose one of {', '.join(MODELS)}")
        if self.model == "cnn" and self.layout in ("tp", "pp"):
            raise ValueError(f"--layout {self.layout} needs --model gpt (the CNN has no "
                             "Megatron blocks to shard or split)")
        if self.micro_batch is not None and self.micro_batch < 1:
            raise ValueError(f"--micro-batch {self.micro_batch} must be >= 1")
        for name in ("steps", "layers", "hidden", "heads", "seq", "vocab",
                     "width", "image_size"):
            if getattr(self, name) < 1:
                raise ValueError(f"--{name.replace('_', '-')} {getattr(self, name)} must be >= 1")
        if self.global_batch is not None and self.global_batch % self.batch:
            raise ValueError(f"--global-batch {self.global_batch} must be a multiple of "
                             f"--micro-batch {self.batch}")
        if self.lr <= 0:
            raise ValueError(f"--lr {self.lr} must be > 0")
        if not 0 <= self.trace_start < self.trace_end:
            raise ValueError(f"--trace-start {self.trace_start} / --trace-end {self.trace_end}: "
                             "need 0 <= start < end")

    @property
    def batch(self) -> int:
        """Samples per micro-batch (``micro_batch`` or the model's default)."""
        if self.micro_batch is not None:
            return self.micro_batch
        return 8 if self.model == "gpt" else 32

    def gpt(self) -> GPTConfig:
        return GPTConfig(vocab_size=self.vocab, seq_len=self.seq, hidden=self.hidden,
                         layers=self.layers, heads=self.heads)

    def cnn(self) -> CNNConfig:
        return CNNConfig(image_size=self.image_size, width=self.width)


# ------------------------------------------------------------------------------ flags
_BOOL_FLAGS = {"capture", "print_losses"}


def _usage() -> str:
    lines = ["usage: train.py [flags]"]
    for f in dataclasses.fields(TrainConfig):
        flag = "--" + f.name.replace("_", "-")
        lines.append(f"  {flag}" + ("" if f.name in _BOOL_FLAGS else f" VALUE (default {f.default})"))
    lines.append(f"  layouts: {', '.join(LAYOUTS)}; models: {', '.join(MODELS)}")
    return "\n".join(lines)


def parse_flags(argv: Sequence[str]) -> TrainConfig:
    """``--name value`` / ``--name=value`` / ``--flag`` → :class:`TrainConfig` (ValueError on bad input)."""
    types = {f.name: f.type for f in dataclasses.fields(TrainConfig)}
    values: dict[str, Any] = {}
    args = list(argv)
    i = 0
    while i < len(args):
        arg = args[i]
        if not arg.startswith("--"):
            raise ValueError(f"unexpected argument {arg!r}\n{_usage()}")
        name, eq, value = arg[2:].partition("=")
        key = name.replace("-", "_")
        if key not in types:
            raise ValueError(f"unknown flag --{name}\n{_usage()}")
        if key in _BOOL_FLAGS:
            values[key] = value.lower() not in ("0", "false", "no") if eq else True
        else:
            if not eq:
                i += 1
                if i >= len(args):
                    raise ValueError(f"--{name} needs a value")
                value = args[i]
            kind = str(types[key])
            if "int" in kind:
                values[key] = int(value)
            elif "float" in kind:
                values[key] = float(value)
            else:
                values[key] = value
        i += 1
    return TrainConfig(**values)


# ------------------------------------------------------------------------------ the job
@dataclass
class Job:
    """A built training job: call :meth:`step` once per optimizer step."""

    cfg: TrainConfig
    rank: int
    world_size: int
    device: torch.device
    model: nn.Module
    optimizer: torch.optim.Optimizer
    run_step: Callable[[int], float | None]
    owns_loss: bool  # this rank prints a loss (dp: every rank, its shard's; tp: rank 0; pp: last)
    losses: list[float] = field(default_factory=list)
    step_s: list[float] = field(default_factory=list)

    def step(self, index: int) -> float | None:
        """One optimizer step on batch ``index``; returns the loss where this rank has it."""
        t0 = time.perf_counter()
        loss = self.run_step(index)
        self.step_s.append(time.perf_counter() - t0)
        if loss is not None:
            self.losses.append(loss)
        return loss


def _device() -> torch.device:
    if torch.cuda.is_available():
        local = int(os.environ.get("LOCAL_RANK", "0"))
        torch.cuda.set_device(local)
        return torch.device("cuda", local)
    return torch.device("cpu")


def _build_model(cfg: TrainConfig) -> nn.Module:
    torch.manual_seed(cfg.seed)  # same initial weights on every rank
    return GPT(cfg.gpt()) if cfg.model == "gpt" else SmallCNN(cfg.cnn())


def _batch(cfg: TrainConfig, step: int, index: int,
           device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """Micro-batch ``index`` of the global batch of ``step``: the same samples whatever the
    layout, so every layout trains on the same data as ``single`` with accumulation."""
    if cfg.model == "gpt":
        x, y = token_batch(cfg.gpt(), cfg.batch, seed=cfg.seed, step=step, index=index)
    else:
        x, y = image_batch(cfg.cnn(), cfg.batch, seed=cfg.seed, step=step, index=index)
    return x.to(device), y.to(device)


def _loss(out: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    return F.cross_entropy(out.reshape(-1, out.shape[-1]), target.reshape(-1))


def apply_ddp(model: nn.Module, device: torch.device) -> nn.Module:
    from torch.nn.parallel import DistributedDataParallel

    ids = [device.index] if device.type == "cuda" else None
    return DistributedDataParallel(model, device_ids=ids)


def apply_fsdp(model: nn.Module, device: torch.device, world_size: int) -> nn.Module:
    # Shard each transformer block as its own unit (its all-gather overlaps the previous
    # block's compute), then the root for the embeddings, final norm and head.
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    mesh = init_device_mesh(device.type, (world_size,))
    if isinstance(model, GPT):
        for block in model.blocks.values():
            fully_shard(block, mesh=mesh)
    fully_shard(model, mesh=mesh)
    return model


def apply_tp(model: nn.Module, device: torch.device, world_size: int) -> nn.Module:
    # Megatron pattern: qkv and fc1 split by output column, proj and fc2 by input row, so
    # each block needs one all-reduce after attention and one after the MLP (forward), and
    # the same two in backward. Embeddings, norms and head stay replicated.
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor.parallel import (
        ColwiseParallel,
        RowwiseParallel,
        parallelize_module,
    )

    assert isinstance(model, GPT)
    if model.cfg.heads % world_size:
        raise ValueError(f"--heads {model.cfg.heads} must divide by the tensor-parallel "
                         f"degree {world_size}")
    mesh = init_device_mesh(device.type, (world_size,))
    plan: dict[str, Any] = {}
    for i in model.blocks.keys():
        plan[f"blocks.{i}.attn.qkv"] = ColwiseParallel()
        plan[f"blocks.{i}.attn.proj"] = RowwiseParallel()
        plan[f"blocks.{i}.mlp.fc1"] = ColwiseParallel()
        plan[f"blocks.{i}.mlp.fc2"] = RowwiseParallel()
    return parallelize_module(model, mesh, plan)


def _dp_job(cfg: TrainConfig, rank: int, world: int, device: torch.device) -> Job:
    """single / ddp / fsdp / tp: every rank runs the whole step; dp ranks read their own shard."""
    model = _build_model(cfg).to(device)
    dp_degree = 1 if cfg.layout in ("single", "tp") else world
    dp_rank = 0 if cfg.layout in ("single", "tp") else rank
    if cfg.layout == "ddp":
        model = apply_ddp(model, device)
    elif cfg.layout == "fsdp":
        model = apply_fsdp(model, device, world)
    elif cfg.layout == "tp":
        model = apply_tp(model, device, world)
    global_batch = cfg.global_batch or cfg.batch * dp_degree
    if global_batch % (cfg.batch * dp_degree):
        raise ValueError(f"--global-batch {global_batch} must be a multiple of --micro-batch "
                         f"{cfg.batch} x data-parallel degree {dp_degree}")
    accum = global_batch // (cfg.batch * dp_degree)
    # foreach kernels cannot mix DTensor and plain parameters (tp keeps some replicated)
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.lr, foreach=cfg.layout != "tp")

    def sync_grads(last: bool) -> contextlib.AbstractContextManager[Any]:
        # gradient accumulation: reduce gradients only on the last micro-batch
        if cfg.layout == "ddp" and not last:
            return model.no_sync()  # type: ignore[operator]
        if cfg.layout == "fsdp":
            model.set_requires_gradient_sync(last)  # type: ignore[operator]
        return contextlib.nullcontext()

    def run_step(step: int) -> float:
        batches = [_batch(cfg, step, dp_rank * accum + m, device) for m in range(accum)]
        opt.zero_grad(set_to_none=True)
        total = torch.zeros((), device=device)
        for m, (x, y) in enumerate(batches):
            with sync_grads(m == accum - 1):
                loss = _loss(model(x), y) / accum
                loss.backward()
            total += loss.detach()
        opt.step()
        return float(total.item())

    # data-parallel ranks each report the loss of their own shard; tp ranks all share one
    return Job(cfg, rank, world, device, model, opt, run_step,
               owns_loss=cfg.layout != "tp" or rank == 0)


def _pp_job(cfg: TrainConfig, rank: int, world: int, device: torch.device) -> Job:
    """pp: rank r holds pipeline stage r; Schedule1F1B runs the micro-batches of a step."""
    from torch.distributed.pipelining import PipelineStage, Schedule1F1B

    model = _build_model(cfg)
    assert isinstance(model, GPT)
    model.keep_stage(rank, world).to(device)
    global_batch = cfg.global_batch or cfg.batch * world
    n_micro = global_batch // cfg.batch
    if n_micro < world:
        raise ValueError(f"--global-batch {global_batch} gives {n_micro} micro-batches; "
                         f"Schedule1F1B needs at least one per stage ({world})")
    stage = PipelineStage(model, rank, world, device)
    schedule = Schedule1F1B(stage, n_micro, loss_fn=_loss)
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.lr)
    last = rank == world - 1

    def run_step(step: int) -> float | None:
        # every stage draws the same global batch, as micro-batches 0..n_micro-1
        parts = [_batch(cfg, step, m, device) for m in range(n_micro)]
        x = torch.cat([p[0] for p in parts])
        y = torch.cat([p[1] for p in parts])
        opt.zero_grad(set_to_none=True)
        losses: list[torch.Tensor] = []
        if rank == 0:
            schedule.step(x)
        elif last:
            schedule.step(target=y, losses=losses)
        else:
            schedule.step()
        opt.step()
        return float(torch.stack(losses).mean().item()) if last else None

    return Job(cfg, rank, world, device, model, opt, run_step, owns_loss=last)


def build_job(cfg: TrainConfig) -> Job:
    """Initialise the process group (distributed layouts) and build model, optimizer and step."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    device = _device()
    if cfg.layout == "single":
        if world != 1:
            raise ValueError(f"--layout single runs one process, got WORLD_SIZE={world}")
        return _dp_job(cfg, 0, 1, device)
    if "RANK" not in os.environ:
        raise ValueError(f"--layout {cfg.layout} needs a launcher: torchrun --nproc_per_node N "
                         "examples/train.py ...")
    if not dist.is_initialized():
        dist.init_process_group("nccl" if device.type == "cuda" else "gloo")
    rank = dist.get_rank()
    if cfg.layout == "pp":
        return _pp_job(cfg, rank, world, device)
    return _dp_job(cfg, rank, world, device)


@contextlib.contextmanager
def _maybe_capture(cfg: TrainConfig) -> Iterator[None]:
    if not cfg.capture:
        yield
        return
    import echo_trace  # only with --capture: the plain script never imports it

    with echo_trace.capture(out_dir=cfg.trace_dir, start_step=cfg.trace_start,
                            end_step=cfg.trace_end):
        yield


def train(cfg: TrainConfig, job: Job | None = None) -> Job:
    """Run ``cfg.steps`` optimizer steps of ``job`` (built from ``cfg`` if not given),
    inside ``echo_trace.capture`` with ``--capture``."""
    job = build_job(cfg) if job is None else job
    with _maybe_capture(cfg):
        for i in range(cfg.steps):
            loss = job.step(i)
            if cfg.print_losses and job.owns_loss:
                # one write per line, so lines of ranks sharing a pipe never interleave
                sys.stdout.write(f"rank {job.rank} step {i} loss {loss!r}\n")
                sys.stdout.flush()
    if cfg.time_steps and job.rank == 0:
        Path(cfg.time_steps).write_text(json.dumps({
            "layout": cfg.layout, "model": cfg.model, "world_size": job.world_size,
            "step_s": job.step_s, "config": dataclasses.asdict(cfg)}, indent=1))
    return job


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if "-h" in args or "--help" in args:
        print(_usage())
        return 0
    try:
        try:
            cfg = parse_flags(args)
            job = build_job(cfg)
        except ValueError as e:
            print(f"train.py: {e}", file=sys.stderr)
            return 2
        train(cfg, job)
        if dist.is_initialized():
            dist.barrier()  # no rank tears down while a peer still communicates
        # Free the model (DDP's reducer, FSDP / pipeline state hold process-group work)
        # before the group goes: gloo aborts now and then if they outlive it.
        del job
        gc.collect()
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
