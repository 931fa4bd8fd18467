"""The GPU path developed against recordings of live profiler objects (no GPU needed).

Every recording of ``../shared/reference/gpu-h200/`` (and the copy under ``tests/data/gpu/``)
goes through ``python -m echo_trace.gpu.recording``: the adapter over the recorded
``_KinetoEvent`` accessors of torch 2.11, the attribution, the recorded events and the writer,
as a GPU run would. What comes out is held to the training script's own step times:

* ``collect``'s iteration of the traced steps 3 and 4 within 5 % of the script's time;
* ``statistic``'s FW / BW / UPDATE per step equal to the GPU busy time of those events, idle
  the rest of the step, and the optimizer update inside its step;
* ``simulate`` with no flags within 5 % of the script's steps 3 and 4 where those agree within
  5 %, else within their spread ± 5 % (a launch-bound step's own jitter is wider than 5 %);
* ``simulate``'s peak memory within 10 % of the allocator's traced peak;
* ``validate`` passes.

The adapter is also run on the live CPU profiler of the installed torch.
"""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch

from echo_trace.gpu.adapter import RecordedEvent, event_row, missing_accessors, read_events
from echo_trace.gpu.recording import RAW_FILE, RecordingError, main, replay, write_replay
from tests.harness import run_echo_sim

REPO = Path(__file__).resolve().parent.parent
SHARED = REPO.parent / "shared" / "reference" / "gpu-h200"
LOCAL = REPO / "tests" / "data" / "gpu"


def _recordings() -> list[Path]:
    """Run directories (``<run>/echo/0_0/kineto_raw.json.gz`` + ``steps_traced.json``)."""
    runs = [p.parents[2] for root in (SHARED, LOCAL) if root.is_dir()
            for p in sorted(root.glob(f"*/echo/0_0/{RAW_FILE}"))]
    return [r for r in runs if (r / "steps_traced.json").exists()]


RUNS = _recordings()


def _sim(*args: str) -> subprocess.CompletedProcess[str]:
    return run_echo_sim(args, timeout=300, cwd=REPO)


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", *args], capture_output=True, text=True,
                          timeout=300, cwd=REPO)


@pytest.fixture(scope="module")
def replayed(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    out = tmp_path_factory.mktemp("replayed")
    got = {}
    for run in RUNS:
        dest = out / f"{run.parent.name}-{run.name}"
        write_replay(run / "echo" / "0_0", dest / "0_0")
        got[str(run)] = dest
    return got


def _script_ms(run: Path) -> list[float]:
    return [s * 1e3 for s in json.loads((run / "steps_traced.json").read_text())["step_s"]]


def _events(trace_dir: Path) -> list[dict[str, Any]]:
    with gzip.open(trace_dir / "0_0" / "trace.json.gz", "rt") as f:
        return [e for e in json.load(f)["traceEvents"] if e.get("ph") == "X"]


def test_the_recordings_are_there() -> None:
    assert any(r.is_relative_to(LOCAL) for r in RUNS)  # the copy kept in this repository
    if SHARED.is_dir():
        assert len([r for r in RUNS if r.is_relative_to(SHARED)]) >= 4


@pytest.mark.parametrize("run", RUNS, ids=lambda r: f"{r.parent.name}/{r.name}")
def test_collect_gives_the_scripts_step_times(run: Path, replayed: dict[str, Path]) -> None:
    got = json.loads(_sim("collect", str(replayed[str(run)]), "--json").stdout)
    per_step = {p["step"]: p["iteration_us"] / 1e3 for p in got["per_step"]}
    script = _script_ms(run)
    for step in (3, 4):
        assert per_step[step] == pytest.approx(script[step], rel=0.05), (step, per_step, script)


@pytest.mark.parametrize("run", RUNS, ids=lambda r: f"{r.parent.name}/{r.name}")
def test_statistic_counts_gpu_busy_time(run: Path, replayed: dict[str, Path]) -> None:
    trace = replayed[str(run)]
    events = _events(trace)
    steps = {e["args"]["step"]: (e["ts"], e["ts"] + e["dur"]) for e in events
             if e["name"] == "STEP"}
    busy: dict[str, float] = {"FW": 0.0, "BW": 0.0, "UPDATE": 0.0}
    for e in events:
        if e["cat"] in busy:
            t0, t1 = steps[e["args"]["step"]]
            # every event inside its step: the update too (it was outside, UPDATE 0.0)
            assert t0 - 0.01 <= e["ts"] and e["ts"] + e["dur"] <= t1 + 0.01, e
            busy[e["cat"]] += e["args"]["busy_us"]
    assert busy["UPDATE"] > 0
    got = json.loads(_sim("statistic", str(trace), "--json").stdout)
    cats = got["categories"]
    n = len(steps)
    # compute's kernels never overlap each other here: the parts are each kind's kernel time,
    # less what ran under communication (Comm_overlapped)
    compute = sum(cats[c]["total_us"] for c in busy) + cats["Comm_overlapped"]["total_us"]
    assert compute == pytest.approx(sum(busy.values()), rel=1e-6, abs=0.01)
    if cats["Comm_overlapped"]["total_us"] == 0:
        for cat, total in busy.items():
            assert cats[cat]["total_us"] == pytest.approx(total, rel=1e-6, abs=0.01), cat
    step_total = sum(t1 - t0 for t0, t1 in steps.values())
    assert cats["idle"]["total_us"] == pytest.approx(
        step_total - sum(busy.values()) - cats["Comm_exposed"]["total_us"], rel=1e-6)
    assert cats["idle"]["per_step_us"] == pytest.approx(cats["idle"]["total_us"] / n)
    assert sum(c["total_us"] for c in cats.values()) == pytest.approx(step_total, rel=1e-9)


@pytest.mark.parametrize("run", RUNS, ids=lambda r: f"{r.parent.name}/{r.name}")
def test_simulate_reproduces_the_traced_job(run: Path, replayed: dict[str, Path]) -> None:
    trace = replayed[str(run)]
    got = json.loads(_sim("simulate", str(trace), "--json").stdout)
    sim_ms = got["iteration_time_us"] / 1e3
    script = _script_ms(run)
    if abs(script[3] / script[4] - 1) <= 0.05:  # the script's own steps agree
        assert sim_ms == pytest.approx(script[3], rel=0.05)
        assert sim_ms == pytest.approx(script[4], rel=0.05)
    else:  # they do not (the launch-bound H100 Llama: 91.9, 78.6 ms): within their spread
        assert min(script[3:5]) * 0.95 <= sim_ms <= max(script[3:5]) * 1.05
    peak = max(e["args"]["peak_cuda_allocated_bytes"] for e in _events(trace)
               if e["name"] == "STEP")
    assert got["peak_memory_bytes"] == pytest.approx(peak, rel=0.10)


def test_replay_cli_writes_a_valid_rank_dir_and_never_overwrites(tmp_path: Path) -> None:
    run = next(r for r in RUNS if r.is_relative_to(LOCAL))
    out = tmp_path / "t" / "0_0"
    done = _cli("echo_trace.gpu.recording", str(run / "echo" / "0_0"), str(out))
    assert done.returncode == 0, done.stderr
    assert {p.name for p in out.iterdir()} == {"trace.json.gz", "meta.json", "dag.gml", RAW_FILE}
    meta = json.loads((out / "meta.json").read_text())
    assert meta["timer"] == "kineto" and meta["num_events"] > 0 and meta["dag_step"] == 5
    ok = _sim("validate", str(tmp_path / "t"))
    assert ok.returncode == 0, ok.stdout + ok.stderr
    again = _cli("echo_trace.gpu.recording", str(run / "echo" / "0_0"), str(out))
    assert again.returncode == 2 and again.stderr.count("\n") == 1
    assert "not empty" in again.stderr and "Traceback" not in again.stderr
    forced = _cli("echo_trace.gpu.recording", str(run / "echo" / "0_0"), str(out), "--force")
    assert forced.returncode == 0, forced.stderr


def test_bad_recordings_are_one_line_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                            ) -> None:
    rank = tmp_path / "r"
    rank.mkdir()
    assert main([str(rank), str(tmp_path / "o")]) == 2
    assert "no such file" in capsys.readouterr().err
    (rank / RAW_FILE).write_bytes(gzip.compress(b'{"events": [1, 2'))
    assert main([str(rank), str(tmp_path / "o")]) == 2
    assert "not valid JSON" in capsys.readouterr().err
    (rank / RAW_FILE).write_bytes(b"not gzip")
    assert main([str(rank), str(tmp_path / "o")]) == 2
    assert "cannot read" in capsys.readouterr().err
    (rank / RAW_FILE).write_bytes(gzip.compress(b'{"events": []}'))
    with pytest.raises(RecordingError, match="not an echo GPU recording"):
        replay(rank)
    assert not (tmp_path / "o").exists()


def test_the_adapter_classifies_device_events_without_activity_type() -> None:
    """torch 2.11's events have no ``activity_type()``: kernels, copies and fills by name,
    annotations and synchronisation records left out."""
    base = {"device_type": "DeviceType.CUDA", "start_ns": 5_000, "end_ns": 6_000,
            "duration_ns": 1_000, "correlation_id": 9, "linked_correlation_id": 1,
            "device_resource_id": 7, "is_user_annotation": False}
    cpu = dict(base, name="aten::mm", device_type="DeviceType.CPU", linked_correlation_id=0,
               correlation_id=1, sequence_nr=4, fwd_thread_id=0, device_resource_id=42)
    names = ["gemm_kernel", "Memcpy HtoD (Pageable -> Device)", "Memset (Device)",
             "Event Sync", "Stream Wait Event", "Optimizer.step#AdamW.step"]
    rows = [cpu] + [dict(base, name=n, is_user_annotation=n.startswith("Optimizer"))
                    for n in names]
    got = read_events([RecordedEvent(r) for r in rows], 0)
    assert got.by_name
    assert [(a.name, a.kind) for a in got.activities] == [
        ("gemm_kernel", "kernel"), ("Memcpy HtoD (Pageable -> Device)", "memcpy"),
        ("Memset (Device)", "memset")]
    assert got.launches[0].correlation == 1 and got.launches[0].tid == 42
    assert got.ops[0].seq == 4 and got.activities[0].ts_us == 5.0
    assert got.activities[0].dur_us == 1.0
    # with activity_type (torch 2.13), the profiler's own classification wins
    typed = [dict(r, activity_type="kernel" if r["name"] == "Event Sync" else "cpu_op")
             for r in rows]
    got2 = read_events([RecordedEvent(r) for r in typed], 0)
    assert not got2.by_name and [a.name for a in got2.activities] == ["Event Sync"]


def test_the_adapter_falls_back_for_every_optional_accessor() -> None:
    """A torch whose events have only the required accessors and ``end_ns``."""
    rows = [{"name": "aten::mm", "device_type": "DeviceType.CPU", "start_ns": 1_000,
             "end_ns": 3_000, "correlation_id": 1, "linked_correlation_id": 0},
            {"name": "k", "device_type": "DeviceType.CUDA", "start_ns": 4_000,
             "end_ns": 4_500, "correlation_id": 2, "linked_correlation_id": 1}]
    got = read_events([RecordedEvent(r) for r in rows], 0)
    assert got.ops == []  # no sequence numbers: no backward mapping, no failure
    assert got.launches[0].tid == 0 and got.activities[0].dur_us == 0.5
    assert missing_accessors(RecordedEvent) == [
        "name", "device_type", "start_ns", "correlation_id", "linked_correlation_id",
        "end_ns/duration_ns"]
    assert missing_accessors(torch._C._autograd._KinetoEvent) == []


def test_the_adapter_reads_the_live_profiler_of_this_torch() -> None:
    """The installed torch's live ``_KinetoEvent`` objects, and their recording, give the
    same inputs (the recording is what a GPU run's kineto_raw.json.gz holds)."""
    from torch.profiler import ProfilerActivity, profile

    x = torch.randn(64, 64, requires_grad=True)
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        (x @ x).relu().sum().backward()
        torch.cuda.synchronize() if torch.cuda.is_available() else None
    events = prof.profiler.kineto_results.events()
    live = read_events(events, 0)
    rows = json.loads(json.dumps([event_row(e) for e in events]))
    recorded = read_events([RecordedEvent(r) for r in rows], 0)
    assert live.ops and live.launches
    assert any(o.fwd_tid > 0 for o in live.ops)  # backward ops carry their forward thread
    assert live.ops == recorded.ops and live.launches == recorded.launches
    assert live.c10d == recorded.c10d and live.activities == recorded.activities
