"""The expected step over the collectives' measured run-to-run spread
(echo_sim.sim.comm_spread), where the spread comes from (CommProfile.run_factors,
CommOverlap.spread, CommModel / TracedFirst .spread) and the simulate pass."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest

from echo_sim.cost.collectives import CommModel
from echo_sim.cost.comm_profile import CommProfile, load_comm_profile, save_comm_profile
from echo_sim.cost.cpu_overheads import comm_overlap
from echo_sim.cost.hardware import get_cluster
from echo_sim.cost.trace_comm import TracedFirst
from echo_sim.sim.comm_spread import DRAWS, draw_count, expected_step
from echo_sim.sim.engine import TaskGraph, run
from echo_sim.sim.simulate import SimConfig, simulate
from tests.test_workload import gpt_trace

BLOCK = Path(__file__).parent / "data" / "comm" / "gloo2_block.json"


def _fork_join(chain: bool = False) -> tuple[TaskGraph, int]:
    """Compute A (10 us) and collective C (8 us) side by side (or C after A), then J (1 us)
    after both."""
    g = TaskGraph()
    comp, chan = g.resource("r0.compute"), g.resource("r0.comm")
    a = g.task(10.0, [comp])
    c = g.task(8.0, [chan])
    j = g.task(1.0, [comp])
    g.edges([(a, j), (c, j)] + ([(a, c)] if chain else []))
    return g, c


def test_a_collective_hidden_on_average_is_exposed_in_half_the_draws() -> None:
    g, c = _fork_join()
    base = run(g)
    assert base.makespan_us == 11.0  # the mean 8 us hides behind A's 10
    # runs of 0.25x and 1.75x the mean: C takes 2 or 14 us, the step 11 or 15
    got = expected_step(g, {c: (8.0, np.array([0.25, 1.75]))}, base=base,
                        measure=lambda s: np.array([s.makespan_us, 1.0]))
    assert got is not None and got.draws == DRAWS and got.varied == 1
    assert got.mean_us == pytest.approx(13.0)  # stratified: exactly half the draws each
    assert (got.p10_us, got.p90_us, got.base_us) == (11.0, 15.0, 11.0)
    assert got.extra.tolist() == pytest.approx([13.0, 1.0])  # averaged per-draw values
    assert g.dur_us == [10.0, 8.0, 1.0]  # restored
    assert "expected step 0.013 ms over 64 draws" in got.note()


def test_a_chain_keeps_its_mean() -> None:
    """Nothing to hide behind: the expected step is the mean schedule's (E of a sum)."""
    g, c = _fork_join(chain=True)
    got = expected_step(g, {c: (8.0, np.array([0.25, 1.75]))}, base=run(g))
    assert got is not None and got.mean_us == pytest.approx(got.base_us) == 19.0


def test_only_the_transfer_varies_and_never_below_zero() -> None:
    g, c = _fork_join()
    g.dur_us[c] = 12.0  # 4 us of wait before an 8 us transfer
    got = expected_step(g, {c: (8.0, np.array([0.0, 2.0]))}, base=run(g))
    # 12 - 8 = 4 or 12 + 8 = 20: the step 11 or 21
    assert got is not None and got.mean_us == pytest.approx(16.0)
    got = expected_step(g, {c: (100.0, np.array([0.0, 2.0]))}, base=run(g))
    assert got is not None and got.p10_us == 11.0  # 12 - 100 clamps at 0


def test_nothing_is_drawn_without_spread() -> None:
    g, c = _fork_join()
    base = run(g)
    assert expected_step(g, {}, base=base) is None
    assert expected_step(g, {c: (8.0, np.array([0.97, 1.0, 1.03]))}, base=base) is None
    assert expected_step(g, {c: (8.0, np.array([1.0]))}, base=base) is None


def test_draws_shrink_for_big_graphs() -> None:
    assert draw_count(100) == DRAWS and draw_count(100_000) == 40
    assert draw_count(10**8) == 8 and draw_count(100, limit=16) == 16


def _profile(runs: list[list[float]]) -> CommProfile:
    return CommProfile(backend="gloo", device="cpu", host="h", world_size=2,
                       samples={("all_reduce", 2): [(1024, 100.0), (4096, 200.0)]},
                       runs_us={("all_reduce", 2): runs})


def test_run_factors_are_the_nearest_sizes_kept_runs_over_their_mean() -> None:
    # 15 runs: ten at 100 us, five stalls at 400; one run in 15 cut at each end
    p = _profile([[100.0] * 10 + [400.0] * 5, [200.0, 220.0]])
    f = p.run_factors("all_reduce", 2, 1500)  # nearer 1024 than 4096 in log size
    assert f is not None
    kept = np.array([100.0] * 9 + [400.0] * 4)
    assert f.tolist() == pytest.approx(sorted(kept / kept.mean()))
    assert f.mean() == pytest.approx(1.0)
    assert p.run_factors("all_reduce", 2, 3000).tolist() == pytest.approx(
        [200 / 210, 220 / 210])  # nearer 4096
    assert p.run_factors("all_gather", 2, 1024) is None
    assert dataclasses.replace(p, runs_us={}).run_factors("all_reduce", 2, 1024) is None


def test_comm_models_spread_what_the_profile_prices_only() -> None:
    prof = load_comm_profile(BLOCK)
    m = CommModel(get_cluster("cpu-gloo"), prof)
    f = m.spread("all_reduce", 1 << 20, [0, 1])
    assert f is not None and f.mean() == pytest.approx(1.0)
    assert m.spread("all_reduce", 1 << 20, [0]) is None  # one rank: no collective
    assert CommModel(get_cluster("cpu-gloo")).spread("all_reduce", 1 << 20, [0, 1]) is None
    # the trace's own collectives are the job's times, stalls included: not drawn
    traced = CommProfile(backend="gloo", device="cpu", host="h", world_size=2,
                         samples={("all_reduce", 2): [(1 << 20, 900.0)]})
    first = TracedFirst(traced, m)
    assert first.spread("all_reduce", 1 << 20, [0, 1]) is None
    assert first.spread("all_gather", 1 << 20, [0, 1]) is not None


def test_overlap_rounds_give_a_spread_per_size() -> None:
    ov = comm_overlap(dataclasses.replace(load_comm_profile(BLOCK), load_avg=0.0,
                                          cpu_count=2), 2)
    assert ov is not None and len(ov.comm_spread) == len(ov.sizes)
    for nb in ov.sizes:
        f = ov.spread(nb)
        assert f is not None and f.mean() == pytest.approx(1.0)
        assert list(f) == sorted(f)
    assert dataclasses.replace(ov, comm_spread=()).spread(1 << 20) is None


def test_simulate_reports_the_expected_step_over_the_profiles_runs(tmp_path: Path) -> None:
    tr = gpt_trace(2)
    prof = load_comm_profile(BLOCK)
    drawn = save_comm_profile(prof, tmp_path / "runs.json")
    mean = save_comm_profile(dataclasses.replace(prof, runs_us={}), tmp_path / "mean.json")
    cfg = dict(dp=2, bucket_cap_bytes=1024)  # several buckets, the first during backward
    a = simulate(tr, SimConfig(comm_profile=str(mean), **cfg))  # type: ignore[arg-type]
    b = simulate(tr, SimConfig(comm_profile=str(drawn), **cfg), keep=True)  # type: ignore[arg-type]
    assert "comm_spread" not in a.calibration and a.iteration_range_us is None
    assert a.to_dict()["iteration_range_us"] is None
    assert not any("run-to-run spread" in m for m in a.models)
    note = next(m for m in b.models if m.startswith("collective run-to-run spread"))
    assert "draws of the measured runs" in note
    cal = b.calibration["comm_spread"]
    assert cal["samples"] == DRAWS and cal["spread_pct"] > 0
    # the timeline kept is the schedule of mean times; the iteration its expectation,
    # at least that (the longest path is convex in the durations; the draws keep each
    # collective's mean)
    assert b.schedule is not None
    assert b.schedule.makespan_us == pytest.approx(a.iteration_time_us)
    assert b.iteration_time_us == pytest.approx(cal["value"] * a.iteration_time_us)
    assert b.iteration_time_us >= a.iteration_time_us * 0.995
    for r in b.ranks:  # the breakdown is averaged over the same draws: it still adds up
        assert r.compute_us + r.exposed_comm_us + r.bubble_us + r.idle_us == \
            pytest.approx(b.iteration_time_us, rel=1e-9)
    lo, hi = b.iteration_range_us or (0.0, 0.0)
    assert lo <= b.iteration_time_us <= hi and b.to_dict()["iteration_range_us"] == [lo, hi]
    from echo_sim.commands.simulate import render

    first = render(b).splitlines()[1]
    assert first.startswith("iteration time") and f"{lo / 1e3:.3f}-{hi / 1e3:.3f} ms" in first
    assert "10-90 %" not in render(a)
    # reproducible: the draws are seeded
    again = simulate(tr, SimConfig(comm_profile=str(drawn), **cfg))  # type: ignore[arg-type]
    assert again.iteration_time_us == b.iteration_time_us
    # spread=False (search's operator probes): the same plan and mean schedule, no draws
    bare = simulate(tr, SimConfig(comm_profile=str(drawn), **cfg), keep=True,  # type: ignore[arg-type]
                    spread=False)
    assert "comm_spread" not in bare.calibration and bare.iteration_range_us is None
    assert bare.iteration_time_us == b.schedule.makespan_us
    assert bare.built is not None and b.built is not None
    assert np.array_equal(bare.built.plan.time_us, b.built.plan.time_us)
