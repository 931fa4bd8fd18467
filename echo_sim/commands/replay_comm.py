"""``python -m echo_sim replay-comm PATH``: time a job's collectives as the job meets them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from echo_sim.analysis.tables import fmt_us, format_table
from echo_sim.commands.checks import float_in, int_in
from echo_sim.commands.outputs import check_output, flag_errors
from echo_sim.commands.spec import Command, Result, arg

__all__ = ["COMMAND", "run"]

DESCRIPTION = """\
Replay one step of PATH's collectives on this host's CPUs (gloo, one fresh process per
rank): for each collective in order, the compute its rank did since the previous one
began (as matrix products of the same length), then the collective on the job's own
message size; repeat the step --warmup untimed and --steps timed times. Write
--comm-profile's profile with the replayed operations' times replaced by the replay's
(the trimmed mean over every call of each size, on the profile's own clock), for
`simulate --comm-profile`.

Why: a looped profile times each collective after a barrier; on hosts whose ranks share
cores, how often a collective stalls depends on what precedes it, so the job can pay far
less (or more) per call. PATH is a multi-process echo trace of the job, or the timeline
`simulate TRACE --dp/--tp ... --output DIR` writes for the layout to predict. Only
collectives over every rank are replayed (DDP, FSDP, TP over all processes); each runs
synchronously (simulate models overlap with later compute as for any profile). Every
timed call also records the ranks' arrival gap (both ranks' start times on the host
clock); simulate prices the job's waits at its synchronisations with half their mean,
where the looped profile's rank-skew probe scales a wait with the compute before it.

Measured against real 2-process jobs on a 2-core host (README, accuracy section): on a
quiet host this route predicted DDP and FSDP2 jobs 0.7-5.7 points closer than the looped
profile with its older skew probe over 20 paired repetitions (both under-predict); against
the looped profile with its chained skew probe (since 2026-11-29) it was closer for DDP
and about even for FSDP2 over 10. On a noisy host, before the gaps were recorded, it was
no better. simulate's default stays the looped profile.
"""


def run(opts: Any) -> Result:
    from echo_sim.cost.comm_profile import load_comm_profile, save_comm_profile
    from echo_sim.load import load_trace
    from echo_sim.measure.comm_replay import ReplaySpec, median_work_us, replay_profile

    spec = ReplaySpec(steps=opts.steps, warmup=opts.warmup, timeout_s=opts.timeout)
    base = load_comm_profile(opts.comm_profile)
    out = check_output("--output", Path(opts.output), force=opts.force)  # before measuring
    trace = load_trace(opts.paths[0])
    prof, sched = replay_profile(trace, base, spec, trace_name=opts.paths[0])
    with flag_errors("--output", out):
        path = save_comm_profile(prof, out, overwrite=opts.force)
    rows, data_rows = [], []
    for op, n in sorted({(c.op, sched.world) for c in sched.calls}):
        for (size, t), err in zip(prof.samples[(op, n)], prof.stderr_pct[(op, n)], strict=True):
            calls = sum(1 for c in sched.calls if c.op == op and c.nbytes == size)
            looped = base.time_us(op, n, size) if (op, n) in base.samples else None
            rows.append([op, str(n), f"{size:,}", str(calls), fmt_us(t), f"{err:.0f}%",
                         "-" if looped is None else fmt_us(looped),
                         "-" if looped is None else f"{t / looped:.2f}"])
            data_rows.append({"op": op, "group_size": n, "bytes": size, "calls_per_step": calls,
                              "replayed_us": t, "stderr_pct": err, "looped_us": looped})
    lines = [f"replayed step {sched.step} of {opts.paths[0]}: {len(sched.calls)} collectives "
             f"over {sched.world} ranks, median {fmt_us(median_work_us(sched))} us of compute "
             f"before each; {spec.steps} timed repetitions -> {path}",
             format_table(["op", "ranks", "bytes", "per_step", "replayed_us", "stderr",
                           "looped_us", "ratio"], rows,
                          title="\nCollectives as the job meets them vs the looped profile",
                          left=1)]
    if sched.skipped:
        lines.append(f"\nnot replayed (kept from the profile): {', '.join(sched.skipped[:8])}"
                     + (" ..." if len(sched.skipped) > 8 else ""))
    data = {"output": str(path), "trace": opts.paths[0], "step": sched.step,
            "world_size": sched.world, "collectives": len(sched.calls),
            "median_work_us": median_work_us(sched), "rows": data_rows,
            "skipped": list(sched.skipped), "replay": prof.replay}
    return Result("\n".join(lines), data)


COMMAND = Command(
    name="replay-comm",
    help="time a job's collectives on this host as the job meets them, into a profile",
    description=DESCRIPTION,
    run=run,
    paths=1,
    args=(
        arg("--comm-profile", metavar="FILE", required=True,
            help="the profile-comm profile of this host to start from (its other operations "
                 "and host calibration are kept)"),
        arg("--output", "-o", required=True, help="profile JSON to write"),
        arg("--steps", type=int_in(1, 100_000), default=10,
            help="timed repetitions of the step (default 10)"),
        arg("--warmup", type=int_in(0, 100_000), default=2,
            help="untimed repetitions first (default 2)"),
        arg("--timeout", type=float_in(0.0, 7 * 86400.0, lo_open=True), default=600.0,
            help="kill every process after this many seconds (default 600)"),
        arg("--force", action="store_true", help="replace an existing --output file"),
    ),
)
