"""tests/forker.py: a forked child is the process ``python ARGV`` would have started, its
ranks carry torchrun's environment, a failing rank stops the others, a hang is killed."""

from __future__ import annotations

import json
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.forker import Forker
from tests.harness import run_python

SHOW = textwrap.dedent("""\
    import atexit, json, os, sys
    atexit.register(lambda: print("atexit ran"))
    print(json.dumps({"argv": sys.argv, "cwd": os.getcwd(), "x": os.environ.get("ECHO_X"),
                      "path0": sys.path[0], "name": __name__,
                      "rank": os.environ.get("RANK"), "world": os.environ.get("WORLD_SIZE"),
                      "master": os.environ.get("MASTER_PORT")}))
    code = int(os.environ.get("EXIT_" + os.environ.get("RANK", "0"), "0"))
    ready = os.environ.get("READY")
    if code == 5 and ready:  # fail once the other rank is waiting
        import time
        for _ in range(3000):
            if os.path.exists(ready):
                break
            time.sleep(0.01)
    if code == 99:
        raise RuntimeError("boom")
    if code == 98:
        import signal, time
        signal.signal(signal.SIGTERM, lambda *_: (print("terminated", flush=True),
                                                  os._exit(143)))
        if ready:
            open(ready, "w").close()
        time.sleep(120)
    sys.exit(code)
    """)


@pytest.fixture(scope="module")
def forker() -> Iterator[Forker]:
    with Forker(preload=()) as f:
        yield f


@pytest.fixture
def script(tmp_path: Path) -> Path:
    path = tmp_path / "show.py"
    path.write_text(SHOW)
    return path


def _shown(stdout: str) -> list[dict[str, object]]:
    return [json.loads(ln) for ln in stdout.splitlines() if ln.startswith("{")]


def test_a_child_is_what_python_would_have_started(forker: Forker, script: Path,
                                                   tmp_path: Path) -> None:
    argv = [str(script), "a", "--b"]
    forked = forker.run(argv, cwd=tmp_path, env={"ECHO_X": "1"})
    fresh = run_python(argv, cwd=tmp_path, env={"ECHO_X": "1"})
    assert forked.returncode == fresh.returncode == 0, forked.stderr
    assert _shown(forked.stdout) == _shown(fresh.stdout)
    assert _shown(forked.stdout)[0]["name"] == "__main__"
    assert forked.stdout.rstrip().endswith("atexit ran")


def test_modules_exit_codes_and_tracebacks(forker: Forker, script: Path, tmp_path: Path) -> None:
    version = forker.run(["-m", "echo_sim", "--version"], cwd=tmp_path)
    assert version.returncode == 0
    assert version.stdout == run_python(["-m", "echo_sim", "--version"]).stdout
    assert forker.run([str(script)], env={"EXIT_0": "3"}).returncode == 3
    raised = forker.run([str(script)], env={"EXIT_0": "99"})
    assert raised.returncode == 1 and "RuntimeError: boom" in raised.stderr


def test_ranks_get_torchruns_environment(forker: Forker, script: Path) -> None:
    done = forker.run([str(script)], ranks=2)
    assert done.returncode == 0, done.stderr
    shown = _shown(done.stdout)
    assert [(s["rank"], s["world"]) for s in shown] == [("0", "2"), ("1", "2")]
    assert shown[0]["master"] == shown[1]["master"] is not None


def test_a_failing_rank_stops_the_others(forker: Forker, script: Path, tmp_path: Path,
                                         ) -> None:
    done = forker.run([str(script)], ranks=2, timeout=100,
                      env={"EXIT_0": "98", "EXIT_1": "5", "READY": str(tmp_path / "ready")})
    assert done.returncode == 5  # the failure's status, not the stopped rank's
    assert "terminated" in done.stdout


def test_a_hang_is_killed_at_the_timeout(forker: Forker, script: Path) -> None:
    with pytest.raises(AssertionError, match="timed out after 2s"):
        forker.run([str(script)], env={"EXIT_0": "98"}, timeout=2)
    assert forker.run([str(script)]).returncode == 0  # the server serves on
