"""benchmarks/profile_precision.py: how much a prediction moves with the comm profile alone."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks.profile_precision import main, summarise, table
from tests.harness import run_python

REPO = Path(__file__).resolve().parents[1]


def _profiles() -> list[dict]:
    return [{"mode": "15 runs", "wall_s": 16.0, "median_stderr_pct": 30.0},
            {"mode": "60 runs", "wall_s": 24.0, "median_stderr_pct": 10.0},
            {"mode": "15 runs", "wall_s": 15.0, "median_stderr_pct": 40.0},
            {"mode": "60 runs", "wall_s": 25.0, "median_stderr_pct": 12.0}]


def test_summary_spread_per_case_and_mode() -> None:
    doc = summarise({"ddp/gpt-s": {"15 runs": [30_000.0, 36_000.0, 33_000.0],
                                   "60 runs": [32_000.0, 33_000.0, 32_500.0]}},
                    _profiles())
    (case,) = doc["cases"]
    fixed, mt = case["15 runs"], case["60 runs"]
    assert fixed["median_us"] == 33_000.0 and fixed["n"] == 3
    assert fixed["range_pct"] == pytest.approx(100 * 6_000 / 33_000, abs=0.01)
    assert fixed["cv_pct"] == pytest.approx(100 * 3_000 / 33_000, abs=0.01)  # stdev 3000
    assert mt["range_pct"] == pytest.approx(100 * 1_000 / 32_500, abs=0.01)
    assert doc["per_mode"]["15 runs"] == {"profiles": 2, "wall_s": 15.5,
                                          "median_stderr_pct": 35.0, "median_cv_pct": 9.09}
    assert doc["per_mode"]["60 runs"]["wall_s"] == 24.5
    text = table(doc)
    assert "| ddp/gpt-s | 33.0, 9.1 %, 18.2 % | 32.5, 1.5 %, 3.1 % |" in text
    assert "| 60 runs | 2 | 24.5 | 11.0 % | 1.54 % |" in text


@pytest.mark.parametrize("argv, needle", [
    (["--sizes", "gpt-xl"], "--sizes gpt-xl: choose from"),
    (["--profiles", "0"], "--profiles must be >= 1"),
    (["--iters", "15,x"], "--iters '15,x': a comma list of different counts >= 1"),
    (["--iters", "15,15"], "--iters '15,15': a comma list of different counts >= 1"),
    (["--iters", "0"], "--iters '0': a comma list"),
    (["--sizes", "resnet", "--layouts", "tp"], "no case for --layouts tp"),
])
def test_argument_errors(argv: list[str], needle: str, capsys: pytest.CaptureFixture) -> None:
    with pytest.raises(SystemExit) as e:
        main(argv)
    assert e.value.code == 2 and needle in capsys.readouterr().err


@pytest.mark.slow
@pytest.mark.timeout(400)
def test_real_run_predicts_one_trace_from_each_profile(tmp_path: Path) -> None:
    """A tiny GPT traced once, one profile per mode (two sizes), every prediction made
    through the simulate command from the profile of its mode's run count."""
    out = tmp_path / "pp.json"
    proc = run_python([str(REPO / "benchmarks" / "profile_precision.py"), "--sizes", "tiny",
                       "--layouts", "ddp", "--profiles", "1", "--profile-sizes", "4KB,64KB",
                       "--iters", "3,6", "--host-rounds", "3", "--steps", "6", "--keep", str(tmp_path / "keep"),
                       "--output", str(out)], timeout=380, env={"OMP_NUM_THREADS": "1"})
    assert proc.returncode == 0, proc.stderr[-2000:]
    doc = json.loads(out.read_text())
    (case,) = doc["cases"]
    assert case["case"] == "ddp/tiny"
    for mode in ("3 runs", "6 runs"):
        assert case[mode]["n"] == 1 and all(x > 0 for x in case[mode]["predicted_us"])
    for p in doc["profiles"]:
        prof = json.loads(Path(p["path"]).read_text())
        runs = {len(r) for op in prof["ops"] if "runs_us" in op for r in op["runs_us"]}
        assert runs == {p["iters"]}, p
    assert "| ddp/tiny |" in proc.stdout
    assert (tmp_path / "keep" / "tiny" / "trace").is_dir()
