"""Shared by the CLI tests: run ``echo_sim`` in process, and a small two-rank trace on disk."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from echo_sim import cli
from echo_sim.trace.export import write_echo_dirs
from tests.test_statistic import two_rank_trace


def run(capsys: Any, *argv: Any) -> tuple[int, str, str]:
    """``echo_sim ARGV`` in this process: (exit status, stdout, stderr)."""
    code = cli.main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def write_two_rank_trace(root: Path) -> Path:
    """The two-rank test trace written as echo rank directories under ``root/run``."""
    d = root / "run"
    write_echo_dirs(two_rank_trace(), d)
    return d
