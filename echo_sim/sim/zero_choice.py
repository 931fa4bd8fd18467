"""Which ZeRO stage and precision a prediction models: stated, or the traced DeepSpeed job's.

``SimConfig.zero_stage`` (``simulate --zero-stage``) states the stage; ``fsdp=True`` is
ZeRO-3. With neither, a trace whose ``meta.json`` says ``training.framework ==
"deepspeed"`` (``integrations/deepspeed.py``) is predicted at its own
``training.zero_stage``, with the ``zero_optimization`` settings it recorded
(:func:`~echo_sim.workload.zero.zero_spec`); any other trace at stage 0 (DDP).

The same DeepSpeed ``training`` object names the engine's precision (``precision``:
``bf16``, ``fp16`` or ``fp32``) and optimizer (``optimizer``, a class name): DeepSpeed's
16-bit modes keep 16-bit parameters and gradients with an fp32 master copy (ZeRO §3.1's
mixed-precision Adam), so ``bf16``/``fp16`` mean the memory model's ``mixed`` and ``fp32``
means none, whatever the traced parameter dtype; the optimizer's name gives its number of
state tensors (:data:`~echo_sim.cost.memory_model.OPTIMIZER_STATES`). Other frameworks'
precision flags (AMP's ``16-mixed`` keeps fp32 parameters) are not read.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from echo_sim.cost.memory_model import OPTIMIZER_STATES, dtype_bytes, optimizer_states
from echo_sim.errors import ConfigError
from echo_sim.workload.zero import ZERO_STAGES, ZeroSpec, zero_spec

__all__ = ["MemoryPrecision", "ZeroChoice", "choose_zero", "memory_precision", "training_meta"]


def training_meta(meta: Mapping[str, Any]) -> dict[str, Any]:
    """meta.json's ``training`` object ({} when absent or not an object)."""
    t = meta.get("training")
    return dict(t) if isinstance(t, Mapping) else {}


def _deepspeed(training: Mapping[str, Any]) -> bool:
    return str(training.get("framework", "")) == "deepspeed"


@dataclass(frozen=True)
class ZeroChoice:
    """The stage modelled (0-3), its ZeRO-1/2 settings (None otherwise), the traced run's
    stage and data-parallel degree (for the memory baseline) and what to say about it."""

    stage: int
    spec: ZeroSpec | None
    traced_stage: int
    traced_dp: int
    notes: list[str] = field(default_factory=list)


def choose_zero(zero_stage: int | None, fsdp: bool, meta: Mapping[str, Any], *,
                pp: int, data_parallel: str = "ddp") -> ZeroChoice:
    """The :class:`ZeroChoice` for a config's ``zero_stage`` / ``fsdp`` and the traced
    ``meta`` (module docstring); a stated ``data_parallel`` other than ``ddp`` (parameter
    server, post-backward all-reduce) is stage 0, not the trace's. Raises :class:`ConfigError` for a DeepSpeed ZeRO-2 trace
    predicted with pipeline parallelism (DeepSpeed's pipeline engine takes stages 0-1)."""
    training = training_meta(meta)
    traced = training.get("zero_stage") if _deepspeed(training) else None
    traced_stage = traced if isinstance(traced, int) and traced in ZERO_STAGES else 0
    dp = training.get("data_parallel_size")
    traced_dp = dp if isinstance(dp, int) and dp >= 1 else 1
    notes: list[str] = []
    if zero_stage is not None:
        stage = zero_stage
    elif fsdp:
        stage = 3
    elif traced is not None and traced_stage == traced and data_parallel == "ddp":
        stage = traced_stage
        notes.append(f"ZeRO-{stage} from DeepSpeed (meta.json training.zero_stage); "
                     "--zero-stage 0|1|2|3 or --fsdp to predict another")
        if stage == 2 and pp > 1:
            raise ConfigError(f"the trace's DeepSpeed zero_stage=2 with pp={pp}: DeepSpeed's "
                              "pipeline engine takes ZeRO stage 0 or 1; pass --zero-stage "
                              "0, 1 or 3")
    else:
        stage = 0
    spec = zero_spec(stage, training) if stage in (1, 2) else None
    if spec is not None:
        notes.append(spec.describe())
    return ZeroChoice(stage=stage, spec=spec, traced_stage=traced_stage, traced_dp=traced_dp,
                      notes=notes)


@dataclass(frozen=True)
class MemoryPrecision:
    """Bytes per parameter element, optimizer state tensors, fp32 master copy, and the
    note saying where they came from (None: the traced dtype and UPDATE op's name)."""

    elem_bytes: int
    states: int
    mixed: bool
    note: str | None = None


def memory_precision(dtype: str, update_name: str | None,
                     meta: Mapping[str, Any]) -> MemoryPrecision:
    """The memory model's precision: the traced parameter ``dtype`` and optimizer
    (``UPDATE.<class>``; 0 states without one), overridden by a DeepSpeed trace's
    ``training.precision`` / ``training.optimizer`` (module docstring)."""
    elem = dtype_bytes(dtype)
    mixed = elem == 2
    states = optimizer_states(update_name) if update_name else 0
    training = training_meta(meta)
    if not _deepspeed(training):
        return MemoryPrecision(elem, states, mixed)
    said: list[str] = []
    prec = training.get("precision")
    if prec in ("bf16", "fp16", "fp32"):
        mixed = prec != "fp32"
        said.append(f"precision {prec}" + (" (16-bit parameters, fp32 master copy)"
                                           if mixed else ""))
    opt = training.get("optimizer")
    if isinstance(opt, str) and opt.rsplit(".", 1)[-1].lower() in OPTIMIZER_STATES:
        states = optimizer_states(opt)
        said.append(f"optimizer {opt} ({states} state tensor(s))")
    note = (f"memory: {' and '.join(said)} from DeepSpeed (meta.json training)"
            if said else None)
    return MemoryPrecision(elem, states, mixed, note)
