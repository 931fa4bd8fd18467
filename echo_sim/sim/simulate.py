"""Predict a training job at another scale, layout or cluster from a one-rank trace.

``simulate(trace, SimConfig(dp=8, tp=4, pp=2, ...))``:

1. :func:`~echo_sim.workload.traced.traced_workload` — the per-op workload of one step of
   the whole traced job (a multi-rank trace's layout and own collectives with it);
2. :mod:`echo_sim.cost.batch_model` — each op's time at the target micro-batch;
3. :mod:`echo_sim.cost.compute_scaling` — each op's time on the target GPU;
4. :mod:`echo_sim.workload.build` — pipeline split, tensor parallel, recomputation,
   FSDP / DeepSpeed ZeRO-1/2 / DDP (the stage stated, or a DeepSpeed trace's own:
   :mod:`echo_sim.sim.zero_choice`) composed into one task graph per simulated rank,
   collectives priced by
   :class:`~echo_sim.cost.collectives.CommModel` (a measured ``comm_profile`` where it applies);
5. :func:`echo_sim.sim.engine.run` — the schedule; iteration time = the last rank's end
   (with a measured profile whose runs spread, the mean of that end over draws of them:
   :mod:`echo_sim.sim.comm_spread`);
6. :mod:`echo_sim.cost.memory_model` — peak memory per rank against the device limit.

Time breakdown per rank (they sum to the iteration time): *compute* (the compute stream
busy), *exposed communication* (a channel busy while compute is not), *pipeline bubble*
(neither, before the rank's last backward, with pp > 1) and *idle* (the rest: waiting for
other ranks at the end of the step).
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from echo_sim.cost.batch_model import make_batch_model
from echo_sim.cost.compute_scaling import compute_scaling, resolve_device
from echo_sim.cost.cpu_overheads import CommOverlap, Skew, comm_overlap, contention, skew
from echo_sim.cost.memory_model import (
    MemoryEstimate,
    activation_bytes,
    zero_state_bytes,
)
from echo_sim.cost.network import apply_network, describe_network
from echo_sim.errors import ConfigError
from echo_sim.sim.comm_spread import StepDraws, draw_count, expected_step
from echo_sim.sim.config import MODES, SimConfig
from echo_sim.sim.engine import Schedule, run
from echo_sim.sim.host_costs import apply_host_costs
from echo_sim.sim.overlap import stretch_overlaps
from echo_sim.sim.stage_memory import chunk_memory, stage_memory
from echo_sim.sim.target import (
    BatchChoice,
    HardwareChoice,
    choose_batch,
    choose_hardware,
    traced_micro_batch,
)
from echo_sim.sim.zero_choice import ZeroChoice, choose_zero, memory_precision
from echo_sim.trace.model import Trace
from echo_sim.units import fmt_bytes
from echo_sim.workload.build import Built, Layout, Plan, build_graph, make_plan
from echo_sim.workload.channel_parallel import CHANNEL_SPLIT, channel_parallel, channel_summary
from echo_sim.workload.jitter import MIN_STEPS, part_gaps
from echo_sim.workload.ops import Workload, extract_workload
from echo_sim.workload.tensor_parallel import apply_tp_plan, check_tensor_parallel
from echo_sim.workload.traced import traced_workload
from echo_sim.workload.traced_layout import TracedLayout

__all__ = ["MODES", "NO_CPU_PROFILE", "RankBreakdown", "SimConfig", "SimResult", "baseline_note",
           "simulate"]


@dataclass(frozen=True)
class RankBreakdown:
    """Where one simulated rank's iteration time went (µs); the four parts sum to it."""

    rank: int
    stage: int
    compute_us: float
    exposed_comm_us: float
    bubble_us: float
    idle_us: float
    peak_memory_bytes: int
    memory: dict[str, int]


@dataclass
class SimResult:
    """A prediction: times, throughput, per-rank breakdown and memory, and the models used."""

    config: SimConfig
    iteration_time_us: float
    samples_per_s: float
    tokens_per_s: float | None
    micro_batch: int
    global_batch: int
    micro_batches: int
    ranks: list[RankBreakdown]
    memory_limit_bytes: int
    models: list[str]
    world_size: int
    nodes: int
    gpus_per_node: int
    simulated_ranks: list[int]
    num_tasks: int
    hardware: HardwareChoice | None = None
    batch: BatchChoice | None = None
    warnings: list[str] = field(default_factory=list)
    calibration: dict[str, dict[str, float]] = field(default_factory=dict)
    # 10th and 90th percentiles of the step over the collectives' measured spread (µs;
    # None when nothing was drawn: echo_sim.sim.comm_spread)
    iteration_range_us: tuple[float, float] | None = None
    built: Built | None = field(default=None, repr=False)
    schedule: Schedule | None = field(default=None, repr=False)
    workload: Workload | None = field(default=None, repr=False)

    @property
    def cluster(self) -> str:
        """The cluster preset predicted for (asked for, or the traced hardware's)."""
        return self.hardware.cluster if self.hardware else str(self.config.cluster)

    @property
    def peak_memory_bytes(self) -> dict[int, int]:
        """Peak memory per simulated rank."""
        return {r.rank: r.peak_memory_bytes for r in self.ranks}

    @property
    def max_peak_memory_bytes(self) -> int:
        return max((r.peak_memory_bytes for r in self.ranks), default=0)

    @property
    def oom(self) -> bool:
        """True when some rank's predicted peak exceeds the memory limit."""
        return self.max_peak_memory_bytes > self.memory_limit_bytes

    def to_dict(self) -> dict[str, Any]:
        c = self.config
        return {
            "iteration_time_us": self.iteration_time_us,
            "iteration_range_us": (list(self.iteration_range_us)
                                   if self.iteration_range_us is not None else None),
            "samples_per_s": self.samples_per_s,
            "tokens_per_s": self.tokens_per_s,
            "layout": {"dp": c.dp, "tp": max(c.stage_tps), "pp": c.pp, "schedule": c.schedule,
                       "virtual_stages": c.virtual_stages, "fsdp": c.fsdp,
                       "zero_stage": c.zero_stage,
                       "recompute": c.recompute, "data_parallel": c.data_parallel,
                       "stage_recompute": list(c.stage_recompute or ()),
                       "stage_tp": list(c.stage_tp or ()),
                       "micro_batch": self.micro_batch, "global_batch": self.global_batch,
                       "micro_batches": self.micro_batches, "nodes": self.nodes,
                       "gpus_per_node": self.gpus_per_node, "cluster": self.cluster,
                       "world_size": self.world_size, "mode": c.mode},
            "hardware": self.hardware.to_dict() if self.hardware else None,
            "micro_batch_source": self.batch.to_dict() if self.batch else None,
            "calibration": self.calibration,
            "warnings": self.warnings,
            "ranks": [{"rank": r.rank, "stage": r.stage, "compute_us": r.compute_us,
                       "exposed_comm_us": r.exposed_comm_us, "bubble_us": r.bubble_us,
                       "idle_us": r.idle_us, "peak_memory_bytes": r.peak_memory_bytes,
                       "memory": r.memory} for r in self.ranks],
            "peak_memory_bytes": self.max_peak_memory_bytes,
            "peak_memory_bytes_per_rank": {str(k): v for k, v in self.peak_memory_bytes.items()},
            "memory_limit_bytes": self.memory_limit_bytes,
            "oom": self.oom,
            "simulated_ranks": self.simulated_ranks,
            "num_tasks": self.num_tasks,
            "models": self.models,
        }

    def to_trace(self) -> Trace:
        """The simulated timeline as a :class:`Trace` (echo contract: pid = global rank).

        Compute ops become ``FW.``/``BW.`` events (their measured host gap left idle, as in
        the traced run), the optimizer an ``UPDATE.`` event, each collective a ``Comm.``
        event on every simulated member (lane per channel), one ``STEP`` per rank.
        """
        if self.built is None or self.schedule is None or self.workload is None:
            raise ConfigError("this SimResult holds no schedule (simulate(..., keep=False))")
        from echo_sim.sim.timeline import timeline_trace

        return timeline_trace(self)


def _resolve_batches(config: SimConfig, mb: int, accum: int = 1) -> tuple[int, int, int]:
    """(micro-batch, global batch, micro-batches per replica). The default global batch keeps
    the traced job's ``accum`` micro-batches per replica and step (at least ``pp`` when
    pipelining): dp · micro_batch · max(accum, pp)."""
    if config.global_batch is None:
        gb = config.dp * mb * max(accum, config.pp if config.pp > 1 else 1)
    else:
        gb = config.global_batch
    if gb % (config.dp * mb):
        raise ConfigError(f"global batch {gb} is not divisible by dp·micro_batch = "
                          f"{config.dp}·{mb} = {config.dp * mb}")
    return mb, gb, gb // (config.dp * mb)


def _resolve_cluster(config: SimConfig, hw: HardwareChoice) -> Any:
    from echo_sim.cost.hardware import CLUSTERS, get_cluster

    base = CLUSTERS[hw.cluster]
    world = config.world
    gpn = config.gpus_per_node
    nodes = config.nodes
    if gpn is None:
        per_node = world if hw.one_host else base.gpus_per_node  # one host: every rank
        gpn = world // nodes if nodes else min(world, per_node)
    if nodes is None:
        nodes = -(-world // gpn)
    net = config.network
    if net is not None and net.gpu_mesh:  # one GPU per mesh position
        if config.gpus_per_node not in (None, 1) or config.nodes not in (None, world):
            raise ConfigError(f"gpu_mesh puts one GPU at each mesh position; gpus_per_node="
                              f"{config.gpus_per_node} and nodes={config.nodes} must be "
                              f"unset (or 1 and dp·tp·pp = {world})")
        gpn, nodes = 1, world
    if nodes * gpn < world:
        raise ConfigError(f"nodes·gpus_per_node = {nodes}·{gpn} < dp·tp·pp = {world}")
    return apply_network(get_cluster(hw.cluster, nodes=nodes, gpus_per_node=gpn), net)


def _check_workload(config: SimConfig, workload: Workload, micro_batches: int) -> None:
    for tp in dict.fromkeys(config.stage_tps):
        try:
            check_tensor_parallel(workload, tp)
        except ConfigError as e:
            if config.stage_tp is None:
                raise
            msg = str(e).replace(f"tp={tp} ", f"degree {tp} ", 1)
            raise ConfigError(f"stage_tp={config.stage_tp!r}: {msg}") from None
    stages = config.pp * config.virtual_stages
    if stages > 1 and stages > workload.num_blocks:
        raise ConfigError(f"pp·virtual_stages = {stages} pipeline stages but the model has "
                          f"only {workload.num_blocks} blocks")
    if config.schedule == "interleaved" and config.virtual_stages > 1 and \
            micro_batches % config.pp:
        raise ConfigError(f"interleaved schedule needs micro-batches ({micro_batches}) "
                          f"divisible by pp={config.pp}")


@dataclass
class _Notes:
    """What a prediction says about itself: model lines, warnings, calibrated figures."""

    models: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    calibration: dict[str, dict[str, float]] = field(default_factory=dict)


def simulate(trace: Trace | Workload, config: SimConfig, *, comm: Any = None,
             batch_traces: tuple[Trace | Workload, ...] = (), keep: bool = True,
             spread: bool = True) -> SimResult:
    """Predict one iteration of ``config`` from ``trace`` (see the module docstring).

    ``comm``: a collective cost model (default: ``CommModel(cluster, comm_profile)``);
    ``batch_traces``: traces of the same model at other micro-batch sizes (batch fit);
    ``keep``: keep the graph and schedule on the result (needed by :meth:`to_trace`);
    ``spread=False`` leaves out step 6d (the collectives' run-to-run spread: about 46 more
    runs of the schedule) and the traced compute's step-to-step spread at each
    synchronisation (step 6b), so the iteration is the schedule of mean times without
    either: for callers that read only the plan's op times and that schedule (search's
    operator probes, whose bounds must stay below every layout's prediction).
    Raises :class:`ConfigError` for layouts the model cannot take.

    The steps run in this order, each a function below: the workload and what it was
    traced on (:func:`_workload`), the target hardware and micro-batch
    (:mod:`echo_sim.sim.target`), the collective model (:func:`_comm_model`), per-op times
    on the target (:func:`_op_times`), the plan of every parallelism plus the host costs
    (:func:`_plan`), the schedule, and memory from the same plan (:func:`_memory`).
    """
    notes = _Notes()
    workload, meta = _workload(trace, config)
    tl = workload.traced_layout
    zero = choose_zero(config.zero_stage, config.fsdp, meta, pp=config.pp,
                       data_parallel=config.data_parallel)
    config = replace(config, zero_stage=zero.stage, fsdp=zero.stage == 3)
    notes.models.extend(zero.notes)
    traced_mb, mb_source = traced_micro_batch(meta)
    if config.traced_micro_batch is not None:
        traced_mb, mb_source = config.traced_micro_batch, (
            "stated: traced_micro_batch (--traced-micro-batch, TrioSim's -batch-size)")
    batch = choose_batch(config.micro_batch, traced_mb or workload.micro_batch, mb_source)
    # op times scale from the traced micro-batch, or from the assumed 1 (said so)
    workload = replace(workload, micro_batch=batch.traced or 1)
    hw = choose_hardware(cluster=config.cluster, gpu=config.gpu, device=workload.device,
                         device_name=workload.device_name, backend=str(meta.get("backend", "")))
    notes.warnings.extend(hw.warnings)
    if batch.assumed:
        notes.warnings.append(f"micro-batch: {batch.source}; pass --micro-batch, or trace "
                              "with capture(micro_batch=...) / TRACE_MICRO_BATCH")
    accum = workload.traced_micro_batches
    mb, gb, m = _resolve_batches(config, batch.micro_batch, accum)
    if accum > 1:
        notes.models.append(f"traced step: {accum} micro-batches of gradient accumulation "
                            f"(their ops folded into one); default global batch keeps "
                            f"{accum} per replica")
    _check_workload(config, workload, m)
    if max(config.stage_tps) > 1 and any(o.role == "channel" for o in workload.ops):
        notes.models.append(channel_summary(workload))
    if config.recompute == "selective" and not any(o.kind == "Attention" for o in workload.ops):
        notes.warnings.append("recompute selective: the trace has no attention-core op of its "
                              "own (attention written inline in a module), so nothing is "
                              "recomputed: the same as none")
    cluster = _resolve_cluster(config, hw)
    notes.models += [f"hardware: {hw.source}", f"micro-batch {mb}: {batch.source}"]
    if config.network is not None:
        notes.models.append(describe_network(cluster, config.network))
        if config.network.gpu_mesh and config.network.remote_bw_gbps is not None:
            notes.warnings.append("remote_bw_gbps: the GPU mesh carries every transfer "
                                  "between GPUs; the off-node rate is not used")
    # the trace's own op times and collectives hold on the hardware it ran on (a preset
    # named for it, as search names it, included), not on retimed or re-wired targets;
    # its collectives price the layout it ran, whose calls they are: another layout is
    # priced by one model for all its collectives (a DDP trace's bucket all-reduces, slowed
    # by the backward they overlapped, say nothing of FSDP's blocking all-gathers)
    traced_hw = not hw.retimed and config.network is None
    same = tl is not None and tl.parallel and _same_layout(config, tl)
    comm, profile = _comm_model(config, cluster, comm, notes,
                                workload.traced_comm if traced_hw and same else None)
    if not same:
        _straggler_warning(workload, notes)
    is_cpu = cluster.gpu.name == "cpu"
    # host calibration applies to a CPU target from a CPU profile only, and not to the
    # layout the trace was taken at on its own host: its op times already hold those costs
    host = profile if is_cpu and profile is not None and profile.device == "cpu" else None
    if host is not None and traced_hw and same and tl is not None:
        host = None
        notes.models.append(f"host calibration of {config.comm_profile}: not applied (the "
                            f"trace ran this layout, {tl.describe()}, on this host: its op "
                            "times hold the contention, DTensor/FSDP host costs and skew)")
    if is_cpu and config.world > 1 and profile is None and not (traced_hw and same):
        notes.warnings.append(NO_CPU_PROFILE)
    others = [b if isinstance(b, Workload) else extract_workload(b) for b in batch_traces]
    base = _op_times(config, workload, others, mb, hw, host, cluster, notes)
    mb_scale = mb / (workload.micro_batch or mb)
    layout = Layout(dp=config.dp, tp=max(config.stage_tps), pp=config.pp,
                    virtual=config.virtual_stages, micro_batches=m, schedule=config.schedule,
                    full=config.mode == "full",
                    stage_tp=config.stage_tps if config.heterogeneous_tp else ())
    plan = _plan(config, workload, layout, base, mb_scale, is_cpu, host, notes, zero)
    built = build_graph(plan, layout, comm, link_contention=config.link_contention)
    sched = run(built.graph)
    sk = skew(host) if config.world > 1 else None
    if sk is not None and any(built.comm_tasks.values()):
        # step 6b: rank skew at each synchronisation, from the compute between them
        w = float(np.median([_breakdown(built, sched, r, sched.makespan_us)[0]
                             / max(len(built.comm_tasks[r]), 1) for r in built.ranks]))
        own = part_gaps(workload.step_curve_us, w) if spread else ()
        built = build_graph(plan, layout, _SkewedComm(comm, sk, w, own),
                            link_contention=config.link_contention)
        sched = run(built.graph)
        notes.models.append(f"{sk.note} ({w:.0f} us here)" + (
            f"; the traced compute's own step-to-step spread over {len(own)} part(s) of "
            f"that length, Gini mean difference {statistics.fmean(own):.0f} us over "
            f"{len(workload.step_curve_us)} steps, added as a variance: "
            f"{sk.wait_us(w, own):.0f} us a synchronisation against {sk.wait_us(w):.0f}"
            if own else
            f"; the traced compute's own step-to-step spread is not priced: the trace holds "
            f"{workload.steps_used} step(s), {MIN_STEPS} or more give it"
            if spread and workload.steps_used < MIN_STEPS else ""))
        notes.calibration["rank_skew_us_per_us"] = {"value": sk.kappa, "spread_pct": 0.0,
                                                    "samples": sk.samples}
    ov = comm_overlap(host, min(cluster.gpus_per_node, cluster.world_size)) \
        if config.world > 1 and config.compute_factor is None else None
    transfer = (_SkewedComm(comm, sk, 0.0) if sk is not None else comm).time_us
    unstretched = list(built.graph.dur_us)
    if ov is not None and stretch_overlaps(
            built, sched, ov, lambda op, nb, grp: float(transfer(op, nb, list(grp)))):
        # step 6c: collectives and compute that overlap slow each other on a shared host
        sched = run(built.graph)
        notes.models.append(ov.note)
        notes.calibration["comm_overlap"] = {
            "value": max(ov.comm_stretch), "spread_pct": 0.0, "samples": ov.samples}
    drawn = (_spread_draws(built, sched, comm, transfer, unstretched, ov)
             if config.world > 1 and spread else None)
    if drawn is not None:
        # step 6d: the expected step over the collectives' measured run-to-run spread
        notes.models.append(drawn.note())
        notes.calibration["comm_spread"] = {
            "value": drawn.mean_us / max(drawn.base_us, 1e-9),
            "spread_pct": 100.0 * (drawn.p90_us - drawn.p10_us) / 2 / max(drawn.mean_us, 1e-9),
            "samples": drawn.draws}
    notes.models.append(_layout_description(config, is_cpu, m))
    if max(config.stage_tps) > 1 and workload.tp_note and any(
            o.role in ("column", "row") for o in workload.ops):
        notes.models.append(workload.tp_note)  # where the roles came from, what is left
    iteration = drawn.mean_us if drawn is not None else sched.makespan_us
    mem, mem_models = _memory(config, workload, plan, layout, mb_scale, is_cpu, cluster, zero,
                              meta)
    notes.models.extend(mem_models)
    limit = config.memory_limit_bytes or int(
        (hw.target_gpu and _gpu(hw.target_gpu).memory_bytes) or cluster.gpu.memory_bytes)
    ranks = []
    for i, r in enumerate(built.ranks):
        s = built.stage_of[r]
        comp, exposed, bubble, idle = (
            (float(x) for x in drawn.extra[4 * i:4 * i + 4]) if drawn is not None
            else _breakdown(built, sched, r, iteration))
        est = mem[s]
        ranks.append(RankBreakdown(rank=r, stage=s, compute_us=comp, exposed_comm_us=exposed,
                                   bubble_us=bubble, idle_us=idle,
                                   peak_memory_bytes=est.peak_bytes, memory=est.to_dict()))
    seq = workload.model.get("seq")
    sps = gb / (iteration * 1e-6) if iteration > 0 else float("inf")
    return SimResult(
        config=config, iteration_time_us=iteration, samples_per_s=sps,
        tokens_per_s=sps * int(seq) if seq else None, micro_batch=mb, global_batch=gb,
        micro_batches=m, ranks=ranks, memory_limit_bytes=int(limit), models=notes.models,
        world_size=config.world, nodes=cluster.nodes, gpus_per_node=cluster.gpus_per_node,
        simulated_ranks=built.ranks, num_tasks=len(built.graph), hardware=hw, batch=batch,
        warnings=notes.warnings, calibration=notes.calibration,
        iteration_range_us=(drawn.p10_us, drawn.p90_us) if drawn is not None else None,
        built=built if keep else None, schedule=sched if keep else None,
        workload=workload if keep else None)


def _spread_draws(built: Built, sched: Schedule, comm: Any, transfer: Callable[..., float],
                  unstretched: list[float], ov: CommOverlap | None) -> StepDraws | None:
    """Step 6d (:mod:`echo_sim.sim.comm_spread`): the makespan and every rank's breakdown
    over draws of the profiled collectives' runs; None when the model has no spread (no
    profile, the trace's own collectives, a tight profile). What varies is a collective's
    transfer as scheduled, not the rank-skew wait before it (``unstretched``: durations
    before step 6c); one that step 6c stretched beside compute draws from the overlap
    rounds' spread (``ov``), the others from the profile's timed runs."""
    spread = getattr(comm, "spread", None)
    if spread is None:
        return None
    g = built.graph
    spreads = {}
    for c, (_, coll, nbytes, grp) in built.comm_info.items():
        f = spread(coll, nbytes, list(grp))
        if f is None:
            continue
        beside = ov.spread(nbytes) if ov is not None and g.dur_us[c] != unstretched[c] \
            else None
        f = beside if beside is not None else f
        wait = max(unstretched[c] - float(transfer(coll, nbytes, list(grp))), 0.0)
        spreads[c] = (max(g.dur_us[c] - wait, 0.0), f)

    ids = [(r, _task_ids(built, r)) for r in built.ranks]

    def measure(s: Schedule) -> np.ndarray:
        T = s.makespan_us
        return np.array([x for r, tasks in ids for x in _breakdown(built, s, r, T, tasks)])

    return expected_step(built.graph, spreads, base=sched, measure=measure,
                         draws=draw_count(len(built.graph)))


class _SkewedComm:
    """A collective model plus rank skew (:func:`echo_sim.cost.cpu_overheads.skew`): a
    measured busy-mode time loses the profile's own skew and gains the job's, ``w_us`` of
    compute before each synchronisation (spread by ``jitter``, the traced compute's over
    parts that long: :func:`echo_sim.workload.jitter.part_gaps`); an unmeasured one gains
    the job's."""

    def __init__(self, inner: Any, sk: Skew, w_us: float,
                 jitter: Sequence[float] = ()) -> None:
        self.inner, self.sk, self.w_us, self.jitter = inner, sk, w_us, tuple(jitter)

    def time_us(self, op: str, nbytes: int, ranks: Sequence[int], *,
                concurrent: int = 1) -> float:
        t = float(self.inner.time_us(op, nbytes, ranks, concurrent=concurrent))
        if len(set(ranks)) < 2:
            return t
        covered = getattr(self.inner, "covered", None)
        if covered is not None and covered(op, ranks):
            return self.sk.collective_us(t, self.w_us, self.jitter)
        return t + self.sk.wait_us(self.w_us, self.jitter)

    def links(self, ranks: Sequence[int]) -> list[str]:
        return list(self.inner.links(ranks))


def _same_layout(config: SimConfig, tl: TracedLayout) -> bool:
    """``config`` asks for the layout the trace was taken at."""
    return (config.dp, max(config.stage_tps), config.pp, bool(config.fsdp),
            config.virtual_stages) == (tl.dp, tl.tp, tl.pp, tl.fsdp, 1)


def _workload(trace: Trace | Workload, config: SimConfig) -> tuple[Workload, dict[str, Any]]:
    """Step 1: the traced job's workload (:func:`~echo_sim.workload.traced.traced_workload`;
    vocab roles dropped unless vocab-parallel) and the traced rank's ``meta.json`` (with its
    backend)."""
    workload = trace if isinstance(trace, Workload) else traced_workload(trace)
    meta: dict[str, Any] = dict(workload.meta)
    if config.tp_plan is not None and max(config.stage_tps) > 1:
        workload = apply_tp_plan(workload, config.tp_plan)
    if not config.vocab_parallel:
        workload = workload.with_ops([replace(o, role="replicated") if o.role == "vocab" else o
                                      for o in workload.ops])
    if max(config.stage_tps) > 1 and meta.get("tp_split") == CHANNEL_SPLIT:  # TrioSim tpflag layers
        workload = channel_parallel(workload)
    return workload, meta


def _comm_model(config: SimConfig, cluster: Any, comm: Any, notes: _Notes,
                traced: Any = None) -> tuple[Any, Any]:
    """Step 3: the collective cost model and the measured profile (None if not used).
    ``traced``: the trace's own collectives (:mod:`echo_sim.cost.trace_comm`), ahead of the
    rest for the calls they cover."""
    if comm is not None:
        notes.models.append(f"comm: {type(comm).__name__} (given)")
        return comm, None
    from echo_sim.cost.collectives import CommModel

    profile = None
    if config.comm_profile:
        from echo_sim.cost.comm_profile import load_comm_profile

        profile = load_comm_profile(config.comm_profile)
    problem = profile.untrusted() if profile is not None else None
    if problem is not None:
        notes.warnings.append(f"comm profile {config.comm_profile}: {problem}; collectives "
                              f"are priced without it")
    measured = (f"measured profile {config.comm_profile} where it covers the group, "
                "else " if profile is not None and problem is None else "")
    model: Any = CommModel(cluster, profile if problem is None else None)
    first = ""
    if traced is not None:
        from echo_sim.cost.trace_comm import TracedFirst

        model = TracedFirst(traced, model)
        first = model.describe()
    notes.models.append(f"comm: {first}{measured}alpha-beta model of {cluster.name}")
    return model, profile


def _faults_note(workload: Workload) -> str:
    """What the traced process's page faults say about its op times (a CPU trace's compute
    holds them; how many another process takes depends on its allocator's history)."""
    alloc = workload.meta.get("malloc")
    setting = (" ".join(f"{k}={v}" for k, v in sorted(alloc.items())) if alloc
               else "glibc's adaptive default, under which another process of this model can "
               "take several times more or fewer" if isinstance(alloc, dict)
               else "not recorded")
    return (f"traced process: {workload.minor_faults_per_step:,.0f} minor page faults per step "
            f"(median; fresh pages its op times include); malloc: {setting}")


NO_CPU_PROFILE = (
    "no --comm-profile for a CPU host: the collectives are priced by the cpu-gloo preset's "
    "generic alpha-beta figures and the host costs a profile calibrates (DDP's hooks, FSDP2's "
    "units, DTensor, cores shared by the ranks) are left out, though on CPU they can outweigh "
    "the transfers (README, 'A CPU job without a profile'); measure this host with python -m "
    "echo_sim profile-comm --nproc N --output comm.json and pass --comm-profile comm.json")
"""The warning of a multi-process CPU prediction with no measured profile (simulate, and once
in search's hardware line), except at the traced layout on the traced hardware, which the
trace's own op times and collectives price."""

STRAGGLER_RATIO = 1.2
"""A traced rank whose ops took this many times the stage's median or more is named as a
straggler when another layout is simulated (two ranks of one job on a shared 2-core host
were up to ~10 % apart in compute, README "Off-CPU time, split")."""


def _straggler_warning(workload: Workload, notes: _Notes) -> None:
    """At a layout other than the traced one the trace's own collectives (which carry the
    wait for a straggler) are not used: say so when the traced ranks' compute differed."""
    busy = dict(workload.rank_busy_us)
    if len(busy) < 2:
        return
    med = float(np.median(list(busy.values())))
    slow = max(busy, key=lambda r: busy[r])
    if med > 0 and busy[slow] >= STRAGGLER_RATIO * med:
        notes.warnings.append(
            f"traced rank {slow}'s ops took {busy[slow] / med:.2f}x a typical rank's "
            f"({busy[slow] / 1e3:.1f} against {med / 1e3:.1f} ms a step, the median over "
            f"the stage's {len(busy)} ranks read): this layout is "
            "priced at a typical rank's compute; a straggler that persists would set every "
            "rank's pace here too (simulate the traced layout to see its cost as measured)")


def _op_times(config: SimConfig, workload: Workload, others: list[Workload], mb: int,
              hw: HardwareChoice, host: Any, cluster: Any, notes: _Notes) -> np.ndarray:
    """Step 4: every op's time on the target at micro-batch ``mb`` before parallelism:
    batch model × compute scaling × host contention (CPU hosts, calibrated)."""
    bm = make_batch_model([workload, *others])
    notes.models.append(bm.description)
    if workload.pool_note:
        notes.models.append(workload.pool_note)
    cs = compute_scaling(workload, hw.target_gpu, factor=config.compute_factor)
    notes.models.append(cs.description)
    if workload.minor_faults_per_step is not None and workload.device == "cpu":
        notes.models.append(_faults_note(workload))  # a GPU trace's op times are kernels
    base = bm.time_us(mb) * cs.factors
    share = contention(host, min(cluster.gpus_per_node, cluster.world_size)) \
        if config.compute_factor is None else None
    if share is not None:
        base = base * share.value
        notes.models.append(share.note)
        notes.calibration["compute_contention"] = {
            "value": share.value, "spread_pct": share.spread_pct, "samples": share.samples}
    return base


def _plan(config: SimConfig, workload: Workload, layout: Layout, base: np.ndarray,
          mb_scale: float, is_cpu: bool, host: Any, notes: _Notes, zero: ZeroChoice) -> Plan:
    """Step 5: the plan of every parallelism (pipeline split, TP, recomputation,
    FSDP/ZeRO-1/2/DDP;
    :func:`~echo_sim.workload.build.make_plan`), then the calibrated host costs of DTensor
    layouts on it (:mod:`echo_sim.sim.host_costs`)."""
    plan = make_plan(workload, layout, base, mb_scale=mb_scale, fsdp=config.fsdp,
                     fsdp_overlap=not is_cpu,
                     recompute=config.stage_recompute or config.recompute,
                     sequence_parallel=config.sequence_parallel,
                     fsdp_impl=config.fsdp_impl,
                     dp_mode=config.data_parallel, bucket_cap_bytes=config.bucket_cap_bytes,
                     stage_split=config.stage_split, zero=zero.spec)
    foreach = config.optimizer_foreach if config.optimizer_foreach is not None else not is_cpu
    slowdown = notes.calibration.get("compute_contention", {}).get("value", 1.0)
    notes.models.extend(apply_host_costs(plan, workload, layout, profile=host,
                                         fsdp=config.fsdp, vocab_parallel=config.vocab_parallel,
                                         foreach=foreach, slowdown=slowdown,
                                         mb_scale=mb_scale,
                                         ddp=(not config.fsdp and zero.spec is None
                                              and config.data_parallel == "ddp")))
    return plan


def _gpu(name: str) -> Any:
    from echo_sim.cost.hardware import get_gpu

    return get_gpu(name)


def _layout_description(config: SimConfig, is_cpu: bool, m: int) -> str:
    tp = "/".join(map(str, config.stage_tps)) if config.heterogeneous_tp \
        else str(max(config.stage_tps))
    parts = [f"layout: dp={config.dp} tp={tp} pp={config.pp} {config.schedule}"
             f"{f' v={config.virtual_stages}' if config.virtual_stages > 1 else ''}, "
             f"{m} micro-batch(es)"]
    if config.fsdp:
        parts.append("FSDP2 " + ("blocking collectives (CPU: no streams)" if is_cpu
                                 else "with prefetch overlap"))
    elif config.zero_stage in (1, 2):
        parts.append(f"DeepSpeed ZeRO-{config.zero_stage}" + (
            " (its engine's host work per step, gradient hooks and bucket copies, is not "
            "priced on a CPU host: README, Known gaps)" if is_cpu and config.dp > 1 else ""))
    elif config.dp > 1:
        parts.append("DDP 25 MiB buckets overlapping backward" if config.data_parallel == "ddp"
                     else "parameter server push/pull")
    if config.stage_recompute:
        parts.append(f"per-stage activation recomputation {','.join(config.stage_recompute)}")
    elif config.recompute not in (False, "none"):
        parts.append(f"{'full' if config.recompute is True else config.recompute} "
                     "activation recomputation")
    parts.append(f"{config.mode} simulation")
    return "; ".join(parts)


# ----------------------------------------------------------------------------- breakdown
def _merge(iv: np.ndarray) -> np.ndarray:
    """Union of intervals (n x 2) as sorted disjoint intervals."""
    if iv.size == 0:
        return iv.reshape(0, 2)
    iv = iv[np.argsort(iv[:, 0], kind="stable")]
    iv = iv[iv[:, 1] > iv[:, 0]]
    if iv.size == 0:
        return iv.reshape(0, 2)
    ends = np.maximum.accumulate(iv[:, 1])
    new = np.ones(len(iv), dtype=bool)
    new[1:] = iv[1:, 0] > ends[:-1]
    starts = iv[new, 0]
    idx = np.flatnonzero(new)
    stops = np.append(ends[idx[1:] - 1], ends[-1])
    return np.stack([starts, stops], axis=1)


def _overlap_us(a: np.ndarray, b: np.ndarray) -> float:
    """Total length of the intersection of two disjoint sorted interval sets: the sum of
    ``min(ends) - max(starts)`` over the pairs that overlap by more than zero. Each ``a[i]``
    meets the ``b[j]`` with ``b_end > a_start`` and ``b_start < a_end``, a contiguous run
    of ``j`` (both sets sorted and disjoint), found by two binary searches."""
    if len(a) == 0 or len(b) == 0:
        return 0.0
    lo = np.searchsorted(b[:, 1], a[:, 0], side="right")
    n = np.maximum(np.searchsorted(b[:, 0], a[:, 1], side="left") - lo, 0)
    pairs = int(n.sum())
    if pairs == 0:
        return 0.0
    ia = np.repeat(np.arange(len(a)), n)
    jb = lo[ia] + np.arange(pairs) - np.repeat(np.cumsum(n) - n, n)
    ov = np.minimum(a[ia, 1], b[jb, 1]) - np.maximum(a[ia, 0], b[jb, 0])
    return float(ov[ov > 0].sum())


def _task_ids(built: Built, r: int) -> tuple[np.ndarray, np.ndarray]:
    """Rank ``r``'s compute and communication task ids."""
    return (np.asarray(built.compute_tasks[r], dtype=np.int64),
            np.asarray(built.comm_tasks[r], dtype=np.int64))


def _breakdown(built: Built, sched: Schedule, r: int, T: float,
               tasks: tuple[np.ndarray, np.ndarray] | None = None,
               ) -> tuple[float, float, float, float]:
    """Rank ``r``'s compute, exposed communication, pipeline bubble and other idle time (µs)
    in a step of ``T`` µs; ``tasks``: its compute and communication task ids as arrays
    (:func:`_task_ids`), when a caller measures many schedules of one graph."""
    ct, mt = tasks if tasks is not None else _task_ids(built, r)
    s, e = sched.start_us, sched.end_us
    comp = _merge(np.stack([s[ct], e[ct]], axis=1)) if ct.size else np.zeros((0, 2))
    comm = _merge(np.stack([s[mt], e[mt]], axis=1)) if mt.size else np.zeros((0, 2))
    comp_us = float((comp[:, 1] - comp[:, 0]).sum())
    comm_us = float((comm[:, 1] - comm[:, 0]).sum())
    exposed = comm_us - _overlap_us(comp, comm)
    rest = max(T - comp_us - exposed, 0.0)
    bubble = 0.0
    if built.layout.pp > 1 and r in built.last_bw:
        t_end = float(e[built.last_bw[r]])
        clip = np.array([[0.0, t_end]])
        busy = _merge(np.concatenate([comp, comm])) if comp.size or comm.size else comp
        bubble = max(t_end - _overlap_us(busy, clip), 0.0)
        bubble = min(bubble, rest)
    return comp_us, exposed, bubble, rest - bubble


# ----------------------------------------------------------------------------- memory
def _memory(config: SimConfig, workload: Workload, plan: Plan, layout: Layout,
            mb_scale: float, is_cpu: bool, cluster: Any, zero: ZeroChoice,
            meta: dict[str, Any]) -> tuple[dict[int, MemoryEstimate], list[str]]:
    upd = workload.update_ops
    prec = memory_precision(workload.dtype, upd[0].name if upd else None, meta)
    elem, states, mixed = prec.elem_bytes, prec.states, prec.mixed
    P, V = layout.pp, layout.virtual
    out: dict[int, MemoryEstimate] = {}
    for s in range(P):
        chunks = [chunk_memory(plan.stages[c * P + s].fw, tp=layout.tp_of(s), mb_scale=mb_scale,
                               recompute=config.stage_recompute[s]
                               if config.stage_recompute else config.recompute,
                               sequence_parallel=config.sequence_parallel,
                               has_blocks=workload.has_blocks) for c in range(V)]
        out[s] = stage_memory(chunks, schedule=layout.schedule, pp=P,
                              micro_batches=layout.micro_batches, stage=s, dp=layout.dp,
                              fsdp=config.fsdp, elem_bytes=elem, states=states, mixed=mixed,
                              is_cpu=is_cpu, zero=zero.spec)
    measured = any(o.saved_bytes >= 0 for o in workload.fw_ops)
    acts = ("activations from the tensors autograd saved in the traced forward "
            "(meta.json saved_activations)" if measured else
            "activations from traced out_bytes (leaf module outputs)")
    models = [f"memory: ZeRO model states ({workload.dtype}, {states} optimizer state(s)"
              f"{', fp32 master copy' if mixed else ''}), {acts}"
              f"{' with recomputation' if config.recompute not in (False, 'none') else ''}"
              ", in-flight "
              f"micro-batches from the {layout.schedule} schedule"]
    if prec.note:
        models.append(prec.note)
    base = _baseline(workload, is_cpu, elem, states, mixed, zero)
    if base > 0:
        out = {s: MemoryEstimate(**{**_fields(e), "baseline_bytes": base}) for s, e in out.items()}
        models.append(f"memory: + {base / 2**20:.1f} MiB baseline = traced peak "
                      f"({workload.peak_memory_kind}) minus this model's estimate of the "
                      "traced run")
    elif note := baseline_note(workload, is_cpu):
        models.append(note)
    return out, models


def baseline_note(workload: Workload, is_cpu: bool) -> str | None:
    """One line when the traced peak's baseline (what the traced process held beyond this
    model's states and activations: a CPU process's interpreter and libraries, a GPU's
    allocator and workspaces) is not carried to a target of the other device kind
    (``is_cpu``: the target is a CPU); None when it is carried or nothing was traced."""
    if not workload.peak_memory_bytes or _traced_cpu(workload) == is_cpu:
        return None
    traced, target = ("CPU process", "GPUs") if not is_cpu else ("GPU", "CPUs")
    return (f"memory: the traced {traced}'s peak ({fmt_bytes(workload.peak_memory_bytes)}, "
            f"{workload.peak_memory_kind}) is not carried to {target}: a peak there is "
            "this model's states, activations and buffers, without the traced run's "
            "baseline")


def _traced_cpu(workload: Workload) -> bool:
    """Whether the trace ran on a CPU."""
    return (resolve_device(workload.device, workload.device_name) or _gpu("cpu")).name == "cpu"


def _fields(e: MemoryEstimate) -> dict[str, float]:
    return {"params_bytes": e.params_bytes, "grads_bytes": e.grads_bytes,
            "optimizer_bytes": e.optimizer_bytes, "activations_bytes": e.activations_bytes,
            "buffers_bytes": e.buffers_bytes}


def _baseline(workload: Workload, is_cpu: bool, elem: int, states: int, mixed: bool,
              zero: ZeroChoice) -> float:
    """Traced peak minus the model's estimate of the traced run (same device kind only;
    a DeepSpeed run's states sharded as its ZeRO stage shards them over its dp ranks)."""
    if not workload.peak_memory_bytes or _traced_cpu(workload) != is_cpu:
        return 0.0
    pbytes = float(workload.total_param_bytes)
    params, grads, opt = zero_state_bytes(pbytes, elem_bytes=elem, states=states, mixed=mixed,
                                          dp=zero.traced_dp, stage=zero.traced_stage)
    act = activation_bytes(workload.fw_ops)
    return max(workload.peak_memory_bytes - (params + grads + opt + act), 0.0)
