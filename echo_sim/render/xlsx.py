"""Tables to an Excel workbook (xlsxwriter): one sheet per table, header row frozen.

Used by ``statistic --xlsx`` (dPRO's ``--xlsx`` switch wrote the statistic table to Excel).
Numbers stay numbers (3 decimals shown), None and NaN are blank cells.

Workbooks are built in memory (:func:`workbook`) and written in one piece: xlsxwriter's own
writer leaves its zip file open when the disk fills, and closing it again at exit prints a
traceback; in memory it also writes no temporary files of its own.
"""

from __future__ import annotations

import io
import math
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

__all__ = ["workbook", "write_tables_xlsx"]


@contextmanager
def workbook(path: str | Path) -> Iterator[Any]:
    """An xlsxwriter ``Workbook`` to fill; written to ``path`` when the block ends normally
    (the directory must exist; the CLI gives a temporary path of
    :func:`echo_sim.commands.outputs.output_file`)."""
    import xlsxwriter

    buf = io.BytesIO()
    wb = xlsxwriter.Workbook(buf, {"in_memory": True})
    yield wb
    wb.close()
    Path(path).write_bytes(buf.getvalue())

_MAX_SHEET_NAME = 31  # Excel's limit


def write_tables_xlsx(path: str | Path,
                      sheets: Mapping[str, tuple[Sequence[str], Sequence[Sequence[Any]]]]) -> Path:
    """Write ``{sheet: (headers, rows)}`` into ``path`` (.xlsx); returns the path."""
    p = Path(path)
    with workbook(p) as wb:
        bold = wb.add_format({"bold": True})
        num = wb.add_format({"num_format": "0.000"})
        for name, (headers, rows) in sheets.items():
            ws = wb.add_worksheet(name[:_MAX_SHEET_NAME])
            for j, h in enumerate(headers):
                ws.write_string(0, j, str(h), bold)
            for i, row in enumerate(rows, start=1):
                for j, v in enumerate(row):
                    _cell(ws, i, j, v, num)
            ws.freeze_panes(1, 1)
            width = max([12] + [len(str(r[0])) for r in list(rows)[:200] if r])
            ws.set_column(0, 0, min(width, 80))
            ws.set_column(1, max(len(headers) - 1, 1), 14)
    return p


def _cell(ws: Any, i: int, j: int, v: Any, num: Any) -> None:
    if v is None or (isinstance(v, float) and not math.isfinite(v)):
        ws.write_blank(i, j, None)
    elif isinstance(v, bool):
        ws.write_boolean(i, j, v)
    elif isinstance(v, int):
        ws.write_number(i, j, v)
    elif isinstance(v, float):
        ws.write_number(i, j, v, num)
    else:
        ws.write_string(i, j, str(v))
