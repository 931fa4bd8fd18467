"""The README's first command ends in ``bash examples/demo.sh``: a real 2-rank DDP job traced
with no code change, then statistic, collect, critical, replay, simulate, search and report on
it. Run whole here, into a directory of the test's, as a user would run it."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from tests.harness import REPO, free_port, run_command

pytestmark = pytest.mark.slow

DEMO = REPO / "examples" / "demo.sh"


def _demo(out: Path, cwd: Path) -> tuple[int, str, str]:
    env = {"MASTER_PORT": str(free_port()),
           # torchrun and python of this interpreter's environment
           "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ["PATH"]])}
    proc = run_command(["bash", str(DEMO), str(out)], env=env, timeout=400, cwd=cwd)
    return proc.returncode, proc.stdout, proc.stderr


def test_the_readme_demo_runs_end_to_end(tmp_path: Path) -> None:
    # an earlier demo's output is there (its marker and a file of its own): one run shows
    # both that the demo works and that a second run replaces its own earlier output
    out = tmp_path / "demo"
    (out / "traces" / "0_0").mkdir(parents=True)
    (out / ".echo-demo").touch()
    (out / "traces" / "0_0" / "stale.json").write_text("{}")
    (out / "old-report.html").write_text("an earlier run's")
    rc, stdout, stderr = _demo(out, tmp_path)
    assert rc == 0, stderr[-3000:]
    assert sorted(p.name for p in (out / "traces").iterdir()) == ["0_0", "0_1"]
    for rank in ("0_0", "0_1"):
        meta = json.loads((out / "traces" / rank / "meta.json").read_text())
        assert meta["world_size"] == 2
    best = json.loads((out / "best.json").read_text())
    assert best["format"] == "echo-search-config/1" and best["layout"]["world_size"] == 8
    assert best["prediction"]["fits"] and best["prediction"]["iteration_time_us"] > 0
    for name in ("critical.json", "replay.json"):  # Chrome traces: open in Perfetto
        assert json.loads((out / name).read_text())["traceEvents"], name
    assert (out / "report.html").read_text().lstrip().startswith("<!DOCTYPE html>")
    assert "predicted:" in stdout and "wrote the best layout" in stdout
    assert "0.0 GiB" not in stdout  # search's table names a small model's peak in MiB
    # the earlier run's files are gone, its marker made again
    assert not (out / "old-report.html").exists()
    assert not (out / "traces" / "0_0" / "stale.json").exists()
    assert (out / ".echo-demo").is_file()


def test_the_demo_never_replaces_a_directory_it_did_not_make(tmp_path: Path) -> None:
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("the user's")
    rc, _, stderr = _demo(mine, tmp_path)
    assert rc == 2 and "is not an earlier demo's output" in stderr, stderr
    assert (mine / "notes.txt").read_text() == "the user's"
