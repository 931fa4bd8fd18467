"""``collect PATH``: iteration time and its compute / communication split (dPRO's collect)."""

from __future__ import annotations

from typing import Any

from echo_sim.analysis.collect import Collected, collect
from echo_sim.analysis.tables import fmt_pct, fmt_us, format_table, write_csv
from echo_sim.commands.engine_args import ENGINE_ARGS, engine_of, memory_workers
from echo_sim.commands.outputs import check_output, output_file
from echo_sim.commands.spec import Command, Result, arg

__all__ = ["COMMAND", "render"]

DESCRIPTION = """\
Iteration time per rank and step, and how it splits into compute and communication.

iteration: the STEP marker's duration (else the span of the step's events).
FW+BW: time covered by forward and backward slices. comm: time covered by communication
slices; overlapped: communication that runs while the same rank computes; exposed: the
rest (communication the rank waits for). Covered time counts each slice's busy share
(args.busy_us / dur on GPU traces, whole slices elsewhere). All times in microseconds.

iteration_time_us (the job's iteration time) is the median over captured steps of the
slowest rank in each step. Per rank: mean and median over its steps.
"""


def render(c: Collected, *, source: str = "") -> str:
    it = c.iteration_time_us
    lines = [
        (f"{source}: " if source else "") + f"{len(c.ranks)} rank(s), steps {c.steps}",
        f"iteration time  {fmt_us(it)} us  (median over steps of the slowest rank; "
        f"mean {fmt_us(c.iteration_time_mean_us)} us)",
        f"FW+BW           {fmt_us(c.fwbw_us)} us per step ({fmt_pct(c.fwbw_us / it if it else None)})",
        f"communication   {fmt_us(c.comm_us)} us per step: overlapped "
        f"{fmt_us(c.overlapped_us)} us, exposed {fmt_us(c.exposed_us)} us",
    ]
    ranks = format_table(
        ["rank", "steps", "iter_mean_us", "iter_median_us", "fwbw_us", "comm_us",
         "overlapped_us", "exposed_us"],
        [[str(r.rank), r.steps, fmt_us(r.iteration_mean_us), fmt_us(r.iteration_median_us),
          fmt_us(r.fwbw_mean_us), fmt_us(r.comm_mean_us), fmt_us(r.overlapped_mean_us),
          fmt_us(r.exposed_mean_us)] for r in c.per_rank],
        title="\nPer rank (means per step)")
    steps = format_table(
        ["step", "iteration_us", "slowest_rank", "fastest_us", "mean_us", "median_us"],
        [[str(s.step), fmt_us(s.iteration_us), str(s.slowest_rank), fmt_us(s.fastest_us),
          fmt_us(s.mean_us), fmt_us(s.median_us)] for s in c.per_step],
        title="\nPer step (iteration_us: the slowest rank; mean, median over ranks)")
    return "\n".join([*lines, ranks, steps])


def run(opts: Any) -> Result:
    from echo_sim.load import load_trace

    if opts.csv:
        check_output("--csv", opts.csv, force=opts.force)  # before the work
    if engine_of(opts) == "duckdb":
        from echo_sim.outofcore import collect_store

        c = collect_store(opts.paths[0], workers=opts.workers)
    else:
        c = collect(load_trace(opts.paths[0], workers=memory_workers(opts.workers)))
    text = render(c, source=opts.paths[0])
    if opts.csv:
        names = list(c.cells)
        rows = [[r, s, *(c.cells[k][i, j] for k in names)]
                for i, r in enumerate(c.ranks) for j, s in enumerate(c.steps)]
        with output_file("--csv", opts.csv, force=opts.force) as tmp:
            write_csv(tmp, ["rank", "step", *names], rows)
        text += f"\nwrote {opts.csv}"
    data = c.to_dict()
    data["source"] = opts.paths[0]
    return Result(text, data)


COMMAND = Command(
    name="collect",
    help="iteration time, FW+BW time, exposed and overlapped communication",
    description=DESCRIPTION,
    run=run,
    args=(
        arg("--csv", metavar="FILE",
            help="also write one row per (rank, step) with every figure as CSV"),
        arg("--force", action="store_true", help="replace the --csv file if it exists"),
        *ENGINE_ARGS,
    ),
    epilog="example: python -m echo_sim collect traces/ --json",
)
