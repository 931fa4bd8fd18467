"""benchmarks/gpu.py: its pure parts here; the timing itself needs CUDA (marked gpu)."""

from __future__ import annotations

import pytest
import torch

from benchmarks.gpu import MODELS, GpuBenchConfig, _bench_model, overhead, parse_args
from tests.harness import run_python


def test_parse_args_and_validation() -> None:
    cfg = parse_args(["--models", "gpt,small", "--reps", "3", "--steps", "4"])
    assert cfg.models == ("gpt", "small") and cfg.reps == 3 and cfg.steps == 4
    assert parse_args([]).models == MODELS
    with pytest.raises(ValueError, match="--reps 0"):
        GpuBenchConfig(reps=0)
    with pytest.raises(ValueError, match="choose from"):
        GpuBenchConfig(models=("resnet",))
    with pytest.raises(SystemExit):
        parse_args(["--models", "nope"])


def test_overhead_is_the_median_ratio_per_repetition() -> None:
    out = overhead({"plain": [0.100, 0.110, 0.090],
                    "capture": [0.101, 0.1122, 0.0918],
                    "profiler": [0.103, 0.1133, 0.0927]})
    assert out["plain"]["overhead_pct"] == pytest.approx(0.0)
    assert out["capture"]["overhead_pct"] == pytest.approx(2.0)  # ratios 1.01, 1.02, 1.02
    assert out["profiler"]["overhead_pct"] == pytest.approx(3.0)
    assert out["capture"]["median_step_ms"] == pytest.approx(101.0)


def test_block_logic_on_cpu_with_the_small_model(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """The same interleaved blocks, modes and summaries, on CPU (timings not asserted)."""
    cfg = GpuBenchConfig(models=("small",), reps=2, steps=2)
    res = _bench_model("small", cfg, tmp_path, device="cpu")
    assert set(res["modes"]) == {"plain", "capture", "profiler"}
    assert all(len(v) == 2 for v in res["block_median_ms"].values())
    assert res["micro_batch"] == 8 and res["model"] == "GPT 4x128"
    assert list(tmp_path.iterdir()) == []  # every block's capture output removed


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the no-CUDA message")
def test_skips_with_a_clear_message_without_cuda() -> None:
    r = run_python(["-m", "benchmarks.gpu", "--reps", "1"], timeout=120)
    assert r.returncode == 0, r.stderr
    assert "skipped: CUDA is not available" in r.stdout


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_runs_on_a_gpu(tmp_path) -> None:  # type: ignore[no-untyped-def]
    import json

    out = tmp_path / "gpu.json"
    r = run_python(["-m", "benchmarks.gpu", "--models", "small", "--reps", "2", "--steps",
                    "3", "--out", str(out)], env={"CUDA_VISIBLE_DEVICES": "0"}, timeout=600)
    assert r.returncode == 0, r.stderr
    res = json.loads(out.read_text())["results"]["small"]
    assert set(res["modes"]) == {"plain", "capture", "profiler"}
