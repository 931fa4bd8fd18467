"""Profiler (Kineto) X events, parsed once into light objects, checked in bulk.

:func:`parse_events` keeps the X events of the categories the Kineto mapping uses (CPU ops,
annotations, GPU kernels and copies), type- and range-checks their times in one vectorised
pass (``"ts": true`` or ``1e308`` is a one-line :class:`~echo_sim.errors.TraceFormatError`
naming the event) and wraps each in a :class:`KinetoEvent`.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np

from echo_sim.errors import TraceFormatError
from echo_sim.textsafe import safe_text
from echo_sim.trace.validate import MAX_TIME_US

__all__ = ["CPU_CATS", "GPU_CATS", "KinetoEvent", "leaves", "parse_events", "top_level"]

CPU_CATS = frozenset({"cpu_op", "user_annotation", "python_function"})
GPU_CATS = frozenset({"kernel", "gpu_memcpy", "gpu_memset"})
_USED_CATS = CPU_CATS | GPU_CATS
_NUMBER_TYPES = frozenset({int, float})


class KinetoEvent:
    __slots__ = ("name", "cat", "ts", "dur", "end", "tid", "args")

    def __init__(self, e: dict[str, Any], ts: float, dur: float) -> None:
        self.name: str = e["name"]
        cat = e.get("cat") or ""
        self.cat: str = cat if type(cat) is str else ""
        self.ts = ts
        self.dur = dur
        self.end = ts + dur
        self.tid = e.get("tid")
        args = e.get("args")
        self.args: dict[str, Any] = args if type(args) is dict else {}


def parse_events(f: Path, events: list[Any], offset: int = 0) -> list[KinetoEvent]:
    """The X events, type- and range-checked in bulk (the slow path names the bad one).

    ``offset``: index of ``events[0]`` in the file's traceEvents (for batches).
    """
    if not all(type(e) is dict for e in events):
        i = next(i for i, e in enumerate(events, offset) if type(e) is not dict)
        raise TraceFormatError(f"{f}: traceEvents[{i}] is not an object")
    # only the categories the mapping uses (cuda_runtime/driver, flows, GPU annotations
    # are a tenth of a real profile and never become rows)
    xs = [e for e in events if e.get("ph") == "X" and isinstance(c := e.get("cat"), str)
          and c in _USED_CATS]
    try:
        ts = [e["ts"] for e in xs]
        dur = [e.get("dur", 0.0) for e in xs]
        ok = (set(map(type, ts)) | set(map(type, dur))) <= _NUMBER_TYPES
        if ok:
            t = np.asarray(ts, dtype=np.float64)
            d = np.asarray(dur, dtype=np.float64)
            ok = bool(np.all(np.abs(t) <= MAX_TIME_US) and np.all((d >= 0) & (d <= MAX_TIME_US)))
        ok = ok and all(type(e.get("name")) is str for e in xs)
    except (KeyError, OverflowError):
        ok = False
    if not ok:
        _raise_first_bad(f, events, offset)
    return [KinetoEvent(e, a, b) for e, a, b in zip(xs, t.tolist(), d.tolist(), strict=True)]


def _raise_first_bad(f: Path, events: list[Any], offset: int) -> None:
    for i, e in enumerate(events, offset):
        if e.get("ph") != "X":
            continue
        name, ts, dur = e.get("name"), e.get("ts"), e.get("dur", 0.0)
        if type(name) is not str:
            raise TraceFormatError(f"{f}: traceEvents[{i}] has no string 'name'")
        for key, v in (("ts", ts), ("dur", dur)):
            if type(v) not in _NUMBER_TYPES:
                raise TraceFormatError(f"{f}: traceEvents[{i}] ({safe_text(name[:60])}): "
                                       f"'{key}' is {safe_text(repr(v)[:40])}, expected a number")
        t, d = float(ts), float(dur)
        if not (math.isfinite(t) and abs(t) <= MAX_TIME_US
                and math.isfinite(d) and 0 <= d <= MAX_TIME_US):
            raise TraceFormatError(f"{f}: traceEvents[{i}] ({safe_text(name[:60])}) has "
                                   f"ts {t!r} / dur {d!r} us (expected finite, "
                                   f"|ts| and dur <= {MAX_TIME_US:.0f}, dur >= 0)")
    raise TraceFormatError(f"{f}: malformed X event (a time too large for float64)")


def top_level(evs: list[KinetoEvent]) -> list[KinetoEvent]:
    """Events not contained in an earlier event of the same list (one thread)."""
    out: list[KinetoEvent] = []
    end = -np.inf
    for e in sorted(evs, key=lambda e: (e.ts, -e.end)):
        if e.ts >= end:
            out.append(e)
            end = e.end
        elif e.end > end:  # partial overlap: treat as top level too
            out.append(e)
            end = e.end
    return out


def leaves(evs: list[KinetoEvent]) -> list[KinetoEvent]:
    """Events that contain no other event of the list."""
    s = sorted(evs, key=lambda e: (e.ts, -e.end))
    return [e for i, e in enumerate(s) if i + 1 == len(s) or s[i + 1].ts >= e.end]
