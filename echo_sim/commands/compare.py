"""``compare A B``: two traces (or two sets of ranks) operator by operator (dPRO's compare)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from echo_sim.analysis.compare import COMPARE_SORT_KEYS, Comparison, compare, write_xlsx
from echo_sim.analysis.tables import fmt_us, format_table, write_csv
from echo_sim.commands.checks import int_in, select_ranks
from echo_sim.commands.checks import parse_ranks as check_ranks
from echo_sim.commands.engine_args import ENGINE_ARGS, engine_of, memory_workers
from echo_sim.commands.outputs import check_output, output_file
from echo_sim.commands.spec import Command, Result, arg
from echo_sim.errors import ConfigError

__all__ = ["COMMAND", "parse_ranks", "render", "render_roles"]

DESCRIPTION = """\
Compare two traces operator by operator: for each event name, the number of occurrences
and the mean duration per occurrence on each side (over its ranks and captured steps),
the difference B - A and the ratio B / A. Durations in microseconds. The summary line
compares iteration times (median over steps of the slowest rank).

To compare two sets of ranks of one trace, give the same path twice with --ranks-a and
--ranks-b (e.g. compare T T --ranks-a 0 --ranks-b 1-3).

--by-role (dPRO's --option 3dcompare) lines the ranks of the two runs up by their parallel
role instead of their number: the coordinates in each rank's meta.json ("parallel":
{"dp": 1, "tp": 0, "pp": 0}, or training's *_parallel_rank) when both runs have them,
else roles read from the traces (pipeline stage from the forward operators a rank runs, its
index in each process group; a group whose collectives all follow the backward's start is
dp, else tp). Per role: iteration times of A and B, B - A, B / A, and its operators
(--head per role).
"""

CSV_COLUMNS = ("name", "category", "count_a", "count_b", "mean_a_us", "mean_b_us",
               "diff_us", "ratio", "total_a_us", "total_b_us")


def parse_ranks(text: str | None, trace: Any, flag: str) -> list[int] | None:
    """``"0,2-4"`` → ``[0, 2, 3, 4]``, each a rank of ``trace`` (ranges are checked, never
    expanded blindly: ``0-10^30`` is one line); None stays None."""
    import numpy as np

    return select_ranks(text, np.unique(trace.events.rank).tolist(), flag)


def _label(path: str, text: str | None, ranks: list[int] | None) -> str:
    return path + (f" ranks {text}" if ranks is not None else "")


def _engine(opts: Any) -> str:
    """The engine for two paths: duckdb needs both to be stores (``auto`` falls back to
    memory when one is not)."""
    from echo_sim.store import is_store

    engine = engine_of(opts)
    if engine == "duckdb" and not all(is_store(p) for p in opts.paths):
        if opts.engine == "auto" and opts.workers != "ray":
            return "memory"
        raise ConfigError("--engine duckdb compares two stores and "
                          f"{next(p for p in opts.paths if not is_store(p))} is none: convert "
                          "it first (python -m echo_sim convert PATH --to DIR)")
    return engine


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


def render_roles(c: Any, head: int) -> str:
    """The text of a by-role comparison (:class:`~echo_sim.analysis.compare_roles.RoleComparison`)."""
    out = [f"A = {c.label_a}\nB = {c.label_b}\nranks lined up by parallel role "
           f"({'meta.json coordinates' if c.role_source == 'meta' else 'read from the traces'})",
           format_table(
               ["role", "ranks_a", "ranks_b", "iter_a_us", "iter_b_us", "diff_us", "ratio"],
               [[r.label, ",".join(map(str, r.ranks_a)) or "-",
                 ",".join(map(str, r.ranks_b)) or "-", fmt_us(r.iteration_a_us),
                 fmt_us(r.iteration_b_us), fmt_us(r.iteration_diff_us),
                 _ratio(r.iteration_ratio)] for r in c.roles],
               title="\nRoles (B - A)", left=2)]
    for r in c.roles:
        if r.comparison is None:
            continue
        ops = r.comparison.ops if head == 0 else r.comparison.ops[:head]
        out.append(format_table(
            ["operator", "cat", "mean_a_us", "mean_b_us", "diff_us", "ratio"],
            [[o.name, o.category, fmt_us(o.mean_a_us), fmt_us(o.mean_b_us), fmt_us(o.diff_us),
              _ratio(o.ratio)] for o in ops],
            title=f"\nrole {r.label}: A ranks {r.ranks_a}, B ranks {r.ranks_b}", left=2))
    return "\n".join(out)


def _run_by_role(opts: Any) -> Result:
    from echo_sim.analysis.compare_roles import compare_by_role
    from echo_sim.load import load_trace

    for flag, value in (("--ranks-a", opts.ranks_a), ("--ranks-b", opts.ranks_b),
                        ("--csv", opts.csv), ("--xlsx", opts.xlsx)):
        if value:
            raise ConfigError(f"--by-role and {flag} exclude each other (roles pick the ranks; "
                              "--json gives every role's operators)")
    pa, pb = opts.paths
    ta = load_trace(pa)
    tb = ta if pb == pa else load_trace(pb)
    res = compare_by_role(ta, tb, sort=opts.sort, label_a=pa, label_b=pb)
    return Result(render_roles(res, opts.head), res.to_dict())


def default_xlsx(path_a: str) -> Path:
    """Bare ``--xlsx`` (dPRO's switch): ``compare.xlsx`` in A's trace directory."""
    p = Path(path_a)
    return (p if p.is_dir() else p.parent) / "compare.xlsx"


def run(opts: Any) -> Result:
    from echo_sim.load import load_trace

    if opts.by_role:
        return _run_by_role(opts)
    pa, pb = opts.paths
    xlsx = (default_xlsx(pa) if opts.xlsx is True else opts.xlsx) if opts.xlsx else None
    for flag, out in (("--csv", opts.csv), ("--xlsx", xlsx)):
        if out:
            check_output(flag, out, force=opts.force)  # before the work
    for flag, text in (("--ranks-a", opts.ranks_a), ("--ranks-b", opts.ranks_b)):
        check_ranks(text, flag)  # before the work
    if _engine(opts) == "duckdb":
        from echo_sim.outofcore import compare_store
        from echo_sim.store import read_store_info

        ra = select_ranks(opts.ranks_a, read_store_info(pa).ranks, "--ranks-a")
        rb = select_ranks(opts.ranks_b, read_store_info(pb).ranks, "--ranks-b")
        full = compare_store(pa, pb, ranks_a=ra, ranks_b=rb, sort=opts.sort,
                             label_a=_label(pa, opts.ranks_a, ra),
                             label_b=_label(pb, opts.ranks_b, rb), workers=opts.workers)
    else:
        ta = load_trace(pa, workers=memory_workers(opts.workers))
        tb = ta if pb == pa else load_trace(pb, workers=memory_workers(opts.workers))
        ra = parse_ranks(opts.ranks_a, ta, "--ranks-a")
        rb = parse_ranks(opts.ranks_b, tb, "--ranks-b")
        full = compare(ta, tb, ranks_a=ra, ranks_b=rb, sort=opts.sort,
                       label_a=_label(pa, opts.ranks_a, ra),
                       label_b=_label(pb, opts.ranks_b, rb))
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
        arg("--by-role", action="store_true",
            help="line ranks up by parallel role (dp/tp/pp coordinates), not rank number; "
                 "per role: iteration and operators of A and B (dPRO's 3dcompare)"),
        *ENGINE_ARGS,
    ),
    epilog="example: python -m echo_sim compare run1/ run2/ --xlsx diff.xlsx",
)
