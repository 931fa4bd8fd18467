"""Output files and directories written safely: the one path every file echo_sim writes takes.

* :func:`atomic_write` writes bytes to one file; :func:`atomic_output` yields a temporary
  path for writers that take a file name (csv, xlsxwriter, matplotlib, networkx);
* :func:`output_tree` writes files under an output directory (``simulate`` / ``synth
  --output DIR``: one rank directory each) and puts them in place together at the end.

The rules, the same everywhere:

1. The target is looked at with ``lstat``, never opened: it may be absent, or a regular file
   when ``overwrite`` is true. A directory, a symbolic link, a device, a FIFO or a socket is
   refused even then (opening a FIFO for writing blocks; as root, replacing ``/dev/full``
   would replace the device node).
2. The target's directory must exist and is never created. Inside an output tree the
   directories the tree makes (the root, ``0_0/``) are made one level at a time, each
   checked with ``lstat``: a symbolic link planted at any of them is refused, never followed.
3. Data goes to a fresh temporary sibling (``mkstemp``: ``O_EXCL``, mode 0600, a random
   name) that then replaces the target with ``os.replace`` (a rename: it never follows a link
   at the target, and readers see the old file or the new one, never half of one). The
   target is checked again just before the rename.
4. On any failure (a full disk, an I/O error, a writer's exception caused by one) the
   temporary files are removed, and :func:`output_tree` removes the files and directories it
   created: what was there before is left as it was.

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
from pathlib import Path, PurePath

from echo_sim.errors import EchoError

__all__ = ["OutputError", "OutputProblem", "OutputTree", "atomic_output", "atomic_write",
           "check_output_dir", "check_output_path", "os_reason", "output_tree"]

_FILE_MODE = 0o666  # before the umask, as open() would create it
_DIR_MODE = 0o777  # before the umask, as mkdir would create it
_MAX_PREFIX = 64  # characters of the target's name kept in a temporary file's name


class OutputProblem(enum.Enum):
    """Why an output path was refused or could not be written."""

    EXISTS = "exists"  # a regular file, and overwrite is false
    DIRECTORY = "directory"  # a directory where a file goes
    NOT_DIRECTORY = "not a directory"  # a file where an output directory goes
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


# ---------------------------------------------------------------------------- checks
def _lstat(p: Path) -> os.stat_result | None:
    """``lstat`` of ``p``, None when absent; other failures are :class:`OutputError`."""
    try:
        return os.lstat(p)
    except FileNotFoundError:
        return None
    except OSError as e:
        raise OutputError(p, _reason(e, p), OutputProblem.OS) from e


def _parent(p: Path) -> Path:
    return p.parent if str(p.parent) else Path(".")


def _check_parent(p: Path) -> None:
    """The directory ``p`` goes in exists (a link to one is the caller's own choice)."""
    parent = _parent(p)
    try:
        st = os.stat(parent)
    except FileNotFoundError:
        raise OutputError(p, f"directory {parent} does not exist", OutputProblem.OS) from None
    except OSError as e:
        raise OutputError(p, _reason(e, p), OutputProblem.OS) from e
    if not stat.S_ISDIR(st.st_mode):
        raise OutputError(p, "a parent of it is not a directory", OutputProblem.OS)


def _refuse_file(p: Path, st: os.stat_result, *, overwrite: bool) -> None:
    """Refuse an existing target ``p`` unless a regular file and ``overwrite``."""
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


def _require_dir(p: Path, st: os.stat_result) -> None:
    """``p`` (an output directory or a level of one) is a real directory, not a link."""
    if stat.S_ISLNK(st.st_mode):
        raise OutputError(p, "it is a symbolic link; refusing to write through it",
                          OutputProblem.SPECIAL)
    if not stat.S_ISDIR(st.st_mode):
        raise OutputError(p, "not a directory", OutputProblem.NOT_DIRECTORY)


def check_output_path(path: str | Path, *, overwrite: bool) -> Path:
    """``path`` as a Path when it may be written (rules 1 and 2 of the module doc); raises
    :class:`OutputError` otherwise."""
    p = Path(path)
    st = _lstat(p)
    if st is None:
        _check_parent(p)
    else:
        _refuse_file(p, st, overwrite=overwrite)
    return p


def check_output_dir(path: str | Path) -> Path:
    """``path`` as a Path when it may be an output directory: absent in an existing
    directory (it will be made), or a real directory (not a link to one)."""
    p = Path(path)
    st = _lstat(p)
    if st is None:
        _check_parent(p)
    else:
        _require_dir(p, st)
    return p


# ---------------------------------------------------------------------------- one file
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
    return "".join(p.suffixes[-2:])[-_MAX_PREFIX:]


def _mkstemp(p: Path, suffix: str) -> tuple[int, str]:
    """A new temporary file beside ``p``: (descriptor, name)."""
    return tempfile.mkstemp(prefix=f".{p.name[:_MAX_PREFIX]}.", suffix=suffix, dir=_parent(p))


def _write_temp(p: Path, data: bytes) -> str:
    """``data`` in a new temporary file beside ``p``, synced; its name. Removed on failure."""
    fd, tmp = _mkstemp(p, ".tmp")
    try:
        with os.fdopen(fd, "wb") as f:  # written through the descriptor mkstemp opened
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, _FILE_MODE & ~_umask())
    except BaseException:
        _unlink_quietly(tmp)
        raise
    return tmp


def _os_cause(e: BaseException) -> OSError | None:
    """The OSError behind a writer's own exception (xlsxwriter's ``FileCreateError``
    wraps the ``OSError`` of a full disk), if any."""
    for inner in (e.__cause__, e.__context__):
        if isinstance(inner, OSError):
            return inner
    return None


@contextmanager
def atomic_output(path: str | Path, *, overwrite: bool) -> Iterator[Path]:
    """Yield a fresh temporary path beside ``path``; on success it replaces ``path``.

    For writers that take a file name (csv, xlsxwriter, matplotlib, networkx). The temporary
    file keeps the target's extensions. On any failure it is removed and the target is left
    as it was; an ``OSError``, or a writer's exception caused by one, becomes
    :class:`OutputError`.
    """
    p = check_output_path(path, overwrite=overwrite)
    tmp: str | None = None
    try:
        fd, tmp = _mkstemp(p, _tmp_suffix(p))
        os.close(fd)
        yield Path(tmp)
        os.chmod(tmp, _FILE_MODE & ~_umask())
        _commit(tmp, p, overwrite=overwrite)
        tmp = None
    except OutputError:
        raise
    except OSError as e:
        raise OutputError(p, _reason(e, p), OutputProblem.OS) from e
    except Exception as e:
        cause = _os_cause(e)
        if cause is None:
            raise
        raise OutputError(p, _reason(cause, p), OutputProblem.OS) from e
    finally:
        if tmp is not None:
            _unlink_quietly(tmp)


def atomic_write(path: str | Path, data: bytes, *, overwrite: bool) -> Path:
    """Write ``data`` to ``path`` atomically (see the module doc); returns the path."""
    p = check_output_path(path, overwrite=overwrite)
    tmp: str | None = None
    try:
        tmp = _write_temp(p, data)
        _commit(tmp, p, overwrite=overwrite)
        tmp = None
    except OSError as e:
        raise OutputError(p, _reason(e, p), OutputProblem.OS) from e
    finally:
        if tmp is not None:
            _unlink_quietly(tmp)
    return p


def _commit(tmp: str, p: Path, *, overwrite: bool) -> None:
    check_output_path(p, overwrite=overwrite)  # again: something may have appeared meanwhile
    os.replace(tmp, p)


# ---------------------------------------------------------------------------- a directory
class OutputTree:
    """Files staged under one output directory; made by :func:`output_tree`, which puts
    them in place when its block succeeds and removes everything it made when not."""

    def __init__(self, root: Path, *, overwrite: bool) -> None:
        self.root = root
        self.overwrite = overwrite
        self._made: list[Path] = []  # directories this tree created, outermost first
        self._staged: list[tuple[str, Path]] = []  # (temporary file, target)
        self._placed: list[Path] = []  # targets renamed into place that did not exist

    def _target(self, rel: str | PurePath) -> Path:
        r = PurePath(rel)
        if r.is_absolute() or not r.parts or ".." in r.parts:
            raise ValueError(f"{rel!r}: give a relative path inside the output directory")
        return self.root / r

    def _levels(self, target: Path) -> list[Path]:
        """The directories from the root down to ``target``'s own."""
        levels = [self.root]
        for part in target.relative_to(self.root).parts[:-1]:
            levels.append(levels[-1] / part)
        return levels

    def check(self, rel: str | PurePath) -> Path:
        """Refuse ``root/rel`` now, before any work: a level that is not a real directory,
        or a target :func:`check_output_path` refuses. Returns the target."""
        target = self._target(rel)
        for level in self._levels(target):
            st = _lstat(level)
            if st is None:
                return target  # made by write(): nothing below it exists yet
            _require_dir(level, st)
        st = _lstat(target)
        if st is not None:
            _refuse_file(target, st, overwrite=self.overwrite)
        return target

    def write(self, rel: str | PurePath, data: bytes) -> Path:
        """Stage ``data`` for ``root/rel``, making its directories; returns the target."""
        target = self.check(rel)
        try:
            for level in self._levels(target):
                self._make_dir(level)
            self._staged.append((_write_temp(target, data), target))
        except OSError as e:
            raise OutputError(target, _reason(e, target), OutputProblem.OS) from e
        return target

    def _make_dir(self, d: Path) -> None:
        """``d`` as a real directory: made when absent (its parent must exist), never a link."""
        st = _lstat(d)
        if st is None:
            _check_parent(d)
            try:
                os.mkdir(d, _DIR_MODE)
                self._made.append(d)
            except FileExistsError:  # appeared meanwhile: checked below like any other
                pass
            st = _lstat(d)
            if st is None:
                raise OutputError(d, "it vanished while being made", OutputProblem.OS)
        _require_dir(d, st)

    def _commit(self) -> None:
        for i, (tmp, target) in enumerate(self._staged):
            for level in self._levels(target):  # again: a level may have been swapped
                st = _lstat(level)
                if st is None:
                    raise OutputError(level, "it vanished before the files were in place",
                                      OutputProblem.OS)
                _require_dir(level, st)
            existed = _lstat(target) is not None
            _commit_checked(tmp, target, overwrite=self.overwrite)
            self._staged[i] = ("", target)
            if not existed:
                self._placed.append(target)
        self._staged.clear()

    def _abort(self) -> None:
        for tmp, _ in self._staged:
            if tmp:
                _unlink_quietly(tmp)
        for target in self._placed:
            _unlink_quietly(str(target))
        for d in reversed(self._made):
            try:
                os.rmdir(d)
            except OSError:  # not empty (something else wrote there) or gone: leave it
                pass


def _commit_checked(tmp: str, target: Path, *, overwrite: bool) -> None:
    try:
        _commit(tmp, target, overwrite=overwrite)
    except OSError as e:
        raise OutputError(target, _reason(e, target), OutputProblem.OS) from e


@contextmanager
def output_tree(root: str | Path, *, overwrite: bool) -> Iterator[OutputTree]:
    """Yield an :class:`OutputTree` for the output directory ``root``.

    ``root`` must be absent in an existing directory (it is made) or a real directory
    (:func:`check_output_dir`). ``tree.check(rel)`` refuses a target early;
    ``tree.write(rel, data)`` stages a file (its directories made one level at a time, never
    through a link). When the block ends normally every staged file replaces its target;
    when it raises, nothing is put in place and what the tree made is removed.
    """
    tree = OutputTree(check_output_dir(root), overwrite=overwrite)
    done = False
    try:
        yield tree
        tree._commit()
        done = True
    finally:
        if not done:
            tree._abort()


# ---------------------------------------------------------------------------- helpers
def _reason(e: OSError, p: Path) -> str:
    if e.errno == errno.ENOTDIR:
        return "a parent of it is not a directory"
    if e.errno == errno.ENOENT and not _parent(p).exists():
        return f"directory {_parent(p)} does not exist"
    return os_reason(e)


def _unlink_quietly(tmp: str) -> None:
    try:
        os.unlink(tmp)
    except FileNotFoundError:
        pass
    except OSError:  # a read-only or vanished directory: nothing more can be done
        return
