"""``simulate PATH``: predict the traced job at another scale, layout or cluster."""

from __future__ import annotations

import os
from typing import Any

from echo_sim.commands.checks import float_in, int_in, parse_bytes_flag
from echo_sim.commands.outputs import check_output_dir, flag_errors
from echo_sim.commands.spec import Command, Result, arg
from echo_sim.errors import ConfigError
from echo_sim.units import fmt_bytes

__all__ = ["COMMAND", "PATHS_HELP", "job_workload", "render", "sim_config", "simulate_argv",
           "tp_plan_flag"]

MAX_WRITTEN_RANKS = 64
# Bounds of the flags (checked before any work): beyond them a run exhausts memory or time.
MAX_GPUS = 2**20  # dp·tp·pp
MAX_FULL_GPUS = 16384  # --mode full simulates every rank
MAX_MICRO_BATCHES = 65536  # per iteration: each is a task chain in the schedule
MAX_MEMORY_BYTES = 2**60

PATHS_HELP = ("trace directory or file; several: separate runs of the same job (model, "
              "layout, micro-batch), each op's time the median over them, so that one "
              "process's pace on a shared CPU host weighs less")

DESCRIPTION = """\
Predict one training iteration of the traced model on DP x TP x PP GPUs of a cluster
(default: the hardware the trace was taken on, said in the output), from
a one-rank (or few-rank) trace: iteration time, throughput, a per-rank breakdown (compute,
exposed communication, pipeline bubble, idle) and peak memory per rank, with an
out-of-memory verdict against --memory-limit (default: the GPU's memory).

Each traced operator is scaled to the target micro-batch (a least-squares line over
--batch-trace traces at other sizes, else fixed overhead + linear), to the target GPU
(roofline on the trace's FLOPs and bytes, or --compute-factor), sharded by tensor
parallelism (Megatron: the projection(s) after a norm column-parallel, the one back to the
hidden width row-parallel, 2+2 all-reduces per block; found from the traced module
structure, the transformers tp_plan the trace records, or --tp-plan), split into
pipeline stages (--schedule gpipe|1f1b|interleaved) and synchronised by DDP buckets
(25 MiB, overlapping backward), a parameter server, DeepSpeed ZeRO-1/2 (--zero-stage; a
DeepSpeed trace's own stage by default) or FSDP (--fsdp). Collectives cost what
--comm-profile measured where it covers the group, else the cluster preset's alpha-beta
model. One rank per pipeline stage is simulated (data- and tensor-parallel peers are
identical); --mode full simulates every rank.

Without --cluster/--gpu the prediction is for the hardware the trace was taken on (a CPU
trace: one gloo host holding every rank); naming one re-times the traced op times to it.
The output says which, and which micro-batch it assumed and from where. On a CPU host, a
--comm-profile measured by profile-comm also calibrates (medians / fastest of several
samples, printed under "models"): the compute slowdown of ranks sharing cores (only when
they oversubscribe the free cores), DTensor dispatch per tensor-parallel Linear, the
optimizer's cost per DTensor parameter (--optimizer), FSDP2's per-unit hooks and copies,
and the wait at each synchronisation as a function of the compute before it.

The network is the cluster preset's unless stated: --ptp-bandwidth (every GPU-to-GPU link,
NVLink inside a node), --bandwidth (each GPU's path off its node), --topology and a mesh of
--num-rows x --num-cols nodes; --interconnects optical is TrioSim's optical mesh, one GPU per
mesh position linked at --ptp-bandwidth. Rates are GB/s per direction (a bare number, or
300GB/s, 1.2TB/s, 400Gb/s) and replace the preset's link rates in the same alpha-beta model.
TrioSim's spellings work as written: -ptp-bandwidth, -bandwidth, -numRows, -numCols,
-interconnects 0|1, -batch-size (the traced batch; TrioSim traces record none) and
-batch-size-sim (the simulated one, = --micro-batch). With --tp, a TrioSim trace's
tpflag layers (conv, linear, embedding) are split by output channels.

--output DIR writes the simulated timeline as per-rank echo traces (one directory per
simulated rank, at most 64) that statistic / critical / combine read.
"""


def render(res: Any) -> str:
    """The text report of a :class:`~echo_sim.sim.simulate.SimResult`."""
    c = res.config
    tp = "/".join(map(str, c.stage_tps)) if c.heterogeneous_tp else str(max(c.stage_tps))
    lines = [
        f"simulated dp={c.dp} tp={tp} pp={c.pp} ({res.world_size} "
        f"{'processes' if res.cluster == 'cpu-gloo' else 'GPUs'} = {res.nodes} nodes x "
        f"{res.gpus_per_node}, {res.cluster}), {c.schedule}, micro-batch {res.micro_batch}, "
        f"global batch {res.global_batch} ({res.micro_batches} micro-batches)",
        f"iteration time   {res.iteration_time_us / 1e3:.3f} ms" + (
            f"  (expected; 10-90 %: {res.iteration_range_us[0] / 1e3:.3f}-"
            f"{res.iteration_range_us[1] / 1e3:.3f} ms as collectives stall or not)"
            if getattr(res, "iteration_range_us", None) else ""),
        f"throughput       {res.samples_per_s:.2f} samples/s"
        + (f", {res.tokens_per_s:.0f} tokens/s" if res.tokens_per_s else ""),
        "",
        f"{'rank':>6} {'stage':>5} {'compute ms':>11} {'exposed comm':>13} {'bubble ms':>10} "
        f"{'idle ms':>8} {'peak memory':>12}",
    ]
    for r in res.ranks:
        lines.append(f"{r.rank:>6} {r.stage:>5} {r.compute_us / 1e3:>11.3f} "
                     f"{r.exposed_comm_us / 1e3:>13.3f} {r.bubble_us / 1e3:>10.3f} "
                     f"{r.idle_us / 1e3:>8.3f} {fmt_bytes(r.peak_memory_bytes):>12}")
    if c.mode == "symmetric" and res.world_size > len(res.ranks):
        lines.append(f"(one representative rank per pipeline stage; the other "
                     f"{res.world_size - len(res.ranks)} ranks are data/tensor-parallel peers)")
    verdict = "OUT OF MEMORY" if res.oom else "fits"
    lines += ["", f"peak memory      {fmt_bytes(res.max_peak_memory_bytes)} of "
                  f"{fmt_bytes(res.memory_limit_bytes)} limit: {verdict}", "", "models:"]
    lines += [f"  {m}" for m in res.models]
    lines += [f"warning: {w}" for w in res.warnings]
    return "\n".join(lines)


def _stage_list(flag: str, text: str | None, pp: int, parse: Any,
                valid: str) -> tuple[Any, ...] | None:
    """A comma-separated per-pipeline-stage flag (``--stage-tp 1,1,2``): one item per stage."""
    if text is None:
        return None
    items = [x.strip() for x in text.split(",")]
    try:
        out = tuple(parse(x) for x in items)
    except ValueError:
        out = ()
    if not out or len(out) != pp:
        raise ConfigError(f"{flag} {text!r}: give {pp} comma-separated {valid}, one per "
                          f"pipeline stage (--pp {pp})")
    return out


def _tp_degree(text: str) -> int:
    v = int(text)
    if not 1 <= v <= MAX_GPUS:
        raise ValueError(text)
    return v


def _recompute_mode(text: str) -> str:
    from echo_sim.workload.build import RECOMPUTE_MODES

    if text not in RECOMPUTE_MODES:
        raise ValueError(text)
    return text


def _stage_flags(opts: Any) -> tuple[tuple[int, ...] | None, tuple[str, ...] | None]:
    """(--stage-tp, --stage-recompute) as per-stage tuples, checked against --pp / --tp."""
    from echo_sim.workload.build import RECOMPUTE_MODES

    stage_tp = _stage_list("--stage-tp", opts.stage_tp, opts.pp, _tp_degree,
                           "tensor-parallel degrees >= 1")
    if stage_tp is not None and opts.tp not in (1, max(stage_tp)):
        raise ConfigError(f"--tp {opts.tp} with --stage-tp {opts.stage_tp}: leave --tp out "
                          f"(each stage's degree is --stage-tp's)")
    stage_rc = _stage_list("--stage-recompute", opts.stage_recompute, opts.pp,
                           _recompute_mode, f"modes of {'|'.join(RECOMPUTE_MODES)}")
    return stage_tp, stage_rc


def _check_bounds(opts: Any) -> int | None:
    """The layout flags against each other (each is range-checked by argparse); the memory
    limit in bytes."""
    stage_tp = _stage_flags(opts)[0]
    world = opts.dp * (sum(stage_tp) if stage_tp else opts.tp * opts.pp)
    cap = MAX_FULL_GPUS if opts.mode == "full" else MAX_GPUS
    if world > cap:
        what = "--dp x sum(--stage-tp)" if stage_tp else "--dp x --tp x --pp"
        raise ConfigError(f"{what} = {world} GPUs is out of range; valid: at most "
                          f"{cap:,}" + (" with --mode full" if opts.mode == "full" else ""))
    if opts.global_batch is not None:
        micro = opts.global_batch // (opts.dp * (opts.micro_batch or 1))
        if micro > MAX_MICRO_BATCHES:
            raise ConfigError(
                f"--global-batch {opts.global_batch} gives {micro:,} micro-batches per "
                f"iteration; valid: at most {MAX_MICRO_BATCHES:,} x --dp x --micro-batch")
    if opts.memory_limit is None:
        return None
    return parse_bytes_flag("--memory-limit", opts.memory_limit, max_bytes=MAX_MEMORY_BYTES)


def _rate(flag: str, text: str | None) -> float | None:
    """A link rate flag in GB/s (see :func:`~echo_sim.cost.network.parse_bandwidth_gbps`)."""
    if text is None:
        return None
    from echo_sim.cost.network import parse_bandwidth_gbps

    try:
        return parse_bandwidth_gbps(text)
    except ConfigError as e:
        raise ConfigError(str(e).replace(f"bandwidth={text!r}", f"{flag} {text!r}", 1)) \
            from None


def _network(opts: Any) -> Any:
    """The stated network (None when no network flag is given)."""
    from echo_sim.cost.network import NetworkSpec

    optical = opts.interconnects in ("1", "optical")
    ptp = _rate("--ptp-bandwidth", opts.ptp_bandwidth)
    remote = _rate("--bandwidth", opts.bandwidth)
    if not optical and ptp is None and remote is None and opts.topology is None and \
            opts.num_rows is None and opts.num_cols is None:
        return None
    return NetworkSpec(ptp_bw_gbps=ptp, remote_bw_gbps=remote, topology=opts.topology,
                       mesh_rows=opts.num_rows, mesh_cols=opts.num_cols, gpu_mesh=optical)


def layout_flags_given(opts: Any) -> bool:
    """Any flag that names a layout (else simulate predicts the traced one)."""
    return any(getattr(opts, f, None) is not None for f in ("dp", "tp", "pp", "zero_stage",
                                                             "stage_tp")) or bool(opts.fsdp)


def sim_config(opts: Any, traced: Any = None) -> Any:
    """The :class:`~echo_sim.sim.simulate.SimConfig` parsed simulate options describe (also
    what ``report --simulate`` predicts with). ``traced``: the trace's
    :class:`~echo_sim.workload.traced_layout.TracedLayout`, the layout when no flag names
    one."""
    import copy

    from echo_sim.sim.simulate import SimConfig

    opts = copy.copy(opts)
    if traced is not None and not layout_flags_given(opts):
        opts.dp, opts.tp, opts.pp, opts.fsdp = traced.dp, traced.tp, traced.pp, traced.fsdp
    opts.dp, opts.tp, opts.pp = opts.dp or 1, opts.tp or 1, opts.pp or 1
    memory_limit = _check_bounds(opts)
    stage_tp, stage_rc = _stage_flags(opts)
    return SimConfig(
        stage_tp=stage_tp, stage_recompute=stage_rc,
        dp=opts.dp, tp=opts.tp, pp=opts.pp, micro_batch=opts.micro_batch,
        global_batch=opts.global_batch, schedule=opts.schedule,
        virtual_stages=opts.virtual_stages, nodes=opts.nodes, gpus_per_node=opts.gpus_per_node,
        cluster=opts.cluster, gpu=opts.gpu, fsdp=opts.fsdp, zero_stage=opts.zero_stage,
        recompute=opts.recompute or False, sequence_parallel=opts.sequence_parallel,
        optimizer_foreach=None if opts.optimizer is None else opts.optimizer == "foreach",
        comm_profile=opts.comm_profile,
        memory_limit_bytes=memory_limit,
        compute_factor=opts.compute_factor, data_parallel=opts.data_parallel,
        fsdp_impl=opts.fsdp_impl,
        stage_split=opts.stage_split, mode=opts.mode,
        vocab_parallel=not opts.no_vocab_parallel, network=_network(opts),
        traced_micro_batch=opts.traced_micro_batch,
        tp_plan=tp_plan_flag(getattr(opts, "tp_plan", None)))


def tp_plan_flag(path: str | None) -> Any:
    """``--tp-plan FILE`` as a :class:`~echo_sim.workload.tp_plan.TpPlan` (None without it);
    errors name the flag."""
    if path is None:
        return None
    from echo_sim.workload.tp_plan import load_tp_plan

    try:
        return load_tp_plan(path)
    except ConfigError as e:
        raise ConfigError(str(e).replace("tp_plan ", "--tp-plan ", 1)) from None


# SimConfig field -> its simulate flag, for the fields a command line can set
_FLAG_OF = {"dp": "--dp", "tp": "--tp", "pp": "--pp", "micro_batch": "--micro-batch",
            "global_batch": "--global-batch", "schedule": "--schedule",
            "virtual_stages": "--virtual-stages", "nodes": "--nodes",
            "gpus_per_node": "--gpus-per-node", "cluster": "--cluster", "gpu": "--gpu",
            "comm_profile": "--comm-profile", "compute_factor": "--compute-factor",
            "data_parallel": "--data-parallel", "stage_split": "--stage-split", "mode": "--mode",
            "fsdp_impl": "--fsdp-impl", "zero_stage": "--zero-stage",
            "traced_micro_batch": "--traced-micro-batch"}


def simulate_argv(config: Any) -> list[str]:
    """The simulate flags that give ``config`` (a SimConfig) back through :func:`sim_config`:
    every field that differs from its default. Raises ConfigError for a field no flag sets
    (a network spec, link contention...)."""
    import dataclasses

    from echo_sim.sim.simulate import SimConfig

    base = SimConfig()
    argv: list[str] = []
    for f in dataclasses.fields(SimConfig):
        v, d = getattr(config, f.name), getattr(base, f.name)
        if v == d or f.name == "memory_limit_bytes":  # no effect on time; GiB-exact flag
            continue
        if f.name in _FLAG_OF:
            argv += [_FLAG_OF[f.name], str(v)]
        elif f.name == "fsdp":
            argv.append("--fsdp")
        elif f.name == "sequence_parallel":
            argv.append("--sequence-parallel")
        elif f.name == "recompute":
            mode = {True: "full", False: "none"}.get(v, v) if isinstance(v, bool) else v
            if mode != "none":
                argv += ["--recompute", str(mode)]
        elif f.name == "vocab_parallel":
            argv.append("--no-vocab-parallel")
        elif f.name == "optimizer_foreach":
            argv += ["--optimizer", "foreach" if v else "loop"]
        elif f.name == "tp_plan":
            argv += ["--tp-plan", v.source]
        elif f.name in ("stage_tp", "stage_recompute"):
            argv += [f"--{f.name.replace('_', '-')}", ",".join(map(str, v))]
        else:
            raise ConfigError(f"{f.name}={v!r} has no simulate flag")
    return argv


def job_workload(paths: list[str]) -> tuple[Any, Any]:
    """The first trace of ``paths`` (its hardware and metadata) and the workload simulate
    and search start from: that trace's, or the per-op median of several runs of the same
    job (:func:`~echo_sim.workload.pool.pool_workloads`)."""
    from echo_sim.load import load_trace
    from echo_sim.workload.pool import pool_workloads
    from echo_sim.workload.traced import traced_workload

    seen: set[str] = set()
    for p in paths:
        if os.path.realpath(p) in seen:
            raise ConfigError(f"PATH {p} is given twice: pool separate runs of the job")
        seen.add(os.path.realpath(p))
    traces = [load_trace(p) for p in paths]
    workloads = [traced_workload(t) for t in traces]
    return traces[0], pool_workloads(workloads, paths if len(paths) > 1 else None)


def run(opts: Any) -> Result:
    from echo_sim.load import load_trace
    from echo_sim.sim.simulate import simulate

    sim_config(opts)  # the flags' own errors before any work
    if opts.output:
        check_output_dir("--output", opts.output)  # before the work
    _, workload = job_workload(opts.paths)
    traced = workload.traced_layout
    config = sim_config(opts, traced)
    extra = tuple(load_trace(p) for p in opts.batch_trace or ())
    res = simulate(workload, config, batch_traces=extra, keep=bool(opts.output))
    if traced.parallel and not layout_flags_given(opts):
        res.models.insert(0, f"layout: the traced one, {traced.describe()}, read from the "
                             "trace's process groups and stages (--dp/--tp/--pp name another)")
    data = res.to_dict()
    data["source"] = opts.paths[0]
    if len(opts.paths) > 1:
        data["sources"] = list(opts.paths)
    text = render(res)
    if opts.output:
        from echo_sim.trace.export import write_echo_dirs

        timeline = res.to_trace()
        ranks = sorted(timeline.ranks)
        note = ""
        if len(ranks) > MAX_WRITTEN_RANKS:
            keep = set(ranks[:: max(1, len(ranks) // MAX_WRITTEN_RANKS)][:MAX_WRITTEN_RANKS])
            timeline = _subset(timeline, keep)
            note = f" (representative {len(keep)} of {len(ranks)} simulated ranks)"
        with flag_errors("--output", opts.output):
            dirs = write_echo_dirs(timeline, opts.output, overwrite=opts.force)
        data["output"] = [str(d) for d in dirs]
        text += f"\n\nwrote {len(dirs)} simulated rank trace(s) to {opts.output}{note}"
        if config.mode == "symmetric" and res.world_size > len(ranks):
            text += "; one representative rank per pipeline stage"
    return Result(text, data)


def _subset(trace: Any, keep: set[int]) -> Any:
    import numpy as np

    from echo_sim.trace.model import Trace

    rows = np.flatnonzero(np.isin(trace.events.rank, sorted(keep)))
    return Trace(events=trace.events.take(rows), names=trace.names,
                 ranks={r: i for r, i in trace.ranks.items() if r in keep}, steps=trace.steps,
                 groups=trace.groups, kinds=trace.kinds, source_format=trace.source_format,
                 source=trace.source)


COMMAND = Command(
    name="simulate",
    help="predict iteration time, throughput and memory at another scale / layout / cluster",
    description=DESCRIPTION,
    run=run,
    paths=-1,
    paths_help=PATHS_HELP,
    param_flags={"memory_limit_bytes": "--memory-limit", "batch_traces": "--batch-trace",
                 "ptp_bw_gbps": "--ptp-bandwidth", "remote_bw_gbps": "--bandwidth",
                 "mesh_rows": "--num-rows", "mesh_cols": "--num-cols",
                 "mesh_dims": "--num-rows x --num-cols", "gpu_mesh": "--interconnects optical",
                 "stage_tp": "--stage-tp", "stage_recompute": "--stage-recompute"},
    args=(
        arg("--dp", type=int_in(1, MAX_GPUS), default=None,
            help="data-parallel degree (default 1; with none of --dp/--tp/--pp/--fsdp/"
                 "--zero-stage/--stage-tp: the layout the trace was taken at)"),
        arg("--tp", type=int_in(1, MAX_GPUS), default=None,
            help="tensor-parallel degree (default 1, or the traced one as for --dp)"),
        arg("--pp", type=int_in(1, MAX_GPUS), default=None,
            help="pipeline stages (default 1, or the traced one as for --dp)"),
        arg("--micro-batch", "--batch-size-sim", "-batch-size-sim", type=int_in(1, 2**20),
            default=None, help="samples per micro-batch per GPU (TrioSim: -batch-size-sim) "
                               "(default: the traced one)"),
        arg("--traced-micro-batch", "--batch-size", "-batch-size", type=int_in(1, 2**20),
            default=None,
            help="the micro-batch the trace was taken at (TrioSim: -batch-size), for traces "
                 "that record none, as TrioSim's (default: the trace's meta.json, else 1 "
                 "with a warning)"),
        arg("--global-batch", type=int_in(1, 2**40), default=None,
            help="samples per iteration over all data-parallel ranks (default: dp x "
                 "micro-batch, x pp with pipelining)"),
        arg("--schedule", choices=["gpipe", "1f1b", "interleaved"], default="1f1b",
            help="pipeline schedule (default 1f1b)"),
        arg("--virtual-stages", type=int_in(1, 1024), default=1,
            help="model chunks per pipeline rank for --schedule interleaved (default 1)"),
        arg("--nodes", type=int_in(1, MAX_GPUS), default=None, help="nodes (default: enough for dp x tp x pp)"),
        arg("--gpus-per-node", type=int_in(1, 1024), default=None,
            help="GPUs per node (default: the cluster preset's, at most dp x tp x pp)"),
        arg("--cluster", default=None,
            help="cluster preset: dgx-a100, dgx-h100, dgx-h200, dgx2-v100, cpu-gloo "
                 "(default: the hardware the trace was taken on; naming another re-times "
                 "the traced op times to it)"),
        arg("--gpu", default=None,
            help="target GPU preset (default: the cluster's, else the traced one)"),
        arg("--ptp-bandwidth", "-ptp-bandwidth", metavar="RATE", default=None,
            help="GPU-to-GPU link rate per direction, GB/s (e.g. 300, 300GB/s, 2.4Tb/s): "
                 "NVLink inside a node, each mesh link with --interconnects optical "
                 "(TrioSim: -ptp-bandwidth) (default: the cluster preset's)"),
        arg("--bandwidth", "-bandwidth", metavar="RATE", default=None,
            help="each GPU's rate off its node (its NIC), GB/s per direction; TrioSim's "
                 "GPU-to-remote-memory -bandwidth (echo has no remote memory: it is the "
                 "link every transfer leaving a node takes) (default: the preset's)"),
        arg("--topology", choices=["switch", "ring", "mesh2d", "torus2d"], default=None,
            help="network between nodes (default: the preset's, a switch; --num-rows / "
                 "--num-cols alone mean mesh2d)"),
        arg("--num-rows", "--numRows", "-numRows", type=int_in(1, MAX_GPUS), default=None,
            help="rows of the node mesh (TrioSim: -numRows) (default: nodes / --num-cols, "
                 "else the most square grid; 1 with --interconnects optical)"),
        arg("--num-cols", "--numCols", "-numCols", type=int_in(1, MAX_GPUS), default=None,
            help="columns of the node mesh (TrioSim: -numCols) (default: nodes / "
                 "--num-rows)"),
        arg("--interconnects", "-interconnects", choices=["electrical", "optical", "0", "1"],
            default=None,
            help="optical (1): TrioSim's optical mesh, one GPU per mesh position, links at "
                 "--ptp-bandwidth; electrical (0, default): the preset's nodes"),
        arg("--optimizer", choices=["foreach", "loop"], default=None,
            help="optimizer implementation of the predicted job, for DTensor parameter "
                 "costs (default: torch's: foreach on GPUs, per-parameter loop on CPU)"),
        arg("--fsdp", action="store_true", help="FSDP / ZeRO-3 instead of DDP"),
        arg("--zero-stage", type=int_in(0, 3), default=None,
            help="ZeRO stage (Rajbhandari et al. 2020) as DeepSpeed runs it: 0 DDP; 1 "
                 "optimizer states sharded over --dp (gradients reduce-scattered in "
                 "reduce_bucket_size buckets, each rank updates 1/dp, updated parameters "
                 "all-gathered); 2 also gradients sharded; 3 = --fsdp (default: a DeepSpeed "
                 "trace's own meta.json training.zero_stage, said in the output; else 0)"),
        arg("--recompute", nargs="?", const="full", default=None,
            choices=["none", "selective", "full"],
            help="activation recomputation: full (a bare --recompute: every block's forward "
                 "again in backward), selective (attention's core only, Korthikanti et al. "
                 "2022) or none (default)"),
        arg("--sequence-parallel", action="store_true",
            help="Megatron sequence parallelism with --tp >= 2: layer norms and dropout "
                 "sharded along the sequence, all-reduces become reduce-scatter + all-gather"),
        arg("--stage-tp", metavar="T0,T1,...", default=None,
            help="one tensor-parallel degree per pipeline stage, e.g. 1,1,2 with --pp 3 "
                 "(Aceso's per-stage model_parallel_size_of_each_op): every stage keeps --dp "
                 "replicas, so stage s holds dp x T_s GPUs (Aceso's num_gpus) and the job "
                 "dp x (T0 + T1 + ...); each degree must divide the heads and hidden size "
                 "(default: --tp on every stage)"),
        arg("--stage-recompute", metavar="M0,M1,...", default=None,
            help="one activation recomputation mode per pipeline stage, none|selective|full, "
                 "e.g. full,none with --pp 2 (Aceso's checkpoint_activations / recompute_ops; "
                 "default: --recompute on every stage)"),
        arg("--comm-profile", metavar="FILE", default=None,
            help="measured collective profile (from profile-comm)"),
        arg("--memory-limit", metavar="SIZE", default=None,
            help="device memory limit, e.g. 80GB (10^9) or 80GiB (2^30) "
                 "(default: the GPU's memory)"),
        arg("--compute-factor", type=float_in(0.0, 1e6, lo_open=True), default=None,
            help="multiply every traced op time by this (your measured target/traced ratio) "
                 "instead of the roofline model"),
        arg("--data-parallel", choices=["ddp", "post", "ps"], default="ddp",
            help="gradient synchronisation without --fsdp: ddp (PyTorch DDP: 25 MiB buckets "
                 "all-reduced during backward), post (one all-reduce of all gradients after "
                 "the last backward, nothing overlapped: Megatron-LM's local DDP of 2021-22) "
                 "or ps (parameter server push/pull) (default ddp)"),
        arg("--fsdp-impl", choices=["fsdp2", "deepspeed-2021"], default="fsdp2",
            help="whose ZeRO-3 with --fsdp: fsdp2 (PyTorch FSDP2: one flat all-gather per "
                 "unit, network-bound) or deepspeed-2021 (DeepSpeed v0.3-0.5's per-module "
                 "fetch path, bound at 21 GB/s per GPU as DeepSpeed issue #1174 measured) "
                 "(default fsdp2)"),
        arg("--stage-split", choices=["time", "even"], default="time",
            help="pipeline split: balance measured time, or even block counts (default time)"),
        arg("--no-vocab-parallel", action="store_true",
            help="with --tp: keep the embedding and head replicated instead of "
                 "vocab-parallel"),
        arg("--tp-plan", metavar="FILE", default=None,
            help="tensor-parallel plan: a JSON object of module-name pattern -> colwise | "
                 "rowwise | replicate (parallelize_module / transformers tp_plan style; "
                 "fnmatch, or re:REGEX; a pattern may match a dotted suffix of a module "
                 "path). Default: the tp_plan the trace's transformers config carries, "
                 "else the model's structure (column projection(s) after a norm, row "
                 "back to the hidden width)"),
        arg("--batch-trace", action="append", metavar="PATH",
            help="a trace of the same model at another micro-batch size (repeatable): "
                 "fits time = a + b x batch per op"),
        arg("--mode", choices=["symmetric", "full"], default="symmetric",
            help="simulate one rank per pipeline stage (default) or every rank"),
        arg("--output", "-o", metavar="DIR", default=None,
            help="write the simulated timeline as per-rank echo traces under DIR"),
        arg("--force", action="store_true", help="replace existing files under --output"),
    ),
)
