"""meta.json's contents: who wrote the trace, on what, with which batch (``docs/trace-format.md``).

Pure functions of what capture already holds, so the step that closes the window pays
O(1) in the number of events for them (``partial_steps`` is added by the writer thread).
"""

from __future__ import annotations

import functools
import os
import socket
from typing import Any

__all__ = ["batch_meta", "build_meta", "echo_version", "malloc_settings"]


@functools.lru_cache(maxsize=1)
def echo_version() -> str:
    """The installed distribution's version (the one source is setup.cfg)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("echo-sim")
    except PackageNotFoundError:  # a source tree that was never installed
        return "0+unknown"


def malloc_settings(env: dict[str, str] | None = None) -> dict[str, str]:
    """The glibc allocator settings in ``env`` (default: this process's environment):
    ``MALLOC_*`` and ``GLIBC_TUNABLES``, which glibc reads at start-up; ``{}`` is its adaptive
    default. ``mallopt()`` calls made at run time are not seen."""
    env = dict(os.environ) if env is None else env
    return {k: v for k, v in sorted(env.items())
            if k.startswith("MALLOC_") or k == "GLIBC_TUNABLES"}


def batch_meta(user: int | None, detected: int | None, tokens: int | None) -> dict[str, Any]:
    """``micro_batch`` and where it came from: ``user`` (config), ``detected`` (dim 0 of the
    root module's first tensor input), else ``assumed`` (1); ``tokens`` (micro-batch × seq)
    when that input is token ids, rescaled to the user's micro-batch."""
    if user is not None:
        if detected and tokens:
            tokens = tokens // detected * user
        return {"micro_batch": user, "micro_batch_source": "user", "tokens": tokens}
    if detected is not None:
        return {"micro_batch": detected, "micro_batch_source": "detected", "tokens": tokens}
    return {"micro_batch": 1, "micro_batch_source": "assumed", "tokens": tokens}


def _backend() -> str | None:
    try:
        import torch.distributed as dist

        if dist.is_available() and dist.is_initialized():
            return str(dist.get_backend())
    except Exception:  # noqa: BLE001 - metadata is best effort
        return None
    return None


def build_meta(*, config: Any, ranks: Any, clock: Any, modules: Any, rec: Any, comm: Any,
               device: str, device_name: str | None, steps: list[int], step_source: str,
               timer: str) -> dict[str, Any]:
    """meta.json but ``partial_steps`` (left empty here)."""
    import torch

    params = modules.param_table() if modules is not None else []
    detected = modules.micro_batch_size if modules is not None else None
    meta: dict[str, Any] = {
        "echo_version": echo_version(), "torch_version": torch.__version__,
        # "highest": fp32 matmuls run at the fp32 rate; "high"/"medium": TF32 / bf16 passes
        "float32_matmul_precision": torch.get_float32_matmul_precision(),
        "rank": ranks.rank, "local_rank": ranks.local_rank, "node_rank": ranks.node_rank,
        "world_size": ranks.world_size, "local_world_size": ranks.local_world_size,
        "rank_source": ranks.source, "backend": _backend(), "device": device,
        "device_name": device_name, "host": socket.gethostname(), "pid": os.getpid(),
        "steps": list(steps), "partial_steps": [], "step_source": step_source,
        "start_step": config.start_step, "end_step": config.end_step,
        "clock_offset_us": 0.0 if clock is None else clock.offset_us,
        "clock_sync": "none" if clock is None else clock.sync_method,
        "base_time_ns": 0 if clock is None else clock.trace_base_ns,
        "timer": timer,
        "malloc": malloc_settings(),  # the allocator settings the process started with
        "micro_batch_size": detected,
        **batch_meta(config.micro_batch, detected,
                     modules.tokens if modules is not None else None),
        "params": params, "param_bytes": sum(p["bytes"] for p in params),
        # the model's buffers (BatchNorm statistics, position ids, ...): DDP broadcasts them
        "buffers": modules.buffer_table() if modules is not None else [],
        "buckets": [],
        "dropped_events": rec.dropped, "max_events": rec.max_events,
        "disabled_reason": rec.disabled_reason,
        "memory_interval_ms": config.memory_interval_ms,
        "depth": config.depth,
        # "byteprofile": ByteProfile's files are in the rank directory too
        "trace_format": config.trace_format,
    }
    if modules is not None and modules.saved_per_call is not None:
        # echo_trace.hooks.saved: autograd's saved tensors at the end of the window's first
        # forward; per traced call (in call order), the bytes of the saved tensors its
        # range made
        meta["saved_activations"] = {
            "micro_batch_size": detected,
            "saved_bytes": modules.saved_total_bytes,
            "per_call": modules.saved_per_call,
        }
    if comm is not None:
        try:
            meta.update(comm.meta())
        except Exception as e:  # noqa: BLE001
            rec.fail("comm meta", e)
    return meta
