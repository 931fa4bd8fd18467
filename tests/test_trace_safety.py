"""Never lose a trace, never write through a trap: the capture writer under failure.

Real processes and real signals where the failure is a process-level one (SIGTERM during
the write, SIGKILL during an overwrite, two runs racing for one TRACE_DIR); in-process
failures (ENOSPC, a failing meta/DAG/clock) go through the real writer with one system
call made to fail.
"""

from __future__ import annotations

import errno
import importlib
import json
import logging
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import networkx as nx
import pytest
import torch
from torch import nn

import echo_trace
from echo_trace import writer as writer_mod
from echo_trace.config import CaptureConfig
from echo_trace.timing.clock import ClockMap
from echo_trace.writer import dumps_json, write_rank_dir
from tests.harness import base_env
from tests.marks import needs_root

capture_mod = importlib.import_module("echo_trace.capture")  # echo_trace.capture: the function

# A job that announces "WRITING" when its files start being written (the writer is slowed
# by SLOW_WRITE_S so a signal can land inside the write) and "READY" once capture started
# (it then waits for GO_FILE, when set, so two jobs can be lined up).
JOB = textwrap.dedent("""
    import os, sys, time
    import torch
    from torch import nn
    import importlib
    import echo_trace
    capture_mod = importlib.import_module("echo_trace.capture")  # the module, not the function
    real = capture_mod.write_rank_dir
    def slow_write(*a, **k):
        print("WRITING", flush=True)
        time.sleep(float(os.environ.get("SLOW_WRITE_S", "0")))
        return real(*a, **k)
    capture_mod.write_rank_dir = slow_write
    out, mode = sys.argv[1], sys.argv[2]
    torch.manual_seed(0)
    model = nn.Sequential(*[nn.Linear(8, 8) for _ in range(4)])
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    end = 4 if mode == "background" else 100
    cap = echo_trace.capture(out, start_step=1, end_step=end,
                             overwrite=os.environ.get("OVERWRITE") == "1").start()
    print("READY", flush=True)
    go = os.environ.get("GO_FILE")
    while go and not os.path.exists(go):
        time.sleep(0.01)
    for i in range(6):
        model(torch.randn(2, 8)).sum().backward()
        opt.step()
    if mode == "background":  # the window closed at step 4: training goes on meanwhile
        for i in range(3000):
            model(torch.randn(2, 8)).sum().backward()
            opt.step()
            time.sleep(0.01)
    print("END", flush=True)
    # mode "exit": the interpreter exits; atexit stops the capture and writes
""")


def _start(tmp: Path, out: Path, mode: str, **env: str) -> subprocess.Popen[str]:
    script = tmp / "job.py"
    script.write_text(JOB)
    return subprocess.Popen([sys.executable, str(script), str(out), mode], env=base_env(env),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)


def _wait_for(proc: subprocess.Popen[str], word: str, timeout: float = 120.0) -> None:
    assert proc.stdout is not None
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if line.strip() == word:
            return
        if not line and proc.poll() is not None:
            raise AssertionError(f"job ended before {word}: {proc.stderr.read()[-3000:]}")
    os.killpg(proc.pid, signal.SIGKILL)
    raise AssertionError(f"no {word} within {timeout}s")


def _finish(proc: subprocess.Popen[str], timeout: float = 120.0) -> tuple[int, str, str]:
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        raise AssertionError(f"job hung:\n{err[-3000:]}") from None
    return proc.returncode, out, err


def _complete_rank_dir(d: Path) -> dict:
    assert sorted(os.listdir(d)) == ["dag.gml", "meta.json", "trace.json"], os.listdir(d)
    doc = json.loads((d / "trace.json").read_text())
    meta = json.loads((d / "meta.json").read_text())
    assert meta["num_events"] == sum(e["ph"] != "M" for e in doc["traceEvents"])
    assert nx.is_directed_acyclic_graph(nx.read_gml(d / "dag.gml"))
    return meta


def _no_leftovers(root: Path) -> None:
    assert [p.name for p in root.iterdir() if p.name.startswith(".")] == []


# ------------------------------------------------------------------ signals (real)
@pytest.mark.slow
@pytest.mark.parametrize("mode", ["exit", "background"])
def test_sigterm_during_the_write_waits_for_it(tmp_path, mode):
    """torchrun's SIGTERM landing mid-write (at exit, or during the background write while
    training goes on) kills the job only once the trace is complete."""
    out = tmp_path / "t"
    proc = _start(tmp_path, out, mode, SLOW_WRITE_S="1.5")
    _wait_for(proc, "WRITING")
    os.kill(proc.pid, signal.SIGTERM)
    rc, _, err = _finish(proc)
    assert rc == -signal.SIGTERM, err
    meta = _complete_rank_dir(out / "0_0")
    assert meta["steps"][:3] == [1, 2, 3]
    assert "wrote" in err and str(out / "0_0") in err  # the one line per process
    _no_leftovers(out)


@pytest.mark.slow
def test_killed_overwrite_leaves_the_old_run_whole(tmp_path):
    out = tmp_path / "t"
    rc, _, err = _finish(_start(tmp_path, out, "exit"))
    assert rc == 0, err
    first = _complete_rank_dir(out / "0_0")
    proc = _start(tmp_path, out, "exit", SLOW_WRITE_S="30", OVERWRITE="1")
    _wait_for(proc, "WRITING")
    os.killpg(proc.pid, signal.SIGKILL)
    _finish(proc)
    assert _complete_rank_dir(out / "0_0")["pid"] == first["pid"]  # old trace + old meta
    rc, _, err = _finish(_start(tmp_path, out, "exit", OVERWRITE="1"))  # not blocked
    assert rc == 0, err
    assert _complete_rank_dir(out / "0_0")["pid"] != first["pid"]
    _no_leftovers(out)


@pytest.mark.slow
def test_two_runs_into_one_dir_exactly_one_wins(tmp_path):
    out, go = tmp_path / "t", tmp_path / "go"
    procs = [_start(tmp_path, out, "exit", GO_FILE=str(go), SLOW_WRITE_S="1")
             for _ in range(2)]
    for p in procs:
        _wait_for(p, "READY")  # both found the rank directory empty
    go.touch()
    results = [_finish(p) for p in procs]
    assert [r[0] for r in results] == [0, 0], results
    winner = _complete_rank_dir(out / "0_0")["pid"]
    loser = next(p for p in procs if p.pid != winner)
    alt = tmp_path / f"t.conflict-{loser.pid}" / "0_0"
    assert _complete_rank_dir(alt)["pid"] == loser.pid  # kept, outside the trace root
    err = results[procs.index(loser)][2]
    assert "filled by another run" in err and str(alt) in err
    assert sorted(os.listdir(out)) == ["0_0"]


# ------------------------------------------------------------------ failures in-process
def _train(cap: echo_trace.Capture, steps: int = 4) -> None:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with cap:
        for _ in range(steps):
            model(torch.randn(2, 4)).sum().backward()
            opt.step()


def test_trace_is_written_first_and_independently(tmp_path, monkeypatch, caplog):
    caplog.set_level(logging.WARNING, logger="echo_trace")

    def broken(*a, **k):
        raise RuntimeError("dag exploded")

    monkeypatch.setattr("echo_trace.dag.step_dag", broken)
    _train(echo_trace.capture(tmp_path / "a", start_step=1, end_step=3))
    assert sorted(os.listdir(tmp_path / "a" / "0_0")) == ["meta.json", "trace.json"]
    assert any("dag exploded" in r.getMessage() for r in caplog.records)
    monkeypatch.undo()

    monkeypatch.setattr(capture_mod.Capture, "_meta_now", broken)
    monkeypatch.setattr(ClockMap, "shift_us", broken)
    cap = echo_trace.capture(tmp_path / "b", start_step=1, end_step=3)
    _train(cap)
    d = tmp_path / "b" / "0_0"
    assert sorted(os.listdir(d)) == ["dag.gml", "trace.json"]
    doc = json.loads((d / "trace.json").read_text())
    assert doc["baseTimeNanoseconds"] == 0  # local clock: the shift failed
    assert {"FW.0", "BW.2"} <= {e["name"] for e in doc["traceEvents"]}
    assert cap.rec.disabled_reason.startswith("building meta.json")


def test_failed_write_leaves_nothing_and_does_not_block(tmp_path, monkeypatch, caplog):
    caplog.set_level(logging.WARNING, logger="echo_trace")
    real_write = os.write

    def full(fd, data):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(writer_mod.os, "write", full)
    cap = echo_trace.capture(tmp_path, start_step=1, end_step=3)
    _train(cap)
    assert "No space left" in (cap.rec.disabled_reason or "")
    assert list(tmp_path.iterdir()) == []  # no *.tmp, no half directory
    monkeypatch.setattr(writer_mod.os, "write", real_write)
    _train(echo_trace.capture(tmp_path, start_step=1, end_step=3))
    _complete_rank_dir(tmp_path / "0_0")


def test_overwrite_that_fails_to_install_restores_the_old_run(tmp_path, monkeypatch):
    d = tmp_path / "0_0"
    write_rank_dir(d, events=[], meta={"rank": 0, "pid": 1}, dag_gml=None)
    real_rename = os.rename

    def rename(src, dst):
        if Path(src).name.endswith(".tmp") and Path(dst) == d:
            raise OSError(errno.EIO, "I/O error")
        return real_rename(src, dst)

    monkeypatch.setattr(writer_mod.os, "rename", rename)
    with pytest.raises(OSError, match="I/O error"):
        write_rank_dir(d, events=[], meta={"rank": 0, "pid": 2}, dag_gml=None, overwrite=True)
    assert json.loads((d / "meta.json").read_text())["pid"] == 1
    _no_leftovers(tmp_path)


def test_meta_is_strict_json(tmp_path, caplog):
    with pytest.raises(ValueError):
        dumps_json({"x": float("inf")})
    caplog.set_level(logging.WARNING, logger="echo_trace")
    r = write_rank_dir(tmp_path / "0_0", events=[], meta={"rank": 0, "x": float("nan")},
                       dag_gml=None)
    assert set(r) == {"trace"} and "meta" in r.errors  # never "NaN" in a file
    json.loads((tmp_path / "0_0" / "trace.json").read_text())


@pytest.mark.parametrize("raw", ["inf", "-inf", "nan", "Infinity", "-5"])
def test_memory_interval_must_be_finite(raw):
    with pytest.raises(ValueError, match="TRACE_MEMORY_INTERVAL_MS"):
        CaptureConfig.from_env({"TRACE_MEMORY_INTERVAL_MS": raw})
    with pytest.raises(ValueError, match="memory_interval_ms"):
        CaptureConfig(memory_interval_ms=float(raw))


@pytest.mark.slow
def test_trace_on_with_infinite_interval_is_one_clear_line(tmp_path):
    code = ("import torch; from torch import nn; m = nn.Linear(2, 2); "
            "o = torch.optim.SGD(m.parameters(), lr=0.1)\n"
            "for _ in range(5): m(torch.randn(1, 2)).sum().backward(); o.step()\n"
            "print('trained')")
    env = base_env({"TRACE_ON": "1", "TRACE_DIR": str(tmp_path / "t"),
                    "TRACE_MEMORY_INTERVAL_MS": "inf"})
    out = subprocess.run([sys.executable, "-c", "import echo_trace._autostart as a; "
                          "a.maybe_start()\n" + code], env=env, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0 and "trained" in out.stdout
    assert "Traceback" not in out.stderr
    assert "TRACE_MEMORY_INTERVAL_MS='inf': expected a finite number" in out.stderr
    assert not (tmp_path / "t").exists()


# ------------------------------------------------------------------ security
def test_planted_symlinks_are_never_followed(tmp_path):
    victim = tmp_path / "victim"
    victim.write_text("precious")
    root = tmp_path / "shared"
    d = root / "0_0"
    d.mkdir(parents=True)
    (d / "old.txt").write_text("old run")
    for name in ("trace.json.tmp", "meta.json.tmp", "dag.gml.tmp", "trace.json", "meta.json"):
        (d / name).symlink_to(victim)
    (root / ".0_0.tmp").symlink_to(victim)
    _train(echo_trace.capture(root, start_step=1, end_step=3, overwrite=True))
    assert victim.read_text() == "precious"
    _complete_rank_dir(d)


def test_rank_dir_that_is_a_symlink_is_refused(tmp_path, caplog):
    caplog.set_level(logging.WARNING, logger="echo_trace")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (tmp_path / "t").mkdir()
    (tmp_path / "t" / "0_0").symlink_to(elsewhere)
    cap = echo_trace.capture(tmp_path / "t", start_step=1, end_step=3, overwrite=True)
    _train(cap)
    assert not cap.enabled and list(elsewhere.iterdir()) == []
    assert any("is a symbolic link" in r.getMessage() for r in caplog.records)


@needs_root
def test_rank_dir_owned_by_another_user_is_refused(tmp_path, caplog):
    caplog.set_level(logging.WARNING, logger="echo_trace")
    foreign = tmp_path / "u" / "0_0"
    foreign.mkdir(parents=True)
    os.chown(foreign, 65534, 65534)
    cap = echo_trace.capture(tmp_path / "u", start_step=1, end_step=3, overwrite=True)
    _train(cap)
    assert list(foreign.iterdir()) == []
    assert any("owned by another user (uid 65534)" in r.getMessage() for r in caplog.records)
    with pytest.raises(PermissionError, match="owned by another user"):
        write_rank_dir(foreign, events=[], meta={}, dag_gml=None, overwrite=True)


# ------------------------------------------------------------------ messages
def test_one_line_per_written_trace_and_a_warning_when_too_short(tmp_path, capfd, caplog):
    cap = echo_trace.capture(tmp_path, start_step=1, end_step=3)
    _train(cap)
    err = capfd.readouterr().err
    n = json.loads((tmp_path / "0_0" / "meta.json").read_text())["num_events"]
    assert err.count("echo_trace:") == 1
    assert f"echo_trace: rank 0 wrote {n} events to {tmp_path / '0_0'}" in err
    caplog.set_level(logging.WARNING, logger="echo_trace")
    _train(echo_trace.capture(tmp_path / "short", start_step=10, end_step=12), steps=3)
    assert any("ended after 3 steps, before start_step=10" in r.getMessage()
               for r in caplog.records)
    assert not (tmp_path / "short").exists()


def test_second_writer_into_a_filled_rank_dir_keeps_its_files_aside(tmp_path):
    root = tmp_path / "t"
    first = write_rank_dir(root / "0_0", events=[], meta={"rank": 0, "pid": 1}, dag_gml=None)
    second = write_rank_dir(root / "0_0", events=[], meta={"rank": 0, "pid": 2}, dag_gml=None)
    assert (first.rank_dir, first.conflict) == (root / "0_0", False)
    assert second.conflict and second.rank_dir == tmp_path / f"t.conflict-{os.getpid()}" / "0_0"
    assert json.loads((root / "0_0" / "meta.json").read_text())["pid"] == 1
    assert json.loads(second["meta"].read_text())["pid"] == 2
    assert sorted(os.listdir(root)) == ["0_0"]
    bad = tmp_path / f"u.conflict-{os.getpid()}"
    bad.symlink_to(tmp_path)  # a planted fallback directory is refused, loudly
    write_rank_dir(tmp_path / "u" / "0_0", events=[], meta={}, dag_gml=None)
    with pytest.raises(writer_mod.WriteConflict, match="symbolic link"):
        write_rank_dir(tmp_path / "u" / "0_0", events=[], meta={}, dag_gml=None)
    assert sorted(p.name for p in (tmp_path / "u").iterdir()) == ["0_0"]


def test_a_job_never_mixes_its_ranks_with_another_jobs(tmp_path):
    """Two 2-rank jobs into one TRACE_DIR, their ranks racing: whichever job installed a rank
    first keeps the directory; every rank of the other job goes to one conflict directory."""
    root = tmp_path / "t"
    a0 = write_rank_dir(root / "0_0", events=[], meta={"rank": 0}, dag_gml=None,
                        conflict_tag="job-a")
    b1 = write_rank_dir(root / "0_1", events=[], meta={"rank": 1}, dag_gml=None,
                        conflict_tag="job-b")  # its own rank directory is free, but not ...
    b0 = write_rank_dir(root / "0_0", events=[], meta={"rank": 0}, dag_gml=None,
                        conflict_tag="job-b")
    a1 = write_rank_dir(root / "0_1", events=[], meta={"rank": 1}, dag_gml=None,
                        conflict_tag="job-a")
    assert (a0.conflict, a1.conflict, b0.conflict, b1.conflict) == (False, False, True, True)
    assert sorted(os.listdir(root)) == ["0_0", "0_1"]
    assert {json.loads((root / d / "meta.json").read_text())["job"] for d in ("0_0", "0_1")} \
        == {"job-a"}
    assert b0.rank_dir.parent == b1.rank_dir.parent == tmp_path / "t.conflict-job-b"
    # a later job with the same name that loses again keeps its files apart as well
    b0_again = write_rank_dir(root / "0_0", events=[], meta={"rank": 0}, dag_gml=None,
                              conflict_tag="job-b")
    assert b0_again.conflict and b0_again.rank_dir.parent.name.startswith("t.conflict-job-b-")
