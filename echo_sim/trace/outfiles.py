"""Output files written safely: atomic, never through a planted link, never over a device.

Every file echo_sim writes goes to a fresh temporary file created with ``mkstemp`` (``O_EXCL``,
mode 0600, a random name) in the target's own directory, then replaces the target with
``os.replace`` (a rename: it never follows a link at the target, and readers see the old or
the new file, never half of one). Before writing and again just before the rename the
target is checked with ``lstat``: it may be absent, or a regular file when ``overwrite`` is
true; a directory, a symbolic link, a device, a pipe or a socket is refused even then (as
root, replacing ``/dev/full`` would replace the device node).

Failures raise :class:`OutputError` (an :class:`EchoError`) carrying the path, a reason and an
:class:`OutputProblem`, so the CLI can name its flag (``--csv out.csv: ...``) while the library
message names the parameter (``overwrite=True``).
"""

from __future__ import annotations

import enum
import errno
import os
import stat
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from echo_sim.errors import EchoError

__all__ = ["OutputError", "OutputProblem", "atomic_output", "atomic_write", "check_output_path",
           "os_reason"]

_FILE_MODE = 0o666  # before the umask, as open() would create it


class OutputProblem(enum.Enum):
    """Why an output path was refused or could not be written."""

    EXISTS = "exists"  # a regular file, and overwrite is false
    DIRECTORY = "directory"
    SPECIAL = "special"  # symlink, device, pipe, socket
    OS = "os"  # the system refused (missing parent, read-only, full disk, /proc ...)


class OutputError(EchoError):
    """An output file cannot be written; ``path``, ``reason`` and ``problem`` say why."""

    def __init__(self, path: Path, reason: str, problem: OutputProblem) -> None:
        self.path = path
        self.reason = reason
        self.problem = problem
        hint = " (overwrite=True replaces it)" if problem is OutputProblem.EXISTS else ""
        super().__init__(f"cannot write {path}: {reason}{hint}")


def os_reason(e: OSError) -> str:
    """``strerror`` of an OSError, or its text when it has none."""
    return e.strerror or str(e) or type(e).__name__


def check_output_path(path: str | Path, *, overwrite: bool) -> Path:
    """``path`` as a Path when it may be written; raises :class:`OutputError` otherwise."""
    p = Path(path)
    try:
        st = os.lstat(p)
    except FileNotFoundError:
        return p
    except OSError as e:
        if e.errno == errno.ENOTDIR:
            raise OutputError(p, "a parent of it is not a directory", OutputProblem.OS) from e
        raise OutputError(p, os_reason(e), OutputProblem.OS) from e
    mode = st.st_mode
    if stat.S_ISDIR(mode):
        raise OutputError(p, "it is a directory", OutputProblem.DIRECTORY)
    if stat.S_ISLNK(mode):
        raise OutputError(p, "it is a symbolic link; refusing to replace it",
                          OutputProblem.SPECIAL)
    if not stat.S_ISREG(mode):
        raise OutputError(p, "not a regular file (device, pipe or socket); refusing to "
                             "replace it", OutputProblem.SPECIAL)
    if not overwrite:
        raise OutputError(p, "it exists", OutputProblem.EXISTS)
    return p


def _umask() -> int:
    """The process umask, read without changing it (Linux ``/proc``; else the usual 022)."""
    try:
        with open("/proc/self/status", encoding="ascii", errors="replace") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    return 0o022


def _tmp_suffix(p: Path) -> str:
    """The name's last two extensions (``.json.gz``), so writers that go by them still work."""
    return "".join(p.suffixes[-2:])


@contextmanager
def atomic_output(path: str | Path, *, overwrite: bool, mkdir: bool = False) -> Iterator[Path]:
    """Yield a fresh temporary path beside ``path``; on success it replaces ``path``.

    For writers that take a file name (csv, xlsxwriter, matplotlib, networkx). The temporary
    file keeps the target's extensions. On any failure it is removed and the target is left
    as it was; an ``OSError`` becomes :class:`OutputError`. A missing parent directory is an
    error unless ``mkdir``.
    """
    p = check_output_path(path, overwrite=overwrite)
    tmp: str | None = None
    try:
        if mkdir:
            p.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{p.name}.", suffix=_tmp_suffix(p),
                                   dir=p.parent if str(p.parent) else ".")
        os.close(fd)
        yield Path(tmp)
        _commit(tmp, p, overwrite=overwrite)
        tmp = None
    except OSError as e:
        raise OutputError(p, _reason(e, p), OutputProblem.OS) from e
    finally:
        if tmp is not None:
            _unlink_quietly(tmp)


def atomic_write(path: str | Path, data: bytes, *, overwrite: bool,
                 mkdir: bool = False) -> Path:
    """Write ``data`` to ``path`` atomically (see the module doc); returns the path.
    A missing parent directory is an error unless ``mkdir``."""
    p = check_output_path(path, overwrite=overwrite)
    tmp: str | None = None
    try:
        if mkdir:
            p.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{p.name}.", suffix=".tmp",
                                   dir=p.parent if str(p.parent) else ".")
        with os.fdopen(fd, "wb") as f:  # written through the descriptor mkstemp opened
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        _commit(tmp, p, overwrite=overwrite)
        tmp = None
    except OSError as e:
        raise OutputError(p, _reason(e, p), OutputProblem.OS) from e
    finally:
        if tmp is not None:
            _unlink_quietly(tmp)
    return p


def _commit(tmp: str, p: Path, *, overwrite: bool) -> None:
    os.chmod(tmp, _FILE_MODE & ~_umask())
    check_output_path(p, overwrite=overwrite)  # again: something may have appeared meanwhile
    os.replace(tmp, p)


def _reason(e: OSError, p: Path) -> str:
    if e.errno == errno.ENOTDIR:
        return "a parent of it is not a directory"
    if e.errno == errno.ENOENT and not p.parent.exists():
        return f"directory {p.parent} does not exist"
    return os_reason(e)


def _unlink_quietly(tmp: str) -> None:
    try:
        os.unlink(tmp)
    except FileNotFoundError:
        pass
    except OSError:  # a read-only or vanished directory: nothing more can be done
        return
