"""Find the per-rank trace files under a path and tell which format they are.

A path may be one rank directory, a root holding many rank directories at any depth up to
three (echo's ``<node>_<local>/``, ByteProfile's ``<rank>_<local>/``, dPRO's
``host<i>/<gpu>/``), a directory of PyTorch profiler files, or a single trace file
(``.json`` or ``.json.gz``). Formats are told apart by file names first and by sniffing the
first 64 KiB of a file second; nothing is parsed in full here.
"""

from __future__ import annotations

import re
import zlib
from pathlib import Path

from echo_sim.errors import TraceFormatError, TraceNotFoundError
from echo_sim.load.aceso import is_aceso_csv, pick_aceso_file
from echo_sim.load.jsonio import GZIP_MAGIC
from echo_sim.load.sources import RankSource
from echo_sim.load.triosim import is_triosim_csv

__all__ = ["FORMATS", "MAX_DEPTH", "RankSource", "discover", "sniff_format"]

FORMATS: tuple[str, ...] = ("echo", "byteprofile", "kineto", "triosim", "aceso")
MAX_DEPTH = 3
_HEAD_BYTES = 65536

_ECHO_TRACE = ("trace.json", "trace.json.gz")
_BPS_TRACE = re.compile(r"^bps_trace_.*\.json(\.gz)?$")
_SIDE_FILES = frozenset({
    "meta.json", "metadata.json", "comm.json", "io.json", "temp.json", "dag.gml",
    "gradient_name_list.txt", "arg_namesINpara_names.txt",
})
_KINETO_MARKS = (b'"schemaVersion"', b'"distributedInfo"', b'"deviceProperties"',
                 b"ProfilerStep#", b'"cpu_op"')
_OP_NAME = re.compile(rb'"name"\s*:\s*"(?:FW|BW|Comm|UPDATE)\.')

_HELP = (
    "looked for <node>_<local>/trace.json[.gz] + meta.json (echo), bps_trace_*.json or "
    "trace.json + dag.gml (ByteProfile/dPRO), PyTorch profiler *.json[.gz] (Kineto), "
    "trace.csv (TrioSim), {model}_{size}_mbs{m}_tp{t}_algo{a}.csv (Aceso), "
    f"up to {MAX_DEPTH} levels deep"
)


def _read_head(path: Path) -> bytes:
    """First 64 KiB of the file, gunzipped as far as the bytes allow (truncation-tolerant)."""
    try:
        with path.open("rb") as f:
            raw = f.read(_HEAD_BYTES)
    except OSError:
        return b""
    if raw[:2] == GZIP_MAGIC:
        try:
            return zlib.decompressobj(wbits=31).decompress(raw, _HEAD_BYTES)
        except zlib.error:
            return b""
    return raw


def sniff_format(head: bytes, *, has_meta: bool = False) -> str | None:
    """The format a trace file's first bytes point to, or None when they point to none."""
    if head.lstrip()[:1] not in (b"{", b"["):
        return None
    if any(m in head for m in _KINETO_MARKS):
        return "kineto"
    if b"echo-trace/1" in head or has_meta:
        return "echo"
    if _OP_NAME.search(head):
        return "echo" if b'"occ"' in head and b'"arg0"' not in head else "byteprofile"
    return None


def _json_problem(head: bytes) -> str | None:
    """Why a small file (read whole by :func:`_read_head`) is not JSON: ``truncated JSON at
    byte N`` or ``not valid JSON at byte N``; None when it parses, or is too big to tell."""
    if len(head) >= _HEAD_BYTES or head.lstrip()[:1] not in (b"{", b"["):
        return None
    import json

    text = head.decode("utf-8", errors="replace")
    try:
        json.loads(text)
    except json.JSONDecodeError as e:
        if e.pos >= len(text.rstrip()) or e.msg.startswith("Unterminated string"):
            return f"truncated JSON at byte {len(head)} (the file ends there: cut short?)"
        at = len(text[:e.pos].encode("utf-8", errors="replace"))
        return f"not valid JSON at byte {at} ({e.msg})"
    return None


def _natural_key(p: Path) -> list[object]:
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", str(p))]


def _host_of(directory: Path, root: Path) -> str:
    """Clock domain of a rank directory: dPRO's ``host<i>`` parent, or echo's node rank."""
    m = re.fullmatch(r"(\d+)_(\d+)", directory.name)
    if m:
        return f"node{m.group(1)}"
    if directory != root and directory.parent != root.parent:
        return directory.parent.name
    return directory.name


def _rank_dir_source(d: Path, root: Path) -> RankSource | None:
    """The trace in directory ``d`` if it is a rank directory, else None."""
    try:
        names = {p.name: p for p in d.iterdir() if p.is_file()}
    except OSError:
        return None
    dag = names.get("dag.gml")
    meta = names.get("meta.json")
    host = _host_of(d, root)
    if "trace.csv" in names and is_triosim_csv(names["trace.csv"]):
        return RankSource("triosim", names["trace.csv"], d, None, None, host)
    aceso = pick_aceso_file(d) if any(n.endswith("_algo0.csv") for n in names) else None
    if aceso is not None:
        return RankSource("aceso", aceso, d, None, None, host)
    bps = sorted((p for n, p in names.items() if _BPS_TRACE.match(n)), key=_natural_key)
    trace = next((names[n] for n in _ECHO_TRACE if n in names), None)
    if trace is not None:
        fmt = "echo" if meta is not None else sniff_format(_read_head(trace))
        if fmt is None and (dag is not None or bps):
            fmt = "byteprofile"
        if fmt is not None:
            return RankSource(fmt, trace, d, meta, dag, host)
    if bps:
        return RankSource("byteprofile", bps[-1], d, None, dag, host)
    return None


def _json_files(d: Path) -> list[Path]:
    try:
        return sorted(
            (p for p in d.iterdir() if p.is_file() and p.name not in _SIDE_FILES
             and (p.name.endswith(".json") or p.name.endswith(".json.gz"))),
            key=_natural_key,
        )
    except OSError:
        return []


def _file_source(f: Path) -> RankSource:
    """A single trace file named on the command line."""
    d = f.parent
    meta = d / "meta.json"
    dag = d / "dag.gml"
    if f.suffix == ".csv" and is_triosim_csv(f):
        return RankSource("triosim", f, d, None, None, d.name)
    if f.suffix == ".csv" and is_aceso_csv(f):
        return RankSource("aceso", f, d, None, None, d.name)
    if _BPS_TRACE.match(f.name):
        return RankSource("byteprofile", f, d, None, dag if dag.is_file() else None, d.name)
    fmt = ("echo" if f.name in _ECHO_TRACE and meta.is_file()
           else sniff_format(_read_head(f)))
    if fmt is None:
        why = _json_problem(_read_head(f))
        raise TraceFormatError(f"{f}: {why}" if why else (
            f"{f}: unknown trace format (valid: echo trace.json, ByteProfile/dPRO Chrome "
            "trace with FW./BW./Comm. events, PyTorch profiler JSON)"))
    if fmt == "kineto":
        return RankSource("kineto", f, None, None, None, "")
    return RankSource(fmt, f, d, meta if meta.is_file() and fmt == "echo" else None,
                      dag if dag.is_file() else None, _host_of(d, d))


def discover(path: str | Path) -> tuple[str, list[RankSource]]:
    """``(format, sources)`` for every rank under ``path``, in natural path order.

    Raises :class:`TraceNotFoundError` for a missing path, an empty directory or one with no
    trace, :class:`TraceFormatError` for an unknown or mixed format.
    """
    p = Path(path)
    if not p.exists():
        raise TraceNotFoundError(f"{p}: no such file or directory")
    if p.is_file():
        src = _file_source(p)
        return src.format, [src]
    if not p.is_dir():
        raise TraceNotFoundError(f"{p}: not a file or directory")
    try:
        empty = not any(p.iterdir())
    except OSError as e:
        raise TraceNotFoundError(f"{p}: cannot list directory ({e.strerror or e})") from None
    if empty:
        raise TraceNotFoundError(f"{p}: empty directory ({_HELP})")
    sources = _walk(p)
    if not sources:
        raise TraceNotFoundError(f"{p}: no trace found ({_HELP})")
    formats = sorted({s.format for s in sources})
    if len(formats) > 1:
        raise TraceFormatError(
            f"{p}: holds traces of several formats ({', '.join(formats)}); "
            "pass the directory of one run"
        )
    return formats[0], sources


def _walk(root: Path) -> list[RankSource]:
    found: list[RankSource] = []
    level = [root]
    for _depth in range(MAX_DEPTH + 1):
        nxt: list[Path] = []
        for d in level:
            src = _rank_dir_source(d, root)
            if src is not None:
                found.append(src)
                continue
            for f in _json_files(d):
                if sniff_format(_read_head(f)) == "kineto":
                    found.append(RankSource("kineto", f, None, None, None, ""))
            try:
                nxt.extend(c for c in d.iterdir() if c.is_dir() and not c.name.startswith("."))
            except OSError:
                continue
        level = sorted(nxt, key=_natural_key)
        if not level:
            break
    return sorted(found, key=lambda s: _natural_key(s.trace_file))
