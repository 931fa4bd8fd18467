"""Bounded, regular-file-only reading of input files (traces, meta, dag, comm profiles).

Every input echo_sim reads goes through :func:`read_regular_file` (plain bytes) or
:func:`read_maybe_gzip` (gunzipped when the file starts with the gzip magic). Both:

* open the path without blocking (``O_NONBLOCK``: a FIFO cannot hang the reader) and
  refuse anything that is not a regular file (``/dev/zero``, FIFOs, sockets, directories);
* refuse a file larger than ``max_bytes`` before reading it, and stop reading at
  ``max_bytes`` should it grow meanwhile;
* stream-decompress gzip in 1 MiB chunks and stop at the decompression limit
  (:func:`gunzip_limit`), so a gzip bomb costs at most that limit in memory, never more.

Limits (a documented choice; real traces sit far below them): a decompressed size of at most
``GZIP_MAX_RATIO`` (64) times the compressed size, with a floor of ``GZIP_MIN_LIMIT``
(64 MiB) for small files, and never more than ``MAX_INPUT_BYTES`` (4 GiB). Real Kineto and
echo traces compress 10-15x (30x for a repetitive synthetic one); a 1 MB gzip of zeros
(ratio ~1000) is refused after decompressing 64 MiB, a 9 MB one after 576 MiB. A file
refused by mistake loads once gunzipped (plain files are capped at 4 GiB only).

Failures are one-line :class:`~echo_sim.errors.EchoError` subclasses naming the file.
"""

from __future__ import annotations

import errno
import os
import stat
import zlib
from pathlib import Path

from echo_sim.errors import TraceFormatError, TraceNotFoundError

__all__ = [
    "GZIP_MAGIC",
    "GZIP_MAX_RATIO",
    "GZIP_MIN_LIMIT",
    "MAX_INPUT_BYTES",
    "gunzip_limit",
    "read_maybe_gzip",
    "read_regular_file",
]

GZIP_MAGIC = b"\x1f\x8b"
MAX_INPUT_BYTES = 4 << 30
"""Largest input file, and largest decompressed content, echo_sim reads (4 GiB)."""
GZIP_MAX_RATIO = 64
"""Largest decompressed / compressed size ratio accepted (gzip-bomb guard). Measured: real
Kineto and echo traces 10-15x, a deliberately repetitive synthetic profile 30x; zeros ~1000x."""
GZIP_MIN_LIMIT = 64 << 20
"""Decompressed size always accepted whatever the ratio (64 MiB)."""
_CHUNK = 1 << 20


def gunzip_limit(compressed_bytes: int) -> int:
    """Most bytes a gzip file of ``compressed_bytes`` may decompress to."""
    return min(MAX_INPUT_BYTES, max(GZIP_MIN_LIMIT, GZIP_MAX_RATIO * compressed_bytes))


def _open_regular(path: Path) -> tuple[int, int]:
    """``(fd, size)`` of a regular file opened read-only; EchoError for anything else."""
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        raise TraceNotFoundError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise TraceFormatError(f"{path}: is a directory, expected a file") from None
    except OSError as e:
        if e.errno == errno.ENXIO:  # a FIFO or socket without a writer
            raise TraceFormatError(f"{path}: not a regular file (a FIFO or socket)") from None
        raise TraceFormatError(f"{path}: cannot read ({e.strerror or e})") from None
    try:
        st = os.fstat(fd)
    except OSError as e:
        os.close(fd)
        raise TraceFormatError(f"{path}: cannot read ({e.strerror or e})") from None
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        kind = ("a directory" if stat.S_ISDIR(st.st_mode) else
                "a device" if stat.S_ISCHR(st.st_mode) or stat.S_ISBLK(st.st_mode) else
                "a FIFO" if stat.S_ISFIFO(st.st_mode) else "a socket or special file")
        raise TraceFormatError(f"{path}: is {kind}, expected a regular file")
    return fd, int(st.st_size)


def _too_big(path: Path, what: str, limit: int) -> TraceFormatError:
    return TraceFormatError(f"{path}: {what} is over the {_human(limit)} limit; "
                            "refusing to read it")


def _human(n: int) -> str:
    for shift, unit in ((30, "GiB"), (20, "MiB"), (10, "KiB")):
        if n >= 1 << shift:
            return f"{n / (1 << shift):.4g} {unit}"
    return f"{n} B"


def read_regular_file(path: str | Path, max_bytes: int = MAX_INPUT_BYTES) -> bytes | bytearray:
    """The bytes of the regular file ``path``, at most ``max_bytes`` (else EchoError).

    Returns a ``bytearray`` (no copy of big files); ``orjson.loads``, ``json.loads`` and
    ``.decode()`` take it as they take ``bytes``.

    Refuses devices (``/dev/zero``), FIFOs, sockets and directories without blocking.
    Raises :class:`TraceNotFoundError` for a missing file and :class:`TraceFormatError`
    for the rest; messages are one line and name the file.
    """
    p = Path(path)
    fd, size = _open_regular(p)
    try:
        if size > max_bytes:
            raise _too_big(p, f"file size {size} bytes", max_bytes)
        buf = bytearray(size)
        view = memoryview(buf)
        got = 0
        try:
            while got < size:
                n = os.readv(fd, [view[got:]])
                if n == 0:
                    break  # the file shrank meanwhile
                got += n
            extra = os.read(fd, 1)
        except OSError as e:
            raise TraceFormatError(f"{p}: cannot read ({e.strerror or e})") from None
        if extra:
            raise _too_big(p, "file (still growing)", size) if size >= max_bytes else \
                TraceFormatError(f"{p}: the file grew while being read; retry when the "
                                 "writer has finished")
        view.release()
        del buf[got:]
        return buf
    finally:
        os.close(fd)


def read_maybe_gzip(path: str | Path, max_bytes: int = MAX_INPUT_BYTES) -> bytes | bytearray:
    """The file's content, gunzipped (streamed, capped) when it starts with the gzip magic.

    A gzip file may decompress to at most ``min(max_bytes, gunzip_limit(size))`` bytes.
    Corrupt or truncated gzip raises :class:`TraceFormatError`.
    """
    p = Path(path)
    raw = read_regular_file(p, max_bytes)
    if raw[:2] != GZIP_MAGIC:
        return raw
    return _gunzip(p, raw, min(max_bytes, gunzip_limit(len(raw))))


def _gunzip(path: Path, raw: bytes | bytearray, limit: int) -> bytearray:
    out = bytearray()
    data = memoryview(raw)
    while True:  # one iteration per gzip member
        d = zlib.decompressobj(wbits=31)
        try:
            buf = data
            while True:
                piece = d.decompress(buf, _CHUNK)
                out += piece
                if len(out) > limit:
                    raise TraceFormatError(
                        f"{path}: gzip content decompresses to over {_human(limit)} "
                        f"({len(raw)} bytes compressed; limit: {GZIP_MAX_RATIO}x the "
                        f"compressed size, at least {_human(GZIP_MIN_LIMIT)}, at most "
                        f"{_human(MAX_INPUT_BYTES)}); refusing a possible gzip bomb (gunzip "
                        "it first to load it anyway)")
                buf = memoryview(d.unconsumed_tail)
                if d.eof or (not buf and not piece):
                    break
            if not d.eof:
                raise TraceFormatError(f"{path}: truncated or corrupt gzip (ends before "
                                       "the end of the compressed stream)")
        except zlib.error as e:
            raise TraceFormatError(f"{path}: truncated or corrupt gzip ({e})") from None
        rest = d.unused_data
        if not rest.lstrip(b"\0"):
            return out
        if rest[:2] != GZIP_MAGIC:
            raise TraceFormatError(f"{path}: trailing garbage after the gzip stream")
        data = memoryview(rest)
