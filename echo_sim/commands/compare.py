"""``compare A B``: two traces (or two sets of ranks) operator by operator (dPRO's compare)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from echo_sim.analysis.compare import COMPARE_SORT_KEYS, Comparison, compare, write_xlsx
from echo_sim.analysis.tables import fmt_us, format_table, write_csv
from echo_sim.commands.checks import int_in, select_ranks
from echo_sim.commands.checks import parse_ranks as check_ranks
from echo_sim.commands.outputs import check_output, output_file
from echo_sim.commands.spec import Command, Result, arg

__all__ = ["COMMAND", "parse_ranks", "render"]

DESCRIPTION = """\
Compare two traces operator by operator: for each event name, the number of occurrences
and the mean duration per occurrence on each side (over its ranks and captured steps),
the difference B - A and the ratio B / A. Durations in microseconds. The summary line
compares iteration times (median over steps of the slowest rank).

To compare two sets of ranks of one trace, give the same path twice with --ranks-a and
--ranks-b (e.g. compare T T --ranks-a 0 --ranks-b 1-3).
"""

CSV_COLUMNS = ("name", "category", "count_a", "count_b", "mean_a_us", "mean_b_us",
               "diff_us", "ratio", "total_a_us", "total_b_us")


def parse_ranks(text: str | None, trace: Any, flag: str) -> list[int] | None:
    """``"0,2-4"`` → ``[0, 2, 3, 4]``, each a rank of ``trace`` (ranges are checked, never
    expanded blindly: ``0-10^30`` is one line); None stays None."""
    import numpy as np

    return select_ranks(text, np.unique(trace.events.rank).tolist(), flag)


def _ratio(x: float | None) -> str:
    return "-" if x is None else f"{x:.3f}x"


def render(c: Comparison) -> str:
    head = (f"A = {c.label_a}\nB = {c.label_b}\n"
            f"iteration time: A {fmt_us(c.iteration_a_us)} us, B {fmt_us(c.iteration_b_us)} us,"
            f" B/A {_ratio(c.iteration_ratio)}")
    table = format_table(
        ["operator", "cat", "count_a", "count_b", "mean_a_us", "mean_b_us", "diff_us", "ratio"],
        [[o.name, o.category, o.count_a, o.count_b, fmt_us(o.mean_a_us), fmt_us(o.mean_b_us),
          fmt_us(o.diff_us), _ratio(o.ratio)] for o in c.ops],
        title="\nOperators (B - A)", left=2)
    more = (f"\n({len(c.ops)} of {c.num_ops} operators shown; --head 0 shows all)"
            if len(c.ops) < c.num_ops else "")
    return head + "\n" + table + more


def default_xlsx(path_a: str) -> Path:
    """Bare ``--xlsx`` (dPRO's switch): ``compare.xlsx`` in A's trace directory."""
    p = Path(path_a)
    return (p if p.is_dir() else p.parent) / "compare.xlsx"


def run(opts: Any) -> Result:
    from echo_sim.load import load_trace

    pa, pb = opts.paths
    xlsx = (default_xlsx(pa) if opts.xlsx is True else opts.xlsx) if opts.xlsx else None
    for flag, out in (("--csv", opts.csv), ("--xlsx", xlsx)):
        if out:
            check_output(flag, out, force=opts.force)  # before the work
    for flag, text in (("--ranks-a", opts.ranks_a), ("--ranks-b", opts.ranks_b)):
        check_ranks(text, flag)  # before the work
    ta = load_trace(pa)
    tb = ta if pb == pa else load_trace(pb)
    ra = parse_ranks(opts.ranks_a, ta, "--ranks-a")
    rb = parse_ranks(opts.ranks_b, tb, "--ranks-b")
    label_a = pa + (f" ranks {opts.ranks_a}" if ra is not None else "")
    label_b = pb + (f" ranks {opts.ranks_b}" if rb is not None else "")
    full = compare(ta, tb, ranks_a=ra, ranks_b=rb, sort=opts.sort,
                   label_a=label_a, label_b=label_b)
    notes: list[str] = []
    if opts.csv:
        with output_file("--csv", opts.csv, force=opts.force) as tmp:
            write_csv(tmp, CSV_COLUMNS, [[getattr(o, k) for k in CSV_COLUMNS] for o in full.ops])
        notes.append(f"wrote {opts.csv}")
    if xlsx is not None:
        with output_file("--xlsx", xlsx, force=opts.force) as tmp:
            write_xlsx(full, tmp)
        notes.append(f"wrote {xlsx}")
    shown = full if opts.head == 0 else Comparison(
        full.label_a, full.label_b, full.iteration_a_us, full.iteration_b_us,
        full.ops[:opts.head], full.num_ops)
    return Result("\n".join([render(shown), *notes]), shown.to_dict())


COMMAND = Command(
    name="compare",
    help="compare two traces (or two sets of ranks) operator by operator",
    description=DESCRIPTION,
    run=run,
    paths=2,
    args=(
        arg("--sort", choices=COMPARE_SORT_KEYS, default="diff", nargs="?", const="ratio",
            help="order: diff (largest |B - A| first), ratio, mean_a, mean_b, total_a, "
                 "total_b, name; default diff (a bare --sort, dPRO's switch, is ratio)"),
        arg("--head", type=int_in(0, 2**31), default=30, metavar="N",
            help="show the first N operators (0: all); default 30"),
        arg("--csv", metavar="FILE", help="also write every operator as CSV"),
        arg("--xlsx", metavar="FILE", nargs="?", const=True, default=None,
            help="also write an Excel workbook (sheets: operators, summary); bare --xlsx: "
                 "compare.xlsx in A's trace directory"),
        arg("--force", action="store_true",
            help="replace output files (--csv, --xlsx) that exist"),
        arg("--ranks-a", metavar="RANKS", help="use only these ranks of A, e.g. 0,2-3"),
        arg("--ranks-b", metavar="RANKS", help="use only these ranks of B"),
    ),
    epilog="example: python -m echo_sim compare run1/ run2/ --xlsx diff.xlsx",
)
