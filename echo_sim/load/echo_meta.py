"""echo ``meta.json``: read, shape- and range-checked, turned into a :class:`RankInfo`.

Everything downstream trusts meta.json's shape, so it is checked here once: ranks and sizes
are integers in range (``MAX_WORLD_SIZE``; a claimed ``world_size`` of 10^12 must not make
anything allocate per rank), ``params`` / ``buckets`` are lists of objects, ``steps`` /
``partial_steps`` lists of step numbers, the clock fields finite numbers. Violations are
one-line :class:`~echo_sim.errors.TraceFormatError`\\ s naming the file and the key.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from echo_sim.errors import TraceFormatError
from echo_sim.load.jsonio import read_json
from echo_sim.load.sources import RankSource
from echo_sim.textsafe import safe_text
from echo_sim.trace.model import MAX_STEP, MAX_WORLD_SIZE, RankInfo

__all__ = ["MAX_META_BYTES", "base_ns", "meta_steps", "rank_info", "read_meta"]

MAX_META_BYTES = 256 << 20
"""Largest meta.json read (256 MiB; a 10^5-parameter model writes ~10 MiB)."""

_LIST_OF_OBJECTS = ("params", "buckets")
_OBJECTS = ("model", "comm", "saved_activations")


def _bad(where: Path, key: str, v: Any, expected: str) -> TraceFormatError:
    return TraceFormatError(f"{where}: '{key}' is {safe_text(repr(v)[:60])}, expected {expected}")


def read_meta(src: RankSource) -> dict[str, Any]:
    """The rank's meta.json as a checked dict ({} when the rank has none)."""
    if src.meta_file is None:
        return {}
    meta = read_json(src.meta_file)
    where = src.meta_file
    if not isinstance(meta, dict):
        raise TraceFormatError(f"{where}: expected a JSON object, found a JSON "
                               f"{type(meta).__name__}")
    for key in _LIST_OF_OBJECTS:
        v = meta.get(key)
        if v is not None and (not isinstance(v, list)
                              or not all(isinstance(p, dict) for p in v)):
            bad = v if not isinstance(v, list) else next(p for p in v if not isinstance(p, dict))
            raise _bad(where, key, bad, "a list of objects" if not isinstance(v, list)
                       else "a list of objects (one per entry)")
    for key in _OBJECTS:
        v = meta.get(key)
        if v is not None and not isinstance(v, dict):
            raise _bad(where, key, v, "an object")
    for key in ("steps", "partial_steps"):
        meta_steps(meta, key, where)
    mb = meta.get("micro_batch_size")
    if mb is not None and (type(mb) is not int or not 0 < mb <= 1 << 31):
        raise _bad(where, "micro_batch_size", mb, "a positive integer or null")
    calls = (meta.get("saved_activations") or {}).get("per_call")
    if calls is not None:
        ok = isinstance(calls, list) and all(
            isinstance(c, list) and len(c) == 2 and isinstance(c[0], str)
            and type(c[1]) is int and 0 <= c[1] < 1 << 62 for c in calls)
        if not ok:
            raise _bad(where, "saved_activations.per_call", calls,
                       "a list of [module path, bytes] pairs")
    return meta


def meta_steps(meta: dict[str, Any], key: str, where: Path) -> list[int] | None:
    """``meta[key]`` as a list of step numbers (None when absent)."""
    v = meta.get(key)
    if v is None:
        return None
    if not isinstance(v, list) or not all(type(s) is int and 0 <= s <= MAX_STEP for s in v):
        raise _bad(where, key, v, f"a list of step numbers 0..{MAX_STEP}")
    return v


def _int_field(d: dict[str, Any], key: str, default: int, where: Path,
               limit: int = MAX_WORLD_SIZE) -> int:
    v = d.get(key, default)
    if v is None:
        return default
    if type(v) is not int or not 0 <= v <= limit:
        raise _bad(where, key, v, f"an integer 0..{limit}")
    return v


def rank_info(src: RankSource, meta: dict[str, Any], other: dict[str, Any],
              index: int) -> RankInfo:
    """The :class:`RankInfo` of one rank from meta.json (over trace.json's ``otherData``)."""
    where = src.meta_file or src.trace_file
    info = {**other, **meta}
    rank = _int_field(info, "rank", index, where, MAX_WORLD_SIZE - 1)
    world = _int_field(info, "world_size", 1, where)
    offset = info.get("clock_offset_us", 0.0)
    if type(offset) not in (int, float) or not math.isfinite(offset) or abs(offset) > 1e15:
        raise _bad(where, "clock_offset_us", offset, "a finite number of µs")
    return RankInfo(
        rank=rank, world_size=max(world, rank + 1),
        local_rank=_int_field(info, "local_rank", 0, where),
        node_rank=_int_field(info, "node_rank", 0, where),
        host=safe_text(str(info.get("host", "")), 200),
        device=safe_text(str(info.get("device", "cpu")), 200),
        backend=safe_text(str(info.get("backend", "")), 200), clock_offset_us=float(offset),
        source=str(src.directory or src.trace_file), meta=meta,
    )


def base_ns(src: RankSource, top: dict[str, Any], meta: dict[str, Any]) -> int:
    """``baseTimeNanoseconds`` of trace.json, else ``base_time_ns`` of meta.json, else 0
    (traces written before the key existed carry absolute Unix µs)."""
    for where, d, key in ((src.trace_file, top, "baseTimeNanoseconds"),
                          (src.meta_file or src.trace_file, meta, "base_time_ns")):
        if key in d:
            v = d[key]
            if type(v) is not int or not 0 <= v < 1 << 63:
                raise _bad(where, key, v, "a non-negative integer (Unix ns)")
            return v
    return 0
