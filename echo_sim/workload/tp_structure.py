"""Tensor-parallel roles from the model's structure: which leaf modules are column-parallel,
row-parallel or vocab-parallel, found from what the trace records, not from module names.

The rule (Megatron-LM, Shoeybi et al. 2019 §3; torchtitan's and transformers' TP plans apply
the same one by name):

1. A **projection** is a leaf module holding one 2-D weight: ``nn.Linear`` (weight
   ``[out, in]``), Hugging Face's ``Conv1D`` (GPT-2; weight ``[in, out]``, transposed), or any
   module whose ``meta.json`` parameter table lists a 2-D ``<module>.weight`` that is not an
   embedding or a norm.
2. Inside a block (``blocks.<i>.`` / ``layers.<i>.`` / ``h.<i>.`` / ``layer.<i>.``, see
   :func:`~echo_sim.workload.ops.block_index`) norms (``*Norm*`` classes) cut the block into
   **segments** (pre-norm: ``ln → attention``, ``ln → MLP``; post-norm BERT:
   ``attention → ln``, ``MLP → ln``). A segment's **hidden width** ``h`` is the input bytes of
   its first projection (the norm's output, the residual stream); widths compare within 1 %.
3. In each segment, projections in forward order: a projection whose output is back at the
   hidden width (``out_bytes ≈ h``) **closes** the open group when one is open and it is the
   last such projection of the segment, or it reads a wider/narrower tensor
   (``in_bytes ≠ h``: ``o_proj``, ``down_proj``, ``fc2``), or its name says so (a hint:
   ``proj``, ``c_proj``, ``o_proj``, ``dense``, ...). It is **row-parallel**; the open group
   before it (fused ``qkv`` / ``c_attn`` / ``query_key_value``, separate and GQA-narrow
   ``q/k/v``, gated ``gate_proj`` + ``up_proj``, ``fc1`` / ``c_fc``) is **column-parallel**.
   A group left open at the segment's end is not placed (replicated).
4. Outside blocks: the token **embeddings** (name hints ``wte``/``embed_tokens``/... — T5's
   encoder and decoder both; else the first embedding with ``vocab`` rows, the model's
   ``vocab``) and the output
   **head** (hint ``lm_head``/``head``/...; else a projection after the last block whose output
   width is ``vocab``) are **vocab-parallel**. Position embeddings, norms, dropout and
   everything else are replicated.

:func:`structural_roles` returns the roles of every forward module and the projections it
could not place (:attr:`Placement.unplaced`), which a one-line summary names.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

__all__ = ["COLUMN_HINTS", "HEAD_HINTS", "Placement", "ROW_HINTS", "TOKEN_EMBEDDING_HINTS",
           "OpLike", "is_projection", "out_features", "placement_summary", "structural_roles"]

# Megatron-LM / HF / torchtitan names: hints only, the rule above decides.
COLUMN_HINTS: frozenset[str] = frozenset({
    "qkv", "c_attn", "q_proj", "k_proj", "v_proj", "query_key_value", "query", "key", "value",
    "wq", "wk", "wv", "fc1", "c_fc", "up_proj", "gate_proj", "w1", "w3", "dense_h_to_4h",
    "linear_fc1", "linear_qkv"})
ROW_HINTS: frozenset[str] = frozenset({
    "proj", "c_proj", "o_proj", "out_proj", "wo", "fc2", "down_proj", "w2", "dense",
    "dense_4h_to_h", "linear_fc2", "linear_proj"})
HEAD_HINTS: frozenset[str] = frozenset({"head", "lm_head", "output", "embed_out"})
TOKEN_EMBEDDING_HINTS: frozenset[str] = frozenset({
    "tok_emb", "wte", "embed_tokens", "word_embeddings", "tok_embeddings", "embedding", "embed",
    "shared", "embed_in"})


class OpLike(Protocol):
    """What the rule reads of an operator (:class:`~echo_sim.workload.ops.Op` has it)."""

    @property
    def module(self) -> str: ...
    @property
    def kind(self) -> str: ...
    @property
    def phase(self) -> str: ...
    @property
    def block(self) -> int: ...
    @property
    def unit(self) -> str: ...
    @property
    def in_bytes(self) -> int: ...
    @property
    def out_bytes(self) -> int: ...


@dataclass(frozen=True)
class Placement:
    """Roles by module path (forward modules only; absent = replicated), the projections no
    rule placed (replicated, listed for the summary) and where the roles came from."""

    roles: dict[str, str]
    unplaced: tuple[str, ...] = ()
    source: str = "the module structure (Megatron rule)"
    notes: tuple[str, ...] = field(default_factory=tuple)


def _leaf(module: str) -> str:
    return module.rsplit(".", 1)[-1]


def _is_norm(kind: str) -> bool:
    return "Norm" in kind


def is_projection(op: OpLike, shapes: Mapping[str, Sequence[int]]) -> bool:
    """True for a leaf module holding one 2-D weight (Linear, HF Conv1D, or a 2-D
    ``<module>.weight`` in the parameter table that is not an embedding's or a norm's)."""
    kind = op.kind
    if "Embedding" in kind or _is_norm(kind):
        return False
    if kind.endswith("Linear") or kind == "Conv1D":
        return True
    return len(shapes.get(op.module + ".weight", ())) == 2


def out_features(op: OpLike, shapes: Mapping[str, Sequence[int]]) -> int | None:
    """Output width of a projection from its weight shape (Linear ``[out, in]``, Conv1D
    ``[in, out]``); None when the table has no shape for it."""
    shape = shapes.get(op.module + ".weight")
    if not shape or len(shape) != 2:
        return None
    return int(shape[1] if op.kind == "Conv1D" else shape[0])


def _same(a: int, b: int) -> bool:
    """Equal widths: byte counts within 1 % (Aceso's profiled sizes carry bias bytes and
    rounding: ``dense`` writes 8,390,705 bytes of an 8,388,608-byte hidden state)."""
    return a > 0 and b > 0 and abs(a - b) <= 0.01 * max(a, b)


def _pair(projs: Sequence[OpLike], roles: dict[str, str], unplaced: list[str]) -> None:
    """Rule 3 over one segment's projections; the hidden width is what the first reads."""
    h = projs[0].in_bytes if projs else 0
    open_: list[OpLike] = []
    for j, p in enumerate(projs):
        back = _same(p.out_bytes, h)
        last_back = not any(_same(q.out_bytes, h) for q in projs[j + 1:])
        if open_ and back and (last_back or not _same(p.in_bytes, h)
                               or _leaf(p.module) in ROW_HINTS):
            for q in open_:
                roles[q.module] = "column"
            roles[p.module] = "row"
            open_ = []
        else:
            open_.append(p)
    unplaced.extend(q.module for q in open_)


def structural_roles(ops: Sequence[OpLike], *, shapes: Mapping[str, Sequence[int]] | None = None,
                     vocab: int | None = None) -> Placement:
    """Roles of the forward modules of ``ops`` by the rule of the module docstring.

    ``shapes``: parameter name → shape (``meta.json`` ``params``); ``vocab``: the model's
    vocabulary size when known (``meta.json`` ``model.vocab``).
    """
    shapes = shapes or {}
    seen: set[str] = set()
    fw: list[OpLike] = []
    for o in ops:
        if o.phase == "F" and o.module not in seen:
            seen.add(o.module)
            fw.append(o)
    roles: dict[str, str] = {}
    unplaced: list[str] = []
    blocks: dict[str, list[OpLike]] = {}  # by unit: encoder.block.0 and decoder.block.0 differ
    for o in fw:
        if o.block >= 0:
            blocks.setdefault(o.unit, []).append(o)
    for block_ops in blocks.values():
        seg: list[OpLike] = []
        for o in block_ops:
            if _is_norm(o.kind):
                _pair(seg, roles, unplaced)
                seg = []
            elif is_projection(o, shapes):
                seg.append(o)
        _pair(seg, roles, unplaced)
    outside = [o for o in fw if o.block < 0]
    embs = [o for o in outside if "Embedding" in o.kind]
    tok = [o for o in embs if _leaf(o.module) in TOKEN_EMBEDDING_HINTS]
    if not tok and vocab:
        tok = [o for o in embs if _rows(o, shapes) == vocab][:1]
    if not vocab and tok:
        vocab = _rows(tok[0], shapes)
    dim = _cols(tok[0], shapes) if tok else None
    last_block = max((i for i, o in enumerate(fw) if o.block >= 0), default=-1)
    heads = [o for o in fw[last_block + 1:] if o.block < 0 and is_projection(o, shapes)]
    head = [o for o in heads if _leaf(o.module) in HEAD_HINTS] or [
        o for o in heads if vocab and (out_features(o, shapes) == vocab or (
            o.module + ".weight" not in shapes and dim and o.in_bytes > 0
            and o.out_bytes * dim == o.in_bytes * vocab))]
    for o in [*tok, *head[-1:]]:
        roles[o.module] = "vocab"
    unplaced.extend(o.module for o in outside if is_projection(o, shapes)
                    and o.module not in roles and blocks)
    return Placement(roles=roles, unplaced=tuple(dict.fromkeys(unplaced)))


def _rows(op: OpLike, shapes: Mapping[str, Sequence[int]]) -> int | None:
    shape = shapes.get(op.module + ".weight")
    return int(shape[0]) if shape and len(shape) == 2 else None


def _cols(op: OpLike, shapes: Mapping[str, Sequence[int]]) -> int | None:
    shape = shapes.get(op.module + ".weight")
    return int(shape[1]) if shape and len(shape) == 2 else None


_DIGITS = re.compile(r"(?<=\.)\d+(?=\.|$)")


def placement_summary(placement: Placement, *, limit: int = 6) -> str:
    """One line: how many modules took each role, from where, and which projections stayed
    replicated (block indices folded to ``*``)."""
    counts = Counter(placement.roles.values())
    parts = [f"{counts[r]} {r}" for r in ("column", "row", "vocab", "channel") if counts[r]]
    left = list(dict.fromkeys(_DIGITS.sub("*", m) for m in placement.unplaced))
    text = (f"tensor-parallel placement from {placement.source}: "
            f"{', '.join(parts) or 'nothing placed'}")
    if left:
        shown = ", ".join(left[:limit]) + (f" (+{len(left) - limit} more)"
                                           if len(left) > limit else "")
        text += f"; not placed (replicated): {shown}"
    return text
