"""The columnar trace store: a directory of Parquet files and one ``store.json``.

Layout (``python -m echo_sim convert PATH --to DIR`` writes it)::

    DIR/store.json                    what is below, steps, groups, notes (STORE_FORMAT)
    DIR/names.parquet                 id int32, name string   (event names, interned)
    DIR/kinds.parquet                 id int32, kind string   (module class names)
    DIR/ranks.json                    one RankInfo per rank (meta.json as the loader read it)
    DIR/events/part-00000.parquet     one row per event, columns EVENT_COLUMNS, a few ranks
    DIR/counters/part-00000.parquet   rank, ts_us, series (id into counter_names), value
    DIR/comm_args/part-00000.parquet  rank, row (the event's row in its part), args (JSON)
    DIR/dags/part-00000.parquet       rank, kind ("node"/"edge"), src, dst, attrs (JSON)

Each part holds whole ranks (one rank group), rows sorted by (rank, ts_us); the columns are
the :class:`~echo_sim.trace.model.Events` columns with their dtypes, names (and kinds,
groups, counter series) as dense int ids into the tables above: the dictionary encoding of
the in-memory :class:`~echo_sim.trace.model.Trace`, kept global so every part and every
query agrees on them. Every event of every captured step is stored; ``steps`` says which
steps an analysis keeps (those complete on every rank) and ``drop_other_steps`` whether the
loader drops the rest (a crashed run), as :meth:`Trace.keep_steps` does. ``ts_shift_us``
holds, per rank whose file had a later time base, the µs to add to its times (applied on
reading, exactly as the echo loader's rebase: ``ts += (base_r − min base) / 1000``).

pyarrow is an optional dependency (extra ``store``): importing this module needs none.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from echo_sim.errors import EchoError, TraceFormatError
from echo_sim.trace.model import _COLUMNS

__all__ = [
    "EVENT_COLUMNS",
    "STORE_FILE",
    "STORE_FORMAT",
    "PartInfo",
    "StoreInfo",
    "is_store",
    "read_store_info",
    "require_pyarrow",
]

STORE_FORMAT = "echo-store/1"
"""``format`` of ``store.json``."""
STORE_FILE = "store.json"

EVENT_COLUMNS: tuple[str, ...] = tuple(_COLUMNS)
"""Columns of an events part, in order (the :class:`Events` columns)."""


def require_pyarrow() -> Any:
    """The ``pyarrow.parquet`` module, or an :class:`EchoError` saying how to install it."""
    try:
        import pyarrow.parquet as pq
    except ImportError:
        raise EchoError("the trace store needs pyarrow: pip install 'echo-sim[store]' "
                        "(or pip install 'pyarrow>=14' 'duckdb>=1.0')") from None
    return pq


def event_schema() -> Any:
    """The pyarrow schema of an events part."""
    import pyarrow as pa

    return pa.schema([(c, pa.from_numpy_dtype(dt)) for c, (dt, _) in _COLUMNS.items()])


@dataclass(frozen=True)
class PartInfo:
    """One rank group: its files (relative to the store) and what it holds."""

    index: int
    ranks: tuple[int, ...]
    rows: int
    events: str
    counters: str
    comm_args: str
    dags: str

    def to_dict(self) -> dict[str, Any]:
        return {"index": self.index, "ranks": list(self.ranks), "rows": self.rows,
                "events": self.events, "counters": self.counters,
                "comm_args": self.comm_args, "dags": self.dags}


@dataclass(frozen=True)
class StoreInfo:
    """What ``store.json`` says (see the module docstring); ``root`` is the directory."""

    root: Path
    source_format: str
    source: str
    steps: list[int]
    drop_other_steps: bool
    groups: list[tuple[int, ...]]
    counter_names: list[str]
    notes: list[str]
    parts: list[PartInfo]
    num_events: int
    ts_shift_us: dict[int, float] = field(default_factory=dict)

    @property
    def ranks(self) -> list[int]:
        return sorted(r for p in self.parts for r in p.ranks)

    def path(self, rel: str) -> Path:
        return self.root / rel

    def to_dict(self) -> dict[str, Any]:
        return {"format": STORE_FORMAT, "source_format": self.source_format,
                "source": self.source, "steps": self.steps,
                "drop_other_steps": self.drop_other_steps,
                "groups": [list(g) for g in self.groups], "counter_names": self.counter_names,
                "notes": self.notes, "num_events": self.num_events,
                "ts_shift_us": {str(r): s for r, s in self.ts_shift_us.items()},
                "parts": [p.to_dict() for p in self.parts]}


def is_store(path: str | Path) -> bool:
    """Whether ``path`` is a store directory (it holds a ``store.json`` of this format)."""
    f = Path(path) / STORE_FILE
    if not f.is_file():
        return False
    try:
        with f.open("rb") as fh:
            head = fh.read(4096)
    except OSError:
        return False
    return STORE_FORMAT.encode() in head


def read_store_info(path: str | Path) -> StoreInfo:
    """Read ``store.json``; raises :class:`TraceFormatError` naming the file when malformed."""
    root = Path(path)
    f = root / STORE_FILE
    try:
        doc = json.loads(f.read_text())
        if doc.get("format") != STORE_FORMAT:
            raise ValueError(f"format is {doc.get('format')!r}, expected {STORE_FORMAT!r}")
        parts = [PartInfo(index=int(p["index"]), ranks=tuple(int(r) for r in p["ranks"]),
                          rows=int(p["rows"]), events=str(p["events"]),
                          counters=str(p["counters"]), comm_args=str(p["comm_args"]),
                          dags=str(p["dags"])) for p in doc["parts"]]
        return StoreInfo(
            root=root, source_format=str(doc["source_format"]), source=str(doc["source"]),
            steps=[int(s) for s in doc["steps"]],
            drop_other_steps=bool(doc["drop_other_steps"]),
            groups=[tuple(int(r) for r in g) for g in doc["groups"]],
            counter_names=[str(c) for c in doc["counter_names"]],
            notes=[str(n) for n in doc["notes"]], parts=parts,
            num_events=int(doc["num_events"]),
            ts_shift_us={int(r): float(s) for r, s in doc.get("ts_shift_us", {}).items()})
    except OSError as e:
        raise TraceFormatError(f"{f}: cannot read the store ({e.strerror or e})") from None
    except (ValueError, KeyError, TypeError) as e:
        raise TraceFormatError(f"{f}: malformed store.json ({e})") from None
