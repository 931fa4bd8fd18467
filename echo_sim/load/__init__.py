"""Read any supported trace into the one in-memory :class:`~echo_sim.trace.model.Trace`.

``load_trace(path)`` looks at what the path holds (see :mod:`echo_sim.load.discover`):
echo_trace rank directories, ByteProfile/dPRO directories, PyTorch profiler (Kineto) JSON
files, a TrioSim trace.csv or an Aceso op database; one rank directory, a root of many, or a
single file (a trace
``echo_sim combine`` wrote is split back into its ranks), or a columnar store
(:mod:`echo_sim.store`, written by ``echo_sim convert``). Bad input ends in one
:class:`~echo_sim.errors.EchoError` whose one-line message names the file and the problem.

Inputs are bounded (:mod:`echo_sim.load.files`: regular files only, size caps, gzip-bomb
limit; use :func:`~echo_sim.load.files.read_regular_file` for any other input file), names
are escaped for terminals (:func:`echo_sim.textsafe.safe_text`), and what the loader
tolerated (steps dropped from a crashed run) is listed in ``Trace.notes``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from echo_sim.load.aceso import load_aceso
from echo_sim.load.byteprofile import load_byteprofile
from echo_sim.load.discover import FORMATS, RankSource, discover
from echo_sim.load.echo import load_echo
from echo_sim.load.files import read_regular_file
from echo_sim.load.kineto import load_kineto
from echo_sim.load.triosim import load_triosim
from echo_sim.store.read import load_store
from echo_sim.store.schema import is_store
from echo_sim.trace.model import Trace
from echo_sim.trace.validate import check_times, raise_fatal, validate

__all__ = ["FORMATS", "PROGRESS_MIN_FILES", "RankSource", "discover", "load_trace",
           "read_regular_file"]

PROGRESS_MIN_FILES = 8
"""With ``progress=None``, progress is reported for this many files or more."""

_LOADERS = {"echo": load_echo, "byteprofile": load_byteprofile, "kineto": load_kineto,
            "triosim": load_triosim, "aceso": load_aceso}


def _progress_wrapper(
    progress: bool | None, n_files: int, what: str
) -> Callable[[Iterable[Any]], Iterable[Any]]:
    show = progress if progress is not None else n_files >= PROGRESS_MIN_FILES
    if not show:
        return iter
    from echo_sim.progress import progress_iter

    def wrap(items: Iterable[Any]) -> Iterable[Any]:
        return progress_iter(items, n_files, f"loading {what}", unit="rank",
                             enabled=True if progress else None)

    return wrap


def load_trace(path: str | Path, *, progress: bool | None = None,
               workers: int | None = None) -> Trace:
    """Load the trace at ``path`` (any format, any supported layout).

    ``progress``: report progress on stderr while reading rank files
    (:class:`echo_sim.progress.Progress`: a bar on a terminal, else a line every few
    seconds; nothing for a read under a second); ``None`` reports when there are at least
    :data:`PROGRESS_MIN_FILES` files, ``False`` never.
    ``workers``: processes that parse echo rank files in parallel; ``None`` picks one per
    core (up to 8) for traces over 64 MiB, else 1.

    Raises :class:`~echo_sim.errors.TraceNotFoundError` (missing path, no trace),
    :class:`~echo_sim.errors.TraceFormatError` (unreadable, truncated, malformed, cyclic
    dag, out-of-range values) or :class:`~echo_sim.errors.TraceMismatchError` (no step
    complete on every rank). Ranks that stopped at different steps keep their common
    complete steps, with a warning in ``Trace.notes``.
    """
    if is_store(path):  # the columnar store `convert` wrote: the same Trace, read fast
        trace = load_store(path)
        for note in trace.notes:
            logging.getLogger("echo_sim").warning("%s", note)
        return trace
    fmt, sources = discover(path)
    wrap = _progress_wrapper(progress, len(sources), fmt)
    if fmt == "echo":
        trace = load_echo(sources, source=str(path), wrap=wrap, workers=workers)
    else:
        trace = _LOADERS[fmt](sources, source=str(path), wrap=wrap)
    # dag cycles and step sets were checked while reading; the times are checked here
    raise_fatal(validate(trace, (check_times,)), str(path))
    for note in trace.notes:  # steps dropped from a crashed run and the like: say so once
        logging.getLogger("echo_sim").warning("%s", note)
    return trace
