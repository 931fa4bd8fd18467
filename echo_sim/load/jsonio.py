"""Fast, failure-safe reading of (optionally gzipped) JSON trace files.

Parsing uses ``orjson`` (about 4x faster than the standard library on Chrome traces) over
the whole file at once. Every way a file can be bad — missing, unreadable, truncated gzip,
truncated or non-JSON text, the wrong top-level shape — becomes one
:class:`~echo_sim.errors.TraceFormatError` (or :class:`~echo_sim.errors.TraceNotFoundError`)
whose one-line message names the file.
"""

from __future__ import annotations

import gzip
import zlib
from pathlib import Path
from typing import Any

import orjson

from echo_sim.errors import TraceFormatError, TraceNotFoundError

__all__ = ["GZIP_MAGIC", "read_bytes", "read_head", "read_json", "read_trace_events"]

GZIP_MAGIC = b"\x1f\x8b"


def _is_gzip(raw: bytes) -> bool:
    return raw[:2] == GZIP_MAGIC


def read_bytes(path: Path) -> bytes:
    """The file's bytes, gunzipped when it starts with the gzip magic (whatever its name)."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise TraceNotFoundError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise TraceFormatError(f"{path}: is a directory, expected a file") from None
    except OSError as e:
        raise TraceFormatError(f"{path}: cannot read ({e.strerror or e})") from None
    if _is_gzip(raw):
        try:
            return gzip.decompress(raw)
        except (EOFError, OSError, zlib.error) as e:
            raise TraceFormatError(f"{path}: truncated or corrupt gzip ({_one_line(e)})") from None
    return raw


def read_head(path: Path, nbytes: int = 65536) -> bytes:
    """Up to ``nbytes`` of the file's (decompressed) start, for sniffing its format."""
    try:
        with path.open("rb") as f:
            magic = f.read(2)
            f.seek(0)
            if magic == GZIP_MAGIC:
                with gzip.GzipFile(fileobj=f) as g:
                    try:
                        return g.read(nbytes)
                    except (EOFError, OSError, zlib.error):
                        return b""
            return f.read(nbytes)
    except OSError:
        return b""


def read_json(path: Path) -> Any:
    """Parse a whole JSON (or gzipped JSON) file."""
    raw = read_bytes(path)
    if not raw.strip():
        raise TraceFormatError(f"{path}: empty file, expected JSON")
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError as e:
        kind = "truncated JSON" if _looks_truncated(raw, e) else "not valid JSON"
        raise TraceFormatError(f"{path}: {kind} ({_one_line(e)})") from None


def read_trace_events(path: Path, doc: Any = None) -> tuple[list[Any], dict[str, Any]]:
    """``(traceEvents, other top-level keys)`` of a Chrome trace in object or array form.

    ``doc``: the already parsed document, to avoid reading the file twice.
    """
    if doc is None:
        doc = read_json(path)
    if isinstance(doc, list):
        return doc, {}
    if not isinstance(doc, dict):
        raise TraceFormatError(
            f"{path}: expected a Chrome trace (a JSON object with 'traceEvents' or a JSON "
            f"array of events), found a JSON {type(doc).__name__}"
        )
    events = doc.get("traceEvents")
    if not isinstance(events, list):
        raise TraceFormatError(
            f"{path}: expected a 'traceEvents' list in the top-level object "
            f"(keys found: {', '.join(sorted(map(str, doc))[:8]) or 'none'})"
        )
    return events, doc


def _looks_truncated(raw: bytes, err: orjson.JSONDecodeError) -> bool:
    pos = getattr(err, "pos", None)
    return isinstance(pos, int) and pos >= len(raw.rstrip()) - 1


def _one_line(e: BaseException) -> str:
    return " ".join(str(e).split())[:200] or type(e).__name__
