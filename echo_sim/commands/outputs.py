"""Output flags of the CLI: every file a command writes is named by a flag, and every failure
to write it is one line naming that flag (``--csv out/: it is a directory``).

* :func:`output_file` yields a temporary path for writers that take a file name (CSV, XLSX,
  images, GML) and replaces the target only when the writer succeeded
  (:func:`echo_sim.trace.outfiles.atomic_output`: link-safe, never over a device).
* :func:`flag_errors` wraps a library call that writes by itself (``combine``, ``write_chrome``,
  ``write_echo_dirs``, ``write_train_config``, ``save_comm_profile``) and renames its errors
  after the flag.
* :func:`check_output` / :func:`check_output_dir` refuse a path before the command's work.

All of them go through :mod:`echo_sim.trace.outfiles`: an existing file is replaced only with
``--force``; a directory, link, device, pipe or socket never is; a missing parent directory
is never created; a failed write leaves nothing behind.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from echo_sim.errors import ConfigError, EchoError
from echo_sim.textsafe import safe_text
from echo_sim.trace import outfiles
from echo_sim.trace.outfiles import (
    OutputError,
    OutputProblem,
    atomic_output,
    check_output_path,
    os_reason,
)

__all__ = ["check_output", "check_output_dir", "flag_errors", "output_file", "output_message"]


def output_message(flag: str, e: OutputError) -> str:
    """The CLI's one line for an :class:`OutputError`: the flag, the path, the reason."""
    where = f"{flag} {safe_text(str(e.path))}"
    if e.problem is OutputProblem.EXISTS:
        return f"{where} exists; pass --force to replace it"
    return f"{where}: {e.reason}"


def _from_cause(flag: str, path: str | Path, e: BaseException) -> EchoError | None:
    """A flag-named error for an OSError, or an EchoError caused by one; else None."""
    cause = e if isinstance(e, OSError) else e.__cause__
    if isinstance(cause, OutputError):
        return ConfigError(output_message(flag, cause))
    if isinstance(cause, OSError):
        return ConfigError(f"{flag} {safe_text(str(path))}: {os_reason(cause)}")
    return None


@contextmanager
def flag_errors(flag: str, path: str | Path) -> Iterator[None]:
    """Run a library writer; its output errors become one line naming ``flag``."""
    try:
        yield
    except OutputError as e:
        raise ConfigError(output_message(flag, e)) from e
    except (EchoError, OSError) as e:
        mapped = _from_cause(flag, path, e)
        if mapped is None:
            raise
        raise mapped from e


def check_output(flag: str, path: str | Path, *, force: bool) -> Path:
    """Refuse ``path`` before any work: an existing file without ``--force``, anything not a
    regular file, or a parent directory that does not exist (never created for a file)."""
    with flag_errors(flag, path):
        return check_output_path(path, overwrite=force)


@contextmanager
def output_file(flag: str, path: str | Path, *, force: bool) -> Iterator[Path]:
    """A temporary file to write ``path`` through (see the module doc)."""
    check_output(flag, path, force=force)
    with flag_errors(flag, path), atomic_output(path, overwrite=force) as tmp:
        yield tmp


def check_output_dir(flag: str, path: str | Path) -> Path:
    """``path`` for an output directory, before any work: absent in an existing directory
    (it will be made) or a real directory, not a link to one."""
    with flag_errors(flag, path):
        return outfiles.check_output_dir(path)
