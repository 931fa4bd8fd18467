"""The schedule of a prediction as an echo trace (``simulate --output``)."""

from __future__ import annotations

from typing import Any, Protocol

from echo_sim.trace.model import Cat, RankInfo, Trace, TraceBuilder

__all__ = ["SimulatedRun", "timeline_trace"]


class SimulatedRun(Protocol):
    """What :func:`timeline_trace` reads of a :class:`~echo_sim.sim.simulate.SimResult` (a
    protocol, so that this module, which ``SimResult.to_trace`` imports, imports nothing of
    ``simulate``: no import circle)."""

    @property
    def built(self) -> Any: ...
    @property
    def schedule(self) -> Any: ...
    @property
    def workload(self) -> Any: ...
    @property
    def cluster(self) -> Any: ...
    @property
    def gpus_per_node(self) -> int: ...
    @property
    def iteration_time_us(self) -> float: ...
    @property
    def micro_batch(self) -> int: ...
    @property
    def world_size(self) -> int: ...

_CHANNEL_TID = {"compute": 0, "comm_tp": 100, "comm_dp": 101, "comm_ag": 102, "comm_rs": 103,
                "comm_push": 104, "comm_pull": 105, "p2p": 106}


def timeline_trace(res: SimulatedRun) -> Trace:
    """The simulated timeline of ``res`` as a :class:`Trace` (see :meth:`SimResult.to_trace`)."""
    built, sched, wl = res.built, res.schedule, res.workload
    assert built is not None and sched is not None and wl is not None  # checked by caller
    g = built.graph
    ops = wl.ops
    b = TraceBuilder(source_format="echo-sim", source="simulate")
    start, end = sched.start_us, sched.end_us
    T = res.iteration_time_us
    names = g.resource_names
    for r in built.ranks:
        for tk in built.compute_tasks[r]:
            lab = g.labels[tk]
            if not isinstance(lab, tuple):
                continue
            kind = lab[0]
            if kind == "op":
                o = ops[lab[2]]
                frac = o.dur_us / o.time_us if o.time_us > 0 else 1.0
                b.add(rank=r, name=o.name, cat=Cat.FW if o.phase == "F" else Cat.BW,
                      ts_us=float(start[tk]), dur_us=float(end[tk] - start[tk]) * frac,
                      step=0, tid=0, kind=o.kind or None, param_bytes=o.param_bytes,
                      in_bytes=int(o.in_bytes * res.micro_batch / (wl.micro_batch or
                                                                    res.micro_batch)),
                      out_bytes=int(o.out_bytes * res.micro_batch / (wl.micro_batch or
                                                                      res.micro_batch)),
                      flops=o.flops)
            elif kind == "update":
                u = wl.update_ops
                b.add(rank=r, name=u[0].name if u else "UPDATE.Optimizer", cat=Cat.UPDATE,
                      ts_us=float(start[tk]), dur_us=float(end[tk] - start[tk]), step=0,
                      tid=0, param_bytes=int(built.plan.stages[built.stage_of[r]].param_bytes))
        b.add(rank=r, name="STEP", cat=Cat.STEP, ts_us=0.0, dur_us=T, step=0, tid=1)
    seqs: dict[tuple[int, ...], int] = {}
    for tk, (name, coll, nbytes, grp) in sorted(built.comm_info.items()):
        seq = seqs.get(grp, 0)
        seqs[grp] = seq + 1
        chans = {names[x].split("/", 1)[1] for x in g.resources[tk] if names[x].startswith("rank")}
        tid = _CHANNEL_TID.get(next(iter(chans)) if chans else "comm_dp", 107)
        members = [x for x in grp if x in built.stage_of]
        for r in members:
            peer = -1
            c = coll
            if coll == "send":
                c = "send" if r == grp[0] else "recv"
                peer = grp[1] if r == grp[0] else grp[0]
            b.add(rank=r, name=f"Comm.{name}", cat=Cat.COMM, ts_us=float(start[tk]),
                  dur_us=float(end[tk] - start[tk]), step=0, tid=tid, collective=c,
                  nbytes=int(nbytes), group_ranks=grp, seq=seq, peer=peer)
    for r in built.ranks:
        b.ranks[r] = RankInfo(rank=r, world_size=res.world_size,
                              local_rank=r % res.gpus_per_node, node_rank=r // res.gpus_per_node,
                              device="cuda" if res.cluster != "cpu-gloo" else "cpu",
                              backend="simulated", source="simulate", meta={
                                  "micro_batch_size": res.micro_batch, "simulated": True,
                                  "representative_ranks": built.ranks,
                                  "cluster": res.cluster, "steps": [0]})
    return b.build(steps=[0])
