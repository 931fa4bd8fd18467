"""``stragglers PATH``: ranks that enter collectives late or compute longer, per step."""

from __future__ import annotations

from typing import Any

from echo_sim.analysis.stragglers import StragglerReport, stragglers
from echo_sim.analysis.tables import fmt_us, format_table
from echo_sim.commands.checks import float_in, int_in
from echo_sim.commands.engine_args import ENGINE_ARGS, engine_of, memory_workers
from echo_sim.commands.spec import Command, Result, arg

__all__ = ["COMMAND", "render"]

DESCRIPTION = """\
Find ranks that hold the others up, step by step.

Collective entry: collectives are matched across ranks by (process group, sequence
number); for each, every member's entry (issue) time is compared with the earliest
member's. late_us is how much later a rank entered (max and mean over a step's
collectives). Compute: busy time covered by FW/BW/UPDATE on a rank in a step (GPU: kernel
time, args.busy_us) minus the median over ranks for that step (excess_us; negative means
faster).

A (step, rank) is flagged when either figure exceeds --threshold-us (default: 5% of the
iteration time, the median over steps of the slowest rank). Times in microseconds.
"""


def render(rep: StragglerReport, *, head: int | None) -> str:
    flagged = rep.flagged
    shown = flagged if head is None else flagged[:head]
    lines = [f"iteration time {fmt_us(rep.iteration_time_us)} us; threshold "
             f"{fmt_us(rep.threshold_us)} us; {len(flagged)} straggler (step, rank) cell(s)"]
    lines.append(format_table(
        ["step", "rank", "reason", "max_late_us", "mean_late_us", "compute_us", "excess_us"],
        [[str(c.step), str(c.rank), c.reason, fmt_us(c.max_late_us), fmt_us(c.mean_late_us),
          fmt_us(c.compute_us), fmt_us(c.compute_excess_us)] for c in shown],
        title="\nStragglers (worst first)", left=3))
    lines.append(format_table(
        ["rank", "times_last", "mean_late_us", "max_late_us", "mean_excess_us", "flagged_steps"],
        [[str(r.rank), r.times_last, fmt_us(r.mean_late_us), fmt_us(r.max_late_us),
          fmt_us(r.mean_compute_excess_us), r.straggler_steps] for r in rep.ranks],
        title="\nPer rank"))
    colls = rep.collectives if head is None else rep.collectives[:head]
    lines.append(format_table(
        ["step", "operator", "collective", "seq", "members", "first", "last", "spread_us"],
        [[str(c.step), c.name, c.collective, c.seq, c.members, str(c.first_rank),
          str(c.last_rank), fmt_us(c.spread_us)] for c in colls],
        title="\nWidest collective entry spreads", left=3))
    return "\n".join(lines)


def run(opts: Any) -> Result:
    from echo_sim.load import load_trace

    if engine_of(opts) == "duckdb":
        from echo_sim.outofcore import stragglers_store

        rep = stragglers_store(opts.paths[0], threshold_us=opts.threshold_us,
                               workers=opts.workers)
    else:
        rep = stragglers(load_trace(opts.paths[0], workers=memory_workers(opts.workers)),
                         threshold_us=opts.threshold_us)
    head = None if opts.head == 0 else opts.head
    data = rep.to_dict()
    data["source"] = opts.paths[0]
    return Result(render(rep, head=head), data)


COMMAND = Command(
    name="stragglers",
    help="ranks entering collectives late or computing longer, per step",
    description=DESCRIPTION,
    run=run,
    args=(
        arg("--threshold-us", type=float_in(0.0, 1e15), default=None, metavar="US",
            help="flag a (step, rank) late or slower than this many microseconds "
                 "(default: 5%% of the iteration time)"),
        arg("--head", type=int_in(0, 2**31), default=20, metavar="N",
            help="rows per table (0: all); default 20"),
        *ENGINE_ARGS,
    ),
    epilog="example: python -m echo_sim stragglers traces/ --threshold-us 500",
)
