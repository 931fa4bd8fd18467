"""benchmarks/accuracy.py's held-out families (BERT encoder, ResNet), its prediction through
the ``simulate`` command line, and its table's flags, spread and load averages.

The workloads train in this process; one tiny captured 1-process run of each (through the
benchmark's own ``--worker``) is predicted by the real ``python -m echo_sim simulate``
against a measured 2-rank gloo profile kept under ``tests/data/comm``. No multi-process job.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import json
import math
import random
import shutil
import statistics
import subprocess
from pathlib import Path
from typing import Any

import pytest

from benchmarks.accuracy import (
    CASES,
    FIXED_MALLOC,
    SIZES,
    WORKLOAD_MODULE,
    Case,
    SimulateError,
    _bias_lines,
    _collectives_us,
    _err_pct,
    _launch,
    _other_threads_us,
    _predict,
    _runqueue_us,
    _sim_flags,
    _simulate_argv,
    _split_us,
    _summarise,
    _train_flags,
    main,
    median_ci,
    other_threads_s,
    repredict,
    runqueue_wait_s,
    table,
)
from echo_trace.meta import malloc_settings

__all__: list[str] = []

REPO = Path(__file__).resolve().parent.parent
PROFILE = REPO / "tests" / "data" / "comm" / "gloo2_calibrated.json"
NEW = ("bert", "resnet")
TINY = {"bert": ["--layers", "1", "--hidden", "32", "--heads", "2", "--seq", "16",
                 "--vocab", "50", "--micro-batch", "4"],
        "resnet": ["--width", "4", "--blocks", "1", "--micro-batch", "4"]}


# ------------------------------------------------------------------------------ workloads
@pytest.mark.parametrize("size", NEW)
def test_new_families_are_cases_with_their_own_module(size: str) -> None:
    # BERT also runs tensor-parallel (a Megatron plan of its own) and as DeepSpeed ZeRO-1/2
    # jobs (the layouts search --zero-stages ranks)
    extra = {"tp", "zero1", "zero2"} if size == "bert" else set()
    assert {c.layout for c in CASES if c.size == size} == {"ddp", "fsdp"} | extra
    mod = importlib.import_module(WORKLOAD_MODULE[size])
    assert not WORKLOAD_MODULE[size].startswith("examples")
    # the benchmark's flags parse in the module, for the traced and the real job alike
    for layout in ("single", "ddp", "fsdp", *sorted(extra)):
        cfg = mod.parse_flags(_train_flags(layout, size, steps=6, capture=Path("/t"), nproc=1))
        assert (cfg.layout, cfg.steps, cfg.capture, cfg.trace_start, cfg.trace_end) == (
            layout, 6, True, 2, 5)
        assert cfg.micro_batch == int(SIZES[size][SIZES[size].index("--micro-batch") + 1])


@pytest.mark.parametrize("size", NEW)
def test_workload_trains_with_finite_falling_loss(size: str) -> None:
    mod = importlib.import_module(WORKLOAD_MODULE[size])
    cfg = mod.parse_flags(["--layout", "single", "--steps", "12", *TINY[size]])
    job = mod.train(cfg)
    assert len(job.step_s) == len(job.losses) == 12
    assert all(s > 0 for s in job.step_s)
    assert all(math.isfinite(x) for x in job.losses)
    # 10 classes: cross-entropy starts near ln 10 = 2.30, and AdamW brings it down
    assert 1.5 < job.losses[0] < 3.5
    assert min(job.losses[-3:]) < job.losses[0]


def test_bert_is_transformers_own_model() -> None:
    from benchmarks.workloads import hf_encoder

    cfg = hf_encoder.parse_flags(TINY["bert"])
    model = hf_encoder.build_model(cfg)
    assert type(model).__name__ == "BertForSequenceClassification"
    assert model.config.num_labels == 10 and len(model.bert.encoder.layer) == 1
    with pytest.raises(ValueError, match="--heads 3 must divide --hidden 32"):
        hf_encoder.Config(hidden=32, heads=3)


def test_resnet_stages_and_shapes() -> None:
    import torch

    from benchmarks.workloads import resnet

    net = resnet.ResNet(width=4, blocks=2)
    assert len(net.blocks()) == 6  # 3 stages x 2 BasicBlocks
    # a projection shortcut where the width or stride changes: stages 2 and 3's first block
    assert [type(b.shortcut).__name__ for b in net.blocks()] == [
        "Identity", "Identity", "Sequential", "Identity", "Sequential", "Identity"]
    assert net(torch.randn(2, 3, 32, 32)).shape == (2, 10)
    with pytest.raises(SystemExit):
        resnet.parse_flags(["--layout", "tp"])  # ddp / fsdp / single only


# ------------------------------------------------------------------------------ the CLI argv
ROOT = Path("/runs/keep")


@pytest.mark.parametrize(("layout", "flags"), [
    ("ddp", ["--dp", "2"]),
    ("fsdp", ["--dp", "2", "--fsdp", "--optimizer", "foreach"]),
    ("tp", ["--tp", "2", "--no-vocab-parallel", "--optimizer", "loop"]),
    ("pp", ["--pp", "2", "--global-batch", "24", "--schedule", "1f1b"]),
    ("zero1", ["--dp", "2", "--zero-stage", "1"]),
    ("zero2", ["--dp", "2", "--zero-stage", "2"]),
])
def test_simulate_argv_per_layout(layout: str, flags: list[str]) -> None:
    case = Case(layout=layout, size="convattn" if layout in ("tp", "pp") else "bert")
    if layout == "pp":
        flags[3] = "32"  # convattn: micro-batch 8 x 4 micro-batches
    argv = _simulate_argv(ROOT / "rep1" / case.size / "trace", case, ROOT / "rep1" / "comm.json",
                          None, None, ROOT)
    assert argv == ["python", "-m", "echo_sim", "simulate", f"rep1/{case.size}/trace", *flags,
                    "--comm-profile", "rep1/comm.json", "--json"]


def test_simulate_argv_timeline_cluster_and_outside_profile() -> None:
    case = Case(layout="ddp", size="resnet", nproc=4)
    argv = _simulate_argv(ROOT / "rep0" / "resnet" / "trace", case, Path("/shared/comm.json"),
                          ROOT / "rep0" / "resnet" / "ddp-sim", "cpu-gloo", ROOT)
    assert argv[4:] == ["rep0/resnet/trace", "--dp", "4", "--cluster", "cpu-gloo", "--nodes",
                        "1", "--gpus-per-node", "4", "--comm-profile", "/shared/comm.json",
                        "--json", "--output", "rep0/resnet/ddp-sim", "--force"]


@pytest.mark.parametrize("case", [Case(layout=lay, size=s)
                                  for lay in ("ddp", "fsdp", "tp", "pp", "zero1", "zero2")
                                  for s in ("gpt-s", "bert")], ids=lambda c: c.name)
def test_flags_give_the_library_config_the_job_needs(case: Case) -> None:
    """Every library knob the benchmark relies on reaches SimConfig through a flag."""
    from echo_sim.commands import simulate as sim_cmd

    parser = argparse.ArgumentParser(prog="simulate", add_help=False)
    sim_cmd.COMMAND.add_arguments(parser)
    cfg = sim_cmd.sim_config(parser.parse_args(["trace", *_sim_flags(case, "comm.json")]))
    got = {k: v for k, v in dataclasses.asdict(cfg).items() if k in (
        "dp", "tp", "pp", "fsdp", "optimizer_foreach", "vocab_parallel", "global_batch",
        "schedule", "cluster", "comm_profile", "zero_stage")}
    want: dict[str, Any] = {"dp": 1, "tp": 1, "pp": 1, "fsdp": False, "optimizer_foreach": None,
                            "vocab_parallel": True, "global_batch": None, "schedule": "1f1b",
                            "cluster": None, "comm_profile": "comm.json", "zero_stage": None}
    want.update({"ddp": {"dp": 2},
                 "fsdp": {"dp": 2, "fsdp": True, "optimizer_foreach": True},
                 "tp": {"tp": 2, "vocab_parallel": False, "optimizer_foreach": False},
                 "pp": {"pp": 2, "global_batch": 4 * (8 if case.size == "gpt-s" else 6)},
                 "zero1": {"dp": 2, "zero_stage": 1}, "zero2": {"dp": 2, "zero_stage": 2},
                 }[case.layout])
    assert got == want


def test_predict_runs_the_command_in_the_run_directory(tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    import benchmarks.launch

    calls: list[tuple[list[str], Any]] = []
    out = {"iteration_time_us": 41000.5, "peak_memory_bytes": 3 << 20, "hardware": {"x": 1},
           "calibration": {"c": 2}, "models": {"m": 3}, "warnings": ["w"],
           "ranks": [{"rank": 0, "stage": 0, "compute_us": 30000.04, "exposed_comm_us": 5.06,
                      "bubble_us": 0.0, "idle_us": 1.0, "peak_memory_bytes": 3 << 20,
                      "memory": {"params": 1}}]}

    def fake(args: list[str], *, timeout: float, cwd: Path) -> Any:
        calls.append((list(args), cwd))
        code = 0 if len(calls) == 1 else 2
        return subprocess.CompletedProcess(args, code, json.dumps(out) if code == 0 else "",
                                           "echo_sim: error: --comm-profile x: no such file")

    monkeypatch.setattr(benchmarks.launch, "run_python", fake)
    case = Case(layout="fsdp", size="resnet")
    pred = _predict(tmp_path / "rep0" / "resnet" / "trace", case, tmp_path / "rep0" / "comm.json",
                    None, root=tmp_path)
    (args, cwd), = calls
    assert cwd == tmp_path
    assert args == ["-m", "echo_sim", "simulate", "rep0/resnet/trace", "--dp", "2", "--fsdp",
                    "--optimizer", "foreach", "--comm-profile", "rep0/comm.json", "--json"]
    assert pred["simulate_argv"] == ["python", *args]
    assert (pred["iteration_time_us"], pred["peak_memory_bytes"]) == (41000.5, 3 << 20)
    assert pred["breakdown"] == [{"rank": 0, "compute_us": 30000.0, "exposed_comm_us": 5.1,
                                  "bubble_us": 0.0, "idle_us": 1.0, "memory": {"params": 1}}]
    assert (pred["hardware"], pred["calibration"], pred["models"], pred["warnings"]) == (
        {"x": 1}, {"c": 2}, {"m": 3}, ["w"])
    with pytest.raises(SimulateError, match="exit 2: echo_sim: error: --comm-profile") as e:
        _predict(tmp_path / "t", case, tmp_path / "comm.json", None, root=tmp_path)
    assert e.value.argv[:4] == ["python", "-m", "echo_sim", "simulate"]


# ------------------------------------------------------------- a real trace, the real CLI
@pytest.fixture(scope="module")
def kept_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A --keep directory: rep0/comm.json and one captured 1-process run of each new size
    (5 steps, steps 2..3 traced), through the benchmark's own worker."""
    root = tmp_path_factory.mktemp("keep")
    (root / "rep0").mkdir()
    shutil.copy(PROFILE, root / "rep0" / "comm.json")
    for size in NEW:
        base = root / "rep0" / size
        recs = _launch(_train_flags("single", size, steps=5, capture=base / "trace", nproc=1),
                       base / "single", 1, 180, size)
        assert len(recs[0]["step_s"]) == 5 and recs[0]["rss_before_model_bytes"] > 0
        # the compute thread's CPU time per step: positive, and never above the step's wall
        # time by more than the clocks' resolution
        cpu = recs[0]["step_cpu_s"]
        assert len(cpu) == 5 and all(0 < c <= w + 1e-3 for c, w in zip(cpu, recs[0]["step_s"],
                                                                      strict=True))
    return root


@pytest.mark.timeout(300)
@pytest.mark.parametrize("size", NEW)
def test_traced_workload_predicts_through_the_cli(kept_run: Path, size: str) -> None:
    trace = kept_run / "rep0" / size / "trace"
    assert (trace / "0_0" / "trace.json").is_file()
    meta = json.loads((trace / "0_0" / "meta.json").read_text())
    # the micro-batch detected from the model's first input (input ids / images)
    assert (meta["micro_batch"], meta["micro_batch_source"]) == (int(SIZES[size][-1]),
                                                                 "detected")
    for layout in ("ddp", "fsdp"):
        case = Case(layout=layout, size=size)
        pred = _predict(trace, case, kept_run / "rep0" / "comm.json",
                        kept_run / "rep0" / size / f"{layout}-sim", root=kept_run)
        assert pred["iteration_time_us"] > 0 and pred["peak_memory_bytes"] > 0
        assert pred["breakdown"][0]["compute_us"] > 0
        assert pred["simulate_argv"][4:6] == [f"rep0/{size}/trace", "--dp"]
        # --output: the simulated timeline, written by the command for compare / --diagnose
        assert any((kept_run / "rep0" / size / f"{layout}-sim").iterdir())


@pytest.mark.timeout(300)
def test_repredict_goes_through_the_cli(kept_run: Path, tmp_path: Path) -> None:
    cases = (Case(layout="ddp", size="bert"), Case(layout="fsdp", size="resnet"))
    raw = {c.name: [{"rep": 0, "measured_us": 50_000.0, "predicted_us": 1.0,
                     "error_pct": _err_pct(1.0, 50_000.0), "measured_mem_delta_bytes": 1 << 20,
                     "predicted_mem_delta_bytes": 1, "load_avg_before": [0.5, 0.4, 0.3],
                     "load_avg_after": [1.5, 0.6, 0.4]}] for c in cases}
    # a diagnosed repetition: its simulated figures are made again, the real ones kept
    stale = {"iteration_time_us": 1.0, "fwbw_us": 1.0, "compute_us": 1.0, "comm_us": 0.0,
             "overlapped_us": 0.0, "exposed_us": 0.0}
    raw["fsdp/resnet"][0]["diagnosis"] = {"real_captured": {"iteration_time_us": 7.0},
                                          "simulated": stale}
    singles = [{"rep": 0, "size": s, "rss_before_model_bytes": 1 << 20} for s in NEW]
    doc = _summarise(cases, raw, singles, [0.5], steps=5, warmup=1, reps=1)
    doc["machine"]["load_avg_per_rep"] = [{"rep": 0, "before": [0.5, 0.4, 0.3],
                                           "after": [1.5, 0.6, 0.4]}]
    old = tmp_path / "old.json"
    old.write_text(json.dumps(doc))
    new = tmp_path / "new.json"
    assert main(["--repredict", str(old), "--keep", str(kept_run), "--output", str(new)]) == 0
    redo = json.loads(new.read_text())
    for row in redo["cases"]:
        assert row["measured_us"] == 50_000.0 and row["predicted_us"] > 1.0, row
        assert row["simulate_argv"][4] == f"rep0/{row['model']}/trace"
        assert row["load_avg_1min_range"] == [0.5, 1.5]
    assert redo["machine"]["load_avg_per_rep"] == doc["machine"]["load_avg_per_rep"]
    fsdp = next(r for r in redo["cases"] if r["case"] == "fsdp/resnet")["reps"][0]
    assert fsdp["diagnosis"]["real_captured"] == {"iteration_time_us": 7.0}
    assert fsdp["diagnosis"]["simulated"]["iteration_time_us"] == pytest.approx(
        fsdp["predicted_us"], rel=0.01)
    assert fsdp["diagnosis"]["simulated"]["comm_us"] > 0
    # a kept repetition whose files are gone keeps its measurement and says why
    gone = repredict(doc, tmp_path)
    assert all("error" in r and "error_pct" not in r for r in gone["cases"])
    assert "simulate exit 2" in gone["cases"][0]["error"]


@pytest.mark.timeout(300)
def test_repredict_makes_the_replay_route_again_with_or_without_its_gaps(
        kept_run: Path, tmp_path: Path) -> None:
    """A --second-profile-replay run: --repredict predicts the replay route again from the
    kept replay profile; --drop-calibration replay_gap_us,replay_work_us from a copy without
    the ranks' arrival gaps (the rank-skew probe's line then prices the waits, which here
    are far smaller)."""
    case = Case(layout="fsdp", size="bert")
    prof = json.loads(PROFILE.read_text())
    prof["run_time"] = "last_arrival"  # a replay over a calibrated profile's clock
    prof["calibration"]["replay_gap_us"] = [20_000.0] * 8
    prof["calibration"]["replay_work_us"] = [2000.0] * 8
    replay = kept_run / "rep0" / "bert" / "fsdp-replay.json"
    replay.write_text(json.dumps(prof))
    raw = {case.name: [{"rep": 0, "measured_us": 50_000.0, "predicted_us": 1.0,
                        "error_pct": _err_pct(1.0, 50_000.0), "second_predicted_us": 1.0,
                        "second_error_pct": _err_pct(1.0, 50_000.0),
                        "measured_mem_delta_bytes": 1 << 20, "predicted_mem_delta_bytes": 1,
                        "load_avg_before": [0.5, 0.4, 0.3], "load_avg_after": [1.5, 0.6, 0.4]}]}
    singles = [{"rep": 0, "size": "bert", "rss_before_model_bytes": 1 << 20}]
    doc = _summarise((case,), raw, singles, [0.5], steps=5, warmup=1, reps=1)
    doc["method"]["second_comm_profile"] = "replay-comm of each case's simulated timeline"
    doc["machine"]["load_avg_per_rep"] = []
    old = tmp_path / "old.json"
    old.write_text(json.dumps(doc))
    got = {}
    for gaps, drop in (("on", []), ("off", ["--drop-calibration",
                                             "replay_gap_us,replay_work_us"])):
        new = tmp_path / f"{gaps}.json"
        assert main(["--repredict", str(old), "--keep", str(kept_run), "--output", str(new),
                     *drop]) == 0
        got[gaps] = json.loads(new.read_text())["cases"][0]["reps"][0]
        assert got[gaps]["second_predicted_us"] > 1.0
    # the FSDP2 BERT step's synchronisations (14), each + 10 ms with the replay's gaps, less
    # what the probe's line prices them at (a few ms, with the trace's compute)
    assert got["on"]["second_predicted_us"] > got["off"]["second_predicted_us"] + 50_000
    nogaps = json.loads((replay.parent / "fsdp-replay-without.json").read_text())
    assert "replay_gap_us" not in nogaps["calibration"] and nogaps["calibration"]
    assert json.loads((tmp_path / "off.json").read_text())["method"][
        "dropped_calibration"] == ["replay_gap_us", "replay_work_us"]
    # the looped profile went through the same copy, its other calibration kept
    assert (kept_run / "rep0" / "comm-without.json").is_file()
    with pytest.raises(SystemExit):  # the ablation is for kept runs only
        main(["--drop-calibration", "replay_gap_us", "--sizes", "bert", "--layouts", "ddp"])


def test_stamped_collectives_give_the_ranks_mean_time_and_half_their_arrival_gaps() -> None:
    # two ranks, three steps (the first a warm-up), two synchronous collectives a step:
    # (start, end) pairs on the shared host clock, us
    r0 = {"step_s": [0.1] * 3, "step_collective_stamps_us": [
        [0, 9, 20, 29], [100, 110, 200, 205], [300, 310, 400, 404]]}
    r1 = {"step_s": [0.1] * 3, "step_collective_stamps_us": [
        [5, 9, 21, 29], [104, 110, 200, 205], [306, 310, 401, 404]]}
    own, half = _collectives_us([r0, r1], warmup=1)  # type: ignore[misc]
    # step 1: rank 0 inside 10 + 5, rank 1 6 + 5 -> mean 13; gaps 4 and 0 -> half 2
    # step 2: rank 0 10 + 4, rank 1 4 + 3 -> mean 10.5; gaps 6 and 1 -> half 3.5
    assert own == pytest.approx((13.0 + 10.5) / 2) and half == pytest.approx((2.0 + 3.5) / 2)
    # no stamps (DDP's bucket all-reduces run in its C++ reducer), or the ranks' calls differ
    assert _collectives_us([{**r0, "step_collective_stamps_us": [[], [], []]}, r1], 1) is None
    r1_short = {**r1, "step_collective_stamps_us": [[5, 9], [104, 110], [306, 310]]}
    assert _collectives_us([r0, r1_short], 1) is None
    assert _collectives_us([{"step_s": [0.1] * 3}, r1], 1) is None  # an older record


def test_merge_pools_the_runs_repetitions(tmp_path: Path) -> None:
    from benchmarks.accuracy import merge

    def run(errs: list[float], date: str, steps: int = 5) -> dict[str, Any]:
        cases = (Case(layout="fsdp", size="bert"),)
        raw = {"fsdp/bert": [{"rep": i, "measured_us": 50_000.0,
                              "predicted_us": 50_000.0 * (1 + e / 100),
                              "error_pct": e, "measured_mem_delta_bytes": 1 << 20,
                              "predicted_mem_delta_bytes": 1 << 20, "step_spread_pct": 1.0}
                             for i, e in enumerate(errs)]}
        doc = _summarise(cases, raw, [], [0.5], steps=steps, warmup=1, reps=len(errs))
        doc["date"] = date
        return doc

    a, b = run([20.0, 22.0, 24.0], "A"), run([-2.0, 0.0, 2.0], "B")
    assert a["cases"][0]["error_pct"] == pytest.approx(22.0)
    got = merge([a, b])
    row = got["cases"][0]
    # the median over all six repetitions, and their spread as the noise
    assert row["rep_errors_pct"] == [20.0, 22.0, 24.0, -2.0, 0.0, 2.0]
    assert row["error_pct"] == pytest.approx(11.0)
    # each repetition against its own job: the median of the six paired errors
    assert (row["paired_error_pct"], row["paired_half_iqr_pct"]) == (11.0, 11.5)
    # two runs that disagree by 22 points: their predictions' spread is the noise, and no
    # error inside it is claimed (one run alone would have claimed +22 %)
    assert row["noise_pct"] == pytest.approx(row["prediction_spread_pct"]) and \
        row["noise_pct"] > 11.0 and row["within_noise"] is True
    assert [(r["run"], r["run_date"]) for r in row["reps"]] == [(0, "A")] * 3 + [(1, "B")] * 3
    # six repetitions bound the paired median: their range, at 1 - 2/64 coverage; three
    # (either run alone) bound nothing
    assert (row["paired_ci_pct"], row["paired_ci_coverage"], row["paired_bound_pct"]) == \
        ([-2.0, 24.0], 0.9688, 24.0)
    assert "paired_ci_pct" not in a["cases"][0]
    assert got["per_layout"]["fsdp"]["max_paired_bound_pct"] == 24.0
    assert "| +11.0 [-2.0..+24.0] |" in table(got)
    assert "fsdp bert within ±24.0 % (96.9 %, 6 reps)" in table(got)
    assert got["method"]["reps"] == 6 and [m["date"] for m in got["method"]["merged"]] == \
        ["A", "B"]
    with pytest.raises(ValueError, match="differ in --steps"):
        merge([a, run([0.0], "C", steps=9)])
    # runs under different allocators are different experiments: not pooled
    fixed = run([0.0], "D")
    fixed["machine"]["malloc"] = dict(FIXED_MALLOC)
    with pytest.raises(ValueError, match="different malloc settings"):
        merge([a, fixed])
    assert merge([fixed, fixed])["machine"]["malloc"] == FIXED_MALLOC
    assert merge([a, b])["machine"]["malloc"] == {}  # older runs: glibc's default
    # the host the runs measured is kept, not the merging one's; two hosts are both named
    far = run([1.0], "E")
    far["machine"].update(cpu_count=16, torch="2.11.0+cu130")
    assert merge([far, far])["machine"]["cpu_count"] == 16
    assert "hosts" not in merge([far, far])["machine"]
    assert {h["cpu_count"] for h in merge([a, far])["machine"]["hosts"]} == \
        {16, a["machine"]["cpu_count"]}
    # how the runs measured is kept: pooled traces are named in the merged table
    a["method"]["pooled_traces"] = b["method"]["pooled_traces"] = "3 one-process traces"
    assert merge([a, b])["method"]["pooled_traces"] == "3 one-process traces"
    b["method"]["comm_profile"] = "busy mode"
    assert merge([a, b])["method"]["comm_profile"] == "busy mode"
    assert "comm_profile" not in merge([a, a])["method"]
    assert malloc_settings({"MALLOC_ARENA_MAX": "2", "PATH": "/bin"}) == {"MALLOC_ARENA_MAX": "2"}
    # the command line: files in, one table and JSON out; a bad file is a one-line error
    fa, fb, out = tmp_path / "a.json", tmp_path / "b.json", tmp_path / "all.json"
    fa.write_text(json.dumps(a))
    fb.write_text(json.dumps(b))
    assert main(["--merge", str(fa), str(fb), "--output", str(out)]) == 0
    assert json.loads(out.read_text())["cases"][0]["rep_errors_pct"] == row["rep_errors_pct"]
    with pytest.raises(SystemExit):
        main(["--merge", str(tmp_path / "missing.json"), "--output", str(out)])


@pytest.mark.parametrize("n", range(1, 30))
def test_median_ci_is_the_narrowest_order_statistic_pair_that_covers(n: int) -> None:
    def coverage(k: int) -> float:  # P(x_(k) <= median <= x_(n-k+1)), exact for any draw
        return 1 - 2 * sum(math.comb(n, i) for i in range(k)) / 2 ** n

    values = [float(i) for i in range(n)]
    random.Random(n).shuffle(values)  # 0..n-1 in some order
    got = median_ci(values)
    if coverage(1) < 0.95:
        assert got is None and n <= 5
        return
    assert got is not None
    k = max(k for k in range(1, n // 2 + 1) if coverage(k) >= 0.95)
    assert got == (k - 1, n - k, pytest.approx(coverage(k)))
    assert got[0] <= statistics.median(values) <= got[1]
    assert median_ci(values, level=0.5) is not None


def test_bias_names_the_rows_whose_interval_excludes_zero() -> None:
    def row(layout: str, lo: float, hi: float) -> dict[str, Any]:
        return {"layout": layout, "model": "bert", "paired_ci_pct": [lo, hi]}

    assert _bias_lines([row("ddp", -4.0, 3.0), row("fsdp", -0.5, 0.0)]) == [
        "", "Bias: every row's interval holds zero (no bias the repetitions can show)."]
    line = _bias_lines([row("ddp", -10.1, -3.2), row("fsdp", 1.5, 9.0), row("tp", -2.0, 2.0)])[1]
    assert line.startswith("Bias: the interval of 2 of 3 rows excludes zero")
    assert "1 under-predicted (ddp bert [-10.1..-3.2 %])" in line
    assert "1 over-predicted (fsdp bert [+1.5..+9.0 %])" in line
    assert "tp" not in line


# ------------------------------------------------------------------------------ the table
def _doc() -> dict[str, Any]:
    argv = ["python", "-m", "echo_sim", "simulate", "rep0/bert/trace", "--dp", "2", "--fsdp",
            "--optimizer", "foreach", "--comm-profile", "rep0/comm.json", "--json"]
    reps = [{"rep": i, "measured_us": m, "predicted_us": p, "error_pct": _err_pct(p, m),
             "step_spread_pct": 1.0, "measured_mem_delta_bytes": 10 << 20,
             "predicted_mem_delta_bytes": 11 << 20,
             "simulate_argv": [a.replace("rep0", f"rep{i}") for a in argv],
             "load_avg_before": [b, 0.8, 0.9], "load_avg_after": [a, 1.1, 1.0]}
            for i, (m, p, b, a) in enumerate(((50e3, 60e3, 0.4, 1.3), (52e3, 61e3, 1.3, 1.9)))]
    doc = _summarise((Case(layout="fsdp", size="bert"), Case(layout="ddp", size="resnet")),
                     {"fsdp/bert": reps,
                      "ddp/resnet": [{"rep": 0, "error": "SimulateError: boom",
                                      "simulate_argv": ["python", "-m", "echo_sim", "simulate",
                                                        "rep0/resnet/trace", "--dp", "2"]}]},
                     [], [0.4, 1.3], steps=6, warmup=1, reps=2)
    doc["machine"]["load_avg_per_rep"] = [{"rep": 0, "before": [0.4, 0.8, 0.9],
                                           "after": [1.3, 1.1, 1.0]},
                                          {"rep": 1, "before": [1.3, 1.1, 1.0],
                                           "after": [1.9, 1.2, 1.0]}]
    return doc


def test_table_says_every_rows_spread_load_and_command() -> None:
    doc = _doc()
    row = doc["cases"][0]
    assert row["simulate_argv"][4] == "rep0/bert/trace"  # the first repetition's
    assert row["load_avg_1min_range"] == [0.4, 1.9]
    assert not row["within_noise"] and row["noise_pct"] == pytest.approx(1.96, abs=0.01)
    # the predictions' own spread over the repetitions (half their range over the median)
    preds = [r["predicted_us"] for r in row["reps"]]
    half_range = 100 * (max(preds) - min(preds)) / 2 / statistics.median(preds)
    assert row["prediction_spread_pct"] == pytest.approx(half_range, abs=0.01)
    text = table(doc)
    # an error outside the noise still says the spread it was judged against, and the
    # predictions' spread beside it
    assert (f"| fsdp | bert | 2 | 51.00 | 60.50 | +18.6 (spread 2.0%; predictions "
            f"±{row['prediction_spread_pct']:.1f}%) | +18.6 ±1.4 | +20.0, +17.3 | 0.4..1.9 "
            "| 10.0 | 11.0 | +10.0 |") in text
    assert "| ddp | resnet | 2 | failed: SimulateError: boom |" in text
    assert "2 repetitions give no distribution-free 95 % interval" in text
    assert "1-min load average 0.4..1.9 during the runs" in text
    assert "rep 0 0.40 -> 1.30, rep 1 1.30 -> 1.90; 5-min 0.80..1.20" in text
    assert ("| fsdp/bert | `python -m echo_sim simulate rep0/bert/trace --dp 2 --fsdp "
            "--optimizer foreach --comm-profile rep0/comm.json --json` |") in text
    assert "| ddp/resnet | `python -m echo_sim simulate rep0/resnet/trace --dp 2` |" in text


def test_the_step_split_takes_the_slowest_rank_of_each_step() -> None:
    recs = [{"step_s": [1.0, 0.010, 0.020, 0.012], "step_cpu_s": [1.0, 0.006, 0.015, 0.004]},
            {"step_s": [1.0, 0.011, 0.018, 0.010], "step_cpu_s": [1.0, 0.009, 0.010, 0.009]}]
    # after 1 warm-up step: slowest ranks 1, 0, 0 -> CPU 9, 15, 4 ms; off-CPU 2, 5, 8 ms
    cpu, off = _split_us(recs, 1)  # type: ignore[misc]
    assert (cpu, off) == pytest.approx((9000.0, 5000.0))
    assert _split_us([{"step_s": [0.1, 0.1]}], 0) is None  # an older record: no CPU times
    reps = [{"rep": i, "measured_us": 50e3, "predicted_us": 52e3, "error_pct": 4.0,
             "step_spread_pct": 1.0, "measured_mem_delta_bytes": 1, "predicted_mem_delta_bytes": 1,
             "split": {"measured_cpu_us": c, "measured_off_cpu_us": 50e3 - c,
                       "predicted_compute_us": 30e3, "predicted_exposed_comm_us": 22e3}}
            for i, c in enumerate((32e3, 34e3, 36e3))]
    doc = _summarise((Case(layout="tp", size="bert"),), {"tp/bert": reps}, [], [0.5],
                     steps=6, warmup=1, reps=3)
    assert doc["cases"][0]["split"] == {"measured_cpu_us": 34e3, "measured_off_cpu_us": 16e3,
                                        "predicted_compute_us": 30e3,
                                        "predicted_exposed_comm_us": 22e3}
    # host costs priced low, collectives high: the step error cancels, the split shows it
    assert "| tp | bert | 34.00 | 30.00 | -11.8 | 16.00 | - | 22.00 | - | - |" in table(doc)
    # with the run-queue wait of each step's slowest rank (after 1 warm-up: 1, 3, 2 ms)
    for rec, w in zip(recs, ([0.0, 0.001, 0.003, 0.002], [0.0, 0.002, 0.0, 0.0]), strict=True):
        rec["step_runqueue_s"] = w
    assert _runqueue_us(recs, 1) == pytest.approx(2000.0)
    assert _runqueue_us([{"step_s": [0.1]}], 0) is None
    for rep, w in zip(reps, (1e3, 2e3, 4e3), strict=True):
        rep["split"]["measured_runqueue_us"] = w
    doc = _summarise((Case(layout="tp", size="bert"),), {"tp/bert": reps}, [], [0.5],
                     steps=6, warmup=1, reps=3)
    assert "| tp | bert | 34.00 | 30.00 | -11.8 | 16.00 | 2.00 | 22.00 | - | - |" in table(doc)
    # the other threads (gloo's) of each step's slowest rank (ranks 1, 0, 0 after the
    # warm-up step): CPU 9, 6, 5 ms, waiting for a core 9, 2, 1 ms
    for rec, (c, w) in zip(recs, (([0, .004, .006, .005], [0, .001, .002, .001]),
                                  ([0, .009, 0, 0], [0, .009, 0, 0])), strict=True):
        rec["step_other_threads_cpu_s"], rec["step_other_threads_runqueue_s"] = c, w
    assert _other_threads_us(recs, 1) == (pytest.approx(6000.0), pytest.approx(2000.0))
    assert _other_threads_us([{"step_s": [0.1], "step_runqueue_s": [0.0]}], 0) is None
    for rep, (c, w) in zip(reps, ((4e3, 1e3), (5e3, 3e3), (7e3, 2e3)), strict=True):
        rep["split"].update(measured_other_threads_cpu_us=c,
                            measured_other_threads_runqueue_us=w)
    doc = _summarise((Case(layout="tp", size="bert"),), {"tp/bert": reps}, [], [0.5],
                     steps=6, warmup=1, reps=3)
    assert ("| tp | bert | 34.00 | 30.00 | -11.8 | 16.00 | 2.00 | 22.00 | 5.00 | 2.00 |"
            in table(doc))


def test_the_worker_reads_its_threads_run_queue_wait() -> None:
    """Linux: the calling thread's schedstat wait (ns) as seconds, never decreasing."""
    a = runqueue_wait_s()
    if a is None:
        pytest.skip("no /proc/thread-self/schedstat on this system")
    b = runqueue_wait_s()
    assert b is not None and 0.0 <= a <= b


def test_the_worker_reads_its_other_threads_cpu() -> None:
    """Linux: CPU a thread burns beside the caller shows in the other threads' time, and the
    caller's own CPU does not (each spins for CPU time, not wall time, whatever the load)."""
    import threading
    import time

    a = other_threads_s()
    if a is None:
        pytest.skip("no /proc/self/task on this system")
    spun, done = threading.Event(), threading.Event()

    def spin() -> None:
        end = time.thread_time() + 0.1
        while time.thread_time() < end:
            pass
        spun.set()
        done.wait(30)  # stays alive until the caller has read it

    t = threading.Thread(target=spin)
    t.start()
    assert spun.wait(60)
    b = other_threads_s()
    done.set()
    t.join()
    assert b is not None and b[0] - a[0] >= 0.1
    c0 = other_threads_s()
    end = time.thread_time() + 0.1
    while time.thread_time() < end:
        pass
    c1 = other_threads_s()
    assert c0 is not None and c1 is not None and c1[0] - c0[0] < 0.05


def test_table_of_an_older_document_without_loads_or_argv() -> None:
    doc = _doc()
    for row in doc["cases"]:
        row.pop("simulate_argv", None)
        row.pop("load_avg_1min_range", None)
    doc["machine"].pop("load_avg_per_rep")
    text = table(doc)
    assert "| 0.4..1.9 |" not in text and "simulate command" not in text
    assert "Where the step goes" not in text  # its runs recorded no CPU times
    assert "1-min load average 0.4..1.3 during the runs" in text
    # its rows' one figure per repetition (the load after the job) still gives a range
    for rep, load in zip(doc["cases"][0]["reps"], (0.7, 1.6), strict=True):
        rep["load_avg_1min"] = load
    assert "| +20.0, +17.3 | 0.7..1.6 |" in table(doc)


def test_no_case_for_the_layouts_asked_is_an_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as e:
        main(["--sizes", "resnet", "--layouts", "tp"])
    assert e.value.code == 2
    assert "no case for --layouts tp on --sizes resnet" in capsys.readouterr().err


def test_a_keep_directory_holding_a_run_is_refused(tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    # capture keeps the traces already there, so a second run would predict from the first's
    (tmp_path / "rep0" / "bert" / "trace").mkdir(parents=True)
    (tmp_path / "run.log").write_text("")
    with pytest.raises(SystemExit) as e:
        main(["--reps", "1", "--sizes", "bert", "--layouts", "ddp", "--keep", str(tmp_path)])
    assert e.value.code == 2
    assert "already holds a run's repetitions" in capsys.readouterr().err
