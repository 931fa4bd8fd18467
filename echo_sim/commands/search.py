"""``search PATH``: the best parallel layouts of the traced model under a memory limit."""

from __future__ import annotations

import dataclasses
from typing import Any

from echo_sim.commands.checks import MAX_GLOBAL_BATCH, MAX_GPUS, int_in, parse_bytes_flag
from echo_sim.commands.outputs import check_output, check_output_dir, flag_errors, output_file
from echo_sim.commands.simulate import PATHS_HELP
from echo_sim.commands.spec import Command, Result, arg
from echo_sim.errors import ConfigError
from echo_sim.units import fmt_bytes

__all__ = ["COMMAND", "render"]

MAX_WORKERS = 1024  # local processes
MAX_TOP = 100_000  # layouts ranked exactly (each one simulated)
MAX_MEMORY_BYTES = 2**60

DESCRIPTION = """\
Search every valid parallel layout of the traced model on --gpus devices: dp x tp x pp =
GPUs, tp inside a node and dividing the attention heads, pp (x virtual stages) dividing the
blocks, micro-batch dividing the per-replica batch, DDP or FSDP/ZeRO-3, no or full
none / selective / full activation recomputation, sequence parallelism (tp >= 2), 1F1B /
GPipe / interleaved schedules (ZeRO-1/2 are not searched). It searches the hardware the trace
was taken on, as simulate predicts on it (a CPU trace: every process on this one host; a GPU
trace: its GPU's DGX preset), unless --cluster / --gpus-per-node say otherwise.

Every row is exactly what `simulate` says for it: the table is followed by the simulate
command that reproduces each of the top rows (--json: "simulate" in every ranked row).

Layouts whose memory lower bound exceeds --memory-limit are dropped before timing; the
rest are visited in order of a lower bound of their time (one cheap probe simulation per
tensor-parallel degree x micro-batch x recomputation, then per layout) and a layout whose
bound cannot reach the --top best is never simulated, so the ranking equals timing every
layout with `simulate`. Prints the ranked table: layout, predicted iteration time,
throughput, peak memory, fits / OOM and the busiest rank's breakdown (compute, exposed
communication, pipeline bubble). --output writes the best layout as a config that
`examples/train.py --config FILE` runs with DDP / FSDP2 / DTensor TP / pipelining;
--format aceso --top N --output DIR writes the N best as Aceso config JSON files instead
(searching only what Aceso's runtime runs, DDP x Megatron TP x 1F1B pipeline, unless --space).
"""


def render(res: Any, top: int) -> str:
    """The ranked table of a :class:`~echo_sim.search.result.SearchResult`."""
    s = res.space
    lines = [f"searched {res.enumerated} layouts of {s.gpus} GPUs ({s.cluster}, "
             f"{s.gpus_per_node}/node), global batch {s.global_batch}, objective "
             f"{res.objective}: {res.pruned_memory} pruned by memory, {res.pruned_bound} by "
             f"time bound, {res.simulated} simulated, in {res.wall_s:.1f} s "
             f"({res.workers} worker(s))", ""]
    head = (f"{'#':>3} {'layout':<44} {'iter ms':>10} {'samples/s':>10} {'peak mem':>10} "
            f"{'fits':>4} {'compute ms':>11} {'exp comm ms':>11} {'bubble ms':>10}")
    lines += [head, "-" * len(head)]
    for i, c in enumerate(res.candidates[:top], 1):
        lines.append(f"{i:>3} {c.layout.label:<44} {c.iteration_time_us / 1e3:>10.2f} "
                     f"{c.samples_per_s:>10.2f} {fmt_bytes(c.peak_memory_bytes, 1):>10} "
                     f"{'yes' if c.fits else 'OOM':>4} {c.compute_us / 1e3:>11.2f} "
                     f"{c.exposed_comm_us / 1e3:>11.2f} {c.bubble_us / 1e3:>10.2f}")
    if res.invalid:
        lines += ["", f"{len(res.invalid)} layout(s) rejected by simulate, e.g. "
                      f"{res.invalid[0][0]}: {res.invalid[0][1]}"]
    return "\n".join(lines)


def _space_dims(text: str | None) -> tuple[str, ...]:
    from echo_sim.search.space import DIMENSIONS

    if not text:
        return DIMENSIONS
    dims = tuple(d.strip() for d in text.split(",") if d.strip())
    bad = [d for d in dims if d not in DIMENSIONS]
    if bad or not dims:
        raise ConfigError(f"--space {text!r}: unknown {', '.join(bad) or 'empty list'}; valid: "
                          f"{','.join(DIMENSIONS)}")
    return dims


def _zero_stages(text: str | None, fmt: str = "echo") -> tuple[int, ...]:
    """``--zero-stages 1,2`` → (1, 2); None → ()."""
    if text is None:
        return ()
    if fmt == "aceso":
        raise ConfigError("--zero-stages with --format aceso: Aceso's runtime has no "
                          "DeepSpeed ZeRO; drop one of them")
    parts = [t.strip() for t in text.split(",") if t.strip()]
    if not parts or any(t not in ("1", "2") for t in parts):
        raise ConfigError(f"--zero-stages {text!r}: a comma list of DeepSpeed ZeRO stages 1 "
                          "and 2 (stage 3 is FSDP, searched with fsdp in --space)")
    return tuple(sorted({int(t) for t in parts}))


def _aceso_dims() -> tuple[str, ...]:
    from echo_sim.search.aceso_config import ACESO_DIMENSIONS

    return ACESO_DIMENSIONS


def _workers(text: str | None) -> int | str | None:
    if text is None:
        return None
    if text == "ray":
        return "ray"
    if not text.isdigit() or not 1 <= int(text) <= MAX_WORKERS:
        raise ConfigError(f"--workers {text!r}: give a number of processes in "
                          f"1..{MAX_WORKERS} or 'ray'")
    return int(text)


SHOWN_COMMANDS = 5  # simulate lines printed under the table (--json has every row's)


def _hardware(trace: Any, opts: Any) -> tuple[str, int, str]:
    """(cluster, GPUs per node, one line saying whence): the asked ones, else the traced
    hardware's exactly as simulate picks it (:func:`echo_sim.sim.target.choose_hardware`)."""
    from echo_sim.cost.hardware import get_cluster
    from echo_sim.sim.target import choose_hardware

    if opts.cluster is not None:
        name, how, one_host = opts.cluster, f"--cluster {opts.cluster}", False
    else:
        info = trace.ranks[min(trace.ranks)]
        meta = info.meta or {}
        hw = choose_hardware(cluster=None, gpu=None,
                             device=str(meta.get("device") or info.device or ""),
                             device_name=str(meta.get("device_name") or ""),
                             backend=str(meta.get("backend") or ""))
        name, how, one_host = hw.cluster, hw.source, hw.one_host
    gpn = opts.gpus_per_node or (opts.gpus if one_host else get_cluster(name).gpus_per_node)
    return name, gpn, f"hardware: {name}, {gpn} per node ({how})"


def _simulate_line(paths: list[str], cand: Any, space: Any, tp_plan: str | None = None
                   ) -> str:
    """The simulate command that predicts ``cand`` exactly as the search did (``tp_plan``:
    the ``--tp-plan`` file the search used)."""
    import shlex

    from echo_sim.commands.simulate import simulate_argv

    argv = simulate_argv(cand.layout.sim_config(space))
    if tp_plan is not None and cand.layout.tp > 1:
        argv += ["--tp-plan", tp_plan]
    return " ".join(shlex.quote(a) for a in ["python", "-m", "echo_sim", "simulate", *paths,
                                            *argv])


def run(opts: Any) -> Result:
    from echo_sim.commands.simulate import job_workload, tp_plan_flag
    from echo_sim.cost.hardware import get_cluster
    from echo_sim.search import SearchSpace, search, write_train_config
    from echo_sim.sim.simulate import NO_CPU_PROFILE, baseline_note
    from echo_sim.workload.tensor_parallel import apply_tp_plan

    if opts.gpus is None or opts.global_batch is None:
        raise ConfigError("search needs --gpus N and --global-batch N")
    trace, workload = job_workload(opts.paths)  # the same start as simulate's
    cluster, gpus_per_node, hw_note = _hardware(trace, opts)
    memory_note = baseline_note(workload, get_cluster(cluster).gpu.name == "cpu")
    if memory_note:  # "peak mem" of a CPU trace on GPUs lacks the CPU process's own memory
        hw_note += f"\n{memory_note}"
    if get_cluster(cluster).gpu.name == "cpu" and opts.gpus > 1 and not opts.comm_profile:
        hw_note += f"\nwarning: {NO_CPU_PROFILE}"
    space = SearchSpace(
        gpus=opts.gpus, global_batch=opts.global_batch, gpus_per_node=gpus_per_node,
        cluster=cluster,
        memory_limit_bytes=parse_bytes_flag("--memory-limit", opts.memory_limit,
                                            max_bytes=MAX_MEMORY_BYTES)
        if opts.memory_limit else None,
        dims=_aceso_dims() if opts.format == "aceso" and not opts.space
        else _space_dims(opts.space), comm_profile=opts.comm_profile,
        vary_gpus=opts.objective == "cost", heterogeneous=opts.heterogeneous,
        zero_stages=_zero_stages(opts.zero_stages, opts.format))
    aceso = opts.format == "aceso"
    if opts.output and aceso and not opts.output.endswith(".json"):
        check_output_dir("--output", opts.output)  # a directory of the --top configs
    elif opts.output:
        check_output("--output", opts.output, force=opts.force)  # before the search
    if opts.plot:
        from echo_sim.render.plots import PLOT_TYPES

        check_output("--plot", opts.plot, force=opts.force)
        if not opts.plot.lower().endswith(PLOT_TYPES):
            raise ConfigError(f"--plot {opts.plot}: unknown image type; use "
                              f"{', '.join(PLOT_TYPES)}")
    traced_zero = (workload.meta.get("training") or {}).get("zero_stage")
    if isinstance(traced_zero, int) and traced_zero > 0:
        # rows are what their labels say; simulate --zero-stage 1|2 prices the others
        space = dataclasses.replace(space, pin_zero=True)
        hw_note += (f"\nthe trace ran DeepSpeed ZeRO-{traced_zero}: rows are what their "
                    "labels say, ddp (ZeRO-0), zero1 / zero2 (--zero-stages) or fsdp (ZeRO-3)")
    plan = tp_plan_flag(opts.tp_plan)
    if plan is not None:  # the same roles simulate --tp-plan gives
        workload = apply_tp_plan(workload, plan)
    res = search(workload, space, objective=opts.objective, top=opts.top,
                 workers=_workers(opts.workers),
                 progress=True)
    data = res.to_dict(top=opts.top)
    data["source"] = opts.paths[0]
    if len(opts.paths) > 1:
        data["sources"] = list(opts.paths)
    data["hardware"] = hw_note
    commands = [_simulate_line(opts.paths, c, space, opts.tp_plan)
                for c in res.candidates[:opts.top]]
    for row, cmd in zip(data["ranked"], commands, strict=True):
        row["simulate"] = cmd
    if data.get("best") and commands:
        data["best"]["simulate"] = commands[0]
    data["tp_placement"] = workload.tp_note
    text = f"{hw_note}\n{render(res, opts.top)}\n{workload.tp_note}"
    if commands:
        text += "\n\nreproduce a row with simulate:\n" + "\n".join(
            f"{i:>3} {cmd}" for i, cmd in enumerate(commands[:SHOWN_COMMANDS], 1))
    if opts.output and res.best is not None and aceso:
        from echo_sim.search.aceso_config import write_aceso_configs

        with flag_errors("--output", opts.output):
            paths = write_aceso_configs(opts.output, res.candidates[:opts.top],
                                        workload=workload, space=space, overwrite=opts.force)
        data["output"] = [str(p) for p in paths]
        text += (f"\n\nwrote {len(paths)} Aceso config(s) (best first): "
                 f"{', '.join(str(p) for p in paths)}")
    elif opts.output and res.best is not None:
        with flag_errors("--output", opts.output):
            path = write_train_config(opts.output, res.best, global_batch=space.global_batch,
                                      model=workload.model, source=opts.paths[0],
                                      overwrite=opts.force)
        data["output"] = str(path)
        text += f"\n\nwrote the best layout ({res.best.layout.label}) to {path}"
    if opts.plot and res.candidates:
        from echo_sim.render.plots import plot_search

        with output_file("--plot", opts.plot, force=opts.force) as tmp:
            plot_search(res.candidates, res.best, tmp,
                        title=f"{len(res.candidates)} layouts timed of {res.enumerated} "
                              f"({space.gpus} devices, {space.cluster})")
        data["plot"] = opts.plot
        text += f"\n\nwrote {opts.plot}"
    return Result(text, data)


COMMAND = Command(
    name="search",
    help="find the best parallel layout under a memory limit (and write a train config)",
    description=DESCRIPTION,
    run=run,
    paths=-1,
    paths_help=PATHS_HELP,
    epilog="example: python -m echo_sim search gpt175b --gpus 1024 --gpus-per-node 8 "
           "--cluster dgx-h100 --global-batch 1536 --memory-limit 80GB --top 10 "
           "--output best.json",
    args=(
        arg("--gpus", type=int_in(1, MAX_GPUS), default=None,
            help="devices to lay the job out on (required)"),
        arg("--gpus-per-node", type=int_in(1, 1024), default=None,
            help="devices per node; tensor parallelism stays inside a node (default: the "
                 "cluster's; a CPU trace: all --gpus on this host)"),
        arg("--cluster", default=None,
            help="cluster preset: dgx-a100, dgx-h100, dgx-h200, dgx2-v100, cpu-gloo "
                 "(default: the traced hardware's, as simulate)"),
        arg("--global-batch", type=int_in(1, MAX_GLOBAL_BATCH), default=None,
            help="samples per iteration over all replicas (required)"),
        arg("--memory-limit", metavar="SIZE", default=None,
            help="device memory limit, e.g. 80GB (10^9) or 80GiB (2^30) "
                 "(default: the GPU's memory)"),
        arg("--top", type=int_in(1, MAX_TOP), default=10,
            help="layouts to rank exactly and print (default 10)"),
        arg("--objective", choices=["time", "throughput", "cost"], default="time",
            help="rank by iteration time, throughput, or cost = GPU-seconds per sample "
                 "(cost also tries every divisor of --gpus as the world size; default time)"),
        arg("--space", metavar="DIMS", default=None,
            help="comma-separated dimensions to search, the rest held at defaults: "
                 "dp,tp,pp,vpp,micro-batch,fsdp,recompute (none/selective/full),sp "
                 "(sequence parallelism, tp >= 2),schedule (default: all)"),
        arg("--workers", metavar="N|ray", default=None,
            help="local worker processes (default: one per core), or 'ray' to run on a Ray "
                 "cluster (RAY_ADDRESS, else a local instance)"),
        arg("--comm-profile", metavar="FILE", default=None,
            help="measured collective profile (from profile-comm)"),
        arg("--output", "-o", metavar="FILE|DIR", default=None,
            help="write the best layout as a config for examples/train.py --config FILE; "
                 "with --format aceso, FILE.json gets the best layout and a DIR (made if "
                 "absent) the --top N fitting ones as DIR/<model>_<size>_top<i>.json"),
        arg("--tp-plan", metavar="FILE", default=None,
            help="tensor-parallel plan, as simulate --tp-plan (module-name pattern -> "
                 "colwise | rowwise | replicate); default: the trace's transformers "
                 "tp_plan, else the model's structure"),
        arg("--heterogeneous", action="store_true",
            help="also search heterogeneous stages when pipelining: per-stage recomputation "
                 "(Aceso's checkpoint_activations / recompute_ops: full recomputation on the "
                 "first k of pp stages, none on the rest; needs recompute in --space) and "
                 "per-stage tensor parallelism (Aceso's num_gpus / "
                 "model_parallel_size_of_each_op: degree a on the first k stages, b on the "
                 "rest, each stage keeping dp replicas of dp x its degree GPUs, in all "
                 "dp x (k·a + (pp-k)·b) = --gpus; needs tp and pp in --space). A row's "
                 "prediction is `simulate --dp D --pp P --stage-tp a,..,b "
                 "[--stage-recompute ...]`"),
        arg("--zero-stages", metavar="1,2", default=None,
            help="also try DeepSpeed ZeRO-1 (optimizer states sharded over dp) and/or ZeRO-2 "
                 "(also the gradients) in place of DDP on every layout with dp >= 2 (ZeRO-2 "
                 "only without pipelining, as DeepSpeed's pipeline engine allows); rows "
                 "labelled zero1 / zero2, priced as `simulate --zero-stage 1|2`. ZeRO-3 is "
                 "fsdp (default: DDP and FSDP only)"),
        arg("--plot", metavar="FILE.png", default=None,
            help="draw the timed layouts, iteration time against peak memory per device, "
                 "coloured by sharding (ddp / zero1 / zero2 / fsdp), hollow where over the "
                 "memory limit, the best starred (.png, .svg or .pdf)"),
        arg("--format", choices=["echo", "aceso"], default="echo",
            help="--output config format: echo's (examples/train.py --config) or aceso "
                 "(Aceso's config JSON: num_stages, num_gpus, model_parallel_size_of_each_op, "
                 "recompute_ops, ...; its runtime's --flexpipe-config) (default echo)"),
        arg("--force", action="store_true", help="replace the --output file if it exists"),
    ),
)
