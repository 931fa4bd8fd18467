"""Byte counts and dtype names of communicated tensors (the ``bytes`` / ``dtype`` args).

Shared by the tracer (:mod:`echo_trace.comm.tracer`) and the three paths (:mod:`.c10d`,
:mod:`.ddp`, :mod:`.functional`); it imports none of them.
"""

from __future__ import annotations

from typing import Any

import torch

__all__ = ["dtype_name", "tensor_nbytes"]


def tensor_nbytes(t: Any) -> int:
    """Bytes of a tensor (``numel * element_size``); 0 for anything else."""
    if isinstance(t, torch.Tensor):
        return int(t.numel()) * int(t.element_size())
    return 0


def dtype_name(t: Any) -> str | None:
    """``float32`` for a float32 tensor; None for anything else."""
    if isinstance(t, torch.Tensor):
        return str(t.dtype).removeprefix("torch.")
    return None
