"""Lower bounds that let the search skip layouts without timing them, exactly.

Every bound here is a *lower* bound of what :func:`~echo_sim.sim.simulate.simulate` would
predict for the layout, so a layout is dropped only when even its bound is worse than a
layout already timed (branch and bound) or over the memory limit. Tests hold each bound
to simulate's own figure on every layout of small spaces, and the pruned search to the
exhaustive one.

**Memory floor** (no simulation), :func:`memory_floor_bytes`. ``simulate`` charges stage
``s`` ``states_s + act_s · k_s + buffers_s + baseline`` (ZeRO model states of the stage's
tensor-parallel shard, activations of one micro-batch times the micro-batches in flight,
DDP buckets; ZeRO-1/2's gradient buckets are counted as 0, below what they hold), so its largest stage is at least the mean over stages
``(Σ states + k_min · Σ act + Σ buffers) / pp``, ``k_min`` = 1 (1F1B: the last stage holds
one micro-batch) or ``m`` (GPipe). ``Σ act`` is at least the whole model's activation bytes
(with recomputation each block keeps its input plus the largest working set: a sum of
per-stage maxima is at least the global maximum). Per-stage tensor-parallel degrees take
the largest of them, ``tp_max``, everywhere: parameters, activations and working sets shrink
as ``tp`` grows, so each stage holds at least its share at ``tp_max`` and the floor stays
below simulate's (tests check it on every such layout).

**Op probe** (one simulation per tensor-parallel degree × micro-batch × recomputation ×
sequence parallelism; on a CPU target priced with a profile, also per data-parallel
degree and sharding, DDP, ZeRO-1/2 or FSDP, whose host costs sit on the operators),
:class:`OpProbe`: the layout's tp / micro-batch / recomputation on one pipeline stage and
one micro-batch. It yields simulate's own time of every operator and of the blocking
tensor-parallel all-reduces each operator issues (they do not depend on the pipeline or
data-parallel degree), the optimizer step and the measured memory baseline.

* *Time floor*: the busiest pipeline rank computes at least the mean,
  ``T >= (m · (ops + tp_comm) + update) / pp``.
* :meth:`OpProbe.stage_bound` cuts the model into ``pp · vpp`` virtual stages the way
  ``make_plan`` does (:func:`~echo_sim.workload.pipeline.split_units` on the per-unit
  forward + backward time) and gives, per pipeline rank ``s``, the compute + blocking TP
  time of one micro-batch ``a_s``, the optimizer step ``u_s`` and the forward/backward
  time ``f_v``, ``b_v`` of every virtual stage. Rank ``s`` cannot start its first forward
  before virtual stages ``0..s-1`` forwarded micro-batch 0, and after its last backward
  those stages still run theirs (the pipeline fill and drain; Narayanan et al. 2021,
  §2.2): ``T >= max_s max(Σ_{v<s} f_v + m·a_s + Σ_{v<s} b_v, m·a_s + u_s)``.
* Its memory is simulate's memory model (``echo_sim.sim.simulate``'s per-stage sum, with
  the functions of :mod:`echo_sim.cost.memory_model`) evaluated on the same split and the
  schedule's in-flight micro-batches (:func:`~echo_sim.workload.pipeline.stage_actions`);
  tests hold it equal to simulate's peak on every layout.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from echo_sim.cost.memory_model import (
    activation_bytes,
    dtype_bytes,
    optimizer_states,
    recompute_working_bytes,
    zero_state_bytes,
)
from echo_sim.errors import ConfigError
from echo_sim.search.space import ParallelLayout, SearchSpace
from echo_sim.sim.stage_memory import ChunkMemory, chunk_memory, stage_memory
from echo_sim.workload.build import unit_stages
from echo_sim.workload.tensor_parallel import tp_param_bytes

__all__ = ["MemoryFloor", "OpProbe", "StageBound", "host_costs", "memory_floor_bytes",
           "probe_ops"]


def _update_shards(layout: ParallelLayout) -> int:
    """How many ways the optimizer step is split: ``dp`` under FSDP and ZeRO-1/2 (each
    replica updates its shard), else 1 (``make_plan``)."""
    return layout.dp if layout.fsdp or layout.zero else 1


def _zero_spec(workload: Any, layout: ParallelLayout) -> Any:
    """The DeepSpeed ZeRO-1/2 settings simulate gives ``layout`` (None: DDP or FSDP)."""
    if not layout.zero or layout.fsdp:
        return None
    from echo_sim.sim.zero_choice import choose_zero

    return choose_zero(layout.zero, False, workload.meta, pp=layout.pp).spec


def _model_states(workload: Any) -> tuple[int, int, bool]:
    elem = dtype_bytes(workload.dtype)
    upd = workload.update_ops
    return elem, (optimizer_states(upd[0].name) if upd else 0), elem == 2


class MemoryFloor:
    """:func:`memory_floor_bytes` for many layouts of one workload, its sums memoised."""

    def __init__(self, workload: Any) -> None:
        self.workload = workload
        self.elem, self.states, self.mixed = _model_states(workload)
        self._parts: dict[tuple[int, int, str, bool], tuple[float, float, float]] = {}

    def _sums(self, tp: int, mb: int, recompute: str,
              sp: bool) -> tuple[float, float, float]:
        """(TP-sharded parameter bytes, whole-model activations of one micro-batch, the
        recomputation working set)."""
        got = self._parts.get((tp, mb, recompute, sp))
        if got is None:
            fw = self.workload.fw_ops
            total = float(sum(tp_param_bytes(o, tp) for o in fw))
            mb_scale = mb / (self.workload.micro_batch or mb)
            # saved activations per micro-batch, plus the working set held once
            act = activation_bytes(fw, tp=tp, mb_scale=mb_scale, recompute=recompute,
                                   include_working=False, sequence_parallel=sp)
            work = recompute_working_bytes(fw, tp=tp, mb_scale=mb_scale, recompute=recompute)
            got = self._parts[(tp, mb, recompute, sp)] = (total, act, work)
        return got

    def __call__(self, layout: ParallelLayout, global_batch: int) -> float:
        # per-stage recomputation holds at least what full recomputation everywhere holds
        total, act, work = self._sums(layout.tp, layout.micro_batch,
                                      "full" if layout.stage_recompute else layout.recompute,
                                      layout.sp)
        params, grads, opt = zero_state_bytes(total, elem_bytes=self.elem, states=self.states,
                                              mixed=self.mixed, dp=layout.dp,
                                              stage=3 if layout.fsdp else layout.zero)
        k = layout.micro_batches(global_batch) if layout.schedule == "gpipe" and \
            layout.pp > 1 else 1
        # DDP's buckets; ZeRO-1/2's gradient buckets are at least 0
        buffers = total if (layout.sharding == "ddp" and layout.dp > 1) else 0.0
        return (params + grads + opt + k * act + work + buffers) / layout.pp


def memory_floor_bytes(workload: Any, layout: ParallelLayout, global_batch: int) -> float:
    """A lower bound of simulate's peak memory for ``layout`` (module docstring)."""
    return MemoryFloor(workload)(layout, global_batch)


@dataclass(frozen=True)
class StageBound:
    """Per pipeline rank: one micro-batch's compute + TP time and the fill / drain before
    and after it (µs); ``stage_fw``: the forward ops of every virtual stage."""

    per_mb_us: tuple[float, ...]
    fill_us: tuple[float, ...]
    drain_us: tuple[float, ...]
    stage_fw: tuple[tuple[Any, ...], ...]


@dataclass
class OpProbe:
    """simulate's op times for one (tp, micro-batch, recomputation, sequence parallelism):
    see the module doc."""

    workload: Any
    tp: int
    micro_batch: int
    recompute: str
    sp: bool
    time_us: np.ndarray  # per op index: compute time of one micro-batch
    tp_comm_us: np.ndarray  # per op index: blocking TP all-reduce time it issues
    baseline_bytes: float
    is_cpu: bool
    _splits: dict[tuple[int, int], StageBound] = field(default_factory=dict, repr=False)
    _floor: tuple[float, float] | None = field(default=None, repr=False)
    _mem: dict[tuple[int, int, int], list[ChunkMemory]] = field(
        default_factory=dict, repr=False)

    def time_floor_us(self, layout: ParallelLayout, global_batch: int) -> float:
        m = layout.micro_batches(global_batch)
        per_mb, upd = self._sums()
        return (m * per_mb + upd / _update_shards(layout)) / layout.pp

    def _sums(self) -> tuple[float, float]:
        """(F/B ops + TP all-reduces of one micro-batch, optimizer step of the TP shard)."""
        if self._floor is None:
            fw = self.workload.fw_ops
            share = float(sum(tp_param_bytes(o, self.tp) for o in fw)) / \
                (float(sum(o.param_bytes for o in fw)) or 1.0)
            upd = self._update_part()
            self._floor = (float(self.time_us.sum()) - upd + float(self.tp_comm_us.sum()),
                           upd * share)
        return self._floor

    def _update_part(self) -> float:
        return float(sum(self.time_us[o.index] for o in self.workload.update_ops))

    def stage_bound(self, layout: ParallelLayout) -> StageBound:
        """The split into ``pp · vpp`` virtual stages and its per-rank times (cached)."""
        P, V = layout.pp, layout.vpp
        got = self._splits.get((P, V))
        if got is None:
            got = self._splits[(P, V)] = self._split(P, V)
        return got

    def _split(self, P: int, V: int) -> StageBound:
        # make_plan's own cut (the same function)
        wl = self.workload
        t = self.time_us
        fw_all = wl.fw_ops
        fw_of = {o.module: o for o in fw_all}
        nvs = P * V
        vs_of_unit = unit_stages(fw_all, wl.bw_ops, t, nvs)
        f_v = [0.0] * nvs
        b_v = [0.0] * nvs
        c_v = [0.0] * nvs  # TP all-reduces, both phases
        fw_v: list[list[Any]] = [[] for _ in range(nvs)]
        for o in fw_all:
            v = vs_of_unit[o.unit]
            f_v[v] += float(t[o.index])
            c_v[v] += float(self.tp_comm_us[o.index])
            fw_v[v].append(o)
        for o in wl.bw_ops:
            f = fw_of.get(o.module)
            v = vs_of_unit[f.unit] if f is not None else nvs - 1
            b_v[v] += float(t[o.index])
            c_v[v] += float(self.tp_comm_us[o.index])
        per_mb = [sum(f_v[c * P + s] + b_v[c * P + s] + c_v[c * P + s] for c in range(V))
                  for s in range(P)]
        fill = [float(sum(f_v[:s])) for s in range(P)]
        drain = [float(sum(b_v[:s])) for s in range(P)]
        return StageBound(per_mb_us=tuple(per_mb), fill_us=tuple(fill),
                          drain_us=tuple(drain), stage_fw=tuple(tuple(x) for x in fw_v))

    def time_bound_us(self, layout: ParallelLayout, global_batch: int) -> float:
        """Level-2 time bound of ``layout`` (fill / drain and the busiest rank)."""
        sb = self.stage_bound(layout)
        m = layout.micro_batches(global_batch)
        upd = self._updates(layout, sb)
        best = 0.0
        for s, a in enumerate(sb.per_mb_us):
            busy = m * a
            best = max(best, sb.fill_us[s] + busy + sb.drain_us[s], busy + upd[s])
        return best

    def _updates(self, layout: ParallelLayout, sb: StageBound) -> list[float]:
        # make_plan: the optimizer step of a rank is the step's share of the parameters it
        # holds (TP-sharded bytes over all bytes), / dp under FSDP
        total = float(sum(o.param_bytes for o in self.workload.fw_ops)) or 1.0
        upd = self._update_part()
        P, V = layout.pp, layout.vpp
        out = []
        for s in range(P):
            held = sum(tp_param_bytes(o, self.tp) for c in range(V) for o in sb.stage_fw[c * P + s])
            out.append(upd * held / total / _update_shards(layout))
        return out

    def _rank_chunks(self, layout: ParallelLayout, s: int) -> list[ChunkMemory]:
        """What each chunk of pipeline rank ``s`` holds in memory, memoised per split."""
        key = (layout.pp, layout.vpp, s)
        got = self._mem.get(key)
        if got is None:
            wl = self.workload
            sb = self.stage_bound(layout)
            P, V = layout.pp, layout.vpp
            mb_scale = self.micro_batch / (wl.micro_batch or self.micro_batch)
            got = self._mem[key] = [
                chunk_memory(sb.stage_fw[c * P + s], tp=self.tp, mb_scale=mb_scale,
                             recompute=self.recompute, sequence_parallel=self.sp,
                             has_blocks=wl.has_blocks) for c in range(V)]
        return got

    def memory_bytes(self, layout: ParallelLayout, global_batch: int) -> float:
        """Peak memory of ``layout`` by simulate's own per-rank model
        (:func:`~echo_sim.sim.stage_memory.stage_memory`) on this split (max rank)."""
        elem, states, mixed = _model_states(self.workload)
        m = layout.micro_batches(global_batch)
        return max(stage_memory(self._rank_chunks(layout, s), schedule=layout.schedule,
                                pp=layout.pp, micro_batches=m, stage=s, dp=layout.dp,
                                fsdp=layout.fsdp, elem_bytes=elem, states=states,
                                mixed=mixed, is_cpu=self.is_cpu,
                                zero=_zero_spec(self.workload, layout)).peak_bytes
                   for s in range(layout.pp)) + self.baseline_bytes


def _tp_comm_by_op(res: Any) -> np.ndarray:
    """Per op index: duration of the TP all-reduces it issues in micro-batch 0."""
    built, sched = res.built, res.schedule
    g = built.graph
    names = g.resource_names
    r = built.ranks[0]
    want = f"rank{r}/comm_tp"
    hooks = built.plan.stages[0].hooks
    out = np.zeros(len(built.plan.time_us))
    for tk in built.comm_tasks[r]:
        lab = g.labels[tk]
        if not (isinstance(lab, tuple) and len(lab) == 4 and lab[0] == "comm" and lab[3] == 0):
            continue
        if not any(names[x] == want for x in g.resources[tk]):
            continue
        issue = hooks[lab[2]].issue
        if issue >= 0:  # issued at an action's start: left out (a bound may drop time)
            out[issue] += float(sched.end_us[tk] - sched.start_us[tk])
    return out


def host_costs(space: SearchSpace) -> bool:
    """True when simulate puts calibrated host costs (DDP's reducer, FSDP2's hooks, DTensor)
    on the operators: a CPU target priced with a communication profile."""
    return space.comm_profile is not None and _cpu_target(space)


def _cpu_target(space: SearchSpace) -> bool:
    """The space's cluster is CPU hosts (gloo), not GPUs."""
    from echo_sim.cost.hardware import CLUSTERS

    return CLUSTERS[space.cluster.strip().lower()].gpu.name == "cpu"


def probe_ops(workload: Any, layout: ParallelLayout, space: SearchSpace, *,
              batch_traces: tuple[Any, ...] = ()) -> OpProbe:
    """Simulate ``layout``'s tp / micro-batch / recomputation / sequence parallelism as one
    stage, one micro-batch."""
    from echo_sim.sim.simulate import simulate

    if host_costs(space):
        # the layout's own data parallelism and sharding (their host costs sit on the
        # operators), one stage: at most the layout's ranks share a host, so no more
        # contention than the layout's own; and its own micro-batch count, so that the rank
        # skew per collective spreads the optimizer step over as many collectives as the
        # layout's (linear in the compute between them: the stages' mean is the probe's)
        one = ParallelLayout(dp=layout.dp, tp=layout.tp, pp=1, micro_batch=layout.micro_batch,
                             recompute=layout.recompute, sp=layout.sp, fsdp=layout.fsdp,
                             zero=layout.zero)
        gb = space.global_batch
    else:  # operator times do not depend on the data parallelism: one probe serves all
        one = ParallelLayout(dp=layout.dp * layout.pp, tp=layout.tp, pp=1,
                             micro_batch=layout.micro_batch, recompute=layout.recompute,
                             sp=layout.sp)
        gb = one.dp * one.micro_batch
    # the probe reads the plan's op times and the mean schedule: not the spread's draws
    res = simulate(workload, one.sim_config(space, global_batch=gb),
                   batch_traces=batch_traces, keep=True, spread=False)
    if res.built is None:  # pragma: no cover - keep=True always keeps it
        raise ConfigError("simulate kept no task graph for the probe")
    plan = res.built.plan
    is_cpu = _cpu_target(space)
    t = np.array(plan.time_us, dtype=float)
    return OpProbe(workload=workload, tp=layout.tp, micro_batch=layout.micro_batch,
                   recompute=layout.recompute, sp=layout.sp, time_us=t,
                   tp_comm_us=_tp_comm_by_op(res),
                   baseline_bytes=float(res.ranks[0].memory.get("baseline", 0)), is_cpu=is_cpu)
