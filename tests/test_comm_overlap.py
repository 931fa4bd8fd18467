"""Collectives and compute slowing each other on a shared CPU host: the calibration
(echo_sim.cost.cpu_overheads.comm_overlap), the progress model and the simulate pass
(echo_sim.sim.overlap)."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import pytest

from echo_sim.cost.comm_profile import CommProfile, load_comm_profile, save_comm_profile
from echo_sim.cost.cpu_overheads import comm_overlap
from echo_sim.sim.overlap import progress_end
from echo_sim.sim.simulate import SimConfig, simulate
from tests.test_workload import gpt_trace

FIXTURE = Path(__file__).parent / "data" / "comm" / "gloo2_calibrated.json"
KIB64, MIB = 64 << 10, 1 << 20


def _rounds() -> dict[str, list[float]]:
    """64 KiB: alone 400 us, ends 2000 us into 5200 us of work (alone 5000);
    1 MiB: alone 2000 us, ends at 7000 us, the work (alone 5000) took 6000."""
    cal: dict[str, list[float]] = {k: [] for k in (
        "overlap_bytes", "overlap_comm_alone_us", "overlap_comm_busy_us",
        "overlap_work_alone_us", "overlap_work_busy_us")}
    for nb, d, t, w, big_w in ((KIB64, 400.0, 2000.0, 5000.0, 5200.0),
                               (MIB, 2000.0, 7000.0, 5000.0, 6000.0)):
        for _ in range(3):
            for k, v in zip(cal, (nb, d, t, w, big_w), strict=True):
                cal[k].append(float(v))
    return cal


@pytest.fixture(scope="module")
def prof() -> CommProfile:
    p = load_comm_profile(FIXTURE)
    return dataclasses.replace(p, load_avg=0.0, calibration={**p.calibration, **_rounds()})


def test_progress_end_shares_the_core_only_while_busy() -> None:
    assert progress_end(0.0, 100.0, [], 4.0) == 100.0
    # fully inside a busy interval: 4x slower
    assert progress_end(10.0, 100.0, [(0.0, 1000.0)], 4.0) == pytest.approx(410.0)
    # busy 0..200 (50 us of progress at x4), then idle: the other 50 at full speed
    assert progress_end(0.0, 100.0, [(0.0, 200.0)], 4.0) == pytest.approx(250.0)
    # idle gap 0..100 covers 100 us; a busy interval after it is not needed
    assert progress_end(0.0, 100.0, [(100.0, 500.0)], 4.0) == pytest.approx(100.0)
    # idle 0..50 (50 us), busy 50..250 (50 us at x4): done at 250
    assert progress_end(0.0, 100.0, [(50.0, 250.0), (300.0, 400.0)], 4.0) == \
        pytest.approx(250.0)
    # intervals ending before the start are skipped
    assert progress_end(500.0, 10.0, [(0.0, 100.0)], 4.0) == 510.0


def test_stretches_from_the_rounds(prof: CommProfile) -> None:
    ov = comm_overlap(prof, 2)
    assert ov is not None and ov.sizes == (KIB64, MIB) and ov.samples == 6
    # ended inside the work: s_comm = t/d = 5; s_work = t / (w - (W - t)) = 2000/1800
    assert ov.comm(KIB64) == pytest.approx(5.0)
    assert ov.work(KIB64) == pytest.approx(2000.0 / 1800.0)
    # outlasted the work: s_comm = W / (d - (t - W)) = 6000/1000; s_work = W / w = 1.2
    assert ov.comm(MIB) == pytest.approx(6.0)
    assert ov.work(MIB) == pytest.approx(1.2)
    # linear in log(size) between them, flat outside
    mid = math.sqrt(KIB64 * MIB)
    assert ov.comm(mid) == pytest.approx(5.5)
    assert ov.comm(1) == ov.comm(KIB64) and ov.comm(1 << 30) == ov.comm(MIB)
    assert "64 KiB x5" in ov.note and "trimmed means of 6 rounds" in ov.note


def test_stretches_are_clamped_and_only_on_shared_cores(prof: CommProfile) -> None:
    cal = dict(prof.calibration)
    cal["overlap_work_busy_us"] = [50000.0] * 6  # the work 10x slower: clamped to 2
    cal["overlap_comm_busy_us"] = [100.0] * 6  # faster than alone: clamped to 1
    ov = comm_overlap(dataclasses.replace(prof, calibration=cal), 2)
    assert ov is not None
    assert ov.work_stretch == (2.0, 2.0) and ov.comm_stretch == (1.0, 1.0)
    # 2 ranks x (1 compute + 1 comm thread) fit 16 idle cores: nothing applied
    big = comm_overlap(dataclasses.replace(prof, cpu_count=16), 2)
    assert big is not None and big.comm_stretch == (1.0, 1.0) and "not applied" in big.note
    # other rank counts and profiles without the rounds: no model
    assert comm_overlap(prof, 4) is None and comm_overlap(prof, 1) is None
    assert comm_overlap(load_comm_profile(FIXTURE), 2) is None


def test_simulate_stretches_ddp_buckets_overlapping_backward(prof: CommProfile,
                                                            tmp_path: Path) -> None:
    tr = gpt_trace(2)
    flat = {**prof.calibration, "sync_us": [100.0] * len(prof.calibration["sync_us"])}
    no_skew = dataclasses.replace(prof, calibration=flat)  # kappa 0: durations = profile
    with_ov = save_comm_profile(no_skew, tmp_path / "ov.json")
    without = save_comm_profile(dataclasses.replace(no_skew, calibration={
        k: v for k, v in flat.items() if not k.startswith("overlap_")}), tmp_path / "p.json")
    cfg = dict(dp=2, bucket_cap_bytes=1024)  # several buckets, the first during backward
    a = simulate(tr, SimConfig(comm_profile=str(without), **cfg), keep=True)  # type: ignore[arg-type]
    b = simulate(tr, SimConfig(comm_profile=str(with_ov), **cfg), keep=True)  # type: ignore[arg-type]
    assert not any(m.startswith("comm/compute overlap") for m in a.models)
    assert any(m.startswith("comm/compute overlap") for m in b.models)
    assert b.calibration["comm_overlap"]["value"] == pytest.approx(6.0)
    assert a.built is not None and b.built is not None and a.schedule is not None
    ga, gb, sa = a.built.graph, b.built.graph, a.schedule
    comms = sorted(a.built.comm_info, key=lambda c: sa.start_us[c])
    first = comms[0]
    t0, d = sa.start_us[first], ga.dur_us[first]
    busy = sum(min(sa.end_us[t], t0 + d) - max(sa.start_us[t], t0)
               for t in a.built.compute_tasks[0]
               if sa.start_us[t] < t0 + d and sa.end_us[t] > t0)
    assert 0 < busy < d  # it overlapped the end of backward, then ran alone
    # processor sharing: ``busy`` of compute gives busy/5 of progress, the rest at full
    # speed: d' = busy + (d - busy/5)
    assert gb.dur_us[first] == pytest.approx(busy + d - busy / 5.0, rel=1e-6)
    # the buckets after backward ran alone: unchanged
    assert all(gb.dur_us[c] == pytest.approx(ga.dur_us[c]) for c in comms[1:])
    assert b.iteration_time_us > a.iteration_time_us
    # the backward ops that ran beside it got slower by at most x(2000/1800)
    compute = a.built.compute_tasks[0]
    ca = sum(ga.dur_us[t] for t in compute)
    cb = sum(gb.dur_us[t] for t in compute)
    assert ca < cb <= ca + busy * (2000.0 / 1800.0 - 1.0) + 1e-6



def _two_ranks(prof: CommProfile, extra: tuple[float, ...] = ()) -> CommProfile:
    """Two ranks' 1 MiB rounds pooled in rank order (3 each): rank 0's work slowed in round 0,
    rank 1's in rounds 1 and 2; ``extra``: one more round appended."""
    rounds = [(MIB, 2000.0, 7000.0, 5000.0, b)
              for busy in ((8000.0, 5000.0, 5000.0), (5000.0, 6500.0, 6500.0)) for b in busy]
    if extra:
        rounds.append(extra)
    keys = ("overlap_bytes", "overlap_comm_alone_us", "overlap_comm_busy_us",
            "overlap_work_alone_us", "overlap_work_busy_us")
    cal = {**prof.calibration, **{k: [float(r[i]) for r in rounds] for i, k in enumerate(keys)}}
    return dataclasses.replace(prof, world_size=2, calibration=cal)


def test_the_compute_stretch_is_the_slower_rank_s_of_each_round(prof: CommProfile) -> None:
    """The compute stretch of each round is the rank whose work took longer (the next
    synchronisation waits for it), whichever rank that is; the collective's stretch and the
    sample count keep both ranks' rounds."""
    ov = comm_overlap(_two_ranks(prof), 2)
    assert ov is not None and ov.samples == 6 and "slower rank" in ov.note
    # the slower rank's W: 8000, 6500, 6500 (mean 7000 >= t 7000, the collective ended
    # inside the work): s_work = t / (w - (W - t)) = 7000 / 5000
    assert ov.work(MIB) == pytest.approx(1.4)
    # s_comm from all six rounds (W mean 6000 < t): W / (d - (t - W)) = 6000 / 1000
    assert ov.comm(MIB) == pytest.approx(6.0)


def test_rounds_that_do_not_pair_by_rank_are_pooled(prof: CommProfile) -> None:
    """Seven rounds do not split into two ranks' blocks: every round counts (the mean rank's
    W of the six 1 MiB rounds is 6000 < t, so s_work = W / w = 1.2)."""
    ov = comm_overlap(_two_ranks(prof, (KIB64, 400.0, 2000.0, 5000.0, 5200.0)), 2)
    assert ov is not None and ov.samples == 7 and "slower rank" not in ov.note
    assert ov.work(MIB) == pytest.approx(1.2)
