"""Every command-line entry point of benchmarks/ and examples/ answers ``--help`` through
argparse (a usage line and exit status 0) and refuses an unknown flag with status 2 and the
usage on stderr."""

from __future__ import annotations

import runpy
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
SCRIPTS = sorted(
    p for p in [*REPO.glob("benchmarks/*.py"), *REPO.glob("examples/*.py")]
    if p.name not in ("__init__.py", "child.py", "models.py")
    and 'if __name__ == "__main__"' in p.read_text(encoding="utf-8"))


def _run(path: Path, *argv: str, monkeypatch: pytest.MonkeyPatch) -> int:
    monkeypatch.setattr(sys, "argv", [str(path), *argv])
    try:
        runpy.run_path(str(path), run_name="__main__")
    except SystemExit as e:
        return int(e.code or 0) if not isinstance(e.code, str) else 1
    return 0


def test_the_scripts_are_found() -> None:
    names = {p.name for p in SCRIPTS}
    assert {"accuracy.py", "overhead.py", "scale.py", "gen_trace.py", "sim_speed.py",
            "replay_fidelity.py", "train.py"} <= names


@pytest.mark.parametrize("path", SCRIPTS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_help_and_unknown_flag(path: Path, monkeypatch: pytest.MonkeyPatch,
                               capsys: pytest.CaptureFixture[str]) -> None:
    assert _run(path, "--help", monkeypatch=monkeypatch) == 0
    out = capsys.readouterr().out
    assert out.startswith("usage:"), out[:200]
    assert _run(path, "--no-such-flag", monkeypatch=monkeypatch) == 2
    err = capsys.readouterr().err
    assert "usage:" in err, err[-300:]  # the one-line complaint comes with the usage
