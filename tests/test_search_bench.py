"""benchmarks/search.py's judgement of a ranking (the real ranking runs for minutes: the
benchmark itself, not the suite)."""

from __future__ import annotations

import pytest

from benchmarks.search import _judged, kendall_tau_b, main


def _row(layout: str, mb: int, pred: float, one: float, reps: list[float]) -> dict:
    return {"layout": layout, "micro_batch": mb, "predicted_s": pred,
            "predicted_one_trace_s": one, "measured_s": sorted(reps)[len(reps) // 2],
            "measured_reps_s": reps}


def test_the_predicted_best_is_judged_against_the_measured_best_and_its_spread() -> None:
    rows = [_row("ddp", 16, 0.14, 0.12, [0.118, 0.120, 0.125]),
            _row("ddp", 32, 0.13, 0.13, [0.124, 0.126, 0.131]),
            _row("fsdp", 32, 0.17, 0.16, [0.150, 0.155, 0.160])]
    pooled = _judged(rows, "predicted_s")
    assert pooled["predicted_best"] == "ddp mb32"
    assert pooled["predicted_best_vs_measured_best"] == pytest.approx(0.126 / 0.120 - 1)
    # ddp mb32's fastest run (0.124) is inside ddp mb16's runs (up to 0.125)
    assert pooled["predicted_best_within_spread"] is True
    assert pooled["kendall_tau_b"] == pytest.approx(kendall_tau_b([0.14, 0.13, 0.17],
                                                                  [0.120, 0.126, 0.155]))
    one = _judged(rows, "predicted_one_trace_s")
    assert one["predicted_best"] == "ddp mb16" and one["predicted_best_vs_measured_best"] == 0
    assert one["kendall_tau_b"] == pytest.approx(1.0)
    apart = [_row("ddp", 16, 0.14, 0.14, [0.110, 0.112, 0.115]), rows[1]]
    assert _judged(apart, "predicted_s")["predicted_best_within_spread"] is False


def test_at_least_one_traced_run(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as e:
        main(["--part", "ranking", "--trace-runs", "0"])
    assert e.value.code == 2 and "--trace-runs 0" in capsys.readouterr().err
