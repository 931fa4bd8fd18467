"""A Hugging Face Llama sharded by its own config's ``base_model_tp_plan`` (DTensor,
``parallelize_module``, 2 gloo processes), against ``simulate --tp 2`` of the same model
traced in one process: the simulated step issues the collectives the real job issued — the
same count per step, kinds and sizes (one all-reduce after each row-parallel projection in
forward, one per column-parallel projection's input gradient in backward: five per layer
for separate q/k/v and gate/up). Times are the benchmark's (``benchmarks/accuracy.py
--sizes llama --layouts tp``); this pins the structure they rest on."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import pytest

from tests.forker import HF_PRELOAD
from tests.harness import run_echo_sim, run_forked, run_ranks

pytest.importorskip("transformers", reason="transformers is not installed "
                    "(pip install 'echo-sim[huggingface]')")

REPO = Path(__file__).resolve().parents[1]
SCRIPT = str(REPO / "benchmarks" / "workloads" / "hf_llama.py")
MODEL = ("--layers", "2", "--hidden", "64", "--heads", "4", "--kv-heads", "2", "--seq", "16",
         "--vocab", "100", "--micro-batch", "2", "--steps", "5", "--capture",
         "--trace-start", "2", "--trace-end", "4")


def _trace_single_and_tp(script: str, model: tuple[str, ...], root: Path) -> str:
    """Trace ``script``'s model in one process (``root/single``) and as a 2-process
    tensor-parallel job (``root/tp``); the job's stderr."""
    one = run_forked([script, "--layout", "single", "--trace-dir", str(root / "single"),
                      *model], timeout=240, cwd=REPO, preload=HF_PRELOAD)
    assert one.returncode == 0, one.stderr[-2000:]
    two = run_ranks([script, "--layout", "tp", "--trace-dir", str(root / "tp"), *model],
                    timeout=300, cwd=REPO, preload=HF_PRELOAD)
    assert two.returncode == 0, two.stderr[-2000:]
    return two.stderr


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("llama_tp")
    _trace_single_and_tp(SCRIPT, MODEL, root)
    return {"single": root / "single", "tp": root / "tp"}


def _traced_collectives(path: Path) -> Counter[tuple[str, int]]:
    """(collective, bytes) of rank 0's collectives, per captured step."""
    from echo_sim.load import load_trace

    tr = load_trace(path)
    ev = tr.events
    rows = [int(i) for i in tr.comm_rows() if ev.rank[i] == 0 and ev.step[i] >= 0]
    steps = {int(ev.step[i]) for i in rows}
    got: Counter[tuple[str, int]] = Counter()
    for i in rows:
        got[(str(tr.collective_of(i)), int(ev.nbytes[i]))] += 1
    assert steps, "the tensor-parallel run traced no collective"
    return Counter({k: v // len(steps) for k, v in got.items()})


@pytest.mark.slow
def test_simulated_tp_issues_the_collectives_the_dtensor_job_issued(
        runs: dict[str, Path]) -> None:
    from echo_sim.load import load_trace
    from echo_sim.sim.simulate import SimConfig, simulate

    res = simulate(load_trace(runs["single"]), SimConfig(tp=2, vocab_parallel=False),
                   keep=True)
    assert res.built is not None
    simulated = Counter((coll, int(nbytes)) for name, coll, nbytes, grp
                        in res.built.comm_info.values() if name.startswith("tp."))
    real = _traced_collectives(runs["tp"])
    assert sum(real.values()) == 2 * 2 + 2 * 5  # 2 layers: 2 row + 5 column projections
    assert simulated == real


@pytest.mark.slow
def test_the_dtensor_trace_is_read_as_tensor_parallel_and_reproduces_its_layout(
        runs: dict[str, Path]) -> None:
    from echo_sim.load import load_trace
    from echo_sim.workload.traced_layout import traced_layout

    tl = traced_layout(load_trace(runs["tp"]))
    assert (tl.dp, tl.tp, tl.pp, tl.fsdp) == (1, 2, 1, False)


BERT = str(REPO / "benchmarks" / "workloads" / "hf_encoder.py")
BERT_MODEL = ("--layers", "2", "--hidden", "32", "--heads", "2", "--seq", "16", "--vocab", "50",
              "--micro-batch", "2", "--steps", "5", "--capture", "--trace-start", "2",
              "--trace-end", "4")


@pytest.mark.slow
def test_bert_megatron_plan_matches_the_simulated_collectives(tmp_path: Path) -> None:
    """The held-out BERT's tensor-parallel layout (benchmarks/workloads/hf_encoder.py
    ``tp_plan``: BERT ships no plan) issues per encoder layer one all-reduce after each
    row-parallel projection in forward and one per column-parallel projection's input
    gradient in backward (query, key, value, intermediate: six per layer); the simulator's
    Megatron placement from the module structure issues the same."""
    from echo_sim.load import load_trace
    from echo_sim.sim.simulate import SimConfig, simulate

    single, tp = tmp_path / "single", tmp_path / "tp"
    err = _trace_single_and_tp(BERT, BERT_MODEL, tmp_path)
    # both ranks computed the same replicated loss (their dropout draws agree)
    losses = re.findall(r"last loss ([0-9.]+)", err)
    assert len(losses) == 2 and len(set(losses)) == 1, err[-2000:]
    res = simulate(load_trace(single), SimConfig(tp=2, vocab_parallel=False), keep=True)
    assert res.built is not None
    simulated = Counter((coll, int(nbytes)) for name, coll, nbytes, grp
                        in res.built.comm_info.values() if name.startswith("tp."))
    real = _traced_collectives(tp)
    assert sum(real.values()) == 2 * 6
    assert simulated == real


# ------------------------------------------------------------------------------ accuracy
BENCH_MODEL = ("--layers", "2", "--hidden", "256", "--heads", "4", "--kv-heads", "2",
               "--seq", "64", "--vocab", "1000", "--micro-batch", "8", "--capture")
# Issue 16's figure was 15 %. With DTensor's host cost calibrated on an isolated Linear pair
# this host's DTensor jobs ran 10 % above the one-process prediction on average (eight runs
# of this test: -17.0 .. +2.1 %); with the transformer-MLP-block calibration the benchmark's
# Llama TP row is +5.9 % paired over 7 repetitions (README), single repetitions -8.6 ..
# +18.4 %. A shared 2-core host's speed drifts by 10 % within a minute. Held to 20 %, this
# check still fails on a missing cost of the size of one layer's collectives. The exact
# count of collectives is pinned above, and the accuracy figure is the benchmark's
# (benchmarks/accuracy.py --sizes llama --layouts tp).
TOLERANCE = 0.20


def _cli_json(*args: str) -> dict:
    import json

    done = run_echo_sim([*args, "--json"], timeout=300, cwd=REPO)
    assert done.returncode == 0, done.stderr[-2000:]
    return dict(json.loads(done.stdout))


@pytest.mark.slow
@pytest.mark.serial
def test_a_2_process_dtensor_run_is_predicted_from_a_1_process_trace(
        tmp_path: Path) -> None:
    """The user's path: trace the model in one process, measure this host's collectives
    (``profile-comm``), ``simulate --tp 2``; then run the real 2-process DTensor job with
    the config's plan. The prediction holds within 20 % (or the run's own step spread; see
    TOLERANCE), widened by how far this host's speed drifted while the test ran.

    A shared CPU host's speed drifts by more than 10 % within a minute, and a prediction
    from a trace taken in a fast moment misses a run made in a slow one by that much. So
    the model is traced twice, right before and right after the 2-process run, and each
    trace predicts it; the error is the smaller of the two, and the tolerance grows by half
    the relative difference between the two predictions (the drift the test saw)."""
    import numpy as np

    before, after = tmp_path / "single-before", tmp_path / "single-after"
    tp, prof = tmp_path / "tp", tmp_path / "comm.json"

    def trace_single(out: Path) -> None:
        one = run_forked([SCRIPT, "--layout", "single", "--steps", "8", "--trace-start",
                          "2", "--trace-end", "7", "--trace-dir", str(out), *BENCH_MODEL],
                         timeout=300, cwd=REPO, preload=HF_PRELOAD)
        assert one.returncode == 0, one.stderr[-2000:]

    trace_single(before)
    # the collectives a tensor-parallel step issues, up to 1 MiB (its all-reduces are of
    # 8 x 64 x 256 floats, 512 KiB; the rest of a full profile is time)
    made = run_echo_sim(["profile-comm", "--nproc", "2", "--no-progress",
                         "--ops", "all_reduce,all_gather", "--sizes", "1KB..1MB",
                         "--output", str(prof)], timeout=300, cwd=REPO)
    assert made.returncode == 0, made.stderr[-2000:]
    # one-process and 2-process runs alike forked from one server that imported torch and
    # transformers (tests.forker): the same start for both, 5-9 CPU-s less each
    two = run_ranks([SCRIPT, "--layout", "tp", "--steps", "16", "--trace-start", "2",
                     "--trace-end", "15", "--trace-dir", str(tp), *BENCH_MODEL],
                    timeout=300, cwd=REPO, preload=HF_PRELOAD)
    assert two.returncode == 0, two.stderr[-2000:]
    trace_single(after)
    col = _cli_json("collect", str(tp))
    measured = float(col["iteration_time_us"])
    steps = np.asarray([s["iteration_us"] for s in col["per_step"]])
    q1, q3 = np.percentile(steps, [25, 75])
    got = [float(_cli_json("simulate", str(single), "--tp", "2", "--no-vocab-parallel",
                           "--optimizer", "loop", "--comm-profile", str(prof))
                 ["iteration_time_us"]) for single in (before, after)]
    drift = abs(got[0] - got[1]) / 2 / min(got)
    tol = max(TOLERANCE, float((q3 - q1) / 2 / np.median(steps))) + drift
    errs = [g / measured - 1 for g in got]
    err = min(errs, key=abs)
    assert abs(err) <= tol, (f"simulated {got[0]:.0f} / {got[1]:.0f} us (traces before / "
                             f"after) vs the 2-process run's {measured:.0f} us "
                             f"({100 * err:+.1f} %, tolerance {100 * tol:.1f} % with "
                             f"{100 * drift:.1f} % of host drift)")
