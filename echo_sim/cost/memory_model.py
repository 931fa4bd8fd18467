"""Per-rank peak memory of a training step: model states, activations, buffers.

Model states (Rajbhandari et al. 2020, "ZeRO", §3.1 and §5): ``Ψ`` parameters of
``k`` bytes each (the traced dtype) hold ``kΨ`` parameters, ``kΨ`` gradients and the
optimizer's fp32 state, ``4Ψ`` per state tensor (AdamW: 2, exp_avg and exp_avg_sq), plus a
``4Ψ`` fp32 master copy under mixed precision (16-bit parameters) — the paper's
``2Ψ + 2Ψ + 12Ψ = 16Ψ`` for mixed-precision Adam. ZeRO-1 divides the optimizer state by the
data-parallel degree ``N_d``, ZeRO-2 also the gradients, ZeRO-3 / FSDP all three
(:func:`zero_state_bytes`); tensor parallelism divides the sharded layers' share by ``tp``.

Activations: per forward op on the stage, the bytes autograd saved for backward that the
call made, as echo_trace measures them (``saved_bytes``: its output and what its parent's
code made before it, e.g. an attention core before its output projection), else the traced
``out_bytes``; scaled to the target micro-batch, the tensor-parallel side (column, the ops
between column and row, and the row op's range) divided by ``tp``. With full recomputation only each block's input is kept, plus one block's
activations while it is recomputed (Chen et al. 2016; Korthikanti et al. 2022, §4: the
``2sbh`` bytes per layer of checkpointed 16-bit inputs). Pipeline stages hold the
activations of every micro-batch forwarded and not yet backwarded: ``pp - s`` on stage ``s``
under 1F1B, all ``m`` under GPipe (Narayanan et al. 2021, §2.2); counted exactly from the
schedule. :func:`korthikanti_activation_bytes` gives the paper's closed form for a
transformer layer (bytes, 16-bit activations) for comparison.

Buffers: DDP's gradient buckets (a flat copy of every gradient, ``gradient_as_bucket_view``
off, PyTorch's default); FSDP's gathered parameters of the units in flight (2 with
prefetch) and one unit's unsharded gradients for the reduce-scatter.

Peak = parameters + gradients + optimizer states + activations + buffers (+ a measured
baseline: the traced peak minus this model's estimate of the traced run, which carries the
runtime's own memory — CUDA context or the Python process — when the target device kind
matches the traced one).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from echo_sim.workload.ops import Op

__all__ = [
    "MemoryEstimate",
    "OPTIMIZER_STATES",
    "activation_bytes",
    "dtype_bytes",
    "korthikanti_activation_bytes",
    "model_state_bytes",
    "optimizer_states",
    "parse_bytes",
    "recompute_working_bytes",
    "zero_state_bytes",
]

OPTIMIZER_STATES: dict[str, int] = {
    "adamw": 2, "adam": 2, "adamax": 2, "nadam": 2, "radam": 2, "lamb": 2, "adadelta": 2,
    "adagrad": 1, "rmsprop": 1, "sgd": 1, "adafactor": 1, "lion": 1,
}
"""fp32 state tensors per parameter (SGD: the momentum buffer, assumed on)."""

_DTYPE_BYTES = {"float32": 4, "float": 4, "float64": 8, "double": 8, "bfloat16": 2,
                "float16": 2, "half": 2, "int8": 1, "float8_e4m3fn": 1, "float8_e5m2": 1}


def dtype_bytes(dtype: str) -> int:
    """Bytes per element of a torch dtype name (``float32`` -> 4); unknown -> 4."""
    return _DTYPE_BYTES.get(dtype.replace("torch.", ""), 4)


def optimizer_states(update_name: str) -> int:
    """State tensors per parameter of the optimizer named in ``UPDATE.<class>``; default 2."""
    key = update_name.rsplit(".", 1)[-1].lower()
    return OPTIMIZER_STATES.get(key, 2)


@dataclass(frozen=True, kw_only=True)
class MemoryEstimate:
    """Peak memory of one rank, by component (bytes)."""

    params_bytes: float
    grads_bytes: float
    optimizer_bytes: float
    activations_bytes: float
    buffers_bytes: float
    baseline_bytes: float = 0.0

    @property
    def peak_bytes(self) -> int:
        return int(round(self.params_bytes + self.grads_bytes + self.optimizer_bytes
                         + self.activations_bytes + self.buffers_bytes + self.baseline_bytes))

    def to_dict(self) -> dict[str, int]:
        return {"params": int(self.params_bytes), "grads": int(self.grads_bytes),
                "optimizer": int(self.optimizer_bytes),
                "activations": int(self.activations_bytes),
                "buffers": int(self.buffers_bytes), "baseline": int(self.baseline_bytes),
                "peak": self.peak_bytes}


def model_state_bytes(param_bytes: float, *, elem_bytes: int, states: int, mixed: bool,
                      shard: int = 1) -> tuple[float, float, float]:
    """(parameters, gradients, optimizer) bytes of one rank holding ``param_bytes``.

    ZeRO §3.1: ``Ψ = param_bytes / elem_bytes``; optimizer = ``4Ψ·(states + mixed)``;
    all three divided by ``shard`` (ZeRO-3 / FSDP data-parallel degree).
    """
    n = param_bytes / elem_bytes
    opt = 4.0 * n * (states + (1 if mixed else 0))
    return param_bytes / shard, param_bytes / shard, opt / shard


def zero_state_bytes(param_bytes: float, *, elem_bytes: int, states: int, mixed: bool,
                     dp: int, stage: int) -> tuple[float, float, float]:
    """(parameters, gradients, optimizer) bytes of one rank under ZeRO stage ``stage``.

    ZeRO §5 (Figure 1), with :func:`model_state_bytes`'s ``kΨ``, ``kΨ``, ``KΨ`` and
    ``N_d = dp``: stage 0 (DDP) ``kΨ + kΨ + KΨ``; 1 (``P_os``) ``kΨ + kΨ + KΨ/N_d``;
    2 (``P_os+g``) ``kΨ + kΨ/N_d + KΨ/N_d``; 3 (``P_os+g+p``, FSDP) ``(kΨ + kΨ + KΨ)/N_d``.
    """
    if stage not in (0, 1, 2, 3):
        from echo_sim.errors import ConfigError

        raise ConfigError(f"zero_stage={stage!r}; valid: 0, 1, 2, 3")
    params, grads, opt = model_state_bytes(param_bytes, elem_bytes=elem_bytes, states=states,
                                           mixed=mixed)
    return (params / (dp if stage >= 3 else 1), grads / (dp if stage >= 2 else 1),
            opt / (dp if stage >= 1 else 1))


def activation_bytes(fw: Sequence[Op], *, tp: int = 1, mb_scale: float = 1.0,
                     recompute: bool | str = False, include_working: bool = True,
                     sequence_parallel: bool = False) -> float:
    """Activation bytes one micro-batch leaves on a stage whose forward ops are ``fw``.

    ``recompute``: ``False``/``"none"``, ``"selective"`` (Korthikanti et al. 2022 §4.2:
    the attention core's working set — scores, softmax, dropout mask — is dropped and
    rebuilt in backward; a recorded trace's ``out_bytes`` never holds that working set,
    only a synthetic ``Attention`` op's does, on top of its output — one third of its
    q, k, v input — which stays: that op counts ``min(out_bytes, in_bytes / 3)``) or
    ``True``/``"full"`` (each block keeps its input; one block's activations are live
    while it recomputes — a transient working set that exists once per rank, not once per
    micro-batch in flight: callers summing micro-batches pass ``include_working=False``
    and add :func:`recompute_working_bytes` once).
    """
    def out(o: Op) -> float:
        sharded = o.role in ("column", "inner") or (o.role == "vocab" and o.kind != "Embedding")
        if o.saved_bytes >= 0:
            # a row op's measured range is the sharded code between column and row (an
            # attention core); its own output, replicated, feeds a residual add unsaved
            sharded = sharded or o.role == "row"
        # sequence parallelism (Korthikanti et al. 2022 §4.2.2): the block's replicated
        # ops (layer norms, dropout-adds, row outputs) hold 1/tp of the sequence
        sharded = sharded or (sequence_parallel and o.block >= 0)
        held = o.saved_bytes if o.saved_bytes >= 0 else o.out_bytes
        return held * mb_scale / (tp if sharded else 1)

    def selective_out(o: Op) -> float:  # the attention core keeps only its output
        if o.kind != "Attention" or o.out_bytes <= 0:
            return out(o)
        return out(o) * min(1.0, o.in_bytes / 3 / o.out_bytes)

    if recompute == "selective":
        return float(sum(selective_out(o) for o in fw))
    if recompute is False or recompute == "none":
        return float(sum(out(o) for o in fw))
    by_unit: dict[str, list[Op]] = {}
    for o in fw:
        by_unit.setdefault(o.unit if o.block >= 0 else f"~{o.unit}", []).append(o)
    kept = 0.0
    working = 0.0
    for key, ops in by_unit.items():
        if key.startswith("~"):  # outside blocks: not checkpointed
            kept += sum(out(o) for o in ops)
        else:
            kept += ops[0].in_bytes * mb_scale
            working = max(working, sum(out(o) for o in ops))
    return kept + (working if include_working else 0.0)


def recompute_working_bytes(fw: Sequence[Op], *, tp: int = 1, mb_scale: float = 1.0,
                            recompute: bool | str = False) -> float:
    """The transient activations of one block being recomputed (0 without full recompute)."""
    if recompute is False or recompute in ("none", "selective"):
        return 0.0
    full = activation_bytes(fw, tp=tp, mb_scale=mb_scale, recompute=recompute)
    return full - activation_bytes(fw, tp=tp, mb_scale=mb_scale, recompute=recompute,
                                   include_working=False)


def korthikanti_activation_bytes(*, seq: int, batch: int, hidden: int, heads: int,
                                 layers: int = 1, tp: int = 1, sequence_parallel: bool = False,
                                 recompute: bool = False) -> float:
    """Activation bytes of ``layers`` transformer layers, Korthikanti et al. 2022 (Eq. 1-4).

    Per layer, 16-bit activations: no parallelism ``sbh(34 + 5as/h)``; tensor parallel
    ``sbh(10 + 24/t + 5as/(ht))``; plus sequence parallel ``sbh/t·(34 + 5as/h)``; full
    recomputation ``2sbh`` (the checkpointed layer input).
    """
    s, b, h, a, t = seq, batch, hidden, heads, tp
    if recompute:
        per = 2.0 * s * b * h
    elif sequence_parallel:
        per = s * b * h / t * (34 + 5 * a * s / h)
    elif t > 1:
        per = s * b * h * (10 + 24 / t + 5 * a * s / (h * t))
    else:
        per = s * b * h * (34 + 5 * a * s / h)
    return per * layers


_UNITS = {"": 1, "b": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12,
          "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40}


def parse_bytes(text: str) -> int:
    """``80GB`` -> 80·10^9, ``80GiB`` -> 80·2^30, ``1e9`` -> 10^9; :class:`ConfigError` if bad."""
    from echo_sim.errors import ConfigError

    s = text.strip().lower().replace(" ", "")
    num = s.rstrip("abcdefghijklmnopqrstuvwxyz")
    unit = s[len(num):]
    try:
        value = float(num)
    except ValueError:
        value = -1.0
    if unit not in _UNITS or not value > 0:
        raise ConfigError(f"bad memory size {text!r}; use e.g. 80GB, 80GiB, 512MiB or 1e9")
    return int(value * _UNITS[unit])
