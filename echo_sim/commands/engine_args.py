"""``--engine`` and ``--workers``, shared by the analyses that run out of core.

``statistic``, ``collect`` and ``stragglers`` take a trace or a store (``convert``); on a
store they may run out of core (:mod:`echo_sim.outofcore`): ``--engine auto`` (default)
picks by size, ``memory`` loads the whole trace, ``duckdb`` reads the store a rank group at
a time with DuckDB queries. ``--workers N`` runs that many processes (the memory engine:
parsing the trace files; the duckdb engine: the rank groups), ``--workers ray`` runs the
rank groups as Ray tasks (the duckdb engine; the store on a path every node sees).
"""

from __future__ import annotations

import argparse
from typing import Any

from echo_sim.commands.spec import Arg, arg
from echo_sim.errors import ConfigError

__all__ = ["ENGINE_ARGS", "engine_of", "memory_workers", "workers_arg"]


def workers_arg(text: str) -> int | str:
    """argparse type of ``--workers``: a count >= 1 or ``ray``."""
    if text == "ray":
        return text
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: give a number of processes or 'ray'"
                                         ) from None
    if n < 1:
        raise argparse.ArgumentTypeError(f"{n} must be >= 1 (or 'ray')")
    return n


ENGINE_ARGS: tuple[Arg, ...] = (
    arg("--engine", choices=("auto", "memory", "duckdb"), default="auto",
        help="auto (default: duckdb for a big store, else memory), memory (load the whole "
             "trace), duckdb (a store from 'convert', one rank group at a time: memory "
             "bounded by the group, not the trace)"),
    arg("--workers", type=workers_arg, default=None, metavar="N|ray",
        help="processes for parsing (memory engine) or rank groups (duckdb engine), or "
             "'ray' to run the rank groups on a Ray cluster (RAY_ADDRESS, else a local one)"),
)


def engine_of(opts: Any) -> str:
    """``"memory"`` or ``"duckdb"`` for this command line."""
    from echo_sim.outofcore.engine import choose_engine

    opts.engine = engine = getattr(opts, "engine", "auto")  # specs built without the flags
    opts.workers = getattr(opts, "workers", None)
    if opts.workers == "ray":
        if engine == "memory":
            raise ConfigError("--workers ray runs the duckdb engine; drop --engine memory")
        engine = "duckdb"
    try:
        return choose_engine(opts.paths[0], engine)
    except ConfigError as e:
        raise ConfigError(str(e).replace("engine='duckdb'", "--engine duckdb")) from None


def memory_workers(workers: int | str | None) -> int | None:
    """``--workers`` for the memory engine's parser processes (None: the loader picks)."""
    return workers if isinstance(workers, int) else None
