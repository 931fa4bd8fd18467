"""Write a rank directory (``trace.json[.gz]``, ``meta.json``, ``dag.gml``) safely.

How a rank directory comes to exist (never half-written, never over someone else's):

1. The files are written into a fresh private directory ``.<rank>.XXXX.tmp`` made by
   ``mkdtemp`` next to the rank directory (mode 0700, so nobody can plant a symlink in
   it), each file created with ``O_EXCL | O_NOFOLLOW`` and fsynced. ``trace.json`` comes
   first; a failure building ``meta.json`` or ``dag.gml`` is logged and the trace is still
   installed without them.
2. The directory is renamed into place. ``rename(2)`` of a directory replaces a missing
   or *empty* target atomically and fails on a non-empty one: that is the emptiness
   re-check at write time, and of two runs writing into one ``TRACE_DIR`` exactly one wins.
   The loser keeps its files in a sibling of the trace root,
   ``<TRACE_DIR>.conflict-<tag>/<rank>/``, and says so (never merged into the winner);
   ``tag`` names the job (the capture passes :func:`~echo_trace.ranks.job_token`, so every
   losing rank of one job lands in one directory), else the process id.
3. With ``overwrite``, the old directory is first renamed aside (``.<rank>.XXXX.old``),
   the new one renamed in, then the old one deleted: an interrupted overwrite leaves the
   old run whole or the new run whole, never new trace + old meta.

A temporary directory is removed when a write fails (ENOSPC, EIO), and its name starts
with a dot, which echo_sim's discovery skips, so a leftover one (after SIGKILL) never
blocks nor pollutes the next run. A rank directory that is a symlink, not a directory,
or owned by another user is refused (:func:`refuse_reason`).
"""

from __future__ import annotations

import errno
import gzip as gzip_mod
import json
import logging
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Iterable
from operator import itemgetter
from pathlib import Path
from typing import Any

from echo_trace.contract import COMPUTE_TID, FORMAT, STEP_TID, thread_name

__all__ = ["FORMAT", "YIELD_EVERY", "WriteConflict", "WriteResult", "dir_is_nonempty",
           "dump_trace_json", "dumps_compact", "dumps_json",
           "refuse_reason", "trace_events", "write_atomic", "write_rank_dir"]

log = logging.getLogger("echo_trace")

_CREATE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) \
    | getattr(os, "O_CLOEXEC", 0)

#: The writer thread lets the training thread take the GIL every this many events (each
#: stretch is well under a millisecond; the interpreter alone would switch every 5 ms).
YIELD_EVERY = 512

try:  # orjson is a declared dependency; json is the fallback
    import orjson

    def _dumps(obj: Any) -> bytes:
        # orjson never writes NaN/Infinity (they become null): the output is always JSON
        return orjson.dumps(obj)
except ImportError:  # pragma: no cover
    def _dumps(obj: Any) -> bytes:
        return json.dumps(obj, separators=(",", ":"), allow_nan=False).encode()


def dumps_compact(obj: Any) -> bytes:
    """Compact JSON bytes, fast (orjson when installed; NaN/Infinity become null, other
    values their ``str()``)."""
    try:
        import orjson
    except ImportError:  # pragma: no cover
        return json.dumps(obj, separators=(",", ":"), default=str).encode()
    return orjson.dumps(obj, default=str)


def dumps_json(obj: Any, *, indent: int | None = None) -> bytes:
    """Strict JSON bytes (``allow_nan=False``: NaN/Infinity raise ``ValueError``)."""
    return json.dumps(obj, indent=indent, default=str, allow_nan=False).encode()


class WriteConflict(OSError):
    """The rank directory was filled by another run while this one was recording."""


class WriteResult(dict[str, Path]):
    """``{"trace", "meta", "dag"}`` → path of each file written (a missing key: that file
    failed, see :attr:`errors`); :attr:`rank_dir` is where they are, :attr:`conflict`
    is True when that is the ``.conflict-<tag>`` sibling instead of the requested place."""

    rank_dir: Path
    conflict: bool = False
    errors: dict[str, str]


def dir_is_nonempty(path: str | os.PathLike[str]) -> bool:
    """True when ``path`` exists and holds at least one entry."""
    try:
        with os.scandir(path) as it:
            return next(it, None) is not None
    except (FileNotFoundError, NotADirectoryError):
        return False


def refuse_reason(path: str | os.PathLike[str]) -> str | None:
    """Why ``path`` must not be used as a rank directory (None: it is fine or missing)."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None
    import stat

    if stat.S_ISLNK(st.st_mode):
        return "is a symbolic link"
    if not stat.S_ISDIR(st.st_mode):
        return "exists and is not a directory"
    if hasattr(os, "geteuid") and st.st_uid != os.geteuid():
        return f"is owned by another user (uid {st.st_uid})"
    return None


def _umask() -> int:
    """The process umask without changing it (``os.umask`` would, for every thread)."""
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    return 0o022


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass  # some filesystems cannot fsync a directory; the rename is still atomic
    finally:
        os.close(fd)


def _create(path: Path, data: bytes) -> None:
    """Create ``path`` (never existing, never through a symlink), write, fsync; on any
    failure (a full disk: ENOSPC) the partial file is removed, so a rank directory never
    holds a truncated file."""
    fd = os.open(path, _CREATE, 0o666)
    try:
        view = memoryview(data)
        while view:
            n = os.write(fd, view)
            view = view[n:]
        os.fsync(fd)
    except BaseException:
        os.close(fd)
        try:
            os.unlink(path)
        except OSError:
            pass
        raise
    os.close(fd)


def write_atomic(path: str | os.PathLike[str], data: bytes) -> None:
    """Write ``data`` to ``path`` through a ``mkstemp`` file in the same directory, fsync,
    ``os.replace`` (+ dir fsync): readers see the old file or the new one, never half."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    _fsync_dir(path.parent)


def trace_events(events: Iterable[dict[str, Any]], *, rank: int, host: str,
                 offset_us: float, yield_every: int = 0,
                 pause: Callable[[], None] | None = None) -> list[dict[str, Any]]:
    """Chrome events: ``M`` metadata first, then events sorted by time with ``pid = rank``
    and ``ts`` = local µs + ``offset_us`` (the local → trace clock shift: µs since the
    file's ``baseTimeNanoseconds`` on rank 0's clock), 3 decimals; ``dur`` is the rounded
    end minus the rounded start, so a slice ending where the next starts touches it.
    ``yield_every`` > 0 calls ``pause`` (default: release the GIL) every that many events
    (see :data:`YIELD_EVERY`)."""
    out: list[dict[str, Any]] = []
    tids = {COMPUTE_TID, STEP_TID}
    for k, ev in enumerate(events):
        if yield_every and k % yield_every == 0:
            (pause or _release)()
        e = dict(ev)
        e["pid"] = rank
        ts = e["ts"] = round(ev["ts"] + offset_us, 3)
        if "dur" in e:  # from the rounded end, so touching slices still touch
            e["dur"] = round(round(ev["ts"] + ev["dur"] + offset_us, 3) - ts, 3)
        tid = e.setdefault("tid", COMPUTE_TID)
        tids.add(tid)
        out.append(e)
    out.sort(key=itemgetter("ts"))
    meta: list[dict[str, Any]] = [
        {"name": "process_name", "ph": "M", "pid": rank, "tid": 0,
         "args": {"name": f"rank {rank} ({host})"}},
        {"name": "process_sort_index", "ph": "M", "pid": rank, "tid": 0,
         "args": {"sort_index": rank}},
    ]
    for tid in sorted(tids):
        meta.append({"name": "thread_name", "ph": "M", "pid": rank, "tid": tid,
                     "args": {"name": thread_name(tid)}})
        meta.append({"name": "thread_sort_index", "ph": "M", "pid": rank, "tid": tid,
                     "args": {"sort_index": tid}})
    return meta + out


def _release() -> None:
    time.sleep(0)


def _dump_trace(chrome: list[dict[str, Any]], rest: dict[str, Any], yield_every: int,
                pause: Callable[[], None] | None = None) -> bytes:
    """``{"traceEvents": chrome, **rest}`` as JSON, the events serialised in chunks (the
    GIL is released between chunks when ``yield_every`` > 0)."""
    step = max(yield_every, 1) * 4 if yield_every else max(len(chrome), 1)
    parts = []
    for i in range(0, len(chrome), step):
        parts.append(_dumps(chrome[i:i + step])[1:-1])
        if yield_every:
            (pause or _release)()
    return b'{"traceEvents":[' + b",".join(parts) + b"]," + _dumps(rest)[1:]


def dump_trace_json(events: list[dict[str, Any]], rest: dict[str, Any], *, yield_every: int = 0,
                    pause: Callable[[], None] | None = None) -> bytes:
    """``{"traceEvents": events, **rest}`` as compact JSON, built as trace.json is (in chunks;
    ``yield_every`` > 0 lets the training thread run between them, see :data:`YIELD_EVERY`)."""
    return _dump_trace(events, rest, yield_every, pause)


def _install(tmp: Path, dest: Path, *, overwrite: bool,
             conflict_tag: str | None = None) -> tuple[Path, bool]:
    """Rename ``tmp`` to ``dest`` (see the module doc); ``(where, conflict)``. Without
    ``overwrite``, a ``dest`` whose sibling rank directories hold another job's trace (its
    ``conflict_tag`` differs) is left to that job: one run per ``TRACE_DIR``, never a mix."""
    if conflict_tag and not overwrite and _foreign_sibling(dest, conflict_tag):
        return _install_aside(tmp, dest, conflict_tag)
    try:
        os.rename(tmp, dest)  # a missing or empty dest is replaced atomically
        return dest, False
    except OSError as e:
        if e.errno not in (errno.ENOTEMPTY, errno.EEXIST):
            raise
    if overwrite:
        old = Path(tempfile.mkdtemp(prefix=f".{dest.name}.", suffix=".old", dir=dest.parent))
        os.rename(dest, old)  # onto the empty placeholder
        try:
            os.rename(tmp, dest)
        except OSError as e:
            try:  # put the old run back whole (if the place is still free)
                os.rename(old, dest)
            except OSError:
                log.warning("echo_trace: the previous contents of %s are in %s", dest, old)
            if e.errno not in (errno.ENOTEMPTY, errno.EEXIST):
                raise
        else:
            shutil.rmtree(old, ignore_errors=True)
            return dest, False
    return _install_aside(tmp, dest, conflict_tag)


def _foreign_sibling(dest: Path, job: str, *, sample: int = 8) -> bool:
    """True when a sibling rank directory of ``dest`` (``<node>_<local>``) holds the trace
    of another job (its meta.json names another ``job``); at most ``sample`` are read, so a
    job of thousands of ranks on a shared filesystem pays a few reads per rank."""
    import re

    try:
        names = [n for n in os.listdir(dest.parent)
                 if re.fullmatch(r"\d+_\d+", n) and n != dest.name]
    except OSError:
        return False
    for n in sorted(names)[:sample]:
        try:
            with open(dest.parent / n / "meta.json", "rb") as f:
                other = json.loads(f.read(1 << 20)).get("job")
        except (OSError, ValueError, AttributeError):
            continue
        if other is not None and other != job:
            return True
    return False


def _install_aside(tmp: Path, dest: Path, conflict_tag: str | None) -> tuple[Path, bool]:
    """Another run has ``dest`` (or its siblings): keep our files next to the trace root,
    never inside it, in ``<root>.conflict-<tag>/``."""
    root = dest.parent
    tag = conflict_tag or str(os.getpid())
    alt_root = root.with_name(f"{root.name}.conflict-{tag}")
    if dir_is_nonempty(alt_root / dest.name):  # an earlier job with the same tag lost too
        alt_root = root.with_name(f"{root.name}.conflict-{tag}-{os.getpid()}")
    alt_root.mkdir(mode=0o777, exist_ok=True)
    reason = refuse_reason(alt_root)
    if reason is not None:
        raise WriteConflict(errno.EEXIST, f"{dest} was filled by another run, and the "
                            f"fallback directory {reason}", str(alt_root))
    alt = alt_root / dest.name
    os.rename(tmp, alt)
    return alt, True


def write_rank_dir(rank_dir: str | os.PathLike[str], *, events: list[dict[str, Any]],
                   meta: dict[str, Any] | Callable[[], dict[str, Any]],
                   dag_gml: str | Callable[[], str] | None, gzip: bool = False,
                   offset_us: float = 0.0, base_time_ns: int = 0,
                   overwrite: bool = False, yield_every: int = 0,
                   extra_files: dict[str, bytes | Callable[[], bytes]] | None = None,
                   pause: Callable[[], None] | None = None,
                   conflict_tag: str | None = None) -> WriteResult:
    """Write the files of one process into ``rank_dir`` (see the module doc).

    ``events`` carry local µs; ``offset_us`` maps them to µs since ``base_time_ns`` (Unix
    ns on rank 0's clock), written as ``baseTimeNanoseconds`` in trace.json and
    ``base_time_ns`` in meta.json. ``meta`` (or a function building it) also gets
    ``format``, ``trace_file``, ``num_events`` and ``base_time_ns``; ``dag_gml`` may be a
    function too: an exception from either is logged and leaves that file out.
    ``yield_every`` > 0 (the capture's writer thread passes :data:`YIELD_EVERY`) releases
    the GIL regularly while building the trace (``pause``: what to call there instead of
    ``time.sleep(0)``, e.g. a :class:`~echo_trace.pacing.Pacer`). ``extra_files`` (name → bytes, or a
    function making them) are written after ``dag.gml``; one that fails is logged and left
    out, like ``dag.gml``. ``conflict_tag`` names the job (written as meta.json's ``job``)
    and the fallback directory of a rank directory another run filled meanwhile, or whose
    siblings hold another job's trace (default: the process id). Raises
    ``OSError`` when the rank directory is refused or the trace cannot be written
    (nothing is left behind then).
    """
    dest = Path(rank_dir)
    reason = refuse_reason(dest)
    if reason is not None:
        raise PermissionError(errno.EPERM, f"rank directory {reason}", str(dest))
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{dest.name}.", suffix=".tmp", dir=dest.parent))
    written: dict[str, str] = {}
    errors: dict[str, str] = {}
    try:
        rank = int(meta.get("rank", 0)) if isinstance(meta, dict) else 0
        meta_doc: dict[str, Any] | None = None
        try:
            meta_doc = dict(meta() if callable(meta) else meta)
            rank = int(meta_doc.get("rank", 0))
        except Exception as e:  # noqa: BLE001 - the trace is written without meta.json
            errors["meta"] = f"{type(e).__name__}: {e}"
        chrome = trace_events(events, rank=rank, host=str((meta_doc or {}).get("host", "")),
                              offset_us=offset_us, yield_every=yield_every, pause=pause)
        rest = {"displayTimeUnit": "ms", "baseTimeNanoseconds": int(base_time_ns),
                "otherData": {"format": FORMAT, "rank": rank,
                              "world_size": (meta_doc or {}).get("world_size", 1),
                              "echo_version": (meta_doc or {}).get("echo_version")}}
        name = "trace.json.gz" if gzip else "trace.json"
        body = _dump_trace(chrome, rest, yield_every, pause)
        del chrome
        if gzip:
            body = gzip_mod.compress(body, compresslevel=6, mtime=0)
        _create(tmp / name, body)
        written["trace"] = name
        del body
        try:
            gml = dag_gml() if callable(dag_gml) else dag_gml
            if gml is not None:
                _create(tmp / "dag.gml", gml.encode())
                written["dag"] = "dag.gml"
        except Exception as e:  # noqa: BLE001
            errors["dag"] = f"{type(e).__name__}: {e}"
        for fname, data in (extra_files or {}).items():
            try:
                _create(tmp / fname, data() if callable(data) else data)
                written[fname] = fname
            except Exception as e:  # noqa: BLE001
                errors[fname] = f"{type(e).__name__}: {e}"
        if meta_doc is not None:
            try:
                meta_doc.update(format=FORMAT, trace_file=name, num_events=len(events),
                                base_time_ns=int(base_time_ns))
                if conflict_tag:
                    meta_doc["job"] = conflict_tag
                _create(tmp / "meta.json", dumps_json(meta_doc, indent=1))
                written["meta"] = "meta.json"
            except Exception as e:  # noqa: BLE001
                errors["meta"] = f"{type(e).__name__}: {e}"
        for what, err in errors.items():
            fname = {"meta": "meta.json", "dag": "dag.gml"}.get(what, what)
            log.warning("echo_trace: could not write %s of %s (%s); the trace is kept "
                        "without it", fname, dest, err)
        os.chmod(tmp, 0o777 & ~_umask())
        _fsync_dir(tmp)
        where, conflict = _install(tmp, dest, overwrite=overwrite, conflict_tag=conflict_tag)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    _fsync_dir(dest.parent)
    result = WriteResult({k: where / v for k, v in written.items()})
    result.rank_dir = where
    result.conflict = conflict
    result.errors = errors
    return result
