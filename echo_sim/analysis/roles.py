"""The parallel role of each rank (its data / tensor / pipeline coordinates), so two runs can be
lined up by what each rank does rather than by its number.

Two sources, the first a trace has on every rank:

1. ``meta.json`` (``source="meta"``): an object ``parallel`` of coordinates, e.g.
   ``{"dp": 1, "tp": 0, "pp": 0}``, or ``training``'s ``<dim>_parallel_rank`` keys
   (``data_parallel_rank`` → ``dp``, ``tensor_parallel_rank`` → ``tp``,
   ``pipeline_parallel_rank`` → ``pp``, ``context_parallel_rank`` → ``cp``,
   ``expert_parallel_rank`` → ``ep``). The role is those coordinates.
2. The trace itself (``source="trace"``), for any trace with communication:

   * pipeline stage: the set of ``FW`` operator names a rank runs (stages run different
     layers); when ranks run different sets, stages are numbered ``pp0, pp1, ...`` in the
     order their forward starts within a step (median over steps of the first ``FW``
     start minus the step's start; stage 0 starts first);
   * one coordinate per collective process group of the rank (send/recv are not groups):
     the rank's index in the group's sorted member list, which is its coordinate along that
     group's dimension for any row-major layout, whatever the order of the dimensions.
     The dimension is named ``dp`` when every collective of the group is issued after the
     rank's first ``BW`` of its step (gradient synchronisation), else ``tp`` (collectives
     inside the forward: tensor parallel; FSDP's all-gathers look the same); a second group
     of one kind is ``dp_2``, in the order of the operation names they carry.

   Two runs' roles match when their labels do, so runs of different bucket sizes or
   operator names still line up; the label names no rank.

   Ranks left with equal roles (no groups, same operators) are told apart by ``#k`` in rank
   order.

Each :class:`Role` has a ``key`` (hashable; equal keys are the same role) and a ``label``
for people (``dp1.tp0.pp0``, ``pp1/dp0``).
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass
from typing import Any

import numpy as np

from echo_sim.errors import ConfigError
from echo_sim.trace.model import COLLECTIVES, Cat, Trace

__all__ = ["ROLE_SOURCES", "Role", "meta_coords", "rank_roles"]

ROLE_SOURCES: tuple[str, ...] = ("auto", "meta", "trace")
"""Valid ``source`` values of :func:`rank_roles` (``auto``: meta when every rank has it)."""

_DIM_ORDER = ("dp", "tp", "pp", "cp", "ep")
_TRAINING_DIMS = {"data": "dp", "tensor": "tp", "pipeline": "pp", "context": "cp",
                  "expert": "ep"}
_P2P = (COLLECTIVES.index("send"), COLLECTIVES.index("recv"))


@dataclass(frozen=True)
class Role:
    """One rank's parallel role: ``key`` compares, ``label`` reads, ``source`` says whence."""

    key: Hashable
    label: str
    source: str


def meta_coords(meta: dict[str, Any]) -> dict[str, int] | None:
    """The coordinates meta.json gives (see the module doc), or None."""
    par = meta.get("parallel")
    coords: dict[str, int] = {}
    if isinstance(par, dict):
        coords = {str(k): v for k, v in par.items() if type(v) is int and v >= 0}
    training = meta.get("training")
    if not coords and isinstance(training, dict):
        for k, v in training.items():
            dim = str(k).removesuffix("_parallel_rank")
            if dim != k and dim in _TRAINING_DIMS and type(v) is int and v >= 0:
                coords[_TRAINING_DIMS[dim]] = v
    return coords or None


def _order(dims: list[str]) -> list[str]:
    return sorted(dims, key=lambda d: (_DIM_ORDER.index(d) if d in _DIM_ORDER else 99, d))


def _meta_roles(trace: Trace, ranks: list[int]) -> dict[int, Role] | None:
    found = {r: meta_coords(trace.ranks[r].meta) if r in trace.ranks else None for r in ranks}
    coords = {r: c for r, c in found.items() if c is not None}
    if not ranks or len(coords) < len(ranks):
        return None
    out = {}
    for r, c in coords.items():
        dims = _order(list(c))
        out[r] = Role(key=("meta", tuple((d, c[d]) for d in dims)),
                      label=".".join(f"{d}{c[d]}" for d in dims), source="meta")
    return out


def _trace_roles(trace: Trace, ranks: list[int]) -> dict[int, Role]:
    ev = trace.events
    in_step = ev.step >= 0
    fw_sets: dict[int, frozenset[str]] = {}
    fw_offset: dict[int, float] = {}
    groups: dict[int, list[tuple[frozenset[str], int, str]]] = {}
    for r in ranks:
        rows = trace.rank_rows(r)
        rows = rows[in_step[rows]]
        cat = ev.cat[rows]
        fw = rows[cat == Cat.FW]
        fw_sets[r] = frozenset(trace.names[int(i)] for i in np.unique(ev.name[fw]))
        first_bw: dict[int, float] = {}
        offsets = []
        for s, part in trace.rows_by_step(r).items():
            if s < 0:
                continue
            lo, _ = trace.bounds_of_rows(part)
            pf = part[ev.cat[part] == Cat.FW]
            if pf.size:
                offsets.append(float(ev.ts_us[pf].min()) - lo)
            pb = part[ev.cat[part] == Cat.BW]
            first_bw[s] = float(ev.ts_us[pb].min()) if pb.size else float("inf")
        fw_offset[r] = float(np.median(offsets)) if offsets else 0.0
        comm = rows[(cat == Cat.COMM) & (ev.group[rows] >= 0) & ~np.isin(ev.coll[rows], _P2P)]
        per_group: dict[int, tuple[set[str], bool]] = {}
        for row in comm.tolist():
            names, in_fw = per_group.setdefault(int(ev.group[row]), (set(), False))
            names.add(trace.name_of(row))
            early = float(ev.ts_us[row]) < first_bw.get(int(ev.step[row]), float("inf"))
            per_group[int(ev.group[row])] = (names, in_fw or early)
        groups[r] = []
        for g, (names, in_fw) in per_group.items():
            members = trace.groups[g]
            if len(members) > 1 and r in members:
                groups[r].append((frozenset(names), sorted(members).index(r),
                                  "tp" if in_fw else "dp"))
    stages = sorted(set(fw_sets.values()),
                    key=lambda s: min(fw_offset[r] for r in ranks if fw_sets[r] == s))
    out: dict[int, Role] = {}
    for r in ranks:
        dims = sorted(groups[r], key=lambda x: (_DIM_ORDER.index(x[2]), sorted(x[0])))
        parts, count = [], dict.fromkeys(_DIM_ORDER, 0)
        for _, i, d in dims:  # a second group of one kind: dp, dp_2, ...
            count[d] += 1
            parts.append(f"{d}{i}" if count[d] == 1 else f"{d}_{count[d]}:{i}")
        if len(stages) > 1:
            parts.insert(0, f"pp{stages.index(fw_sets[r])}")
        label = ".".join(parts) or "rank"
        out[r] = Role(key=("trace", label), label=label, source="trace")
    # equal roles (nothing tells them apart): numbered in rank order
    seen: dict[Hashable, int] = {}
    for r in ranks:
        k = out[r].key
        n = seen[k] = seen.get(k, -1) + 1
        if n or sum(1 for x in ranks if out[x].key == k) > 1:
            out[r] = Role(key=(k, n), label=f"{out[r].label}#{n}", source="trace")
    return out


def rank_roles(trace: Trace, *, source: str = "auto") -> dict[int, Role]:
    """rank → :class:`Role` for every rank with events (see the module doc)."""
    if source not in ROLE_SOURCES:
        raise ConfigError(f"source {source!r}: choose one of {', '.join(ROLE_SOURCES)}")
    ranks = sorted(int(r) for r in np.unique(trace.events.rank))
    if source in ("auto", "meta"):
        roles = _meta_roles(trace, ranks)
        if roles is not None:
            return roles
        if source == "meta":
            raise ConfigError(f"trace {trace.source or '(in memory)'}: not every rank's "
                              "meta.json has 'parallel' coordinates (or training's "
                              "*_parallel_rank); use source='trace'")
    return _trace_roles(trace, ranks)
