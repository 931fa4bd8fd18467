"""TrioSim's -batch-size (traced) and -batch-size-sim (simulated) (issue 22, TrioSim row 4).

A TrioSim trace records no batch (TrioSim takes it on its command line), so echo assumed
1. ``trace2-h100-bs8/vgg_mini`` was traced at batch 8; its forward/backward ops take
[100, 20, 15, 80, 10, 8, 6, 4, 2, 2, 10, 9, 12, 160, 25, 22, 150] us back to back (no host
gaps) and its update 30 us. echo's one-trace batch model
(:func:`echo_sim.cost.batch_model.linear_batch_model`) keeps ``min(dur, 5 us)`` of each op
fixed and scales the rest with the batch: ``t(B) = a + (t0 - a)·B/8``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from echo_sim.cli import main

VGG = str(Path(__file__).parent / "data" / "triosim" / "trace2-h100-bs8" / "vgg_mini")
OPS_US = [100, 20, 15, 80, 10, 8, 6, 4, 2, 2, 10, 9, 12, 160, 25, 22, 150]
UPDATE_US = 30.0
BASE = ["--cluster", "dgx-h100", "--compute-factor", "1"]


def _run(capsys: pytest.CaptureFixture[str], *args: str) -> dict:
    assert main(["simulate", VGG, *BASE, *args, "--json"]) == 0, capsys.readouterr().err
    return json.loads(capsys.readouterr().out)


def _predicted_us(batch: int, traced: int) -> float:
    return sum(min(t, 5) + (t - min(t, 5)) * batch / traced for t in OPS_US) + UPDATE_US


def test_seed_spelling_scales_compute_from_the_stated_batch(capsys) -> None:
    r = _run(capsys, "-batch-size", "8", "-batch-size-sim", "16")
    assert r["iteration_time_us"] == pytest.approx(_predicted_us(16, 8))  # 1222 us
    assert _predicted_us(16, 8) == pytest.approx(1222.0)
    src = r["micro_batch_source"]
    assert (src["micro_batch"], src["traced_micro_batch"], src["assumed"]) == (16, 8, False)
    assert not any("assumed 1" in w for w in r["warnings"])
    assert r["samples_per_s"] == pytest.approx(16 / (1222.0 * 1e-6))


def test_same_batch_replays_the_trace(capsys) -> None:
    # TrioSim: -batch-size-sim defaults to -batch-size: the traced op times as they are
    r = _run(capsys, "-batch-size", "8")
    assert r["iteration_time_us"] == pytest.approx(sum(OPS_US) + UPDATE_US)
    assert r["layout"]["micro_batch"] == 8


def test_echo_and_seed_spellings_agree(capsys) -> None:
    seed = _run(capsys, "--batch-size", "8", "--batch-size-sim", "4", "--dp", "2")
    echo = _run(capsys, "--traced-micro-batch", "8", "--micro-batch", "4", "--dp", "2")
    assert seed["iteration_time_us"] == echo["iteration_time_us"]
    assert echo["layout"]["global_batch"] == 8  # 2 data-parallel ranks x 4
    assert echo["ranks"][0]["compute_us"] == pytest.approx(_predicted_us(4, 8))


def test_without_the_traced_batch_it_says_it_assumed_one(capsys) -> None:
    r = _run(capsys, "-batch-size-sim", "16")
    assert r["micro_batch_source"]["assumed"] is True
    assert any("assumed" in w or "taken as micro-batch 1" in w for w in r["warnings"])
    assert r["iteration_time_us"] == pytest.approx(_predicted_us(16, 1))
