"""Trace a DeepSpeed engine: wrap the training loop.

    from integrations.deepspeed import trace_engine
    engine, *_ = deepspeed.initialize(model=model, optimizer=opt, config=ds_config)
    with trace_engine(engine, out_dir="traces", start_step=2, end_step=5):
        for batch in loader:
            loss = engine(batch); engine.backward(loss); engine.step()

A step is one DeepSpeed global step (``engine.global_steps`` advancing: the optimizer step
at the gradient-accumulation boundary), so one captured step holds every micro-batch of
it. ZeRO's collectives are recorded as they run (``Comm.all_reduce``,
``Comm.all_gather``, ``Comm.reduce_scatter``... through ``torch.distributed``), and meta.json's
``training`` names the ZeRO stage, the engine's batch figures
(``train_micro_batch_size_per_gpu``, ``gradient_accumulation_steps``, ``train_batch_size``,
``dp_world_size``), its ``precision`` and ``optimizer``, the ``zero_optimization`` settings
(``zero_config``: bucket sizes, ``overlap_comm``...) and a per-collective count and byte total
of the captured steps; ``echo_sim simulate`` predicts the trace at its own ZeRO stage. On CPU
DeepSpeed runs with its ``cpu`` accelerator over gloo (``DS_ACCELERATOR=cpu``).
Install: ``pip install 'echo-sim[deepspeed]'``.
"""

from __future__ import annotations

import os
import socket
from types import TracebackType
from typing import Any

import echo_trace
from echo_trace.profile.meta import annotate_written, training_meta

__all__ = ["DeepSpeedTrace", "deepspeed_training_meta", "initialize_engine", "trace_engine"]



def _ask(engine: Any, method: str) -> Any:
    """``engine.<method>()``, or None when this DeepSpeed version lacks it or it fails."""
    try:
        return getattr(engine, method)()
    except Exception:  # noqa: BLE001 - an optional fact; never hurt the job
        return None


def _precision(engine: Any) -> str:
    """``bf16``, ``fp16`` or ``fp32``: the engine's parameter precision."""
    if _ask(engine, "bfloat16_enabled"):
        return "bf16"
    return "fp16" if _ask(engine, "fp16_enabled") else "fp32"


def _zero_config(engine: Any) -> dict[str, Any]:
    """The ``zero_optimization`` settings echo_sim's ZeRO-1/2 model reads
    (``echo_sim.workload.zero.zero_spec``); a setting this version lacks is left out."""
    out: dict[str, Any] = {}
    for key, method in (("reduce_bucket_size", "zero_reduce_bucket_size"),
                        ("allgather_bucket_size", "zero_allgather_bucket_size"),
                        ("overlap_comm", "zero_overlap_comm"),
                        ("reduce_scatter", "zero_reduce_scatter"),
                        ("use_multi_rank_bucket_allreduce", "zero_multi_rank_bucket_allreduce"),
                        ("contiguous_gradients", "zero_contiguous_gradients")):
        v = _ask(engine, method)
        if isinstance(v, bool):
            out[key] = v
        elif isinstance(v, (int, float)):
            out[key] = int(v)
    return out


def deepspeed_training_meta(engine: Any) -> dict[str, Any]:
    """meta.json's ``training`` object from a DeepSpeed engine's own configuration: the
    batch figures, ``zero_stage``, ``precision`` (bf16 / fp16 / fp32), ``optimizer`` (the
    client optimizer's class or the config's optimizer name) and ``zero_config`` (bucket
    sizes, ``overlap_comm``, ``reduce_scatter``...), which ``echo_sim simulate`` models."""
    extra: dict[str, Any] = {"precision": _precision(engine), "zero_config": _zero_config(engine)}
    opt = _ask(engine, "optimizer_name")
    if isinstance(opt, str) and opt:
        extra["optimizer"] = opt
    return training_meta(
        framework="deepspeed", micro_batch_size=int(engine.train_micro_batch_size_per_gpu()),
        gradient_accumulation_steps=int(engine.gradient_accumulation_steps()),
        data_parallel_size=int(getattr(engine, "dp_world_size", 1) or 1),
        global_batch_size=int(engine.train_batch_size()),
        zero_stage=int(engine.zero_optimization_stage()), **extra)


class DeepSpeedTrace:
    """Capture DeepSpeed global steps ``start_step .. end_step-1`` (see the module docstring).

    Wraps ``engine.step`` on the instance while active (restored on exit) so each global
    step marks a step boundary; ``capture_kwargs`` go to :func:`echo_trace.capture`.
    """

    def __init__(self, engine: Any, out_dir: str | os.PathLike[str] = "traces",
                 start_step: int = 2, end_step: int | None = 5, **capture_kwargs: Any) -> None:
        self.engine = engine
        self.cap = echo_trace.capture(out_dir, start_step, end_step, model=engine,
                                      **capture_kwargs)
        self._orig_step: Any = None
        self._annotated = False

    def __enter__(self) -> DeepSpeedTrace:
        self.cap.start()
        engine = self.engine
        orig = engine.step
        self._orig_step = orig

        def step(*args: Any, **kwargs: Any) -> Any:
            before = int(engine.global_steps)
            out = orig(*args, **kwargs)
            for _ in range(int(engine.global_steps) - before):
                self.cap.step()
            self._annotate()
            return out

        engine.step = step
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if self._orig_step is not None:
            self.engine.step = self._orig_step
            self._orig_step = None
        self.cap.stop()
        self._annotate()

    def _annotate(self) -> None:
        if not self._annotated:
            self._annotated = annotate_written(
                self.cap, lambda: deepspeed_training_meta(self.engine), collectives=True)

def trace_engine(engine: Any, out_dir: str | os.PathLike[str] = "traces", start_step: int = 2,
                 end_step: int | None = 5, **capture_kwargs: Any) -> DeepSpeedTrace:
    """``with trace_engine(engine, ...):`` around the training loop."""
    return DeepSpeedTrace(engine, out_dir, start_step, end_step, **capture_kwargs)


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def initialize_engine(model: Any, *, micro_batch_size: int, zero_stage: int = 1,
                      lr: float = 1e-4, gradient_accumulation_steps: int = 1,
                      ) -> tuple[Any, dict[str, Any]]:
    """``deepspeed.initialize`` with a torch AdamW and ZeRO ``zero_stage``; (engine, config).

    Joins (or creates, for a single process) the process group: gloo on CPU, where the
    ``cpu`` accelerator is selected unless ``DS_ACCELERATOR`` says otherwise.
    """
    import torch

    if not torch.cuda.is_available():
        os.environ.setdefault("DS_ACCELERATOR", "cpu")
    if "RANK" not in os.environ:  # one process, no launcher
        os.environ.update(RANK="0", LOCAL_RANK="0", WORLD_SIZE="1",
                          MASTER_ADDR="127.0.0.1", MASTER_PORT=str(_free_port()))
    import deepspeed

    deepspeed.init_distributed(dist_backend="nccl" if torch.cuda.is_available() else "gloo")
    config: dict[str, Any] = {
        "train_micro_batch_size_per_gpu": micro_batch_size,
        "gradient_accumulation_steps": gradient_accumulation_steps,
        "zero_optimization": {"stage": zero_stage},
    }
    opt = torch.optim.AdamW(model.parameters(), lr=lr)
    engine, _, _, _ = deepspeed.initialize(model=model, optimizer=opt, config=config)
    return engine, config
