"""``statistic PATH``: per-operator, per-category and per-rank time (dPRO's statistic)."""

from __future__ import annotations

from typing import Any

from echo_sim.analysis.statistic import SORT_KEYS, OpStat, Statistics, statistic
from echo_sim.analysis.tables import fmt_pct, fmt_us, format_table, write_csv
from echo_sim.commands.spec import Command, Result, arg

__all__ = ["COMMAND", "render"]

DESCRIPTION = """\
Per-operator statistics over every rank and captured step.

Operators are event names (FW.<module>, BW.<module>, Comm.<tensor or bucket>,
UPDATE.<optimizer>). Each occurrence on each rank in each captured step is one sample;
the table shows count, total, mean, median, 95th percentile and standard deviation of
the durations (microseconds) and the share of step time (operator total / sum of step
times over ranks and steps).

Categories (FW, BW, Comm, UPDATE) are covered time: the union of the category's slices
per rank and step, so nested modules and concurrent collectives count once. idle is step
time not covered by any compute slice (FW/BW/UPDATE). Per rank: means per step.
"""

CSV_COLUMNS = ("name", "category", "count", "total_us", "mean_us", "median_us", "p95_us",
               "std_us", "share")


def _op_row(o: OpStat) -> list[Any]:
    return [o.name, o.category, o.count, fmt_us(o.total_us), fmt_us(o.mean_us),
            fmt_us(o.median_us), fmt_us(o.p95_us), fmt_us(o.std_us), fmt_pct(o.share)]


def render(stats: Statistics, *, source: str = "", shown: int | None = None) -> str:
    """The terminal form of :class:`Statistics`."""
    n_cells = sum(r.steps for r in stats.ranks)
    head = (f"{source}: " if source else "") + (
        f"{len(stats.ranks)} rank(s), steps {stats.steps}, mean step time "
        f"{fmt_us(stats.step_time_us / n_cells if n_cells else 0.0)} us")
    ops = stats.ops if shown is None else stats.ops[:shown]
    more = (f"\n({len(ops)} of {stats.num_ops} operators shown; --head 0 shows all)"
            if len(ops) < stats.num_ops else "")
    parts = [
        head,
        format_table(["operator", "cat", "count", "total_us", "mean_us", "median_us",
                      "p95_us", "std_us", "share"], [_op_row(o) for o in ops],
                     title="\nOperators", left=2) + more,
        format_table(["category", "total_us", "per_step_us", "share"],
                     [[c.category, fmt_us(c.total_us), fmt_us(c.per_step_us), fmt_pct(c.share)]
                      for c in stats.categories], title="\nCategories (covered time)"),
        format_table(["rank", "steps", "step_us", "FW_us", "BW_us", "Comm_us", "UPDATE_us",
                      "idle_us"],
                     [[str(r.rank), r.steps, fmt_us(r.step_us), fmt_us(r.fw_us),
                       fmt_us(r.bw_us), fmt_us(r.comm_us), fmt_us(r.update_us),
                       fmt_us(r.idle_us)] for r in stats.ranks],
                     title="\nPer rank (mean per step)"),
    ]
    return "\n".join(parts)


def run(opts: Any) -> Result:
    from echo_sim.load import load_trace

    trace = load_trace(opts.paths[0])
    stats = statistic(trace, sort=opts.sort)
    shown = None if opts.head == 0 else opts.head
    notes: list[str] = []
    if opts.csv:
        p = write_csv(opts.csv, CSV_COLUMNS,
                      [[getattr(o, c) for c in CSV_COLUMNS] for o in stats.ops])
        notes.append(f"wrote {p}")
    if opts.plot:
        from echo_sim.analysis.collect import collect
        from echo_sim.render.plots import plot_step_breakdown, step_breakdown

        p = plot_step_breakdown(step_breakdown(stats, collect(trace)), opts.plot)
        notes.append(f"wrote {p}")
    data = stats.to_dict()
    if shown is not None:
        data["ops"] = data["ops"][:shown]
    data["source"] = opts.paths[0]
    text = render(stats, source=opts.paths[0], shown=shown)
    return Result("\n".join([text, *notes]), data)


COMMAND = Command(
    name="statistic",
    help="per-operator, per-category and per-rank time statistics",
    description=DESCRIPTION,
    run=run,
    args=(
        arg("--sort", choices=SORT_KEYS, default="total",
            help="operator table order (descending; name: alphabetical); default total"),
        arg("--head", type=int, default=30, metavar="N",
            help="show the first N operators (0: all); default 30"),
        arg("--csv", metavar="FILE", help="also write the full operator table as CSV"),
        arg("--plot", metavar="FILE.png",
            help="also draw the per-rank step-time breakdown (FW, BW, UPDATE, exposed "
                 "Comm, idle) as an image (.png, .svg, .pdf)"),
    ),
    epilog="example: python -m echo_sim statistic traces/ --sort mean --head 10 --csv ops.csv",
)
