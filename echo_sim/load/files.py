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

Memory: a file is refused before it is read when reading it would not fit in the memory
this process can still get (:func:`memory_budget`: the smaller of the system's available
memory and, under ``ulimit -v``, the address space left), and a whole-document JSON parse
(:func:`parse_budget_ok`) when about ``PARSE_FACTOR`` times the text would not: the parsed
objects of a Chrome trace take several times its text. Refusing there, in one line, is what
keeps a 2 GB malformed file from ending in a ``MemoryError`` traceback or a crash inside the
parser.

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
    "PARSE_FACTOR",
    "header_starts_with",
    "memory_budget",
    "parse_budget_ok",
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


#: memory a whole-document parse takes, as a multiple of the JSON text (measured on echo and
#: Kineto traces with orjson: 4-7x; a lower bound is used, so nothing loadable is refused)
PARSE_FACTOR = 3


def memory_budget() -> int | None:
    """Bytes this process can still allocate, as far as the system says (None: unknown): the
    smaller of ``MemAvailable`` (Linux) and, when ``RLIMIT_AS`` is set, that limit minus the
    process's current address space."""
    budget: int | None = None
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    budget = int(line.split()[1]) * 1024
                    break
    except (OSError, ValueError, IndexError):
        pass
    try:
        import resource

        soft, _ = resource.getrlimit(resource.RLIMIT_AS)
        if soft != resource.RLIM_INFINITY and soft > 0:
            used = 0
            with open("/proc/self/status", encoding="ascii") as f:
                for line in f:
                    if line.startswith("VmSize:"):
                        used = int(line.split()[1]) * 1024
                        break
            left = max(soft - used, 0)
            budget = left if budget is None else min(budget, left)
    except (ImportError, OSError, ValueError, IndexError):
        pass
    return budget


def _check_memory(path: Path, need: int, what: str) -> None:
    budget = memory_budget()
    if budget is not None and need > budget:
        raise TraceFormatError(f"{path}: {what} needs about {_human(need)} of memory, more than "
                               f"the {_human(budget)} available; refusing to read it")


def parse_budget_ok(path: Path, text_bytes: int) -> None:
    """Raise a one-line :class:`TraceFormatError` when parsing ``text_bytes`` of JSON as one
    document (about :data:`PARSE_FACTOR` times that in objects) would not fit in memory."""
    _check_memory(path, PARSE_FACTOR * text_bytes, f"parsing {_human(text_bytes)} of JSON")


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
        _check_memory(p, size, f"reading its {_human(size)}")
        try:
            buf = bytearray(size)
        except MemoryError:
            raise TraceFormatError(f"{p}: out of memory reading its {_human(size)}") from None
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
    try:
        return _gunzip(p, raw, min(max_bytes, gunzip_limit(len(raw))))
    except MemoryError:
        raise TraceFormatError(f"{p}: out of memory decompressing it") from None


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


def header_starts_with(path: Path, prefix: str) -> bool:
    """True when the first line of the text file ``path`` (BOM and spaces ignored, at most
    4 KiB read) starts with ``prefix``: how the CSV formats (TrioSim, Aceso) are sniffed."""
    try:
        with Path(path).open("r", encoding="utf-8-sig", errors="replace") as f:
            head = f.readline(4096)
    except OSError:
        return False
    return head.replace(" ", "").startswith(prefix)
