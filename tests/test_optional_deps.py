"""Analysis-only installs: echo_sim without matplotlib says what to install, and a
communication profile path that is not a regular file is one clear error."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from echo_sim.cost.comm_profile import load_comm_profile
from echo_sim.errors import ProfileError

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("path", ["/dev/zero", "/nonexistent/comm.json", "/tmp"])
def test_comm_profile_reads_regular_files_only(path: str) -> None:
    with pytest.raises(ProfileError) as e:
        load_comm_profile(path)
    assert path in str(e.value) and "\n" not in str(e.value)


def test_plot_without_matplotlib_is_one_line(tmp_path: Path) -> None:
    # a child interpreter where importing matplotlib fails, as on an analysis-only install
    code = (
        "import sys, builtins\n"
        "real = builtins.__import__\n"
        "def fake(name, *a, **k):\n"
        "    if name.split('.')[0] == 'matplotlib':\n"
        "        raise ImportError(name)\n"
        "    return real(name, *a, **k)\n"
        "builtins.__import__ = fake\n"
        "from echo_sim import cli\n"
        f"sys.exit(cli.main(['statistic', {str(ROOT / 'tests/data/load/echo_real_ddp')!r}, "
        f"'--plot', {str(tmp_path / 'b.png')!r}]))\n")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120, cwd=ROOT)
    assert res.returncode == 2, res.stderr
    assert res.stderr.count("\n") == 1 and "echo-sim[plot]" in res.stderr
    assert not (tmp_path / "b.png").exists()
