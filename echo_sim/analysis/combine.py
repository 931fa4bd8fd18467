"""Merge every rank into one Perfetto-loadable trace (dPRO's ``combine``).

One process per rank (``pid`` = global rank, named ``rank N (host)``), threads as in the trace
contract, timestamps on the clock the loader aligned across ranks, shifted to start near 0
(``otherData.base_time_ns`` holds the shift; small times keep the 3-decimal rounding exact).
``load_trace`` reads the file back as its ranks (``otherData.format`` ``echo-combined/1``). ``filter`` keeps only the
named communication operations (compute and step slices are always kept): each pattern is an
event name (``Comm.bucket0``), a name without the ``Comm.`` prefix, or a collective type
(``all_reduce``), and may be a shell glob (``Comm.layer*``).
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from echo_sim.errors import EchoError
from echo_sim.trace.export import chrome_events, write_chrome
from echo_sim.trace.model import COLLECTIVES, Cat, Trace

__all__ = ["Combined", "combine", "default_output", "parse_filter", "select_rows"]


@dataclass(frozen=True)
class Combined:
    """What :func:`combine` wrote."""

    path: Path
    num_events: int  # X slices written
    num_ranks: int
    num_comm_kept: int
    num_comm_dropped: int

    def to_dict(self) -> dict[str, Any]:
        return {"output": str(self.path), "num_events": self.num_events,
                "num_ranks": self.num_ranks, "num_comm_kept": self.num_comm_kept,
                "num_comm_dropped": self.num_comm_dropped}


def parse_filter(text: str | None) -> list[str]:
    """``"a, b*"`` → ``["a", "b*"]``; empty or None → no filter."""
    if not text:
        return []
    return [p.strip() for p in text.split(",") if p.strip()]


def select_rows(trace: Trace, patterns: list[str]) -> np.ndarray:
    """Rows to keep: every non-Comm event, and Comm events matching any pattern.

    Raises :class:`EchoError` when patterns are given but match no Comm event.
    """
    ev = trace.events
    rows = np.arange(len(ev))
    if not patterns:
        return rows
    is_comm = ev.cat == Cat.COMM
    keep_name = np.zeros(len(trace.names), dtype=bool)
    for i, name in enumerate(trace.names):
        short = name[5:] if name.startswith("Comm.") else name
        keep_name[i] = any(fnmatch.fnmatchcase(name, p) or fnmatch.fnmatchcase(short, p)
                           for p in patterns)
    keep_coll = np.asarray([any(fnmatch.fnmatchcase(c, p) for p in patterns)
                            for c in COLLECTIVES] + [False], dtype=bool)  # index -1: none
    match = keep_name[ev.name] | keep_coll[ev.coll.astype(np.int64)]
    if not (is_comm & match).any():
        names = sorted({trace.names[i] for i in np.unique(ev.name[is_comm])})
        shown = ", ".join(names[:8]) + (" ..." if len(names) > 8 else "")
        raise EchoError(f"--filter {','.join(patterns)!r} matches no communication op; "
                        f"the trace has: {shown or 'none'}")
    return rows[~is_comm | match]


def _relative(trace: Trace) -> tuple[Trace, int]:
    """The trace with times shifted by the whole µs of its earliest event (and that shift)."""
    ev = trace.events
    finite = ev.ts_us[np.isfinite(ev.ts_us)]
    c_finite = trace.counters.ts_us[np.isfinite(trace.counters.ts_us)]
    lows = [float(a.min()) for a in (finite, c_finite) if a.size]
    base_us = int(np.floor(min(lows))) if lows else 0
    if base_us == 0:
        return trace, 0
    events = replace(ev, ts_us=ev.ts_us - base_us)
    counters = replace(trace.counters, ts_us=trace.counters.ts_us - base_us)
    return replace(trace, events=events, counters=counters), base_us


def default_output(path: str | Path) -> Path:
    """``combined.json`` next to the input: inside it when a directory, beside it when a file."""
    p = Path(path)
    return (p if p.is_dir() else p.parent) / "combined.json"


def combine(trace: Trace, output: str | Path, *, filter: list[str] | None = None,
            overwrite: bool = False) -> Combined:
    """Write every rank of ``trace`` into one Chrome trace at ``output`` (.gz: gzipped)."""
    patterns = filter or []
    rows = select_rows(trace, patterns)
    shifted, base_us = _relative(trace)
    # no filter: all rows, memory counters included
    events = chrome_events(shifted, rows=rows if patterns else None)
    del shifted
    is_comm = trace.events.cat == Cat.COMM
    kept_comm = int(is_comm[rows].sum())
    other = {
        "format": "echo-combined/1",
        "source": trace.source,
        "source_format": trace.source_format,
        "ranks": sorted(trace.ranks) or sorted(np.unique(trace.events.rank).tolist()),
        "world_size": trace.world_size,
        "steps": trace.steps,
        "filter": patterns,
        # times are µs since this offset on the loaded trace's clock (kept exact: absolute
        # Unix µs in float64 are only 0.25 µs apart, which rounding to 3 decimals breaks)
        "base_time_ns": base_us * 1000,
    }
    path = write_chrome(output, events, other_data=other, overwrite=overwrite)
    return Combined(path=path, num_events=int(rows.size),
                    num_ranks=len(np.unique(trace.events.rank[rows])),
                    num_comm_kept=kept_comm, num_comm_dropped=int(is_comm.sum()) - kept_comm)
