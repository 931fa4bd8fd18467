"""Runtime mode of ``echo_trace.profile``: train a few steps under capture and time them.

One process, or one of ``--nproc`` processes started by torchrun (``WORLD_SIZE`` set): the
process group is gloo on CPU and NCCL on CUDA, the model is wrapped in DDP (``pytorch``,
``huggingface``) or handed to ``deepspeed.initialize`` (``deepspeed``). Steps ``0 ..
warmup-1`` are warm-up, ``warmup .. warmup+repeats-1`` are captured (``cap.step()`` marks
each end), any further steps up to ``steps`` run untraced. The step time reported is the
median wall time of the captured steps (CUDA synchronised at each step end).
"""

from __future__ import annotations

import logging
import os
import statistics
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from echo_trace.profile.meta import annotate_meta, comm_summary, training_meta
from echo_trace.profile.models import ModelBundle, call_model, loss_of, to_device

__all__ = ["RunResult", "RuntimeSpec", "run_runtime"]

log = logging.getLogger("echo_trace")


@dataclass(frozen=True, kw_only=True)
class RuntimeSpec:
    """What to run: ``framework``, steps (``warmup`` untraced, then ``repeats`` traced, up to
    ``steps`` in all), where to write (``path``), and DeepSpeed's ``zero_stage``."""

    framework: str
    path: str
    warmup: int = 2
    repeats: int = 3
    steps: int | None = None
    lr: float = 1e-4
    zero_stage: int = 0
    overwrite: bool = False
    gzip: bool = False

    def __post_init__(self) -> None:
        if self.warmup < 0:
            raise ValueError(f"warmup={self.warmup}: expected >= 0")
        if self.repeats < 1:
            raise ValueError(f"repeats={self.repeats}: expected >= 1")
        if self.steps is None:
            object.__setattr__(self, "steps", self.warmup + self.repeats)
        elif self.steps < self.warmup + self.repeats:
            raise ValueError(f"steps={self.steps}: expected >= warmup + repeats "
                             f"({self.warmup + self.repeats})")
        if self.zero_stage not in (0, 1, 2, 3):
            raise ValueError(f"zero_stage={self.zero_stage}: expected 0, 1, 2 or 3")


@dataclass
class RunResult:
    """Where the trace went and how long a captured step took (median, µs)."""

    rank_dir: Path | None
    step_time_us: float
    step_times_us: list[float] = field(default_factory=list)
    rank: int = 0
    world_size: int = 1


def _dist_setup() -> tuple[int, int, Any]:
    """Join the process group when launched by torchrun; (rank, world, device)."""
    import torch

    world = int(os.environ.get("WORLD_SIZE", "1") or 1)
    local = int(os.environ.get("LOCAL_RANK", "0") or 0)
    cuda = torch.cuda.is_available()
    device = torch.device("cuda", local) if cuda else torch.device("cpu")
    if cuda:
        torch.cuda.set_device(device)
    if world > 1:
        import torch.distributed as dist

        if not dist.is_initialized():
            dist.init_process_group("nccl" if cuda else "gloo")
        return dist.get_rank(), dist.get_world_size(), device
    return 0, 1, device


def _sync(device: Any) -> None:
    import torch

    if device.type == "cuda":
        torch.cuda.synchronize(device)


def run_runtime(spec: RuntimeSpec, bundle: ModelBundle) -> RunResult:
    """Train ``bundle`` for ``spec.steps`` steps under capture; see the module docstring."""
    import torch

    import echo_trace

    rank, world, device = _dist_setup()
    model = bundle.model.to(device)
    model.train()
    engine: Any = None
    ds_cfg: dict[str, Any] = {}
    if spec.framework == "deepspeed":
        from integrations.deepspeed import initialize_engine

        engine, ds_cfg = initialize_engine(model, micro_batch_size=int(
            bundle.info.get("micro_batch_size") or 1), zero_stage=spec.zero_stage, lr=spec.lr)
        trained: Any = engine
        opt: Any = None
    else:
        trained = model
        if world > 1:
            from torch.nn.parallel import DistributedDataParallel as DDP

            trained = DDP(model, device_ids=[device.index] if device.type == "cuda" else None)
        opt = torch.optim.AdamW(model.parameters(), lr=spec.lr)
    total_steps = spec.steps if spec.steps is not None else spec.warmup + spec.repeats
    cap = echo_trace.capture(out_dir=spec.path, start_step=spec.warmup,
                             end_step=spec.warmup + spec.repeats, model=trained,
                             overwrite=spec.overwrite, gzip=spec.gzip)
    times_us: list[float] = []
    with cap:
        for step in range(total_steps):
            t0 = time.perf_counter()
            batch = to_device(bundle.make_batch(), device)
            if engine is not None:
                loss = loss_of(call_model(engine, batch), bundle.loss_fn)
                engine.backward(loss)
                engine.step()
            else:
                loss = loss_of(call_model(trained, batch), bundle.loss_fn)
                loss.backward()
                opt.step()
                opt.zero_grad(set_to_none=True)
            _sync(device)
            cap.step()
            if spec.warmup <= step < spec.warmup + spec.repeats:
                times_us.append((time.perf_counter() - t0) * 1e6)
    if engine is not None:
        from integrations.deepspeed import deepspeed_training_meta

        training = deepspeed_training_meta(engine)
        training["deepspeed_config"] = ds_cfg
        if cap.rank_dir is not None and cap.written is not None:
            training["collectives"] = comm_summary(cap.rank_dir)
    else:
        training = training_meta(framework=spec.framework,
                                 micro_batch_size=bundle.info.get("micro_batch_size"),
                                 gradient_accumulation_steps=1, data_parallel_size=world)
    if cap.written is not None:
        annotate_meta(cap.rank_dir, training, model=bundle.info)
    step_us = statistics.median(times_us) if times_us else 0.0
    return RunResult(rank_dir=cap.rank_dir if cap.written is not None else None,
                     step_time_us=step_us, step_times_us=times_us, rank=rank, world_size=world)
