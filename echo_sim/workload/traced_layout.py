"""The parallel layout a multi-rank trace was taken at: data, tensor and pipeline degrees.

Read from the trace's own events, so any echo, Kineto or converted trace has one:

* **pipeline stages**: ranks that run different sets of ``FW`` operators are different
  stages (stage 0 starts its forward first in a step, as in :mod:`echo_sim.analysis.roles`);
  ``pp`` = the number of such sets;
* **tensor parallel**: a collective process group with an ``all_reduce`` (or a
  ``reduce_scatter`` / ``all_gather`` pair of sequence parallelism) issued inside the forward
  of its step; ``tp`` = the size of the largest such group;
* **FSDP / ZeRO-3**: a group that all-gathers in the forward and reduce-scatters only in the
  backward (parameters gathered, gradients sharded); ``dp`` = its size, ``fsdp`` = True;
* **data parallel**: a group whose every collective is issued after the first ``BW`` of its
  step (gradient synchronisation); ``dp`` = its size.

``dp`` falls back to ``world / (tp · pp)`` where no group says it. A one-rank trace is
``dp = tp = pp = 1``. Send/recv are no groups.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from echo_sim.trace.model import COLLECTIVES, Cat, Trace

__all__ = ["TracedLayout", "traced_layout"]

_AR, _AG, _RS = (COLLECTIVES.index(c) for c in ("all_reduce", "all_gather", "reduce_scatter"))
_P2P = (COLLECTIVES.index("send"), COLLECTIVES.index("recv"))


@dataclass(frozen=True)
class TracedLayout:
    """The traced job's layout. ``stages[s]`` = the ranks of pipeline stage ``s`` (sorted);
    ``ranks_per_host`` = the most ranks one host ran (the cores / GPU they shared)."""

    world: int
    dp: int = 1
    tp: int = 1
    pp: int = 1
    fsdp: bool = False
    stages: tuple[tuple[int, ...], ...] = ()
    ranks_per_host: int = 1

    @property
    def parallel(self) -> bool:
        """More than one rank took part."""
        return self.world > 1

    def describe(self) -> str:
        parts = [f"dp={self.dp}" + (" fsdp" if self.fsdp else ""), f"tp={self.tp}",
                 f"pp={self.pp}"]
        return " ".join(parts) + f" ({self.world} ranks, {self.ranks_per_host} per host)"


def _first_bw(trace: Trace, rows: np.ndarray) -> dict[int, float]:
    ev = trace.events
    out: dict[int, float] = {}
    bw = rows[ev.cat[rows] == Cat.BW]
    for s in np.unique(ev.step[bw]).tolist():
        out[int(s)] = float(ev.ts_us[bw[ev.step[bw] == s]].min())
    return out


def traced_layout(trace: Trace) -> TracedLayout:
    """The layout ``trace`` was taken at (see the module doc)."""
    ev = trace.events
    ranks = sorted(int(r) for r in np.unique(ev.rank)) or sorted(trace.ranks)
    world = max([len(ranks)] + [int(i.world_size) for i in trace.ranks.values()])
    hosts: dict[str, int] = {}
    for r in ranks:
        info = trace.ranks.get(r)
        key = info.host if info is not None and info.host else f"node{info.node_rank if info else 0}"
        hosts[key] = hosts.get(key, 0) + 1
    per_host = max(hosts.values()) if hosts else 1
    if len(ranks) < 2:
        return TracedLayout(world=world, dp=world, stages=(tuple(ranks),),
                            ranks_per_host=per_host)
    in_step = ev.step >= 0
    fw_sets: dict[int, frozenset[int]] = {}
    fw_offset: dict[int, float] = {}
    tp = dp = 1
    fsdp = False
    for r in ranks:
        rows = trace.rank_rows(r)
        rows = rows[in_step[rows]]
        fw = rows[ev.cat[rows] == Cat.FW]
        fw_sets[r] = frozenset(np.unique(ev.name[fw]).tolist())
        offs = []
        for s, part in trace.rows_by_step(r).items():
            pf = part[ev.cat[part] == Cat.FW]
            if s >= 0 and pf.size:
                offs.append(float(ev.ts_us[pf].min()) - trace.bounds_of_rows(part)[0])
        fw_offset[r] = float(np.median(offs)) if offs else 0.0
        first_bw = _first_bw(trace, rows)
        comm = rows[(ev.cat[rows] == Cat.COMM) & (ev.group[rows] >= 0)
                    & ~np.isin(ev.coll[rows], _P2P)]
        for g in np.unique(ev.group[comm]).tolist():
            members = trace.groups[int(g)]
            if len(members) < 2:
                continue
            mine = comm[ev.group[comm] == g]
            early = ev.ts_us[mine] < np.asarray(
                [first_bw.get(int(s), np.inf) for s in ev.step[mine]])
            coll = ev.coll[mine]
            if not early.any():
                dp = max(dp, len(members))
            elif (coll[early] == _AG).all() and (coll == _RS).any() and not (
                    (coll == _RS) & early).any():
                dp, fsdp = max(dp, len(members)), True
            else:
                tp = max(tp, len(members))
    sets = sorted(set(fw_sets.values()),
                  key=lambda fs: min(fw_offset[r] for r in ranks if fw_sets[r] == fs))
    pp = len(sets) if len(sets) > 1 else 1
    stages = tuple(tuple(r for r in ranks if fw_sets[r] == fs) for fs in sets) \
        if pp > 1 else (tuple(ranks),)
    if dp * tp * pp != world and world % (tp * pp) == 0:
        dp = world // (tp * pp)
    return TracedLayout(world=world, dp=dp, tp=tp, pp=pp, fsdp=fsdp, stages=stages,
                        ranks_per_host=per_host)
