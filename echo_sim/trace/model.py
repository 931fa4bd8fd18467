"""Columnar, interned model of a multi-rank training trace.

Every loader (echo_trace directories, ByteProfile/dPRO, Kineto) produces a :class:`Trace`;
every analysis, the replayer and the simulator read one. Nothing downstream knows which
format a trace came from.

Events are held as parallel numpy arrays (one row per event, sorted by rank then start
time), with names interned to integers: a 1,000,000-event, 64-rank trace costs about
100 bytes per event instead of a Python dict each.

Units: times are microseconds (``*_us``) on a clock aligned across ranks; sizes are bytes.

Busy time: an event spans ``ts_us``..``ts_us + dur_us``; ``busy_us`` is the part of that span
in which work actually ran. On GPU traces an event is one run of consecutive kernels and
``busy_us`` their summed kernel time (the trace's ``args.busy_us``); everywhere else it equals
``dur_us``. Invariant: ``0 <= busy_us <= dur_us`` (``busy_us == dur_us`` when ``dur_us < 0``).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any

import numpy as np

from echo_sim.textsafe import safe_text

__all__ = [
    "CAT_NAMES",
    "COLLECTIVES",
    "DEVICE_TID",
    "MAX_STEP",
    "MAX_WORLD_SIZE",
    "Cat",
    "Counters",
    "Events",
    "RankInfo",
    "STEP_COUNT_SERIES",
    "Trace",
    "TraceBuilder",
    "busy_within",
]


class Cat(IntEnum):
    """Event category; the prefix of the event name in the trace contract."""

    FW = 0
    BW = 1
    COMM = 2
    UPDATE = 3
    STEP = 4
    OTHER = 5


CAT_NAMES: tuple[str, ...] = ("FW", "BW", "Comm", "UPDATE", "STEP", "OTHER")
"""Display name per :class:`Cat` value (index = value)."""

STEP_COUNT_SERIES: tuple[str, ...] = ("minor_faults", "major_faults")
"""Counter series that are counts per step, not bytes: a STEP event's ``args.minor_faults`` /
``args.major_faults`` (the process's page faults during the step), one sample at the step's
end, as the per-step memory peaks."""

DEVICE_TID: int = 200
"""Lane of device stream 0: a loader puts GPU kernels and copies that belong to no FW / BW /
Comm / UPDATE event (a profiler trace's) as ``OTHER`` rows on tid ``DEVICE_TID + stream``.
``OTHER`` rows on lower tids are host work (CPU ops, I/O)."""

COLLECTIVES: tuple[str, ...] = (
    "all_reduce",
    "all_gather",
    "reduce_scatter",
    "broadcast",
    "reduce",
    "all_to_all",
    "gather",
    "scatter",
    "barrier",
    "send",
    "recv",
)
"""Collective type names; ``Events.coll`` holds an index into this tuple (-1: not a Comm)."""

_COLL_INDEX = {c: i for i, c in enumerate(COLLECTIVES)}

MAX_WORLD_SIZE = 1 << 20
"""Largest world size (and rank + 1) a loader accepts: 1,048,576 processes. Claimed sizes
are range-checked against it so nothing allocates per rank for a corrupt 10^12."""
MAX_STEP = (1 << 31) - 1
"""Largest step number (the ``step`` column is int32)."""

# Column name -> numpy dtype, and the value a row gets when the loader gives none.
_COLUMNS: dict[str, tuple[type, Any]] = {
    "rank": (np.int32, 0),
    "step": (np.int32, -1),  # captured step the event belongs to, -1 when outside any step
    "cat": (np.int8, int(Cat.OTHER)),
    "name": (np.int32, 0),  # index into Trace.names
    "tid": (np.int32, 0),  # track within the rank (0 compute, 1 steps, >=100 comm lanes)
    "ts_us": (np.float64, 0.0),
    "dur_us": (np.float64, 0.0),
    "occ": (np.int32, 0),  # occurrence of this name within (rank, step)
    "coll": (np.int16, -1),  # index into COLLECTIVES, -1 for non-Comm
    "nbytes": (np.int64, 0),  # Comm: whole-buffer bytes (nccl-tests convention)
    "group": (np.int32, -1),  # index into Trace.groups, -1 unknown
    "seq": (np.int64, -1),  # Comm: per-group (or per src->dst pair) sequence number
    "peer": (np.int32, -1),  # send/recv: the other global rank
    "kind": (np.int32, -1),  # index into Trace.kinds (module class name), -1 unknown
    "param_bytes": (np.int64, 0),
    "in_bytes": (np.int64, 0),
    "out_bytes": (np.int64, 0),
    "flops": (np.float64, 0.0),
    # time work ran inside the span (GPU: kernel time); NaN = not given, stored as dur_us
    "busy_us": (np.float64, np.nan),
}


def _busy_not_given() -> np.ndarray:
    return np.zeros(0, np.float64)


def busy_within(busy_us: np.ndarray, dur_us: np.ndarray) -> np.ndarray:
    """``busy_us`` made to hold the :class:`Events` invariant, vectorised: NaN (not given)
    becomes ``dur_us``, the rest is clipped to ``[0, dur_us]``."""
    busy = np.where(np.isnan(busy_us), dur_us, busy_us)
    return np.minimum(np.maximum(busy, 0.0), dur_us)


@dataclass
class Events:
    """Parallel arrays, one row per event; see ``_COLUMNS`` for the meaning of each.

    ``busy_us`` may be left out: it is then a copy of ``dur_us`` (every event busy for its
    whole span, as on CPU traces).
    """

    rank: np.ndarray
    step: np.ndarray
    cat: np.ndarray
    name: np.ndarray
    tid: np.ndarray
    ts_us: np.ndarray
    dur_us: np.ndarray
    occ: np.ndarray
    coll: np.ndarray
    nbytes: np.ndarray
    group: np.ndarray
    seq: np.ndarray
    peer: np.ndarray
    kind: np.ndarray
    param_bytes: np.ndarray
    in_bytes: np.ndarray
    out_bytes: np.ndarray
    flops: np.ndarray
    busy_us: np.ndarray = field(default_factory=_busy_not_given)

    def __post_init__(self) -> None:
        if self.busy_us.shape != self.dur_us.shape:
            if self.busy_us.size:
                raise ValueError(f"Events.busy_us has {self.busy_us.size} rows, dur_us "
                                 f"{self.dur_us.size}; give one per event or none")
            self.busy_us = self.dur_us.astype(np.float64, copy=True)

    def __len__(self) -> int:
        return int(self.ts_us.shape[0])

    @property
    def end_us(self) -> np.ndarray:
        """End time of every event (``ts_us + dur_us``)."""
        return self.ts_us + self.dur_us

    def take(self, index: np.ndarray) -> Events:
        """Rows selected by a boolean mask or an index array, as a new table."""
        return Events(**{c: getattr(self, c)[index] for c in _COLUMNS})

    @classmethod
    def empty(cls) -> Events:
        return cls(**{c: np.zeros(0, dtype=dt) for c, (dt, _) in _COLUMNS.items()})

    @classmethod
    def concat(cls, parts: Sequence[Events]) -> Events:
        if not parts:
            return cls.empty()
        return cls(**{c: np.concatenate([getattr(p, c) for p in parts]) for c in _COLUMNS})


@dataclass
class Counters:
    """Counter samples (memory): one row per (sample, series)."""

    rank: np.ndarray
    ts_us: np.ndarray
    series: np.ndarray  # index into Trace.counter_names
    value: np.ndarray  # float64

    def __len__(self) -> int:
        return int(self.ts_us.shape[0])

    @classmethod
    def empty(cls) -> Counters:
        return cls(
            np.zeros(0, np.int32), np.zeros(0, np.float64), np.zeros(0, np.int32),
            np.zeros(0, np.float64),
        )


@dataclass
class RankInfo:
    """What a loader knows of one process (from ``meta.json`` or the foreign format)."""

    rank: int
    world_size: int = 1
    local_rank: int = 0
    node_rank: int = 0
    host: str = ""
    device: str = "cpu"
    backend: str = ""
    clock_offset_us: float = 0.0
    source: str = ""  # the file or directory this rank was read from
    meta: dict[str, Any] = field(default_factory=dict)  # the full meta.json, or {}
    # what the trace file itself says of its rank (echo: trace.json's otherData and
    # baseTimeNanoseconds), for cross-checking against meta.json
    file_meta: dict[str, Any] = field(default_factory=dict)


@dataclass
class Trace:
    """A multi-rank trace: events, ranks, steps, and where it came from.

    ``events`` are sorted by (rank, ts_us). ``steps`` lists the steps every rank captured.
    ``dags`` holds the per-rank ``dag.gml`` graphs a loader found (may be empty: the
    dependency rules in :mod:`echo_sim.trace.graph` rebuild them from the events).
    ``comm_args`` keeps the free-form args of Comm events (DDP bucket parameter names),
    keyed by event row. ``notes`` are one-line warnings the loader gave while reading
    (steps dropped from a crashed run, a combined trace split back into ranks), for the CLI
    to print.
    """

    events: Events
    names: list[str]
    ranks: dict[int, RankInfo]
    steps: list[int]
    groups: list[tuple[int, ...]] = field(default_factory=list)
    kinds: list[str] = field(default_factory=list)
    counters: Counters = field(default_factory=Counters.empty)
    counter_names: list[str] = field(default_factory=list)
    # rank -> networkx.DiGraph; a Mapping (the echo loader's reads each dag.gml on first use)
    dags: Mapping[int, Any] = field(default_factory=dict)
    comm_args: dict[int, dict[str, Any]] = field(default_factory=dict)
    source_format: str = "echo"
    source: str = ""
    notes: list[str] = field(default_factory=list)

    # ----------------------------------------------------------------- lookups
    @property
    def world_size(self) -> int:
        return max((r.world_size for r in self.ranks.values()), default=len(self.ranks))

    def name_of(self, row: int) -> str:
        return self.names[int(self.events.name[row])]

    def name_id(self, name: str) -> int:
        """Interned id of ``name``; -1 when the trace has no such name."""
        try:
            return self.names.index(name)
        except ValueError:
            return -1

    def rank_rows(self, rank: int) -> np.ndarray:
        """Row indices of one rank's events (a contiguous range: rows are rank-sorted)."""
        r = self.events.rank
        lo = int(np.searchsorted(r, rank, side="left"))
        hi = int(np.searchsorted(r, rank, side="right"))
        return np.arange(lo, hi)

    def step_rows(self, rank: int, step: int) -> np.ndarray:
        """Row indices of one rank's events in one captured step, in time order."""
        rows = self.rank_rows(rank)
        return rows[self.events.step[rows] == step]

    def rows_by_step(self, rank: int) -> dict[int, np.ndarray]:
        """Row indices of one rank's events per step value (-1: outside any step), each in
        time order as :meth:`step_rows` gives them. One stable sort of the rank's step column
        serves every step: calling :meth:`step_rows` for each of S steps scans the rank's n
        rows S times (O(S·n), quadratic in the captured steps); this is O(n log n)."""
        rows = self.rank_rows(rank)
        if rows.size == 0:
            return {}
        steps = self.events.step[rows]
        order = np.argsort(steps, kind="stable")  # stable: row (time) order within a step
        keys, starts = np.unique(steps[order], return_index=True)
        parts = np.split(rows[order], starts[1:])
        return {int(k): p for k, p in zip(keys.tolist(), parts, strict=True)}

    def iteration_bounds(self, rank: int, step: int) -> tuple[float, float]:
        """(start_us, end_us) of a step on a rank: the STEP marker, else the span of its events."""
        return self.bounds_of_rows(self.step_rows(rank, step))

    def bounds_of_rows(self, rows: np.ndarray) -> tuple[float, float]:
        """(start_us, end_us) of one step's rows (:meth:`rows_by_step`): the STEP marker among
        them, else their span; NaNs when there are none."""
        if rows.size == 0:
            return (float("nan"), float("nan"))
        ev = self.events
        marker = rows[ev.cat[rows] == Cat.STEP]
        if marker.size:
            m = int(marker[0])
            return float(ev.ts_us[m]), float(ev.ts_us[m] + ev.dur_us[m])
        return float(ev.ts_us[rows].min()), float((ev.ts_us[rows] + ev.dur_us[rows]).max())

    def comm_rows(self) -> np.ndarray:
        return np.flatnonzero(self.events.cat == Cat.COMM)

    def collective_of(self, row: int) -> str | None:
        c = int(self.events.coll[row])
        return COLLECTIVES[c] if c >= 0 else None

    def group_of(self, row: int) -> tuple[int, ...] | None:
        g = int(self.events.group[row])
        return self.groups[g] if g >= 0 else None

    def keep_steps(self, steps: Sequence[int]) -> None:
        """Keep only events of ``steps`` (and those outside any step); set ``self.steps``."""
        self.steps = sorted(int(s) for s in steps)
        ev = self.events
        keep = (ev.step < 0) | np.isin(ev.step, np.asarray(self.steps, dtype=np.int64))
        if keep.all():
            return
        new_row = np.cumsum(keep) - 1
        self.events = ev.take(keep)
        self.comm_args = {int(new_row[r]): a for r, a in self.comm_args.items() if keep[r]}

    def iter_rank_steps(self) -> Iterator[tuple[int, int]]:
        for rank in sorted(self.ranks):
            for step in self.steps:
                yield rank, step


class TraceBuilder:
    """Accumulates events row by row (or in bulk) and builds a :class:`Trace`.

    Loaders call :meth:`add` per event; ``occ`` is computed at :meth:`build` when not given.
    """

    def __init__(self, source_format: str = "echo", source: str = "") -> None:
        self.source_format = source_format
        self.source = source
        self._cols: dict[str, list[Any]] = {c: [] for c in _COLUMNS}
        self._occ_given: list[bool] = []
        self._names: dict[str, int] = {}
        self._kinds: dict[str, int] = {}
        self._groups: dict[tuple[int, ...], int] = {}
        self._counter_names: dict[str, int] = {}
        self._counters: dict[str, list[Any]] = {"rank": [], "ts_us": [], "series": [], "value": []}
        self._comm_args: dict[int, dict[str, Any]] = {}
        self.ranks: dict[int, RankInfo] = {}
        self.dags: dict[int, Any] = {}

    # interning ---------------------------------------------------------------
    def intern_name(self, name: str) -> int:
        i = self._names.get(name)
        if i is None:
            i = self._names[name] = len(self._names)
        return i

    def intern_group(self, ranks: Iterable[int]) -> int:
        key = tuple(sorted(int(r) for r in ranks))
        i = self._groups.get(key)
        if i is None:
            i = self._groups[key] = len(self._groups)
        return i

    def _intern_kind(self, kind: str) -> int:
        i = self._kinds.get(kind)
        if i is None:
            i = self._kinds[kind] = len(self._kinds)
        return i

    # rows ----------------------------------------------------------------------
    def add(
        self,
        *,
        rank: int,
        name: str,
        cat: Cat,
        ts_us: float,
        dur_us: float,
        step: int = -1,
        tid: int = 0,
        occ: int | None = None,
        collective: str | None = None,
        nbytes: int = 0,
        group_ranks: Iterable[int] | None = None,
        seq: int = -1,
        peer: int = -1,
        kind: str | None = None,
        param_bytes: int = 0,
        in_bytes: int = 0,
        out_bytes: int = 0,
        flops: float = 0.0,
        busy_us: float | None = None,
        comm_args: dict[str, Any] | None = None,
    ) -> int:
        """Append one event; returns its provisional row (order before the final sort).

        ``busy_us``: time work ran inside the span (GPU kernel time); None: all of it
        (``dur_us``). Clipped to ``[0, dur_us]``.
        """
        c = self._cols
        row = len(c["rank"])
        c["rank"].append(rank)
        c["step"].append(step)
        c["cat"].append(int(cat))
        c["name"].append(self.intern_name(name))
        c["tid"].append(tid)
        c["ts_us"].append(ts_us)
        c["dur_us"].append(dur_us)
        c["occ"].append(0 if occ is None else occ)
        self._occ_given.append(occ is not None)
        c["coll"].append(_COLL_INDEX.get(collective, -1) if collective else -1)
        c["nbytes"].append(nbytes)
        c["group"].append(self.intern_group(group_ranks) if group_ranks is not None else -1)
        c["seq"].append(seq)
        c["peer"].append(peer)
        c["kind"].append(self._intern_kind(kind) if kind else -1)
        c["param_bytes"].append(param_bytes)
        c["in_bytes"].append(in_bytes)
        c["out_bytes"].append(out_bytes)
        c["flops"].append(flops)
        c["busy_us"].append(np.nan if busy_us is None else busy_us)
        if comm_args:
            self._comm_args[row] = comm_args
        return row

    def add_counter(self, *, rank: int, ts_us: float, series: str, value: float) -> None:
        i = self._counter_names.get(series)
        if i is None:
            i = self._counter_names[series] = len(self._counter_names)
        self._counters["rank"].append(rank)
        self._counters["ts_us"].append(ts_us)
        self._counters["series"].append(i)
        self._counters["value"].append(value)

    def __len__(self) -> int:
        return len(self._cols["rank"])

    # build ----------------------------------------------------------------------
    def build(self, steps: Sequence[int] | None = None) -> Trace:
        """Sort rows by (rank, ts), fill missing ``occ``, and freeze into a :class:`Trace`.

        ``steps``: the steps common to all ranks; by default the sorted set of steps seen.
        """
        cols: dict[str, np.ndarray] = {
            c: np.asarray(v, dtype=_COLUMNS[c][0]) for c, v in self._cols.items()
        }
        cols["busy_us"] = busy_within(cols["busy_us"], cols["dur_us"])
        n = cols["rank"].shape[0]
        order = np.lexsort((cols["ts_us"], cols["rank"])) if n else np.zeros(0, np.int64)
        cols = {c: v[order] for c, v in cols.items()}
        given = np.asarray(self._occ_given, dtype=bool)[order] if n else np.zeros(0, bool)
        events = Events(**cols)
        if n and not given.all():
            _fill_occurrence(events, ~given)
        inverse = np.empty(n, dtype=np.int64)
        inverse[order] = np.arange(n)
        comm_args = {int(inverse[r]): a for r, a in self._comm_args.items()}
        k = self._counters
        counters = Counters(
            np.asarray(k["rank"], np.int32), np.asarray(k["ts_us"], np.float64),
            np.asarray(k["series"], np.int32), np.asarray(k["value"], np.float64),
        )
        if steps is None:
            steps = sorted({int(s) for s in np.unique(events.step) if s >= 0})
        return Trace(
            events=events,
            names=[safe_text(n) for n in self._names],
            ranks=dict(sorted(self.ranks.items())),
            steps=list(steps),
            groups=list(self._groups),
            kinds=[safe_text(k) for k in self._kinds],
            counters=counters,
            counter_names=[safe_text(c) for c in self._counter_names],
            dags=self.dags,
            comm_args=comm_args,
            source_format=self.source_format,
            source=self.source,
        )


def _fill_occurrence(events: Events, missing: np.ndarray) -> None:
    """Number repeated names within each (rank, step) in time order (rows already sorted)."""
    key = np.stack([events.rank.astype(np.int64), events.step.astype(np.int64),
                    events.name.astype(np.int64)], axis=1)
    # stable sort by key keeps time order inside each group
    order = np.lexsort((np.arange(len(events)), key[:, 2], key[:, 1], key[:, 0]))
    k = key[order]
    new_group = np.ones(len(order), dtype=bool)
    new_group[1:] = np.any(k[1:] != k[:-1], axis=1)
    group_start = np.maximum.accumulate(np.where(new_group, np.arange(len(order)), 0))
    occ_sorted = np.arange(len(order)) - group_start
    occ = np.empty(len(order), dtype=np.int32)
    occ[order] = occ_sorted
    events.occ[missing] = occ[missing]
