"""echo ``trace.json`` events -> sorted numpy columns, a batch of parsed events at a time.

:class:`ColumnBuilder` receives the events of one rank file in batches (see
:func:`echo_sim.load.jsonio.read_trace_event_chunks`): each batch becomes numpy columns
(list comprehensions over the parsed dicts, one column at a time) and its dicts are dropped,
so a 10^6-event rank never holds all its dicts at once. :meth:`ColumnBuilder.finish` joins
the batches, sorts by time and fills missing occurrences.

Values are type- and range-checked per batch (vectorised): times must be numbers, not
booleans (``"ts": true`` used to pass as 1.0 µs); integer args must be integers that fit
their column (int32 steps, int64 byte counts), so nothing overflows silently.

``args.busy_us`` (GPU traces: kernel time inside the slice, µs) fills the ``busy_us`` column;
events without it get their ``dur`` (see :func:`echo_sim.trace.model.busy_within`).
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np

from echo_sim.errors import TraceFormatError
from echo_sim.textsafe import safe_text
from echo_sim.trace.model import COLLECTIVES, STEP_COUNT_SERIES, Cat, busy_within

__all__ = ["CAT_BY_LABEL", "ColumnBuilder", "Interner", "RankTable", "occurrences"]

CAT_BY_LABEL: dict[str, int] = {
    "FW": int(Cat.FW), "BW": int(Cat.BW), "Comm": int(Cat.COMM), "UPDATE": int(Cat.UPDATE),
    "step": int(Cat.STEP), "STEP": int(Cat.STEP),
}
_COLL_INDEX = {c: i for i, c in enumerate(COLLECTIVES)}
_EMPTY: dict[str, Any] = {}
# Comm args that have their own column; the rest stay in Trace.comm_args.
_COMM_COLUMNS = frozenset({"step", "occ", "collective", "bytes", "group_ranks", "seq", "peer"})
_NUMBER = frozenset({int, float})
_INT = frozenset({int})
_I32 = (-(1 << 31), (1 << 31) - 1)
_I64 = (-(1 << 63), (1 << 63) - 1)
_NAN = float("nan")


class Interner:
    """str/tuple -> dense int, shared across all ranks of one load."""

    def __init__(self) -> None:
        self.ids: dict[Any, int] = {}

    def many(self, keys: Iterable[Any]) -> list[int]:
        d = self.ids
        sd = d.setdefault
        return [sd(k, len(d)) for k in keys]

    def one(self, key: Any) -> int:
        return self.ids.setdefault(key, len(self.ids))

    def values(self) -> list[Any]:
        return list(self.ids)


def occurrences(step: np.ndarray, name: np.ndarray) -> np.ndarray:
    """0-based occurrence of each row's name within its step, rows in time order (one rank)."""
    n = step.shape[0]
    if n == 0:
        return np.zeros(0, np.int32)
    key = step.astype(np.int64) * (int(name.max()) + 1) + name.astype(np.int64)
    order = np.argsort(key, kind="stable")
    k = key[order]
    start = np.ones(n, dtype=bool)
    start[1:] = k[1:] != k[:-1]
    first = np.maximum.accumulate(np.where(start, np.arange(n), 0))
    occ = np.empty(n, np.int32)
    occ[order] = np.arange(n) - first
    return occ


class RankTable:
    """Columns of one rank's events, time-sorted, plus its Comm args and counters."""

    def __init__(self, cols: dict[str, np.ndarray], comm_args: dict[int, dict[str, Any]],
                 counters: tuple[np.ndarray, np.ndarray, np.ndarray]) -> None:
        self.cols = cols
        self.comm_args = comm_args
        self.counters = counters


def _ints(values: list[Any], dtype: type, what: str, bounds: tuple[int, int]) -> np.ndarray:
    if not set(map(type, values)) <= _INT:
        bad = next(v for v in values if type(v) is not int)
        raise ValueError(f"args.{what} is {bad!r}, expected an integer")
    if values and (min(values) < bounds[0] or max(values) > bounds[1]):
        bad = min(values) if min(values) < bounds[0] else max(values)
        raise ValueError(f"args.{what} is {bad}, out of range")
    return np.asarray(values, dtype=dtype)


def _numbers(values: list[Any], what: str) -> np.ndarray:
    if not set(map(type, values)) <= _NUMBER:
        bad = next(v for v in values if type(v) not in _NUMBER)
        raise ValueError(f"'{what}' is {bad!r}, expected a number")
    try:
        return np.asarray(values, dtype=np.float64)
    except OverflowError:  # an integer beyond float64
        raise ValueError(f"'{what}' holds an integer too large for a time") from None


class ColumnBuilder:
    """Accumulates one rank file's events batch by batch (see module docstring)."""

    def __init__(self, path: Path, rank: int, names: Interner, kinds: Interner,
                 groups: Interner, series: Interner) -> None:
        self.path = path
        self.rank = rank
        self.names, self.kinds, self.groups, self.series = names, kinds, groups, series
        self.reset()

    def reset(self) -> None:
        """Forget every batch (the reader starts over with the whole file)."""
        self._parts: list[dict[str, np.ndarray]] = []
        self._comm_args: dict[int, dict[str, Any]] = {}
        self._counters: tuple[list[float], list[int], list[float]] = ([], [], [])
        self._counter_pid: list[int] = []
        self._n = 0
        self._seen = 0

    def add(self, events: list[Any]) -> None:
        """Turn one batch of parsed events into columns (TraceFormatError on a bad one)."""
        try:
            self._add(events)
        except (KeyError, TypeError, ValueError, AttributeError, OverflowError) as e:
            detail = _first_bad(events, self._seen) or _one_line(e)
            raise TraceFormatError(f"{self.path}: malformed event: {detail}") from None
        self._seen += len(events)

    def _add(self, events: list[Any]) -> None:
        xs = [e for e in events if e.get("ph") == "X"]
        cs = [e for e in events if e.get("ph") == "C"]
        name_list = [e["name"] for e in xs]
        if not all(type(n) is str for n in name_list):
            raise TypeError("event name is not a string")
        n = len(xs)
        ts = _numbers([e["ts"] for e in xs], "ts")
        dur = _numbers([e["dur"] for e in xs], "dur")
        tid = _ints([e.get("tid", 0) for e in xs], np.int32, "tid", _I32)
        args = [e.get("args") or _EMPTY for e in xs]
        if not all(type(a) is dict for a in args):
            raise TypeError("'args' is not an object")
        cat = np.asarray([CAT_BY_LABEL.get(e.get("cat"), 5) for e in xs], dtype=np.int8)
        step = _ints([a.get("step", -1) for a in args], np.int32, "step", _I32)
        occ = _ints([a.get("occ", -1) for a in args], np.int32, "occ", _I32)
        # intern through a per-batch lookup of the (few) distinct values: one dict hit per row
        name_lut = {key: self.names.one(safe_text(key)) for key in dict.fromkeys(name_list)}
        name = np.asarray(list(map(name_lut.__getitem__, name_list)), dtype=np.int32)
        del name_list
        types = [a.get("type") for a in args]
        kind_lut = {t: (self.kinds.one(safe_text(t)) if isinstance(t, str) and t else -1)
                    for t in dict.fromkeys(types)}
        kind = np.asarray(list(map(kind_lut.__getitem__, types)), dtype=np.int32)
        cols: dict[str, np.ndarray] = {
            "step": step, "cat": cat, "name": name, "tid": tid, "ts_us": ts, "dur_us": dur,
            "occ": occ, "kind": kind,
            "param_bytes": _ints([a.get("param_bytes", 0) for a in args], np.int64,
                                 "param_bytes", _I64),
            "in_bytes": _ints([a.get("in_bytes", 0) for a in args], np.int64, "in_bytes", _I64),
            "out_bytes": _ints([a.get("out_bytes", 0) for a in args], np.int64, "out_bytes",
                               _I64),
            "flops": _numbers([a.get("flops", 0.0) for a in args], "args.flops"),
            "busy_us": busy_within(_numbers([a.get("busy_us", _NAN) for a in args],
                                            "args.busy_us"), dur),
        }
        cols.update(self._comm(cat, args, n))
        pids = [e.get("pid", 0) for e in xs]
        cols["pid"] = (np.asarray(pids, np.int64) if set(map(type, pids)) <= _INT
                       and (not pids or -(1 << 62) < min(pids) <= max(pids) < 1 << 62)
                       else np.full(n, -1, np.int64))
        del pids
        self._parts.append(cols)
        for e, a in zip(xs, args, strict=True):
            # a STEP's allocator / RSS peaks (echo_trace resets them at every step) and its
            # page-fault counts: counter samples of their own series at the step's end, since
            # the periodic samples miss the peak between them
            if e["name"] == "STEP" and a:
                for key, v in a.items():
                    if (key.startswith("peak_") and key.endswith("_bytes")
                            or key in STEP_COUNT_SERIES) and type(v) in _NUMBER:
                        self._counter_pid.append(e.get("pid", 0)
                                                 if type(e.get("pid")) is int else -1)
                        self._counters[0].append(float(e["ts"]) + float(e["dur"]))
                        self._counters[1].append(self.series.one(key))
                        self._counters[2].append(float(v))
        for e in cs:
            t = e["ts"]
            if type(t) not in _NUMBER:
                raise ValueError(f"counter 'ts' is {t!r}, expected a number")
            for key, v in (e.get("args") or _EMPTY).items():
                if type(v) not in _NUMBER:
                    raise ValueError(f"counter {key!r} is {v!r}, expected a number")
                self._counter_pid.append(e.get("pid", 0) if type(e.get("pid")) is int else -1)
                self._counters[0].append(float(t))
                self._counters[1].append(self.series.one(safe_text(str(key))))
                self._counters[2].append(float(v))
        self._n += n

    def _comm(self, cat: np.ndarray, args: list[dict[str, Any]], n: int) -> dict[str, np.ndarray]:
        coll = np.full(n, -1, np.int16)
        nbytes = np.zeros(n, np.int64)
        group = np.full(n, -1, np.int32)
        seq = np.full(n, -1, np.int64)
        peer = np.full(n, -1, np.int32)
        group_lut: dict[tuple[Any, ...], int] = {}
        for i in np.flatnonzero(cat == int(Cat.COMM)).tolist():
            a = args[i]
            c = a.get("collective")
            coll[i] = _COLL_INDEX.get(c, -1) if isinstance(c, str) else -1
            nbytes[i] = _int_arg(a, "bytes", 0, _I64)
            g = a.get("group_ranks")
            if g is not None:
                raw = tuple(g)
                gid = group_lut.get(raw)
                if gid is None:
                    gid = group_lut[raw] = self.groups.one(_group(raw))
                group[i] = gid
            seq[i] = _int_arg(a, "seq", -1, _I64)
            peer[i] = _int_arg(a, "peer", -1, _I32)
            extra = {k: v for k, v in a.items() if k not in _COMM_COLUMNS}
            if extra:
                self._comm_args[self._n + i] = extra
        return {"coll": coll, "nbytes": nbytes, "group": group, "seq": seq, "peer": peer}

    def finish(self) -> RankTable:
        """The rank's columns joined, sorted by time, with missing ``occ`` numbered."""
        parts = self._parts
        keys = ("step", "cat", "name", "tid", "ts_us", "dur_us", "occ", "coll", "nbytes",
                "group", "seq", "peer", "kind", "param_bytes", "in_bytes", "out_bytes", "flops",
                "busy_us", "pid")
        if len(parts) == 1:
            cols = parts[0]
        elif parts:
            cols = {k: np.concatenate([p[k] for p in parts]) for k in keys}
        else:
            floats = ("ts_us", "dur_us", "flops", "busy_us")
            cols = {k: np.zeros(0, np.float64 if k in floats else np.int64) for k in keys}
        self._parts = []
        n = int(cols["ts_us"].shape[0])
        pid = cols.pop("pid")
        # by pid, then time: a combined trace (pid = rank) splits into contiguous ranks
        order = (np.lexsort((cols["ts_us"], pid)) if n and pid.min() != pid.max()
                 else np.argsort(cols["ts_us"], kind="stable"))
        cols = {k: v[order] for k, v in cols.items()}
        cols["rank"] = np.full(n, self.rank, np.int32)
        self.pid: np.ndarray = pid[order]  # source pid per row (-1: not integers)
        if n and (cols["occ"] < 0).any():
            missing = cols["occ"] < 0
            cols["occ"][missing] = occurrences(cols["step"], cols["name"])[missing]
        inverse = np.empty(n, np.int64)
        inverse[order] = np.arange(n)
        comm_args = {int(inverse[i]): a for i, a in self._comm_args.items()}
        c_ts, c_series, c_value = self._counters
        counters = (np.asarray(c_ts, np.float64), np.asarray(c_series, np.int32),
                    np.asarray(c_value, np.float64))
        self.counter_pid: np.ndarray = np.asarray(self._counter_pid, np.int64)
        return RankTable(cols, comm_args, counters)


def _int_arg(a: dict[str, Any], key: str, default: int, bounds: tuple[int, int]) -> int:
    v = a.get(key, default)
    if type(v) is not int or not bounds[0] <= v <= bounds[1]:
        raise ValueError(f"args.{key} is {v!r}, expected an integer in range")
    return v


def _group(raw: tuple[Any, ...]) -> tuple[int, ...]:
    if not all(type(r) is int and 0 <= r <= _I32[1] for r in raw):
        raise ValueError(f"args.group_ranks {list(raw)[:8]!r} are not rank numbers")
    return tuple(sorted(raw))


def _first_bad(events: list[Any], offset: int) -> str:
    """Slow pass that names the first malformed event (only run after a failure)."""
    for i, e in enumerate(events, offset):
        if not isinstance(e, dict):
            return f"traceEvents[{i}] is a {type(e).__name__}, expected an object"
        ph = e.get("ph")
        if ph not in ("X", "C"):
            continue
        for key in ("name", "ts") + (("dur",) if ph == "X" else ()):
            if key not in e:
                return f"traceEvents[{i}] ({ph}) has no '{key}'"
        if not isinstance(e["name"], str):
            return f"traceEvents[{i}]: 'name' is not a string"
        for key in ("ts", "dur"):
            v = e.get(key, 0)
            if type(v) not in _NUMBER:
                return f"traceEvents[{i}]: '{key}' is {_short(v)}, expected a number"
        args = e.get("args") or {}
        if not isinstance(args, dict):
            return f"traceEvents[{i}]: 'args' is not an object"
        if ph == "X" and type(args.get("busy_us", 0.0)) not in _NUMBER:
            return f"traceEvents[{i}]: args.busy_us is {_short(args['busy_us'])}, expected a number"
        for key, v in args.items():
            if key in ("step", "occ", "bytes", "seq", "peer", "param_bytes", "in_bytes",
                       "out_bytes") and type(v) is not int:
                return f"traceEvents[{i}]: args.{key} is {_short(v)}, expected an integer"
    return ""


def _short(v: Any) -> str:
    return safe_text(repr(v)[:60])


def _one_line(e: BaseException) -> str:
    return safe_text(" ".join(str(e).split())[:200]) or type(e).__name__
