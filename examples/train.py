"""One training script for every parallel layout echo traces.

Run it as a plain script or under torchrun::

    python examples/train.py --layout single --model gpt --steps 6 --print-losses
    torchrun --nproc_per_node 2 examples/train.py --layout ddp --steps 6
    TRACE_ON=1 TRACE_START_STEP=2 TRACE_END_STEP=5 torchrun --nproc_per_node 2 \\
        examples/train.py --layout fsdp          # traced with no code change
    python examples/train.py --capture --trace-dir traces   # traced with echo_trace.capture
    python -m echo_sim search traces --gpus 2 --gpus-per-node 2 --cluster cpu-gloo \\
        --global-batch 16 --output best.json     # search the layouts of the traced model
    torchrun --nproc_per_node 2 examples/train.py --config best.json   # run the best one

Layouts (gloo on CPU, NCCL when CUDA is available), one small function each:
``single`` (one process), ``ddp`` (DistributedDataParallel), ``fsdp`` (FSDP2
``fully_shard`` per block, then the root), ``tp`` (DTensor ``parallelize_module``:
``qkv``/``fc1`` colwise, ``proj``/``fc2`` rowwise), ``pp`` (``torch.distributed.pipelining``:
one ``PipelineStage`` per rank, ``Schedule1F1B`` over micro-batches). Every step ends
with an AdamW ``optimizer.step()``, which is what echo_trace counts as a step.

``--recompute full`` checkpoints every transformer block, ``--recompute selective`` every
attention core (scores and probabilities rebuilt in backward); ``--schedule gpipe`` swaps the
pipeline schedule. ``--config FILE`` takes its settings from ``echo_sim search --output``.

Without ``--capture`` this is a plain training script: echo_trace is imported only when
``--capture`` is given. Flags: ``--help``.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import functools
import gc
import json
import os
import re
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn

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
    "LAYOUTS", "MODELS", "PP_SCHEDULES", "RECOMPUTE", "Job", "TrainConfig", "apply_ddp",
    "apply_fsdp", "apply_recompute", "apply_tp", "build_job", "build_parser", "config_defaults",
    "main", "parse_flags", "train",
]

LAYOUTS = ("single", "ddp", "fsdp", "tp", "pp")
MODELS = ("gpt", "cnn")
RECOMPUTE = ("none", "selective", "full")
PP_SCHEDULES = ("1f1b", "gpipe")


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
    recompute: str = "none"
    schedule: str = "1f1b"
    config: str | None = None

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
        if self.recompute not in RECOMPUTE:
            raise ValueError(f"--recompute {self.recompute!r}: choose one of "
                             f"{', '.join(RECOMPUTE)}")
        if self.recompute != "none" and self.model != "gpt":
            raise ValueError(f"--recompute {self.recompute} needs --model gpt (it "
                             "checkpoints transformer blocks or their attention cores)")
        if self.schedule not in PP_SCHEDULES:
            raise ValueError(f"--schedule {self.schedule!r}: choose one of "
                             f"{', '.join(PP_SCHEDULES)}")
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
_HELP = {
    "layout": f"parallel layout: {', '.join(LAYOUTS)}",
    "model": f"model: {', '.join(MODELS)}",
    "steps": "optimizer steps to run",
    "micro_batch": "samples per micro-batch (default: GPT 8, CNN 32)",
    "global_batch": "samples per step over all data-parallel ranks (default: one "
                    "micro-batch per rank; pp: one per stage)",
    "recompute": f"activation recomputation: {', '.join(RECOMPUTE)} (selective: "
                 "checkpoint every attention core; full: every transformer block)",
    "schedule": f"pipeline schedule for --layout pp: {', '.join(PP_SCHEDULES)}",
    "config": "a layout config from `python -m echo_sim search --output FILE`: its train "
              "settings become the defaults (flags given here still win)",
    "capture": "trace the run with echo_trace.capture",
    "print_losses": "print each step's loss",
    "time_steps": "write per-step wall times (JSON) to this file",
}


def _bool(text: str) -> bool:
    return text.lower() not in ("0", "false", "no")


class _Parser(argparse.ArgumentParser):
    """argparse that raises ValueError (``main`` prints it, exit 2) instead of exiting."""

    def error(self, message: str) -> NoReturn:
        m = re.match(r"argument (--[\w-]+).*expected one argument", message)
        if m:
            raise ValueError(f"{m.group(1)} needs a value")
        raise ValueError(f"{message}\n{self.format_usage()}")


def build_parser() -> argparse.ArgumentParser:
    """Every :class:`TrainConfig` field as ``--field-name`` (defaults ``None``: unset)."""
    p = _Parser(prog="train.py", add_help=False, allow_abbrev=False,
                description="Train a small model under one parallel layout (gloo on CPU, "
                            "NCCL on CUDA).",
                epilog=f"layouts: {', '.join(LAYOUTS)}; models: {', '.join(MODELS)}")
    p.add_argument("-h", "--help", action="store_true", help="show this help and exit")
    for f in dataclasses.fields(TrainConfig):
        flag = "--" + f.name.replace("_", "-")
        help_text = _HELP.get(f.name, f.name.replace("_", " "))
        if f.name in _BOOL_FLAGS:
            p.add_argument(flag, dest=f.name, nargs="?", const=True, default=None, type=_bool,
                           help=help_text)
            continue
        kind = str(f.type)
        conv: Callable[[str], Any] = int if "int" in kind else float if "float" in kind else str
        p.add_argument(flag, dest=f.name, type=conv, default=None, metavar="VALUE",
                       help=f"{help_text} (default {f.default})")
    return p


def _usage() -> str:
    return build_parser().format_help()


_CONFIG_KEYS = ("layout", "micro_batch", "global_batch", "recompute", "schedule", "layers",
                "hidden", "heads", "seq", "vocab")


def config_defaults(path: str) -> dict[str, Any]:
    """TrainConfig fields from an ``echo-search-config/1`` file's ``train`` section."""
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, ValueError) as e:
        raise ValueError(f"--config {path}: cannot read it as JSON ({e})") from None
    if not isinstance(data, dict) or not str(data.get("format", "")).startswith(
            "echo-search-config/"):
        raise ValueError(f"--config {path}: not an echo search config (no 'format': "
                         "'echo-search-config/1')")
    train_section = data.get("train")
    if not isinstance(train_section, dict):
        raise ValueError(f"--config {path}: this layout has no train.py form: "
                         f"{data.get('train_note', 'no train section')}")
    out = {k: train_section[k] for k in _CONFIG_KEYS if train_section.get(k) is not None}
    nproc = train_section.get("nproc")
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if isinstance(nproc, int) and nproc != world:
        raise ValueError(f"--config {path} lays the job out on {nproc} processes; this run "
                         f"has WORLD_SIZE={world} (torchrun --nproc_per_node {nproc})")
    return out


def parse_flags(argv: Sequence[str]) -> TrainConfig:
    """``--name value`` / ``--name=value`` / ``--flag`` → :class:`TrainConfig` (ValueError on
    bad input). With ``--config FILE`` the file's settings are defaults under the flags."""
    parser = build_parser()
    ns, extra = parser.parse_known_args(list(argv))
    if extra:
        first = extra[0]
        if first.startswith("--"):
            raise ValueError(f"unknown flag {first.split('=', 1)[0]}\n{_usage()}")
        raise ValueError(f"unexpected argument {first!r}\n{_usage()}")
    given = {k: v for k, v in vars(ns).items() if v is not None and k != "help"}
    values: dict[str, Any] = {}
    if given.get("config"):
        values.update(config_defaults(given["config"]))
    values.update(given)
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
    model = GPT(cfg.gpt()) if cfg.model == "gpt" else SmallCNN(cfg.cnn())
    if cfg.recompute == "full" and isinstance(model, GPT):
        apply_recompute(model)
    if cfg.recompute == "selective" and isinstance(model, GPT):
        for block in model.blocks.values():
            block.attn.recompute_core = True
    return model


def _checkpointed(block: nn.Module, x: torch.Tensor) -> torch.Tensor:
    from torch.utils.checkpoint import checkpoint

    out: torch.Tensor = checkpoint(type(block).forward, block, x, use_reentrant=False)
    return out


def apply_recompute(model: GPT) -> GPT:
    # Full activation recomputation (Chen et al. 2016): each block keeps only its input and
    # re-runs its forward during backward. The block's own ``forward`` is replaced on the
    # instance, so module names (and the TP plan, FSDP units, echo_trace events) stay the same.
    for block in model.blocks.values():
        block.forward = functools.partial(_checkpointed, block)  # type: ignore[method-assign]
    return model


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
    """pp: rank r holds pipeline stage r; Schedule1F1B (or ScheduleGPipe) runs the
    micro-batches of a step."""
    from torch.distributed.pipelining import PipelineStage, Schedule1F1B, ScheduleGPipe

    model = _build_model(cfg)
    assert isinstance(model, GPT)
    model.keep_stage(rank, world).to(device)
    global_batch = cfg.global_batch or cfg.batch * world
    n_micro = global_batch // cfg.batch
    if n_micro < world:
        raise ValueError(f"--global-batch {global_batch} gives {n_micro} micro-batches; "
                         f"Schedule1F1B needs at least one per stage ({world})")
    stage = PipelineStage(model, rank, world, device)
    kind = ScheduleGPipe if cfg.schedule == "gpipe" else Schedule1F1B
    schedule = kind(stage, n_micro, loss_fn=_loss)
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
