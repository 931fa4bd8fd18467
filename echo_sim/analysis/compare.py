"""Two traces (or two sets of ranks of one trace) operator by operator (dPRO's ``compare``).

For every operator (event name) in either side: occurrences, mean duration per occurrence
over the side's ranks and captured steps, ``diff_us = mean_b_us − mean_a_us`` and
``ratio = mean_b_us / mean_a_us`` (None when an operator is missing on one side or A's mean
is 0). The summary compares iteration times (median over steps of the slowest rank, as
:func:`echo_sim.analysis.collect.collect` defines it).

Units: microseconds.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from echo_sim.analysis.collect import collect
from echo_sim.analysis.statistic import step_grid
from echo_sim.errors import EchoError
from echo_sim.trace.model import CAT_NAMES, Trace

__all__ = ["COMPARE_SORT_KEYS", "Comparison", "OpDiff", "Side", "compare",
           "comparison_from_sides", "subset_ranks", "write_xlsx"]

COMPARE_SORT_KEYS: tuple[str, ...] = ("diff", "ratio", "mean_a", "mean_b", "total_a",
                                      "total_b", "name")
"""Valid ``sort`` values: ``diff`` by |difference|, the rest descending except ``name``."""


@dataclass(frozen=True)
class OpDiff:
    """One operator on both sides (None where the side lacks it)."""

    name: str
    category: str
    count_a: int
    count_b: int
    mean_a_us: float | None
    mean_b_us: float | None
    total_a_us: float
    total_b_us: float
    diff_us: float | None
    ratio: float | None


@dataclass(frozen=True)
class Comparison:
    """What :func:`compare` returns; ``to_dict`` is the ``--json`` form."""

    label_a: str
    label_b: str
    iteration_a_us: float
    iteration_b_us: float
    ops: list[OpDiff]
    num_ops: int  # before head

    @property
    def iteration_ratio(self) -> float | None:
        return self.iteration_b_us / self.iteration_a_us if self.iteration_a_us > 0 else None

    def to_dict(self) -> dict[str, Any]:
        return {"a": self.label_a, "b": self.label_b, "iteration_a_us": self.iteration_a_us,
                "iteration_b_us": self.iteration_b_us,
                "iteration_diff_us": self.iteration_b_us - self.iteration_a_us,
                "iteration_ratio": self.iteration_ratio, "num_ops": self.num_ops,
                "ops": [asdict(o) for o in self.ops]}


def subset_ranks(trace: Trace, ranks: Sequence[int] | None) -> Trace:
    """The events of ``ranks`` only (all ranks when None); raises on an unknown rank."""
    if ranks is None:
        return trace
    have = sorted(set(np.unique(trace.events.rank).tolist()))
    bad = sorted(set(ranks) - set(have))
    if bad:
        raise EchoError(f"rank(s) {bad} not in trace {trace.source or '<memory>'}; "
                        f"it has ranks {have}")
    keep = np.isin(trace.events.rank, list(ranks))
    return replace(trace, events=trace.events.take(keep),
                   ranks={r: i for r, i in trace.ranks.items() if r in set(ranks)},
                   comm_args={}, dags={r: g for r, g in trace.dags.items() if r in set(ranks)})


def _side(trace: Trace) -> dict[str, tuple[str, int, float]]:
    """name → (category, count, total_us) over captured steps."""
    grid = step_grid(trace)
    ev = trace.events
    name = ev.name[grid.rows].astype(np.int64)
    count = np.bincount(name, minlength=len(trace.names))
    total = np.bincount(name, weights=ev.dur_us[grid.rows], minlength=len(trace.names))
    cat = np.zeros(len(trace.names), dtype=np.int64)
    cat[name] = ev.cat[grid.rows]
    return {trace.names[i]: (CAT_NAMES[int(cat[i])], int(count[i]), float(total[i]))
            for i in np.flatnonzero(count)}


def _sort_key(sort: str) -> Callable[[OpDiff], Any]:
    def neg(x: float | None) -> float:
        return -x if x is not None else float("inf")

    keys: dict[str, Callable[[OpDiff], Any]] = {
        "diff": lambda o: (neg(abs(o.diff_us) if o.diff_us is not None else None), o.name),
        "ratio": lambda o: (neg(o.ratio), o.name),
        "mean_a": lambda o: (neg(o.mean_a_us), o.name),
        "mean_b": lambda o: (neg(o.mean_b_us), o.name),
        "total_a": lambda o: (-o.total_a_us, o.name),
        "total_b": lambda o: (-o.total_b_us, o.name),
        "name": lambda o: o.name,
    }
    if sort not in keys:
        raise EchoError(f"unknown sort key {sort!r}; choose from {', '.join(COMPARE_SORT_KEYS)}")
    return keys[sort]


def compare(a: Trace, b: Trace, *, ranks_a: Sequence[int] | None = None,
            ranks_b: Sequence[int] | None = None, sort: str = "diff",
            head: int | None = None, label_a: str = "A", label_b: str = "B") -> Comparison:
    """Operator-by-operator comparison of ``a`` (restricted to ``ranks_a``) and ``b``."""
    _sort_key(sort)  # a bad key fails before the work
    if head is not None and head < 0:
        raise EchoError(f"--head must be >= 0, got {head}")
    ta, tb = subset_ranks(a, ranks_a), subset_ranks(b, ranks_b)
    return comparison_from_sides(_side(ta), _side(tb),
                                 iteration_a_us=collect(ta).iteration_time_us,
                                 iteration_b_us=collect(tb).iteration_time_us, sort=sort,
                                 head=head, label_a=label_a, label_b=label_b)


Side = dict[str, tuple[str, int, float]]
"""name → (category, occurrences, total duration in µs) over one side's captured steps."""


def comparison_from_sides(sa: Side, sb: Side, *, iteration_a_us: float, iteration_b_us: float,
                          sort: str = "diff", head: int | None = None, label_a: str = "A",
                          label_b: str = "B") -> Comparison:
    """:class:`Comparison` from each side's per-operator counts and totals and iteration
    time; the out-of-core engine computes those with DuckDB."""
    key = _sort_key(sort)
    if head is not None and head < 0:
        raise EchoError(f"--head must be >= 0, got {head}")
    ops: list[OpDiff] = []
    for name in sorted(set(sa) | set(sb)):
        cat_a, na, tot_a = sa.get(name, ("", 0, 0.0))
        cat_b, nb, tot_b = sb.get(name, ("", 0, 0.0))
        ma = tot_a / na if na else None
        mb = tot_b / nb if nb else None
        diff = mb - ma if ma is not None and mb is not None else None
        ratio = mb / ma if ma and mb is not None else None
        ops.append(OpDiff(name=name, category=cat_a or cat_b, count_a=na, count_b=nb,
                          mean_a_us=ma, mean_b_us=mb, total_a_us=tot_a, total_b_us=tot_b,
                          diff_us=diff, ratio=ratio))
    ops.sort(key=key)
    num = len(ops)
    if head is not None:
        ops = ops[:head]
    return Comparison(label_a=label_a, label_b=label_b, iteration_a_us=iteration_a_us,
                      iteration_b_us=iteration_b_us, ops=ops, num_ops=num)


XLSX_COLUMNS: tuple[tuple[str, str], ...] = (
    ("name", "operator"), ("category", "category"), ("count_a", "count A"),
    ("count_b", "count B"), ("mean_a_us", "mean A (us)"), ("mean_b_us", "mean B (us)"),
    ("diff_us", "diff B-A (us)"), ("ratio", "ratio B/A"), ("total_a_us", "total A (us)"),
    ("total_b_us", "total B (us)"),
)


def write_xlsx(cmp: Comparison, path: str | Path) -> Path:
    """An Excel workbook: sheet ``operators`` (one row per operator) and ``summary``, written
    where told (its directory must exist; the CLI writes through
    :func:`echo_sim.commands.outputs.output_file`: atomic, link-safe)."""
    from echo_sim.render.xlsx import workbook

    p = Path(path)
    with workbook(p) as wb:
        bold = wb.add_format({"bold": True})
        num = wb.add_format({"num_format": "0.000"})
        ws = wb.add_worksheet("operators")
        for j, (_, title) in enumerate(XLSX_COLUMNS):
            ws.write_string(0, j, title, bold)
        for i, op in enumerate(cmp.ops, start=1):
            for j, (attr, _) in enumerate(XLSX_COLUMNS):
                v = getattr(op, attr)
                if isinstance(v, str):
                    ws.write_string(i, j, v)
                elif v is None or v != v:
                    ws.write_blank(i, j, None)
                elif isinstance(v, int):
                    ws.write_number(i, j, v)
                else:
                    ws.write_number(i, j, float(v), num)
        ws.freeze_panes(1, 1)
        ws.set_column(0, 0, max([12] + [len(o.name) for o in cmp.ops[:200]]))
        ws.set_column(1, len(XLSX_COLUMNS) - 1, 14)
        sm = wb.add_worksheet("summary")
        rows: list[tuple[str, Any]] = [
            ("A", cmp.label_a), ("B", cmp.label_b),
            ("iteration A (us)", cmp.iteration_a_us), ("iteration B (us)", cmp.iteration_b_us),
            ("iteration ratio B/A", cmp.iteration_ratio), ("operators", cmp.num_ops),
        ]
        for i, (k, v) in enumerate(rows):
            sm.write_string(i, 0, k, bold)
            if isinstance(v, str):
                sm.write_string(i, 1, v)
            elif v is None or v != v:
                sm.write_blank(i, 1, None)
            else:
                sm.write_number(i, 1, float(v))
        sm.set_column(0, 1, 24)
    return p
