"""Fast, failure-safe, memory-bounded reading of (optionally gzipped) JSON trace files.

Parsing uses ``orjson`` (about 4x faster than the standard library on Chrome traces).
Files are read through :mod:`echo_sim.load.files` (regular files only, size caps, streamed
gunzip with a gzip-bomb limit). Every way a file can be bad — missing, unreadable, truncated
gzip, truncated or non-JSON text, the wrong top-level shape — becomes one
:class:`~echo_sim.errors.TraceFormatError` (or :class:`~echo_sim.errors.TraceNotFoundError`)
whose one-line message names the file.

:func:`read_trace_event_chunks` parses a Chrome trace ``{"traceEvents": [...], ...}`` a few
tens of thousands of events at a time, so a caller that turns each batch into columns never
holds a Python dict per event of the whole file (a 10^6-event file costs ~1.5 GB as dicts).
Batches are cut at ``},{"`` between two events: such a cut can only be wrong by landing
inside a string or a nested object, and then the batch does not parse (an open string or
bracket), so any failure falls back to parsing the whole file at once.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import orjson

from echo_sim.errors import TraceFormatError
from echo_sim.load.files import GZIP_MAGIC, parse_budget_ok, read_maybe_gzip

__all__ = ["CHUNK_BYTES", "GZIP_MAGIC", "read_bytes", "read_head", "read_json",
           "read_trace_event_chunks", "read_trace_events"]

CHUNK_BYTES = 8 << 20
"""Bytes of JSON text parsed per batch by :func:`read_trace_event_chunks`."""

_EVENTS_KEY = re.compile(rb'"traceEvents"\s*:\s*\[\s*')
_HEAD_SEARCH = 1 << 20  # traceEvents must start within the first MiB to be read in batches
_CUT = re.compile(rb'\}\s*,\s*\{\s*"')
_BLANK = re.compile(rb"\s*\Z")


def read_bytes(path: Path) -> bytes | bytearray:
    """The file's bytes, gunzipped when it starts with the gzip magic (whatever its name)."""
    return read_maybe_gzip(path)


def read_head(path: Path, nbytes: int = 65536) -> bytes:
    """Up to ``nbytes`` of the file's (decompressed) start, for sniffing its format."""
    import zlib

    try:
        with path.open("rb") as f:
            raw = f.read(nbytes)
    except OSError:
        return b""
    if raw[:2] == GZIP_MAGIC:
        try:
            return zlib.decompressobj(wbits=31).decompress(raw, nbytes)
        except zlib.error:
            return b""
    return raw


def _loads(path: Path, raw: bytes | bytearray | memoryview) -> Any:
    if _BLANK.match(raw):
        raise TraceFormatError(f"{path}: empty file, expected JSON")
    parse_budget_ok(path, len(raw))
    try:
        return orjson.loads(raw)
    except MemoryError:
        raise TraceFormatError(f"{path}: out of memory parsing it") from None
    except orjson.JSONDecodeError as e:
        kind = "truncated JSON" if _looks_truncated(raw, e) else "not valid JSON"
        raise TraceFormatError(f"{path}: {kind} ({_one_line(e)})") from None
    except RecursionError:
        raise TraceFormatError(f"{path}: JSON nested too deeply") from None


def _sniff(path: Path) -> None:
    """Refuse, from its first bytes, a file that cannot be a JSON document (a sparse or binary
    file), before reading all of it."""
    head = read_head(path, 4096)
    first = head.lstrip(b" \t\r\n")[:1]
    if head and first and first not in b"{[":
        raise TraceFormatError(f"{path}: not valid JSON (starts with {bytes(head[:8])!r})")


def read_json(path: Path) -> Any:
    """Parse a whole JSON (or gzipped JSON) file."""
    _sniff(path)
    return _loads(path, read_bytes(path))


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


def read_trace_event_chunks(path: Path, consume: Callable[[list[Any]], None],
                            reset: Callable[[], None],
                            chunk_bytes: int = CHUNK_BYTES) -> dict[str, Any]:
    """Feed the file's ``traceEvents`` to ``consume`` in batches; return the top-level object.

    The returned dict holds every top-level key but ``traceEvents``. Should a batch cut fail
    to parse (see the module docstring), ``reset()`` is called and ``consume`` gets the
    whole list parsed at once.
    """
    _sniff(path)
    raw = read_bytes(path)
    head = _head_keys(raw) if len(raw) > 2 * chunk_bytes else None
    if head is not None:
        top = _chunked(raw, head[1], consume, chunk_bytes)
        if top is not None:
            return {**head[0], **top}
        reset()
    doc = _loads(path, raw)
    del raw
    events, top = read_trace_events(path, doc)
    consume(events)
    top = dict(top)
    top.pop("traceEvents", None)
    return top


def _head_keys(raw: bytes | bytearray) -> tuple[dict[str, Any], int] | None:
    """(top-level keys before ``traceEvents``, offset of its first event), or None.

    The text before ``"traceEvents": [`` (Kineto writes ``schemaVersion``,
    ``deviceProperties``, ... first) must parse as an object once closed: that proves the
    key is at the top level.
    """
    m = _EVENTS_KEY.search(raw, 0, _HEAD_SEARCH)
    if m is None:
        return None
    try:
        doc = orjson.loads(bytes(raw[:m.start()]) + b'"traceEvents":[]}')
    except (orjson.JSONDecodeError, RecursionError):
        return None
    if not isinstance(doc, dict):
        return None
    doc.pop("traceEvents", None)
    return doc, m.end()


def _chunked(raw: bytes | bytearray, start: int, consume: Callable[[list[Any]], None],
             chunk_bytes: int) -> dict[str, Any] | None:
    """Batches cut at ``},{"``; None when a cut does not parse (caller falls back)."""
    view = memoryview(raw)
    pos = start
    for cut in _cuts(raw, start, chunk_bytes):
        try:
            batch = orjson.loads(b"[" + view[pos:cut + 1] + b"]")
        except (orjson.JSONDecodeError, RecursionError):
            return None
        if not isinstance(batch, list):
            return None
        consume(batch)
        del batch
        m = _CUT.match(raw, cut)
        pos = raw.rfind(b"{", cut, m.end() if m else cut + 1)
    try:
        last = orjson.loads(b'{"traceEvents":[' + view[pos:])
    except (orjson.JSONDecodeError, RecursionError):
        return None
    if not isinstance(last, dict) or not isinstance(last.get("traceEvents"), list):
        return None
    consume(last.pop("traceEvents"))
    return last


def _cuts(raw: bytes | bytearray, start: int, chunk_bytes: int) -> Iterator[int]:
    """Positions of the ``}`` ending a batch, about ``chunk_bytes`` apart."""
    pos = start + chunk_bytes
    n = len(raw)
    while pos < n - chunk_bytes:
        m = _CUT.search(raw, pos)
        if m is None:
            return
        yield m.start()
        pos = m.end() + chunk_bytes


def _looks_truncated(raw: bytes | bytearray | memoryview, err: orjson.JSONDecodeError) -> bool:
    pos = getattr(err, "pos", None)
    end = len(raw)
    while end and raw[end - 1] in b" \t\r\n":
        end -= 1
    return isinstance(pos, int) and pos >= end - 1


def _one_line(e: BaseException) -> str:
    return " ".join(str(e).split())[:200] or type(e).__name__
