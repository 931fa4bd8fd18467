"""Per-operator time on another device: the roofline model, a peak ratio, or a user factor.

Roofline (Williams, Waterman & Patterson 2009): an op doing ``F`` FLOPs over ``Q`` bytes of
memory traffic takes at least ``max(F / peak_flops, Q / mem_bw)``. We scale each measured
time by the ratio of that bound on the target and on the traced device::

    t_target = t_measured · max(F/P_t, Q/W_t) / max(F/P_s, Q/W_s)

so an op that was at x% of the traced device's bound stays at x% on the target. ``F`` is
the trace's ``flops`` (backward: 2x forward); ``Q`` is estimated from tensor sizes:
forward ``in + out + params`` bytes, backward twice that (read input, output grad and
weights; write input and weight grads). Ops with neither get the ratio of peak FLOPs
``P_s / P_t``; the optimizer step (pure memory traffic over parameters, gradients and
states) gets the bandwidth ratio ``W_s / W_t``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from echo_sim.cost.hardware import GPU, GPUS, get_gpu
from echo_sim.errors import ConfigError
from echo_sim.workload.ops import Op, Workload

__all__ = ["ComputeScaling", "compute_scaling", "op_traffic_bytes", "resolve_device",
           "roofline_us"]


def roofline_us(flops: float, nbytes: float, gpu: GPU, dtype: str = "fp32") -> float:
    """Roofline lower bound (µs) of an op doing ``flops`` over ``nbytes`` of traffic."""
    return max(flops / gpu.peak_flops(dtype) * 1e6, nbytes / gpu.mem_bw_bytes_per_us)


def op_traffic_bytes(op: Op) -> float:
    """Estimated memory traffic (bytes) of an op (see the module docstring)."""
    q = float(op.in_bytes + op.out_bytes + op.param_bytes)
    return 2.0 * q if op.phase == "B" else q


def resolve_device(device: str, device_name: str) -> GPU | None:
    """The preset a trace ran on: by exact name, by a preset name inside the device name
    (``NVIDIA H100 80GB HBM3`` -> ``h100``), ``cpu`` for CPU traces; None if unknown."""
    for cand in (device_name, device):
        if cand and cand.strip().lower() in GPUS:
            return GPUS[cand.strip().lower()]
    low = f"{device_name} {device}".lower()
    if device.startswith("cpu"):
        return GPUS.get("cpu")
    for name, gpu in GPUS.items():
        if name != "cpu" and name in low:
            return gpu
    return None


@dataclass(frozen=True)
class ComputeScaling:
    """Per-op time factor (by op index) and a one-line description of how it was derived."""

    factors: np.ndarray
    description: str


def _dtype_key(dtype: str) -> str:
    return {"float32": "fp32", "bfloat16": "bf16", "float16": "fp16"}.get(dtype, "fp32")


def compute_scaling(workload: Workload, target: GPU | str | None, *,
                    factor: float | None = None) -> ComputeScaling:
    """Factors taking the traced op times to ``target`` (a preset or its name).

    ``factor`` (a user's measured speed ratio: target time / traced time) overrides the
    model. Same device, or no target: factor 1. Unknown traced device: factor 1, said so.
    """
    n = len(workload.ops)
    if factor is not None:
        if not factor > 0:
            raise ConfigError(f"compute factor {factor} must be > 0")
        return ComputeScaling(np.full(n, float(factor)),
                              f"compute: user factor x{factor:g} on every op time")
    if target is None:
        return ComputeScaling(np.ones(n), "compute: traced times as measured")
    dst = get_gpu(target) if isinstance(target, str) else target
    src = resolve_device(workload.device, workload.device_name)
    if src is None:
        return ComputeScaling(np.ones(n), (
            f"compute: traced device {workload.device_name or workload.device!r} is not a "
            f"preset; times used as measured (pass compute_factor to scale to {dst.name})"))
    if src.name == dst.name:
        return ComputeScaling(np.ones(n), f"compute: traced on {src.name}, times as measured")
    key = _dtype_key(workload.dtype)
    peak_ratio = src.peak_flops(key) / dst.peak_flops(key)
    bw_ratio = src.mem_bw_gbps / dst.mem_bw_gbps
    f = np.empty(n)
    for o in workload.ops:
        q = op_traffic_bytes(o)
        if o.phase == "U":
            f[o.index] = bw_ratio
        elif o.flops > 0 or q > 0:
            f[o.index] = roofline_us(o.flops, q, dst, key) / roofline_us(o.flops, q, src, key)
        else:
            f[o.index] = peak_ratio
    return ComputeScaling(f, (
        f"compute: roofline {src.name} -> {dst.name} ({key}; median op factor "
        f"{float(np.median(f)) if n else 1.0:.3g})"))
