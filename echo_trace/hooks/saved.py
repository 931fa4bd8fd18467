"""What autograd keeps for backward, per traced module call.

Peak memory in training is dominated by the tensors autograd saves during forward and frees
in backward (Chen et al. 2016, "Training deep nets with sublinear memory cost", §3;
Korthikanti et al. 2022, §4). A trace of leaf modules sees their outputs, but not what a
module's own ``forward`` code makes between its children — an attention block's q/k/v
split and transposes, its scores and probabilities, a fused loss inside the model — nor what
a leaf saves besides its output (LayerNorm's mean and rstd, a dropout mask, autocast's
low-precision copies). This module measures those bytes once per capture window:

* at the end of one forward of the root module (with autograd recording), walk the
  autograd graph from the root's outputs (``grad_fn`` → ``next_functions``), reading each
  node's saved tensors (``_saved_*`` attributes of built-in nodes, ``saved_tensors`` of
  custom ``autograd.Function`` nodes) — nothing is installed into autograd, so training is
  untouched. A slot packed by saved-tensor hooks is never read (its raw ``SavedTensor``
  says so first): unpacking it would run the hook — activation checkpointing recomputes
  its region, ``save_on_cpu`` copies back to the GPU — and what it holds is not the
  tensor anyway;
* count each storage once (``untyped_storage()``: a view holds its whole storage), at the
  node that **made** it (the ``grad_fn`` of a saved tensor, or of its base for a view),
  whichever later node saved it: a Linear saves its input, the previous call's output;
  autograd sequence numbers increase in creation order. Leave out parameters and buffers
  (model state, not activations) and storages already freed (size 0: FSDP2 frees a unit's
  gathered parameters after its forward);
* give each storage to the traced call whose range holds the node that made it: call
  ``i`` owns the sequence numbers after call ``i - 1``'s output and up to its own, so its
  own output and what the code a parent runs before it makes count with it (an attention
  core with the output projection after it); nodes after the last traced call (a loss
  inside the model) count with the last call.

Cost: one pass over the graph's nodes (~4 µs per node on a CPU core: ~1 ms for a 2-layer
GPT, a few ms for GPT-2 small), once per window, at the end of the first forward.
"""

from __future__ import annotations

import bisect
import functools
from collections.abc import Iterable
from typing import Any

import torch

__all__ = ["SavedWalk", "attribute", "storage_key", "walk_saved"]

def storage_key(t: torch.Tensor) -> tuple[int, int] | None:
    """(data pointer, bytes) of the storage under ``t`` (a DTensor's local shard), or None
    for a tensor without one (meta, fake, sparse)."""
    local = getattr(t, "_local_tensor", t)
    try:
        st = local.untyped_storage()
        return st.data_ptr(), st.nbytes()
    except (RuntimeError, NotImplementedError, AttributeError, TypeError):
        return None


@functools.cache
def _pairs(node_type: type) -> tuple[tuple[str, str], ...]:
    """(raw attribute, unpacking attribute) of each saved-tensor slot of a node type."""
    names = set(dir(node_type))
    got = tuple((raw, "_saved_" + raw[len("_raw_saved_"):]) for raw in sorted(names)
                if raw.startswith("_raw_saved_") and "_saved_" + raw[11:] in names)
    if "_raw_saved_tensors" in names and "saved_tensors" in names:  # autograd.Function
        got += (("_raw_saved_tensors", "saved_tensors"),)
    return got


def _saved(node: Any) -> list[torch.Tensor]:
    """The tensors ``node`` saved, **never running an unpack hook**: a slot packed by
    saved-tensor hooks (activation checkpointing would recompute its region on unpack,
    ``save_on_cpu`` would copy back to the GPU) is skipped — checked on the raw
    ``SavedTensor`` (``unpack_hook``) before the slot is read."""
    out: list[torch.Tensor] = []
    for raw_name, name in _pairs(type(node)):  # type: ignore[arg-type]
        try:
            raw = getattr(node, raw_name)
            raws = list(raw) if isinstance(raw, (list, tuple)) else [raw]
            if not raws or any(r.unpack_hook is not None for r in raws):
                continue
            v = getattr(node, name)
        except (RuntimeError, AttributeError):  # freed, or undefined in this node
            continue
        if isinstance(v, torch.Tensor):
            out.append(v)
        elif isinstance(v, (list, tuple)):
            out.extend(u for u in v if isinstance(u, torch.Tensor))
    return out


class SavedWalk:
    """The storages saved for backward under some autograd roots: ``first_seq[ptr]`` is the
    sequence number of the node that made storage ``ptr`` (the earliest over its saved
    tensors; for a tensor without ``grad_fn`` the node saving it) and ``nbytes[ptr]`` its
    size."""

    def __init__(self) -> None:
        self.first_seq: dict[int, int] = {}
        self.nbytes: dict[int, int] = {}
        self.nodes = 0


def walk_saved(roots: Iterable[Any], exclude: set[int]) -> SavedWalk:
    """Walk the autograd graph from ``roots`` (``grad_fn`` nodes); storages whose pointer
    is in ``exclude`` or whose size is 0 are left out."""
    out = SavedWalk()
    # id -> node: the Python wrapper of a C++ autograd node lives only while referenced
    # and is made anew on each access, so a freed wrapper's id is soon reused by another
    # node's; holding every visited wrapper keeps ids unique (and a node's wrapper cached,
    # so a second path to it yields the same object). Dropping this pruned whole branches:
    # on CUDA the walk stopped after the model's last two calls.
    seen: dict[int, Any] = {}
    stack = [r for r in roots if r is not None]
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen[id(node)] = node
        out.nodes += 1
        try:
            seq = int(node._sequence_nr())
        except (AttributeError, RuntimeError):
            seq = -1
        for t in _saved(node):
            if t.dim() == 0:  # a scalar: negligible, and a wrapped Python number is made
                continue      # anew on every read (never the same storage)
            key = storage_key(t)
            if key is None or key[1] <= 0 or key[0] in exclude:
                continue
            ptr, nb = key
            # the node that made the storage: a view's base's (a Linear saves its 3-d input
            # as a 2-d view made inside it); else, for a leaf input, the node saving it
            made = seq
            base = t._base
            producer = base.grad_fn if base is not None else t.grad_fn
            if producer is not None:
                try:
                    made = int(producer._sequence_nr())
                except (AttributeError, RuntimeError):
                    pass
            if ptr not in out.first_seq or made < out.first_seq[ptr]:
                out.first_seq[ptr] = made
                out.nbytes[ptr] = nb
        for nxt, _ in getattr(node, "next_functions", ()):
            if nxt is not None:
                stack.append(nxt)
    return out


def attribute(walk: SavedWalk, call_seqs: list[int]) -> list[int]:
    """Saved bytes per traced call, in call order.

    ``call_seqs``: each traced call's last sequence number (its output's node), ascending.
    Storage ``p`` goes to the first call whose last sequence number is ``>= first_seq[p]``
    (the call that made it, or whose parent code before it did), or to the last call.
    """
    n = len(call_seqs)
    per = [0] * n
    if not n:
        return per
    for ptr, seq in walk.first_seq.items():
        per[min(bisect.bisect_left(call_seqs, seq), n - 1)] += walk.nbytes[ptr]
    return per
