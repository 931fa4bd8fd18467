"""Write a rank directory: ``trace.json[.gz]``, ``meta.json`` and ``dag.gml``, atomically.

Every file is written to ``<name>.tmp``, fsynced and ``os.replace``d into place, so a
reader never sees half a file, even when SIGTERM arrives during a write.
"""

from __future__ import annotations

import gzip as gzip_mod
import json
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from echo_trace.recorder import COMM_TID_BASE, COMPUTE_TID, STEP_TID

__all__ = ["FORMAT", "dir_is_nonempty", "trace_events", "write_atomic", "write_rank_dir"]

FORMAT = "echo-trace/1"

try:  # orjson is a declared dependency; json is the fallback
    import orjson

    def _dumps(obj: Any) -> bytes:
        return orjson.dumps(obj)
except ImportError:  # pragma: no cover
    def _dumps(obj: Any) -> bytes:
        return json.dumps(obj, separators=(",", ":")).encode()


def dir_is_nonempty(path: str | os.PathLike[str]) -> bool:
    """True when ``path`` exists and holds at least one entry."""
    try:
        with os.scandir(path) as it:
            return next(it, None) is not None
    except (FileNotFoundError, NotADirectoryError):
        return False


def write_atomic(path: str | os.PathLike[str], data: bytes) -> None:
    """Write ``data`` to ``path`` via ``path.tmp`` + fsync + ``os.replace`` (+ dir fsync)."""
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    try:
        fd = os.open(path.parent, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass  # some filesystems cannot fsync a directory; the rename is still atomic
    finally:
        os.close(fd)


def _thread_name(tid: int) -> str:
    if tid == COMPUTE_TID:
        return "compute"
    if tid == STEP_TID:
        return "steps"
    if tid >= COMM_TID_BASE:
        return f"comm {tid - COMM_TID_BASE}"
    return f"thread {tid}"


def trace_events(events: Iterable[dict[str, Any]], *, rank: int, host: str,
                 offset_us: float) -> list[dict[str, Any]]:
    """Chrome events: ``M`` metadata first, then events sorted by time with ``pid = rank``
    and ``ts`` = local µs + ``offset_us`` (the local → trace clock shift: µs since the
    file's ``baseTimeNanoseconds`` on rank 0's clock), 3 decimals; ``dur`` is the rounded
    end minus the rounded start, so a slice ending where the next starts touches it."""
    out: list[dict[str, Any]] = []
    tids = {COMPUTE_TID, STEP_TID}
    for ev in events:
        e = dict(ev)
        e["pid"] = rank
        ts = e["ts"] = round(ev["ts"] + offset_us, 3)
        if "dur" in e:  # from the rounded end, so touching slices still touch
            e["dur"] = round(round(ev["ts"] + ev["dur"] + offset_us, 3) - ts, 3)
        tid = e.setdefault("tid", COMPUTE_TID)
        tids.add(tid)
        out.append(e)
    out.sort(key=lambda e: e["ts"])
    meta: list[dict[str, Any]] = [
        {"name": "process_name", "ph": "M", "pid": rank, "tid": 0,
         "args": {"name": f"rank {rank} ({host})"}},
        {"name": "process_sort_index", "ph": "M", "pid": rank, "tid": 0,
         "args": {"sort_index": rank}},
    ]
    for tid in sorted(tids):
        meta.append({"name": "thread_name", "ph": "M", "pid": rank, "tid": tid,
                     "args": {"name": _thread_name(tid)}})
        meta.append({"name": "thread_sort_index", "ph": "M", "pid": rank, "tid": tid,
                     "args": {"sort_index": tid}})
    return meta + out


def write_rank_dir(rank_dir: str | os.PathLike[str], *, events: list[dict[str, Any]],
                   meta: dict[str, Any], dag_gml: str | None, gzip: bool = False,
                   offset_us: float = 0.0, base_time_ns: int = 0) -> dict[str, Path]:
    """Write the three files of one process; returns ``{"trace", "meta", "dag"}`` paths.

    ``events`` carry local µs; ``offset_us`` maps them to µs since ``base_time_ns`` (Unix
    ns on rank 0's clock), written as ``baseTimeNanoseconds`` in trace.json and
    ``base_time_ns`` in meta.json. ``meta`` also gets ``format``, ``trace_file`` and
    ``num_events`` filled in.
    """
    d = Path(rank_dir)
    d.mkdir(parents=True, exist_ok=True)
    rank = int(meta.get("rank", 0))
    chrome = trace_events(events, rank=rank, host=str(meta.get("host", "")),
                          offset_us=offset_us)
    doc = {"traceEvents": chrome, "displayTimeUnit": "ms",
           "baseTimeNanoseconds": int(base_time_ns),
           "otherData": {"format": FORMAT, "rank": rank,
                         "world_size": meta.get("world_size", 1),
                         "echo_version": meta.get("echo_version")}}
    name = "trace.json.gz" if gzip else "trace.json"
    body = _dumps(doc)
    if gzip:
        body = gzip_mod.compress(body, compresslevel=6, mtime=0)
    paths = {"trace": d / name, "meta": d / "meta.json", "dag": d / "dag.gml"}
    write_atomic(paths["trace"], body)
    other = d / ("trace.json" if gzip else "trace.json.gz")
    if other.exists():  # an overwrite must not leave the other flavour behind
        other.unlink()
    if dag_gml is not None:
        write_atomic(paths["dag"], dag_gml.encode())
    meta = dict(meta, format=FORMAT, trace_file=name, num_events=len(events),
                base_time_ns=base_time_ns)
    write_atomic(paths["meta"], json.dumps(meta, indent=1, default=str).encode())
    return paths
