"""What discovery hands a loader: one rank's files and their format (no I/O here).

Kept apart from :mod:`echo_sim.load.discover` so that the loaders, which take
:class:`RankSource` lists, and discovery, which asks a loader's sniffer whether a file is its
format (:func:`~echo_sim.load.triosim.is_triosim_csv`), import it without importing each other.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

__all__ = ["RankSource"]


@dataclass(frozen=True)
class RankSource:
    """One rank's files. ``host`` groups ranks that share a clock (dPRO's host directory)."""

    format: str
    trace_file: Path
    directory: Path | None = None
    meta_file: Path | None = None
    dag_file: Path | None = None
    host: str = ""
