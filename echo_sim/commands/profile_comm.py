"""``python -m echo_sim profile-comm``: measure this machine's collectives into a profile."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from echo_sim.commands.checks import float_in, int_in
from echo_sim.commands.outputs import check_output, flag_errors
from echo_sim.commands.spec import Command, Result, arg
from echo_sim.errors import ConfigError
from echo_sim.measure.host_overheads import DEFAULT_ROUNDS, SYNC_ROUNDS_FACTOR
from echo_sim.measure.profile_comm import DEFAULT_ITERS, HOST_ROUNDS_RANGE

__all__ = ["COMMAND", "run"]


def run(opts: Any) -> Result:
    from echo_sim.cost.comm_profile import STALL_US, save_comm_profile, stalls
    from echo_sim.measure.profile_comm import (
        PROFILE_OPS,
        ProfileSpec,
        measure_comm_profile,
        parse_sizes,
        summary_rows,
    )

    ops = tuple(o.strip() for o in opts.ops.split(",") if o.strip()) if opts.ops else PROFILE_OPS
    try:
        groups = tuple(int(g) for g in opts.group_sizes.split(",") if g.strip())
    except ValueError:
        raise ConfigError(f"--group-sizes {opts.group_sizes!r}: use a comma list of integers, "
                          "e.g. 2,4") from None
    try:
        sizes = parse_sizes(opts.sizes)
    except ConfigError as e:  # name the flag once
        msg = str(e)
        raise ConfigError(msg if "--sizes" in msg else f"--sizes {opts.sizes!r}: {msg}") from None
    out = check_output("--output", Path(opts.output), force=opts.force)  # before measuring
    spec = ProfileSpec(nproc=opts.nproc, group_sizes=groups, sizes_bytes=sizes,
                       iters=opts.iters, warmup=opts.warmup, backend=opts.backend, ops=ops,
                       timeout_s=opts.timeout, progress=not opts.no_progress,
                       busy_us=opts.busy_us, host_overheads=not opts.no_host_overheads,
                       host_rounds=opts.host_rounds)
    profile = measure_comm_profile(spec)
    with flag_errors("--output", out):
        path = save_comm_profile(profile, out, overwrite=opts.force)
    lines = [f"{profile.backend} on {profile.device} ({profile.device_name}), "
             f"{profile.world_size} processes, trimmed mean of {profile.iters} runs per size "
             f"-> {path}",
             f"{'op':<15}{'ranks':>6}{'bytes':>12}{'time_us':>12}{'algbw_GB/s':>12}"]
    for op, n, s, t, bw in summary_rows(profile):
        lines.append(f"{op:<15}{n:>6}{s:>12}{t:>12.1f}{bw:>12.3f}")
    lines.append("fits (t = alpha + beta * bytes):")
    for key in profile.ops:
        a, b = profile.fits[key]
        lines.append(f"  {key[0]:<15}{key[1]:>3} ranks  alpha {a:10.1f} us  "
                     f"beta {b * 1024:.4f} us/KB  ({1 / b / 1e3:.3f} GB/s)")
    found = stalls(profile)
    if found:
        lines.append(f"stalls (runs >= {STALL_US / 1e3:g} ms over their size's median: a rank "
                     "descheduled or a halted vCPU; each collective pays the excess on average):")
        for st in found:
            lines.append(f"  {st.op:<15}{st.group_size:>3} ranks  {st.rate:6.1%} of {st.runs} runs"
                         f"  excess {st.excess_us:8.1f} us")
        worst = max(found, key=lambda st: st.rate)
        if worst.rate >= 0.1:
            lines.append(f"  note: {worst.rate:.0%} of {worst.op} runs stalled; on such a host a "
                         "job's communication time varies by as much between runs")
    data = {"output": str(path), **profile.to_json(),
            "stalls": [dataclasses.asdict(st) for st in found]}
    return Result("\n".join(lines), data)


COMMAND = Command(
    name="profile-comm",
    help="measure collective times on this machine into a communication profile",
    description=(
        "Start NPROC processes (gloo on CPU, NCCL when CUDA is available), time all_reduce,\n"
        "all_gather, reduce_scatter, all_to_all, broadcast and send/recv against message\n"
        "size (warm-up, barrier before each run, --iters runs round-robin over the sizes,\n"
        "mean without one run in 15 at each end), fit t = alpha + beta*S per op, and\n"
        "write the profile JSON that `simulate --comm-profile` uses."
    ),
    run=run,
    paths=0,
    args=(
        arg("--nproc", type=int_in(2, 1024), default=2, help="processes to start (default 2)"),
        arg("--output", "-o", required=True, help="profile JSON to write"),
        arg("--group-sizes", default="",
            help="also measure sub-groups of these sizes (ranks 0..k-1), e.g. 2,4"),
        arg("--sizes", default="1KB..64MB",
            help="message sizes: LO..HI (x4 steps), LO..HIx2, or a list 1KB,1MB "
                 "(KB = 1024 bytes; default 1KB..64MB)"),
        arg("--iters", type=int_in(1, 100_000), default=DEFAULT_ITERS,
            help=f"timed runs per size (default {DEFAULT_ITERS}: on a host whose collectives "
                 "stall now and then, a mean over 15 moves by tens of %% between profiles)"),
        arg("--warmup", type=int_in(0, 100_000), default=3, help="untimed runs per size first (default 3)"),
        arg("--backend", choices=["auto", "gloo", "nccl"], default="auto",
            help="auto: NCCL when CUDA is available, else gloo"),
        arg("--ops", default="", help="comma list of ops to measure (default: all)"),
        arg("--timeout", type=float_in(0.0, 7 * 86400.0, lo_open=True), default=600.0,
            help="kill every process after this many seconds (default 600)"),
        arg("--busy-us", type=float_in(0.0, 1e6), default=0.0,
            help="busy mode for ranks that share CPU cores (gloo on CPU): before each timed "
                 "collective every rank computes for about this many microseconds instead of "
                 "a barrier, as in training (on a shared host what precedes a collective "
                 "changes how often it stalls); also records the compute slowdown of ranks "
                 "running at once (default 0: idle mode)"),
        arg("--no-host-overheads", action="store_true",
            help="gloo on CPU: skip the host microbenchmarks (compute contention, the "
                 "ranks' arrival gaps at chained all-reduces, DTensor dispatch, DTensor "
                 "optimizer, FSDP2 and DDP hooks) that simulate calibrates from"),
        arg("--host-rounds", type=int_in(*HOST_ROUNDS_RANGE), default=DEFAULT_ROUNDS,
            help=f"gloo on CPU: samples of each host microbenchmark (default {DEFAULT_ROUNDS}; "
                 f"the rank-skew probes run {SYNC_ROUNDS_FACTOR}x as many). Fewer make a "
                 "quicker profile whose host calibration moves more between profiles"),
        arg("--force", action="store_true", help="replace an existing --output file"),
        arg("--no-progress", action="store_true", help="no progress bar on stderr"),
    ),
)
