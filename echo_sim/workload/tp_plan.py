"""Tensor-parallel roles from a plan the user (or the model's config) already has.

A plan maps module-name patterns to styles, as ``torch.distributed.tensor.parallel.
parallelize_module``'s ``parallelize_plan`` and transformers' ``base_model_tp_plan`` /
``model.tp_plan`` do::

    {"layers.*.self_attn.q_proj": "colwise", "layers.*.self_attn.o_proj": "rowwise",
     "embed_tokens": "embedding_rowwise", "lm_head": "colwise_gather_output",
     "re:.*\\.mlp\\.(gate|up)_proj": "colwise"}

A JSON file holds that mapping, or an object with it under ``"tp_plan"``,
``"base_model_tp_plan"`` or ``"plan"`` (so a transformers ``config.json`` that carries its plan
works as is).

**Matching.** A pattern matches a module path, or any of its dotted suffixes (transformers'
plans are relative to the base model: ``layers.*.mlp.up_proj`` matches
``model.layers.0.mlp.up_proj``): shell-style (:func:`fnmatch.fnmatchcase`, ``*`` also crosses
dots), or a regular expression (:func:`re.fullmatch`) when the pattern starts with ``re:``.
The first pattern in the file's order that matches wins. Modules no pattern matches are
replicated, as ``parallelize_module`` leaves them.

**Styles → roles** (:mod:`echo_sim.workload.tensor_parallel` prices each role):

* ``colwise``, ``local_colwise``, ``packed_colwise``, ... (any style with ``colwise``) →
  ``column``; with ``rep`` / ``gather`` in it (output gathered: ``colwise_rep``,
  ``colwise_gather_output``) → ``channel`` (all-gather of the output forward, all-reduce of
  the input gradient backward; :mod:`~echo_sim.workload.channel_parallel`); on an embedding
  (``ColwiseParallel`` on ``nn.Embedding`` shards the embedding dimension) → ``channel``;
* ``rowwise``, ``local_rowwise``, ``rowwise_rep``, ... → ``row``; on an embedding
  (``embedding_rowwise``, ``RowwiseParallel`` on ``nn.Embedding``: shards the vocabulary) →
  ``vocab``;
* ``replicate``, ``replicated_with_grad_allreduce``, ``sequence_parallel``, ``local``,
  ``isolate``, ``gather``, ``moe_tp_experts`` → ``replicated`` (time and parameters kept).
"""

from __future__ import annotations

import fnmatch
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from echo_sim.errors import ConfigError
from echo_sim.workload.tp_structure import (
    OpLike,
    Placement,
    is_projection,
    structural_roles,
)

__all__ = ["PLAN_KEYS", "REPLICATED_STYLES", "TpPlan", "load_tp_plan", "plan_roles",
           "style_role", "tp_placement"]

PLAN_KEYS: tuple[str, ...] = ("tp_plan", "base_model_tp_plan", "plan")
"""Keys under which a JSON object may hold its plan (else the object is the plan)."""

REPLICATED_STYLES: frozenset[str] = frozenset({
    "replicate", "replicated", "replicated_with_grad_allreduce", "sequence_parallel", "local",
    "isolate", "gather", "moe_tp_experts", "ep_router", "grouped_gemm"})


@dataclass(frozen=True, kw_only=True)
class TpPlan:
    """Ordered ``(pattern, style)`` rules and where they came from (``source``: a file path,
    or a sentence naming the config)."""

    rules: tuple[tuple[str, str], ...]
    source: str

    def __post_init__(self) -> None:
        if not self.rules:
            raise ConfigError(f"tp_plan {self.source}: the plan is empty")
        for pattern, style in self.rules:
            if not isinstance(pattern, str) or not pattern:
                raise ConfigError(f"tp_plan {self.source}: pattern {pattern!r} must be a "
                                  "non-empty string")
            style_role(style, "Linear", where=f"tp_plan {self.source}: {pattern!r}")
            if pattern.startswith("re:"):
                try:
                    re.compile(pattern[3:])
                except re.error as e:
                    raise ConfigError(f"tp_plan {self.source}: pattern {pattern!r} is not a "
                                      f"regular expression ({e})") from None

    @classmethod
    def from_mapping(cls, plan: Any, *, source: str) -> TpPlan:
        """A plan from a ``{pattern: style}`` mapping (or an object holding one under one of
        :data:`PLAN_KEYS`)."""
        if isinstance(plan, Mapping):
            for key in PLAN_KEYS:
                if isinstance(plan.get(key), Mapping):
                    plan = plan[key]
                    break
        if not isinstance(plan, Mapping) or not all(isinstance(v, str) for v in plan.values()):
            raise ConfigError(f"tp_plan {source}: expected a JSON object of module-name "
                              "pattern -> style (colwise, rowwise, replicate, ...)")
        return cls(rules=tuple((str(k), str(v)) for k, v in plan.items()), source=source)

    def style_of(self, module: str) -> str | None:
        """The style of the first rule matching ``module`` or one of its dotted suffixes."""
        parts = module.split(".")
        names = [".".join(parts[i:]) for i in range(len(parts))]
        for pattern, style in self.rules:
            if pattern.startswith("re:"):
                rx = re.compile(pattern[3:])
                if any(rx.fullmatch(n) for n in names):
                    return style
            elif any(fnmatch.fnmatchcase(n, pattern) for n in names):
                return style
        return None


def style_role(style: str, kind: str, *, where: str = "tp_plan") -> str:
    """The role of a module of class ``kind`` under ``style`` (module docstring table)."""
    s = style.strip().lower()
    emb = "Embedding" in kind
    if "colwise" in s:
        return "channel" if emb or "rep" in s or "gather" in s else "column"
    if "rowwise" in s:
        return "vocab" if emb else "row"
    if s in REPLICATED_STYLES:
        return "replicated"
    raise ConfigError(f"{where}: style {style!r} unknown; valid: colwise, rowwise, "
                      f"colwise_rep, embedding_rowwise, {', '.join(sorted(REPLICATED_STYLES))}")


def load_tp_plan(path: str | Path) -> TpPlan:
    """The plan in JSON file ``path`` (:class:`ConfigError` naming the file when unreadable)."""
    p = Path(path)
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except OSError as e:
        raise ConfigError(f"tp_plan {p}: cannot read ({e.strerror or e})") from None
    except ValueError as e:
        raise ConfigError(f"tp_plan {p}: not JSON ({e})") from None
    return TpPlan.from_mapping(data, source=str(p))


def plan_roles(ops: Sequence[OpLike], plan: TpPlan, *,
               shapes: Mapping[str, Sequence[int]] | None = None) -> Placement:
    """Roles of the forward modules of ``ops`` under ``plan``; the projections (2-D weights)
    no rule of the plan matched are listed as not placed."""
    shapes = shapes or {}
    roles: dict[str, str] = {}
    unplaced: list[str] = []
    seen: set[str] = set()
    for o in ops:
        if o.phase != "F" or o.module in seen:
            continue
        seen.add(o.module)
        style = plan.style_of(o.module)
        if style is None:
            if is_projection(o, shapes):
                unplaced.append(o.module)
            continue
        role = style_role(style, o.kind, where=f"tp_plan {plan.source}")
        if role != "replicated":
            roles[o.module] = role
    return Placement(roles=roles, unplaced=tuple(unplaced), source=plan.source)


def _shapes(meta: Mapping[str, Any]) -> dict[str, list[int]]:
    return {str(p.get("name", "")): [int(x) for x in p.get("shape") or []]
            for p in meta.get("params") or [] if isinstance(p, Mapping) and p.get("shape")}


def tp_placement(ops: Sequence[OpLike], meta: Mapping[str, Any], *,
                 plan: TpPlan | None = None) -> Placement:
    """Roles for ``ops``: ``plan`` when given; else the plan ``meta.json`` records from the
    model's transformers config (``model.tp_plan``, written by ``echo_trace.profile``); else
    the structural rule (:func:`~echo_sim.workload.tp_structure.structural_roles`)."""
    shapes = _shapes(meta)
    raw = meta.get("model")
    model: Mapping[str, Any] = raw if isinstance(raw, Mapping) else {}
    if plan is None and isinstance(model.get("tp_plan"), Mapping) and model["tp_plan"]:
        src = str(model.get("tp_plan_source") or "the model's transformers config")
        try:
            plan = TpPlan.from_mapping(model["tp_plan"], source=f"{src} (in meta.json)")
        except ConfigError:
            plan = None  # a plan of styles echo does not know: the structure decides
    if plan is not None:
        return plan_roles(ops, plan, shapes=shapes)
    vocab = model.get("vocab")
    return structural_roles(ops, shapes=shapes,
                            vocab=int(vocab) if isinstance(vocab, int) and vocab > 0 else None)
