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

__all__ = ["BYTES_PER_COUNTER", "BYTES_PER_SLICE", "PERFETTO_LIMIT_BYTES", "Combined",
           "combine", "default_output", "estimate_bytes", "parse_filter", "perfetto_subset",
           "select_rows", "take_ranks"]

PERFETTO_LIMIT_BYTES = 500 * 10**6
"""Perfetto's UI fails near 1 GB of JSON (its in-browser memory); ``combine`` keeps a rank /
step subset by default when the file would pass this."""
BYTES_PER_SLICE = 230
"""JSON bytes of one ``X`` slice with its args (measured on echo traces: 180–260)."""
BYTES_PER_COUNTER = 90
"""JSON bytes of one counter sample."""


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


def estimate_bytes(trace: Trace) -> int:
    """Uncompressed JSON size of :func:`combine`'s file, estimated from the row counts."""
    return len(trace.events) * BYTES_PER_SLICE + len(trace.counters) * BYTES_PER_COUNTER


def take_ranks(trace: Trace, ranks: list[int]) -> Trace:
    """The trace restricted to ``ranks`` (events, comm args, counters, rank infos, DAGs)."""
    keep = np.isin(trace.events.rank, np.asarray(ranks, np.int64))
    new_row = np.cumsum(keep) - 1
    k = trace.counters
    ck = np.isin(k.rank, np.asarray(ranks, np.int64))
    wanted = set(ranks)
    return replace(
        trace, events=trace.events.take(keep),
        comm_args={int(new_row[r]): a for r, a in trace.comm_args.items() if keep[r]},
        counters=type(k)(k.rank[ck], k.ts_us[ck], k.series[ck], k.value[ck]),
        ranks={r: i for r, i in trace.ranks.items() if r in wanted},
        dags={r: trace.dags[r] for r in trace.dags if r in wanted})


def perfetto_subset(trace: Trace, *, limit_bytes: int | None = None) -> tuple[Trace, str]:
    """``(trace, "")`` when its combined JSON fits ``limit_bytes`` (:func:`estimate_bytes`);
    else a subset that does, and a one-line note saying what was kept: the first captured
    step, then as many of the lowest ranks as fit (``limit_bytes`` None:
    :data:`PERFETTO_LIMIT_BYTES`)."""
    if limit_bytes is None:
        limit_bytes = PERFETTO_LIMIT_BYTES
    size = estimate_bytes(trace)
    if size <= limit_bytes:
        return trace, ""
    what = []
    if len(trace.steps) > 1:
        trace = replace(trace, comm_args=dict(trace.comm_args))
        trace.keep_steps(trace.steps[:1])
        what.append(f"step {trace.steps[0]}")
    ranks = sorted(set(trace.ranks) | set(np.unique(trace.events.rank).tolist()))
    if estimate_bytes(trace) > limit_bytes and len(ranks) > 1:
        per_rank = estimate_bytes(trace) / len(ranks)
        n = max(1, int(limit_bytes // per_rank))
        trace = take_ranks(trace, ranks[:n])
        what.append(f"ranks {ranks[0]}-{ranks[n - 1]} of {len(ranks)}")
    return trace, (f"the whole trace would be ~{size / 1e6:,.0f} MB of JSON, past what "
                   f"Perfetto opens (~{limit_bytes / 1e6:,.0f} MB): wrote "
                   f"{' and '.join(what) or 'it anyway'} (--step / --ranks choose, --all "
                   "writes everything)")
