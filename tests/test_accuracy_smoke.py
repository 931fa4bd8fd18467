"""benchmarks/accuracy.py: its helpers (fast) and its whole pipeline on a tiny model (slow).

The slow test traces one process, profiles gloo collectives, predicts and runs the real
2-process DDP job once, and checks the result document; it asserts no accuracy (timings on
a shared machine are benchmarks, not test outcomes).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from benchmarks.accuracy import (
    FIXED_MALLOC,
    SIZES,
    Case,
    _collectives_us,
    _err_pct,
    _iteration_us,
    _launch,
    _mem_delta,
    _sim_flags,
    _step_spread_pct,
    _summarise,
    _train_flags,
    main,
    table,
)
from echo_sim.cost.comm_profile import load_comm_profile
from tests.cli_util import run

__all__: list[str] = []


def test_iteration_time_is_median_of_slowest_rank_after_warmup() -> None:
    recs = [{"step_s": [9.0, 0.010, 0.020, 0.030, 0.050]},
            {"step_s": [9.0, 0.012, 0.018, 0.040, 0.001]}]
    # steps 1..4: slowest 0.012, 0.020, 0.040, 0.050 -> median 0.030 s
    assert _iteration_us(recs, 1) == pytest.approx(30_000.0)
    # a rank with fewer steps limits the steps compared
    assert _iteration_us([recs[0], {"step_s": [1.0, 0.5]}], 1) == pytest.approx(500_000.0)


def test_memory_delta_is_worst_rank_rss_growth() -> None:
    recs = [{"rss_before_model_bytes": 100, "peak_rss_bytes": 400},
            {"rss_before_model_bytes": 50, "peak_rss_bytes": 500}]
    assert _mem_delta(recs) == 450
    cuda = [{**r, "peak_cuda_allocated_bytes": b} for r, b in zip(recs, (7, 9), strict=True)]
    assert _mem_delta(cuda) == 9


def test_flags_and_configs_match_the_real_job() -> None:
    flags = _train_flags("pp", "tiny", steps=6, capture=None, nproc=2)
    assert flags[flags.index("--global-batch") + 1] == "8"  # micro-batch 2 x 4 micro-batches
    cap = _train_flags("single", "gpt-s", steps=10, capture=Path("/t"), nproc=1)
    assert cap[cap.index("--trace-end") + 1] == "9" and "--capture" in cap
    p = "comm.json"
    # no cluster: the simulator predicts for the traced hardware; tp's AdamW runs per parameter
    assert _sim_flags(Case(layout="tp", size="gpt-s"), p) == [
        "--tp", "2", "--no-vocab-parallel", "--optimizer", "loop", "--comm-profile", p]
    assert _sim_flags(Case(layout="fsdp", size="gpt-m"), p) == [
        "--dp", "2", "--fsdp", "--optimizer", "foreach", "--comm-profile", p]
    assert _sim_flags(Case(layout="ddp", size="convattn"), p, "cpu-gloo") == [
        "--dp", "2", "--cluster", "cpu-gloo", "--nodes", "1", "--gpus-per-node", "2",
        "--comm-profile", p]
    assert _sim_flags(Case(layout="pp", size="cnn"), p) == [
        "--pp", "2", "--global-batch", "128", "--schedule", "1f1b", "--comm-profile", p]
    assert set(SIZES) >= {"gpt-s", "gpt-m", "cnn", "tiny", "convattn"}
    ca = _train_flags("pp", "convattn", steps=6, capture=None, nproc=2)
    assert ca[ca.index("--global-batch") + 1] == "32"  # micro-batch 8 x 4 micro-batches


def test_summary_medians_and_table() -> None:
    reps = [{"rep": i, "measured_us": m, "predicted_us": p, "error_pct": _err_pct(p, m),
             "measured_mem_delta_bytes": 100 << 20, "predicted_mem_delta_bytes": 110 << 20}
            for i, (m, p) in enumerate(((100.0, 90.0), (120.0, 130.0), (110.0, 99.0)))]
    doc = _summarise((Case(layout="ddp", size="tiny"), Case(layout="tp", size="tiny")),
                     {"ddp/tiny": reps, "tp/tiny": [{"rep": 0, "error": "boom"}]}, [], [1.5],
                     steps=6, warmup=2, reps=3)
    ddp, tp = doc["cases"]
    assert (ddp["measured_us"], ddp["predicted_us"]) == (110.0, 99.0)
    assert ddp["error_pct"] == -10.0 and ddp["mem_error_pct"] == 10.0
    # repetitions measured 100, 120, 110: half their range over the median = 9.09 %; the
    # predictions 90, 130, 99 spread more, 20.2 %: the -10 % error is within that noise
    assert ddp["prediction_spread_pct"] == pytest.approx(20.2, abs=0.01)
    assert ddp["noise_pct"] == pytest.approx(20.2, abs=0.01) and ddp["within_noise"]
    assert doc["per_layout"]["ddp"] == {"median_abs_error_pct": 10.0,
                                        "median_noise_pct": 20.2,
                                        "median_abs_mem_error_pct": 10.0,
                                        # three repetitions bound no paired error
                                        "max_paired_bound_pct": None}
    assert tp["error"] == "boom" and doc["per_layout"]["tp"]["median_abs_error_pct"] is None
    text = table(doc)
    assert "| ddp | tiny | 2 | 0.11 | 0.10 | within noise (spread 20.2%; predictions " \
        "±20.2%) | -10.0 ±9.2 | -10.0, +8.3, -10.0 | - | 100.0 | 110.0 | +10.0 |" in text
    # the same predictions without their spread: the measured runs' 9.09 % decides
    steady = [{**r, "predicted_us": 99.0, "error_pct": _err_pct(99.0, r["measured_us"])}
              for r in reps]
    one = _summarise((Case(layout="ddp", size="tiny"),), {"ddp/tiny": steady}, [], [1.5],
                     steps=6, warmup=2, reps=3)["cases"][0]
    assert one["noise_pct"] == pytest.approx(9.09, abs=0.01) and not one["within_noise"]
    assert "-10.0 (spread 9.1%) |" in table({**doc, "cases": [one]})
    assert "| tp | tiny | 2 | failed: boom" in text
    assert "Pooled traces" not in text  # one trace per repetition: no pooled table


def test_pooled_traces_are_summarised_beside_the_first_trace() -> None:
    """``--traces N``: each repetition's pooled prediction, its error of medians, paired
    error and spread, set beside the first trace's on the repetitions that have both."""
    reps = [{"rep": i, "measured_us": m, "predicted_us": p, "error_pct": _err_pct(p, m),
             "pooled_predicted_us": q, "pooled_error_pct": _err_pct(q, m),
             "measured_mem_delta_bytes": 1, "predicted_mem_delta_bytes": 1}
            for i, (m, p, q) in enumerate(((100.0, 80.0, 95.0), (100.0, 130.0, 105.0),
                                           (100.0, 100.0, 100.0)))]
    doc = _summarise((Case(layout="ddp", size="tiny"),), {"ddp/tiny": reps}, [], [1.0],
                     steps=6, warmup=2, reps=3)
    doc["method"]["pooled_traces"] = "3 one-process traces"
    (row,) = doc["cases"]
    assert row["pooled_predicted_us"] == 100.0 and row["pooled_error_pct"] == 0.0
    assert row["pooled_rep_errors_pct"] == [-5.0, 5.0, 0.0]
    # predictions 80, 130, 100 spread 25 % (half the range over the median), pooled 5 %
    assert row["single_prediction_spread_pct"] == pytest.approx(25.0)
    assert row["pooled_prediction_spread_pct"] == pytest.approx(5.0)
    assert "| ddp | tiny | +0.0 % | +0.0 ±" in table(doc)
    assert "| 25.0 % | +0.0 % | +0.0 ±5.0 | 5.0 % | -5.0, +5.0, +0.0 |" in table(doc)
    assert "pooled_paired_ci_pct" not in row  # three repetitions bound nothing
    # six: the pooled errors' median gets its interval and bound, as the first trace's
    six = _summarise((Case(layout="ddp", size="tiny"),), {"ddp/tiny": reps + [
        dict(r, rep=r["rep"] + 3) for r in reps]}, [], [1.0], steps=6, warmup=2, reps=6)
    (row6,) = six["cases"]
    assert row6["pooled_paired_ci_pct"] == [-5.0, 5.0] and row6["pooled_paired_bound_pct"] == 5.0
    assert row6["paired_ci_pct"] == [-20.0, 30.0]
    assert "| +0.0 [-20.0..+30.0] | 25.0 % | +0.0 % | +0.0 [-5.0..+5.0] |" in table(six)


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_pipeline_end_to_end_on_a_tiny_model(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    for k in FIXED_MALLOC:  # --malloc fixed sets them in this process: restored after
        monkeypatch.setenv(k, "0")  # records the variable's state, so teardown restores it
        monkeypatch.delenv(k)
    out = tmp_path / "accuracy.json"
    assert main(["--sizes", "tiny", "--layouts", "ddp", "--reps", "1", "--steps", "5",
                 "--malloc", "fixed",
                 "--warmup", "2", "--profile-sizes", "1KB,4KB", "--profile-iters", "5",
                 "--profile-host-rounds", "3",
                 "--second-profile-replay", "--traces", "2", "--keep",
                 str(tmp_path / "work"), "--output", str(out)]) == 0
    doc = json.loads(out.read_text())
    assert doc["benchmark"] == "accuracy"
    assert {"platform", "cpu_count", "torch", "load_avg_1min_at_runs"} <= set(doc["machine"])
    assert (tmp_path / "work" / "rep0" / "comm.json").is_file()  # one profile per repetition
    # every process the run started ran with the fixed allocator, and the result says so
    assert doc["machine"]["malloc"] == FIXED_MALLOC
    for rank in (0, 1):
        rec = json.loads((tmp_path / "work" / "rep0" / "tiny" / "ddp-real"
                          / f"rank{rank}.json").read_text())
        assert rec["malloc"] == FIXED_MALLOC
    assert json.loads((tmp_path / "work" / "rep0" / "tiny" / "single" / "rank0.json")
                      .read_text())["malloc"] == FIXED_MALLOC
    assert "malloc: MALLOC_MMAP_THRESHOLD_=67108864 MALLOC_TRIM_THRESHOLD_=268435456" \
        in table(doc)
    # the second profile (a replay of the case's simulated step over the first) predicts
    # the same jobs, through the commands a user runs
    replayed = tmp_path / "work" / "rep0" / "tiny" / "ddp-replay.json"
    assert load_comm_profile(replayed).replay
    assert (tmp_path / "work" / "rep0" / "tiny" / "ddp-sim").is_dir()
    assert "replay-comm" in doc["method"]["second_comm_profile"]
    assert (tmp_path / "work" / "rep0" / "tiny" / "trace" / "0_0" / "trace.json").is_file()
    (case,) = doc["cases"]
    assert case["case"] == "ddp/tiny", case
    assert "error" not in case, case
    assert case["measured_us"] > 0 and case["predicted_us"] > 0
    assert case["error_pct"] == pytest.approx(
        100 * (case["predicted_us"] - case["measured_us"]) / case["measured_us"], abs=0.01)
    assert case["measured_mem_delta_bytes"] > 0 and case["predicted_mem_delta_bytes"] > 0
    (rep,) = case["reps"]
    assert {"measured_peak_rss_bytes", "predicted_peak_bytes", "breakdown",
            "load_avg_1min"} <= set(rep)
    assert rep["breakdown"][0]["compute_us"] > 0
    # where the real 2-process step went: the slowest rank's compute-thread CPU and the rest
    split = rep["split"]
    assert split["measured_cpu_us"] > 0 and split["measured_off_cpu_us"] >= 0
    assert split["predicted_compute_us"] == rep["breakdown"][0]["compute_us"]
    assert case["split"] == split and "Where the step goes" in table(doc)
    assert set(doc["per_layout"]) == {"ddp"}
    assert case["second_error_pct"] == pytest.approx(
        100 * (case["second_predicted_us"] - case["measured_us"]) / case["measured_us"],
        abs=0.01)
    assert rep["second_error_pct"] == case["second_rep_errors_pct"][0]
    assert rep["replay_argv"][3:5] == ["replay-comm", "rep0/tiny/ddp-sim"]
    assert "Second profile (replay-comm of each case's simulated timeline" in table(doc)
    assert doc["single_traces"][0]["rss_before_model_bytes"] > 0
    # --traces 2: a second one-process run traced, the case also predicted from both pooled
    assert len(doc["single_traces"][0]["pooled_traced_iteration_us"]) == 2
    assert rep["pooled_simulate_argv"][4:6] == ["rep0/tiny/trace", "rep0/tiny/trace2"]
    assert case["pooled_error_pct"] == pytest.approx(
        100 * (case["pooled_predicted_us"] - case["measured_us"]) / case["measured_us"],
        abs=0.01)
    assert "Pooled traces (2 one-process traces" in table(doc)
    # the two real runs pooled: the prediction lies between theirs and says what it pooled
    work = tmp_path / "work" / "rep0"

    def sim(*paths: Path) -> dict[str, Any]:
        code, out, err = run(capsys, "simulate", *paths, "--dp", "2", "--comm-profile",
                             work / "comm.json", "--json")
        assert code == 0, err
        return dict(json.loads(out))

    capsys.readouterr()  # the benchmark's own table
    runs = [work / "tiny" / "trace", work / "tiny" / "trace2"]
    lo, hi = sorted(sim(t)["iteration_time_us"] for t in runs)
    both = sim(*runs)
    assert lo <= both["iteration_time_us"] <= hi
    assert any("per-op median over 2 traces" in m for m in both["models"])
    # the kept run predicts again with today's models, measurements reused as they are
    again = tmp_path / "again.json"
    assert main(["--repredict", str(out), "--keep", str(tmp_path / "work"), "--output",
                 str(again)]) == 0
    redo = json.loads(again.read_text())
    assert redo["cases"][0]["measured_us"] == case["measured_us"]
    assert redo["cases"][0]["predicted_us"] > 0 and "repredicted" in redo["method"]
    assert redo["cases"][0]["reps"][0]["pooled_simulate_argv"] == rep["pooled_simulate_argv"]


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_a_real_fsdp2_job_stamps_its_collectives(tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """A real 2-process FSDP2 job through the benchmark's worker: every step records its
    blocking all-gathers and reduce-scatters (start, end on the host clock) on both ranks,
    the same number on each, so the step's collective time and arrival gaps can be read."""
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    recs = _launch(_train_flags("fsdp", "tiny", steps=4, capture=None, nproc=2),
                   tmp_path / "fsdp-real", 2, 180, "tiny")
    assert len(recs) == 2
    for r in recs:
        stamps = r["step_collective_stamps_us"]
        assert len(stamps) == len(r["step_s"]) == 4
        # FSDP2 over the tiny GPT's units: all-gathers in forward and backward, one
        # reduce-scatter per unit: several calls a step, each ending after it starts
        assert all(len(x) >= 6 and len(x) % 2 == 0 for x in stamps)
        assert all(e >= b for x in stamps for b, e in zip(x[0::2], x[1::2], strict=True))
    got = _collectives_us(recs, 1)
    assert got is not None
    own, half = got
    assert own > 0 and half >= 0


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_a_real_ddp_job_with_buffers_stamps_its_buffer_broadcast(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """DDP broadcasts a BatchNorm model's buffers before every forward (C++, under the Python
    ``_sync_buffers``): the worker stamps it once a step on both ranks."""
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    recs = _launch(_train_flags("ddp", "resnet", steps=4, capture=None, nproc=2),
                   tmp_path / "ddp-real", 2, 180, "resnet")
    for r in recs:
        stamps = r["step_collective_stamps_us"]
        assert len(stamps) == len(r["step_s"]) == 4
        assert all(len(x) == 2 and x[1] >= x[0] > 0 for x in stamps)
    got = _collectives_us(recs, 1)
    assert got is not None and got[0] > 0


def test_an_error_inside_the_noise_is_not_claimed() -> None:
    # the job's steps scatter by +-20 %: a 5 % error cannot be told from noise
    recs = [{"step_s": [1.0, 0.08, 0.12, 0.10, 0.08, 0.12, 0.10, 0.11, 0.09]}]
    spread = _step_spread_pct(recs, 1)
    assert 10.0 < spread < 25.0
    reps = [{"rep": 0, "measured_us": 100.0, "predicted_us": 105.0, "error_pct": 5.0,
             "step_spread_pct": spread, "measured_mem_delta_bytes": 1,
             "predicted_mem_delta_bytes": 1}]
    doc = _summarise((Case(layout="pp", size="tiny"),), {"pp/tiny": reps}, [], [],
                     steps=9, warmup=1, reps=1)
    (row,) = doc["cases"]
    assert row["within_noise"] and row["noise_pct"] == pytest.approx(spread, abs=0.01)
    assert f"within noise (spread {row['noise_pct']:.1f}%)" in table(doc)


def test_cli_rejects_bad_flags(capsys: pytest.CaptureFixture[str]) -> None:
    for argv, needle in ((["--sizes", "huge"], "--sizes huge"),
                         (["--layouts", "zero"], "--layouts zero"),
                         (["--warmup", "10", "--steps", "5"], "--warmup 10"),
                         (["--profile-iters", "0"], "--profile-iters must be >= 1")):
        with pytest.raises(SystemExit) as e:
            main(argv)
        assert e.value.code == 2 and needle in capsys.readouterr().err
