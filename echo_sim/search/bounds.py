"""Lower bounds that let the search skip layouts without timing them, exactly.

Every bound here is a *lower* bound of what :func:`~echo_sim.sim.simulate.simulate` would
predict for the layout, so a layout is dropped only when even its bound is worse than a
layout already timed (branch and bound) or over the memory limit. Tests compare the pruned
search with timing every layout.

Memory (no simulation): :func:`memory_floor_bytes`. ``simulate`` charges stage ``s``
``states_s + act_s · k_s + buffers_s + baseline`` (ZeRO model states of the stage's
tensor-parallel shard, activations of one micro-batch times the micro-batches in flight,
DDP buckets), so its largest stage is at least the mean over stages:
``(Σ states + k_min · Σ act + Σ buffers) / pp``, with ``k_min = 1`` (1F1B: the last stage
holds one micro-batch) or ``m`` (GPipe holds all). ``Σ act`` over stages is at least the
whole model's activation bytes (recomputation keeps each block's input plus the largest
block's working set — a sum of per-stage maxima is at least the global maximum).

Time, level 1 (one probe per tensor-parallel degree, micro-batch and recomputation):
:class:`OpProbe` — a one-micro-batch, one-stage simulation gives the time of every
operator and of the tensor-parallel all-reduces of one micro-batch; op times do not depend
on the pipeline or data-parallel degree. The busiest pipeline rank computes at least the
mean, so ``T >= m · (ops + tp_comm) / pp``.

Time, level 2 (one probe per layout without its schedule): :class:`StageProbe` — a
simulation of the same layout with one micro-batch per replica (``pp`` for interleaving)
gives per rank the compute and blocking tensor-parallel time of one micro-batch ``a_s``,
the fixed compute (optimizer step, host overheads) ``u_s``, and per virtual stage its
forward and backward compute ``f_v``, ``b_v``. Rank ``s`` cannot start its first forward
before virtual stages ``0..s-1`` forwarded micro-batch 0, and after its last backward
those stages still run theirs (the pipeline fill and drain; Narayanan et al. 2021, §2.2):
``T >= max_s max(Σ_{v<s} f_v + m·a_s + Σ_{v<s} b_v, m·a_s + u_s)``. Its memory is exact for
one-chunk schedules: the per-micro-batch activations times the schedule's in-flight count
(:func:`~echo_sim.workload.pipeline.max_in_flight`); interleaved stages take the probe's.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from echo_sim.cost.memory_model import (
    activation_bytes,
    dtype_bytes,
    model_state_bytes,
    optimizer_states,
)
from echo_sim.search.space import ParallelLayout, SearchSpace
from echo_sim.workload.pipeline import max_in_flight, stage_actions
from echo_sim.workload.tensor_parallel import tp_param_bytes

__all__ = ["OpProbe", "StageProbe", "memory_floor_bytes", "probe_ops", "probe_stages"]


def memory_floor_bytes(workload: Any, layout: ParallelLayout, global_batch: int) -> float:
    """A lower bound of simulate's peak memory for ``layout`` (module docstring)."""
    elem = dtype_bytes(workload.dtype)
    upd = workload.update_ops
    states = optimizer_states(upd[0].name) if upd else 0
    fw = workload.fw_ops
    total = float(sum(tp_param_bytes(o, layout.tp) for o in fw))
    shard = layout.dp if layout.fsdp else 1
    params, grads, opt = model_state_bytes(total, elem_bytes=elem, states=states,
                                           mixed=elem == 2, shard=shard)
    mb_scale = layout.micro_batch / (workload.micro_batch or layout.micro_batch)
    act = activation_bytes(fw, tp=layout.tp, mb_scale=mb_scale,
                           recompute=layout.recompute == "full")
    k = layout.micro_batches(global_batch) if layout.schedule == "gpipe" and layout.pp > 1 else 1
    buffers = total if (not layout.fsdp and layout.dp > 1) else 0.0
    return (params + grads + opt + k * act + buffers) / layout.pp


@dataclass(frozen=True)
class OpProbe:
    """Per micro-batch on one unsplit replica: compute of every F/B op and blocking TP
    all-reduce time (µs); ``update_us``: the unsharded optimizer step."""

    ops_us: float
    tp_comm_us: float
    update_us: float

    def time_floor_us(self, layout: ParallelLayout, global_batch: int) -> float:
        m = layout.micro_batches(global_batch)
        upd = self.update_us / (layout.dp if layout.fsdp else 1)
        return (m * (self.ops_us + self.tp_comm_us) + upd) / layout.pp


@dataclass(frozen=True)
class StageProbe:
    """Per pipeline rank (index = stage): see the module docstring."""

    per_mb_us: tuple[float, ...]
    fixed_us: tuple[float, ...]
    fill_us: tuple[float, ...]
    drain_us: tuple[float, ...]
    mem_fixed_bytes: tuple[float, ...]
    act_bytes: tuple[float, ...]  # activations the probe held (one micro-batch if vpp = 1)

    def time_bound_us(self, layout: ParallelLayout, global_batch: int) -> float:
        m = layout.micro_batches(global_batch)
        best = 0.0
        for s, a in enumerate(self.per_mb_us):
            busy = m * a
            best = max(best, self.fill_us[s] + busy + self.drain_us[s], busy + self.fixed_us[s])
        return best

    def memory_bytes(self, layout: ParallelLayout, global_batch: int) -> float:
        """Exact peak (vpp = 1), else a lower bound (the probe's in-flight activations)."""
        m = layout.micro_batches(global_batch)
        out = 0.0
        for s, fixed in enumerate(self.mem_fixed_bytes):
            act = self.act_bytes[s]
            if layout.vpp == 1:
                act *= max_in_flight(stage_actions(layout.schedule, layout.pp, m, s, 1))
            out = max(out, fixed + act)
        return out


def _run(workload: Any, config: Any) -> Any:
    from echo_sim.sim.simulate import simulate

    return simulate(workload, config, keep=True)


def _tp_task_ids(res: Any, r: int) -> list[int]:
    g = res.built.graph
    names = g.resource_names
    want = f"rank{r}/comm_tp"
    return [tk for tk in res.built.comm_tasks[r] if any(names[x] == want for x in g.resources[tk])]


def _mb0(label: object) -> bool:
    return isinstance(label, tuple) and len(label) == 4 and label[-1] == 0


def probe_ops(workload: Any, layout: ParallelLayout, space: SearchSpace) -> OpProbe:
    """Level-1 probe: ``layout``'s tp / micro-batch / recomputation on one stage, DDP."""
    one = ParallelLayout(dp=layout.dp * layout.pp, tp=layout.tp, pp=1,
                         micro_batch=layout.micro_batch, recompute=layout.recompute)
    res = _run(workload, one.sim_config(space, global_batch=one.dp * one.micro_batch))
    plan = res.built.plan
    ops_us = float(sum(plan.time_us[o.index] for sp in plan.stages for o in (*sp.fw, *sp.bw)))
    r = res.built.ranks[0]
    s, e = res.schedule.start_us, res.schedule.end_us
    labels = res.built.graph.labels
    tp = float(sum(e[tk] - s[tk] for tk in _tp_task_ids(res, r) if _mb0(labels[tk])))
    return OpProbe(ops_us=ops_us, tp_comm_us=tp, update_us=float(sum(plan.update_us)))


def probe_stages(workload: Any, layout: ParallelLayout, space: SearchSpace) -> StageProbe:
    """Level-2 probe: ``layout`` with one micro-batch per replica (``pp`` if interleaved)."""
    m = layout.pp if layout.vpp > 1 else 1
    cfg = layout.sim_config(space, global_batch=layout.dp * layout.micro_batch * m,
                            keep_schedule=layout.vpp > 1)
    res = _run(workload, cfg)
    built, sched = res.built, res.schedule
    plan = built.plan
    labels = built.graph.labels
    st, en = sched.start_us, sched.end_us
    t = plan.time_us
    f_v = [float(sum(t[o.index] for o in sp.fw)) for sp in plan.stages]
    b_v = [float(sum(t[o.index] for o in sp.bw)) for sp in plan.stages]
    P = layout.pp
    per_mb = [0.0] * P
    fixed = [0.0] * P
    mem_fixed = [0.0] * P
    act = [0.0] * P
    by_rank = {rb.rank: rb for rb in res.ranks}
    for r in built.ranks:
        s_ = built.stage_of[r]
        a = u = 0.0
        for tk in built.compute_tasks[r]:
            lab = labels[tk]
            d = float(en[tk] - st[tk])
            if isinstance(lab, tuple) and lab and lab[0] == "op":
                if lab[-1] == 0:
                    a += d
            else:
                u += d
        a += float(sum(en[tk] - st[tk] for tk in _tp_task_ids(res, r) if _mb0(labels[tk])))
        per_mb[s_] = max(per_mb[s_], a)
        fixed[s_] = max(fixed[s_], u)
        mem = by_rank[r].memory
        act[s_] = float(mem.get("activations", 0))
        mem_fixed[s_] = float(by_rank[r].peak_memory_bytes) - act[s_]
    fill = [float(sum(f_v[:s])) for s in range(P)]
    drain = [float(sum(b_v[:s])) for s in range(P)]
    return StageProbe(per_mb_us=tuple(per_mb), fixed_us=tuple(fixed), fill_us=tuple(fill),
                      drain_us=tuple(drain), mem_fixed_bytes=tuple(mem_fixed),
                      act_bytes=tuple(act))
