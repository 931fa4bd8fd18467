"""``statistic PATH``: per-operator, per-category and per-rank time (dPRO's statistic)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from echo_sim.analysis.statistic import SORT_KEYS, OpStat, Statistics, statistic
from echo_sim.analysis.tables import fmt_pct, fmt_us, format_table, write_csv
from echo_sim.commands.checks import int_in
from echo_sim.commands.engine_args import ENGINE_ARGS, engine_of, memory_workers
from echo_sim.commands.outputs import check_output, output_file
from echo_sim.commands.spec import Command, Result, arg
from echo_sim.errors import EchoError
from echo_sim.render.plots import PLOT_TYPES

__all__ = ["COMMAND", "render"]

DESCRIPTION = """\
Per-operator statistics over every rank and captured step.

Operators are event names (FW.<module>, BW.<module>, Comm.<tensor or bucket>,
UPDATE.<optimizer>). Each occurrence on each rank in each captured step is one sample;
the table shows count, total, mean, median, 95th percentile and standard deviation of
the durations (microseconds) and the share of step time (operator total / sum of step
times over ranks and steps).

Categories split every rank's step time into parts that add up to it (shares sum to
100 %): compute alone (FW, BW, UPDATE, and "other": device kernels under no module range,
as in profiler traces), communication overlapped with compute (Comm_overlapped: hidden),
communication alone (Comm_exposed: the step waits for it), and idle (no activity on any
stream of the rank). Nested modules and concurrent collectives count once; a slice counts
only its busy share (args.busy_us / dur: GPU kernel time inside a run of kernels; the
whole slice on CPU traces), so gaps between kernels are idle. Per rank: means per step.
Operator rows are durations and may overlap each other (their shares do not add up).
Long operator names are shortened in the table; --csv, --xlsx and --json keep them whole.
"""

CSV_COLUMNS = ("name", "category", "count", "total_us", "mean_us", "median_us", "p95_us",
               "std_us", "share")


_RANK_FIELD = {"FW": "fw_us", "BW": "bw_us", "UPDATE": "update_us", "other": "other_us",
               "Comm_overlapped": "comm_overlapped_us", "Comm_exposed": "comm_exposed_us",
               "idle": "idle_us"}


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
    # "other" (device work under no module range) exists only on profiler traces
    cats = [c for c in stats.categories if c.category != "other" or c.total_us > 0]
    parts_shown = [c.category for c in cats]
    more = (f"\n({len(ops)} of {stats.num_ops} operators shown; --head 0 shows all)"
            if len(ops) < stats.num_ops else "")
    parts = [
        head,
        format_table(["operator", "cat", "count", "total_us", "mean_us", "median_us",
                      "p95_us", "std_us", "share"], [_op_row(o) for o in ops],
                     title="\nOperators", left=2) + more,
        format_table(["category", "total_us", "per_step_us", "share"],
                     [[c.category, fmt_us(c.total_us), fmt_us(c.per_step_us), fmt_pct(c.share)]
                      for c in cats],
                     title="\nCategories (parts of the step: shares add up to 100 %)"),
        format_table(["rank", "steps", "step_us", *[f"{p}_us" for p in parts_shown]],
                     [[str(r.rank), r.steps, fmt_us(r.step_us),
                       *[fmt_us(getattr(r, _RANK_FIELD[p])) for p in parts_shown]]
                      for r in stats.ranks],
                     title="\nPer rank (mean per step; the parts add up to step_us)"),
    ]
    return "\n".join(parts)


def default_xlsx(path: str) -> Path:
    """Bare ``--xlsx`` (dPRO's switch): ``statistic.xlsx`` in the trace directory."""
    p = Path(path)
    return (p if p.is_dir() else p.parent) / "statistic.xlsx"


def run(opts: Any) -> Result:
    from echo_sim.load import load_trace

    xlsx = (default_xlsx(opts.paths[0]) if opts.xlsx is True else opts.xlsx) if opts.xlsx else None
    for flag, out in (("--csv", opts.csv), ("--xlsx", xlsx), ("--plot", opts.plot)):
        if out:
            check_output(flag, out, force=opts.force)  # before the work
    if engine_of(opts) == "duckdb":
        from echo_sim.outofcore import statistic_store

        stats = statistic_store(opts.paths[0], sort=opts.sort, workers=opts.workers)
    else:
        stats = statistic(load_trace(opts.paths[0], workers=memory_workers(opts.workers)),
                          sort=opts.sort)
    shown = None if opts.head == 0 else opts.head
    if opts.plot and Path(opts.plot).suffix.lower() not in PLOT_TYPES:
        raise EchoError(f"--plot {opts.plot}: unknown image type {Path(opts.plot).suffix!r}; "
                        f"use {', '.join(PLOT_TYPES)}")
    notes: list[str] = []
    rows = [[getattr(o, c) for c in CSV_COLUMNS] for o in stats.ops]
    if opts.csv:
        with output_file("--csv", opts.csv, force=opts.force) as tmp:
            write_csv(tmp, CSV_COLUMNS, rows)
        notes.append(f"wrote {opts.csv}")
    if xlsx is not None:
        from echo_sim.render.xlsx import write_tables_xlsx

        with output_file("--xlsx", xlsx, force=opts.force) as tmp:
            write_tables_xlsx(tmp, {"operators": (CSV_COLUMNS, rows)})
        notes.append(f"wrote {xlsx}")
    if opts.plot:
        from echo_sim.render.plots import plot_step_breakdown, step_breakdown

        with output_file("--plot", opts.plot, force=opts.force) as tmp:
            plot_step_breakdown(step_breakdown(stats), tmp)
        notes.append(f"wrote {opts.plot}")
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
        arg("--sort", choices=SORT_KEYS, default="total", nargs="?", const="total",
            help="operator table order (descending; name: alphabetical); default total "
                 "(a bare --sort, dPRO's switch, is total)"),
        arg("--head", type=int_in(0, 2**31), default=30, metavar="N",
            help="show the first N operators (0: all); default 30"),
        arg("--csv", metavar="FILE", help="also write the full operator table as CSV"),
        arg("--xlsx", metavar="FILE", nargs="?", const=True, default=None,
            help="also write the full operator table as an Excel workbook (bare --xlsx: "
                 "statistic.xlsx in the trace directory, as dPRO did)"),
        arg("--plot", metavar="FILE.png",
            help="also draw the per-rank step-time breakdown (the category parts: FW, BW, "
                 "UPDATE, overlapped and exposed Comm, idle) as an image (.png, .svg, .pdf)"),
        arg("--force", action="store_true",
            help="replace output files (--csv, --xlsx, --plot) that exist"),
        *ENGINE_ARGS,
    ),
    epilog="example: python -m echo_sim statistic traces/ --sort mean --head 10 --csv ops.csv",
)
