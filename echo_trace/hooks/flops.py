"""Forward FLOPs of the module types whose cost is known from their shapes.

Used by :class:`~echo_trace.hooks.modules.ModuleTracer` for the ``flops`` arg of ``FW`` events.
"""

from __future__ import annotations

import math

import torch
from torch import nn

__all__ = ["LINEAR", "flops_kind", "forward_flops"]

# flops kinds
_NONE, LINEAR, _CONV, _CONVT, _ZERO = 0, 1, 2, 3, 4


def flops_kind(mod: nn.Module) -> tuple[int, int]:
    """(kind, constant) for :func:`forward_flops`."""
    if isinstance(mod, nn.Linear):
        return LINEAR, mod.in_features * mod.out_features
    if isinstance(mod, (nn.Conv1d, nn.Conv2d, nn.Conv3d)):
        return _CONV, (mod.in_channels // mod.groups) * math.prod(mod.kernel_size)
    if isinstance(mod, (nn.ConvTranspose1d, nn.ConvTranspose2d, nn.ConvTranspose3d)):
        return _CONVT, (mod.out_channels // mod.groups) * math.prod(mod.kernel_size)
    if isinstance(mod, (nn.Embedding, nn.EmbeddingBag)):
        return _ZERO, 0
    return _NONE, 0


def forward_flops(kind: int, const: int, in_t: torch.Tensor | None,
                  out_t: torch.Tensor | None, in_features: int = 1) -> int | None:
    """Forward FLOPs, counting a multiply-add as 2 (the convention of
    ``torch.utils.flop_counter``):

    * Linear: ``2 · in · out · rows``, rows = input elements / in_features;
    * Conv: ``2 · out_elements · (C_in / groups) · prod(kernel)``;
    * ConvTranspose: ``2 · in_elements · (C_out / groups) · prod(kernel)``;
    * Embedding: 0.  Other modules: None (unknown).
    """
    if kind == LINEAR and in_t is not None:
        return 2 * const * (in_t.numel() // max(in_features, 1))
    if kind == _CONV and out_t is not None:
        return 2 * out_t.numel() * const
    if kind == _CONVT and in_t is not None:
        return 2 * in_t.numel() * const
    if kind == _ZERO:
        return 0
    return None
