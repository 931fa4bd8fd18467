"""benchmarks/collective_after_work.py: what precedes a collective, measured on real gloo ranks."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks import collective_after_work as caw


def test_stalled_share_is_counted_against_the_calls_unstalled_time() -> None:
    # ten runs in all: the 10th percentile (the second fastest, 310 us) is the call's
    # unstalled time, so a run of 2,310 us or more is stalled
    base = [300.0, 310.0, 320.0, 330.0, 4300.0]  # one stalled
    work = [350.0, 2400.0, 2310.0, 3900.0, 360.0]  # three stalled
    rows = {r["mode"]: r for r in caw.summarise({"all_reduce|4096|barrier": base,
                                                 "all_reduce|4096|work20": work})}
    assert rows["barrier"]["stalled_pct"] == 20.0
    assert rows["work20"]["stalled_pct"] == 60.0
    # another op's runs are another call: none of these is over its own floor
    assert [r["stalled_pct"] for r in caw.summarise({"all_gather|4096|work20": [5000.0] * 5})
            ] == [0.0]
    assert rows["work20"]["median_us"] == 2310.0
    # the 10 %-trimmed mean of five keeps all five (floor(0.5) = 0 cut at each end)
    assert rows["work20"]["trimmed_mean_us"] == pytest.approx(sum(work) / 5, abs=0.1)
    assert rows["barrier"]["bytes"] == 4096 and rows["barrier"]["op"] == "all_reduce"
    assert "late_arrival_pct" not in rows["barrier"]  # no stamps, no gap columns


def test_gap_shares_count_runs_whose_ranks_met_2_ms_apart() -> None:
    # per run: arrival gap, exit gap, the other threads' CPU (us)
    gaps = {"all_gather|4096|work5": [[10.0, 2000.0, 3300.0, 50.0],
                                      [5.0, 5.0, 1999.0, 2500.0],
                                      [400.0, 600.0, 800.0, 200.0]]}
    (row,) = caw.summarise({"all_gather|4096|work5": [300.0] * 4}, gaps)
    assert row["late_arrival_pct"] == 50.0  # 2,000 and 3,300 us: >= 2 ms
    assert row["late_exit_pct"] == 25.0  # 1,999 us is not
    assert row["mean_arrival_gap_us"] == pytest.approx((10 + 2000 + 3300 + 50) / 4)
    assert row["helper_threads_cpu_us"] == 500.0


@pytest.mark.slow
def test_a_real_two_rank_probe_writes_every_mode(tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "probe.json"
    rc = caw.main(["--sizes", "4KB,16KB", "--modes", "barrier,work1,b2b", "--runs", "3",
                   "--rounds", "2", "--timeout", "240", "--control", "--output", str(out)])
    assert rc == 0
    got = json.loads(out.read_text())
    rows = got["rows"]
    assert {(r["op"], r["bytes"], r["mode"]) for r in rows} == {
        (op, n, m) for op in ("all_reduce", "all_gather") for n in (4096, 16384)
        for m in ("barrier", "work1", "b2b")}
    for r in rows:
        assert r["runs"] == 6  # 3 runs x 2 rounds
        assert 0 < r["median_us"] <= r["p90_us"]
        assert 0.0 <= r["stalled_pct"] <= 100.0
        assert 0.0 <= r["late_arrival_pct"] <= 100.0 and 0.0 <= r["late_exit_pct"] <= 100.0
        # one host clock: a gap is never negative; gloo's threads do some work per call
        assert r["mean_arrival_gap_us"] >= 0.0 and r["helper_threads_cpu_us"] > 0.0
    assert got["nproc"] == 2
    # the control: every mode, with its runs (3 x 2), no gloo
    assert [(c["mode"], c["runs"]) for c in got["control"]] == [
        ("barrier", 6), ("work1", 6), ("b2b", 6)]
    assert all(c["mean_arrival_gap_us"] >= 0.0 for c in got["control"])
    assert "| all_gather | 16,384 | work1 | 6 |" in capsys.readouterr().out


def test_a_bad_mode_is_one_line_and_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert caw.main(["--modes", "barrier,sleep5"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == ("collective_after_work: error: modes: 'sleep5' is not barrier, b2b or "
                   "workN (N ms)")
