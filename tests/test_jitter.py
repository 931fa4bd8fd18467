"""The traced compute's step-to-step spread, and what it adds at a synchronisation."""

from __future__ import annotations

import dataclasses
import itertools
import math
from pathlib import Path

import numpy as np
import pytest

from echo_sim.cost.cpu_overheads import SYNC_SHARE, Skew
from echo_sim.sim.simulate import SimConfig, simulate
from echo_sim.workload.jitter import (
    GRID,
    MIN_STEPS,
    gini_mean_difference,
    part_gaps,
    step_curve,
)
from echo_sim.workload.ops import extract_workload
from tests.test_workload import gpt_trace

FIXTURE = Path(__file__).parent / "data" / "comm" / "gloo2_calibrated.json"


def test_gini_mean_difference_is_the_mean_gap_over_pairs() -> None:
    rng = np.random.default_rng(7)
    x = rng.exponential(1000.0, size=11)
    pairs = [abs(a - b) for a, b in itertools.permutations(x, 2)]
    assert gini_mean_difference(x) == pytest.approx(float(np.mean(pairs)))
    assert gini_mean_difference([5.0]) == 0.0 and gini_mean_difference([3.0, 3.0]) == 0.0
    # a normal sample: 2 sigma / sqrt(pi)
    big = rng.normal(0.0, 100.0, size=20_000)
    assert gini_mean_difference(big) == pytest.approx(200.0 / math.sqrt(math.pi), rel=0.02)


def _curve(steps: int, ops: int = 128, op_us: float = 100.0,
           extra: dict[tuple[int, int], float] | None = None) -> np.ndarray:
    """Cumulative compute per step at every op boundary, ``extra[(step, op)]`` µs added."""
    per = np.full((steps, ops), op_us)
    for (s, o), v in (extra or {}).items():
        per[s, o] += v
    return np.concatenate([np.zeros((steps, 1)), np.cumsum(per, axis=1)], axis=1)


def test_step_curve_keeps_each_step_at_equal_shares_of_the_median() -> None:
    cum = _curve(5, extra={(2, 100): 3000.0})
    curve = step_curve(cum)
    assert len(curve) == 5 and all(len(row) == GRID + 1 for row in curve)
    assert all(row[0] == 0.0 and row[-1] == cum[i, -1] for i, row in enumerate(curve))
    assert all(np.all(np.diff(row) >= 0) for row in curve)
    assert curve[0][GRID // 2] == pytest.approx(6400.0)  # half of 128 ops of 100 us
    assert step_curve(_curve(MIN_STEPS - 1)) == ()  # too few steps to tell a spread
    assert step_curve(np.zeros((4, 10))) == ()


def test_part_gaps_follow_where_the_spread_lies() -> None:
    # nine steps of 12.8 ms; one step interrupted for 3 ms late in its second half
    curve = step_curve(_curve(9, extra={(4, 100): 3000.0}))
    whole = part_gaps(curve, 12_800.0)
    # 16 of the 72 ordered pairs hold the interrupted step, 3 ms apart
    assert whole == pytest.approx((16 * 3000.0 / 72,))
    halves = part_gaps(curve, 6_400.0)
    assert halves == pytest.approx((0.0, 16 * 3000.0 / 72))
    assert len(part_gaps(curve, 1_600.0)) == 8
    # longer than the step: the step's spread, as a sum of independent steps'
    assert part_gaps(curve, 4 * 12_800.0) == pytest.approx((2 * 16 * 3000.0 / 72,))
    assert part_gaps((), 1000.0) == () and part_gaps(curve, 0.0) == ()
    assert part_gaps(step_curve(_curve(6)), 3_000.0) == pytest.approx((0.0,) * 4)


def test_a_synchronisation_adds_the_spreads_as_variances() -> None:
    sk = Skew(kappa=0.1, w_busy_us=0.0, samples=3, note="")  # 100 us apart per ms
    w = 4000.0
    gap = sk.gap_at(w)
    assert gap == pytest.approx(400.0)
    assert sk.wait_us(w, ()) == sk.wait_us(w) == pytest.approx(SYNC_SHARE * gap)
    own = (0.0, 3 * gap, 4 * gap)
    want = SYNC_SHARE * (gap + math.hypot(gap, 3 * gap) + math.hypot(gap, 4 * gap)) / 3
    assert sk.wait_us(w, own) == pytest.approx(want)
    assert sk.collective_us(10_000.0, w, own) - sk.collective_us(10_000.0, w) == \
        pytest.approx(want - SYNC_SHARE * gap)


def test_simulate_prices_the_traced_steps_spread_at_each_synchronisation() -> None:
    """A trace whose steps vary costs more at a 2-rank job's synchronisations than the same
    trace with its spread left out; one whose steps do not vary, nothing more."""
    scales = (1.0, 1.0, 1.25, 1.0, 0.95, 1.0)
    tr = gpt_trace(layers=2, steps=tuple(range(6)), fw_us=400.0, bw_us=800.0,
                   step_scale=scales)
    wl = extract_workload(tr)
    assert len(wl.step_curve_us) == wl.steps_used == 6
    cfg = SimConfig(dp=2, comm_profile=str(FIXTURE))
    spread = simulate(wl, cfg)
    flat = simulate(dataclasses.replace(wl, step_curve_us=()), cfg)
    assert spread.iteration_time_us > flat.iteration_time_us
    assert spread.ranks[0].compute_us == pytest.approx(flat.ranks[0].compute_us)
    note = next(m for m in spread.models if m.startswith("rank skew"))
    assert "Gini mean difference" in note and "6 steps" in note
    assert not any("Gini" in m for m in flat.models)
    # two traced steps: no spread to read, and simulate says why
    short = extract_workload(gpt_trace(layers=2, steps=(0, 1), fw_us=400.0, bw_us=800.0))
    note = next(m for m in simulate(short, cfg).models if m.startswith("rank skew"))
    assert "not priced: the trace holds 2 step(s), 3 or more give it" in note
    # search's bound probes (no spread at all) leave it out: their bounds stay below
    assert simulate(wl, cfg, spread=False).iteration_time_us == pytest.approx(
        simulate(dataclasses.replace(wl, step_curve_us=()), cfg, spread=False)
        .iteration_time_us)
    even = extract_workload(gpt_trace(layers=2, steps=tuple(range(6)), fw_us=400.0,
                                      bw_us=800.0))
    assert all(g == pytest.approx(0.0) for g in part_gaps(even.step_curve_us, 1000.0))
    one = simulate(even, cfg)
    assert one.iteration_time_us == pytest.approx(
        simulate(dataclasses.replace(even, step_curve_us=()), cfg).iteration_time_us)


def test_pooled_runs_keep_the_first_runs_spread() -> None:
    """The pace between separate processes is not one process's step-to-step spread."""
    from echo_sim.workload.pool import pool_workloads

    kw = dict(layers=2, steps=tuple(range(5)), fw_us=400.0, bw_us=800.0)
    first = extract_workload(gpt_trace(step_scale=(1.0, 1.3, 1.0, 1.0, 1.0), **kw))
    second = extract_workload(gpt_trace(step_scale=(1.5,) * 5, **kw))
    pooled = pool_workloads([first, second])
    assert pooled.step_curve_us == first.step_curve_us != second.step_curve_us
