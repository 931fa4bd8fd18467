"""Plain aligned text tables and CSV files, shared by the analysis commands.

Numbers are formatted by column kind: times in µs with thousands separators and up to 3
decimals, shares as percentages, counts as integers; None / NaN print as ``-``. Label cells
longer than :data:`LABEL_WIDTH` characters (C++ kernel names run to 500) are shortened in the
middle with ``…`` in text tables only: CSV, Excel and ``--json`` keep the full names.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from echo_sim.errors import EchoError

__all__ = ["LABEL_WIDTH", "fmt_num", "fmt_pct", "fmt_us", "format_table", "shorten",
           "write_csv"]

LABEL_WIDTH = 60
"""Widest label cell of a text table (characters)."""


def shorten(text: str, width: int = LABEL_WIDTH) -> str:
    """``text`` cut to at most ``width`` characters: a leading ``void `` and a C++ argument
    list ``(...)`` go first, then the middle becomes ``…`` (the head keeps 2/3 of the room,
    the tail, where template and kernel suffixes differ, the rest)."""
    if len(text) <= width:
        return text
    t = text[5:] if text.startswith("void ") else text
    if len(t) > width and t.endswith(")") and "(" in t:
        t = t[:t.index("(")] + "(…)"
    if len(t) <= width:
        return t
    room = max(width - 1, 2)
    head = (2 * room) // 3
    return t[:head] + "…" + t[len(t) - (room - head):]


def fmt_us(x: float | None) -> str:
    """A duration in µs with 3 decimals (the trace's resolution): ``1,234.500``; ``-`` for None/NaN."""
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "-"
    return f"{x:,.3f}"


def fmt_pct(x: float | None) -> str:
    """A fraction as a percentage: ``0.1234`` → ``12.3%``."""
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "-"
    return f"{100.0 * x:.1f}%"


def fmt_num(x: Any) -> str:
    """Integers with separators, floats with 3 significant decimals, the rest as str."""
    if x is None:
        return "-"
    if isinstance(x, bool):
        return "yes" if x else ""
    if isinstance(x, int):
        return f"{x:,}"
    if isinstance(x, float):
        return "-" if math.isnan(x) else f"{x:,.3f}"
    return str(x)


def format_table(headers: Sequence[str], rows: Sequence[Sequence[Any]], *,
                 title: str | None = None, left: int = 1,
                 label_width: int | None = LABEL_WIDTH) -> str:
    """Rows of already-formatted cells (anything is ``str()``-ed) as an aligned text table.

    The first ``left`` columns are left-aligned (labels), the rest right-aligned (numbers).
    Label cells are :func:`shorten`-ed to ``label_width`` characters (None: never).
    """
    cells = [[c if isinstance(c, str) else fmt_num(c) for c in row] for row in rows]
    if label_width is not None:
        cells = [[shorten(c, label_width) if j < left else c for j, c in enumerate(row)]
                 for row in cells]
    widths = [len(h) for h in headers]
    for row in cells:
        for j, c in enumerate(row):
            widths[j] = max(widths[j], len(c))

    def line(items: Sequence[str]) -> str:
        return "  ".join(c.ljust(widths[j]) if j < left else c.rjust(widths[j])
                         for j, c in enumerate(items)).rstrip()

    out = []
    if title:
        out.append(title)
    out.append(line(list(headers)))
    out.append("  ".join("-" * w for w in widths))
    out.extend(line(r) for r in cells)
    if not cells:
        out.append("(none)")
    return "\n".join(out)


def write_csv(path: str | Path, headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> Path:
    """Write a CSV file (raw values, None as empty) where told: its directory must exist.
    Raises EchoError if it cannot be written. The CLI writes through
    :func:`echo_sim.commands.outputs.output_file` (atomic, link-safe)."""
    p = Path(path)
    try:
        with open(p, "w", newline="", encoding="utf-8") as f:
            w = csv.writer(f)
            w.writerow(headers)
            for row in rows:
                w.writerow(["" if v is None or (isinstance(v, float) and math.isnan(v)) else v
                            for v in row])
    except OSError as e:
        raise EchoError(f"cannot write CSV {p}: {e.strerror}") from e
    return p
