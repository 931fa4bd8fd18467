"""Batch-size extrapolation: the least-squares fit and the one-trace linear model."""

from __future__ import annotations

import numpy as np
import pytest

from echo_sim.cost.batch_model import fit_batch_model, linear_batch_model, make_batch_model
from echo_sim.errors import ConfigError, TraceMismatchError
from echo_sim.sim.simulate import SimConfig, simulate
from echo_sim.workload import extract_workload
from tests.test_workload import chain_trace, make_trace


def _at(mb: int, a: float = 3.0, b: float = 2.0, n: int = 3, update_us: float = 7.0):
    mods = [dict(m=f"l{i}", k="Linear", p=16, i=4 * mb, o=4 * mb, f=0.0) for i in range(n)]
    return extract_workload(make_trace(mods, fw_us=a + b * mb, bw_us=2 * (a + b * mb),
                                       update_us=update_us, mb=mb))


def test_fit_recovers_exact_line_from_two_sizes():
    bm = fit_batch_model([_at(2), _at(4)])
    assert bm.kind == "fit"
    fw = [o.index for o in _at(2).ops if o.phase == "F"]
    bw = [o.index for o in _at(2).ops if o.phase == "B"]
    np.testing.assert_allclose(bm.a_us[fw], 3.0)
    np.testing.assert_allclose(bm.b_us[fw], 2.0)
    np.testing.assert_allclose(bm.time_us(8)[bw], 2 * (3 + 2 * 8))
    upd = [o.index for o in _at(2).ops if o.phase == "U"]
    np.testing.assert_allclose(bm.time_us(64)[upd], 7.0)  # optimizer: batch independent
    assert "least-squares" in bm.description


def test_fit_least_squares_over_three_sizes_and_clipping():
    # times 10, 14, 22 at 1, 2, 4: slope 4, intercept 6 (least squares)
    ws = [extract_workload(make_trace([dict(m="l0", k="Linear", p=4, i=4, o=4, f=0.0)],
                                      fw_us=t, bw_us=t, update_us=1.0, mb=b))
          for b, t in ((1, 10.0), (2, 14.0), (4, 22.0))]
    bm = fit_batch_model(ws)
    assert bm.a_us[0] == pytest.approx(6.0) and bm.b_us[0] == pytest.approx(4.0)
    # a line through negative intercept is refitted through the origin
    ws = [extract_workload(make_trace([dict(m="l0", k="Linear", p=4, i=4, o=4, f=0.0)],
                                      fw_us=t, bw_us=t, mb=b)) for b, t in ((1, 1.0), (3, 9.0))]
    bm = fit_batch_model(ws)
    assert bm.a_us[0] == 0.0 and bm.b_us[0] == pytest.approx((1 * 1 + 9 * 3) / 10)


def test_fit_rejects_bad_inputs():
    with pytest.raises(ConfigError):
        fit_batch_model([_at(2)])
    with pytest.raises(ConfigError):
        fit_batch_model([_at(2), _at(2)])
    with pytest.raises(TraceMismatchError):
        fit_batch_model([_at(2, n=3), _at(4, n=2)])
    assert make_batch_model([_at(2), _at(2)]).kind == "linear"


def test_linear_model_fixed_overhead_and_proportional_rest():
    mods = [dict(m=f"l{i}", k="Linear", p=4, i=4, o=4, f=0.0) for i in range(2)]
    wl = extract_workload(make_trace(mods, fw_us=[20.0, 40.0], bw_us=[30.0, 30.0],
                                     gap_us=2.0, mb=4))
    bm = linear_batch_model(wl, op_overhead_us=5.0)
    t = {o.name: o for o in wl.ops}
    # FW.l0: 20 + gap 2; fixed = min(2, median gap 2) + min(20, 5) = 7; at B=8: 7 + 15·2
    i = t["FW.l0"].index
    assert bm.a_us[i] == pytest.approx(7.0)
    assert bm.time_us(8)[i] == pytest.approx(7.0 + 15.0 * 2)
    assert bm.time_us(4)[i] == pytest.approx(t["FW.l0"].time_us)  # the traced size: as measured
    assert bm.time_us(2)[t["FW.l1"].index] == pytest.approx(7.0 + 35.0 / 2)
    assert "fixed" in bm.description


def test_simulate_uses_fit_when_given_other_sizes():
    tr2 = make_trace([dict(m=f"l{i}", k="Linear", p=16, i=8, o=8, f=0.0) for i in range(3)],
                     fw_us=7.0, bw_us=14.0, update_us=7.0, mb=2)
    tr4 = make_trace([dict(m=f"l{i}", k="Linear", p=16, i=16, o=16, f=0.0) for i in range(3)],
                     fw_us=11.0, bw_us=22.0, update_us=7.0, mb=4)
    res = simulate(tr2, SimConfig(micro_batch=8, cluster="cpu-gloo"), batch_traces=(tr4,))
    # per op a + b·8 with FW 3 + 2B, BW 6 + 4B: 3·(19 + 38) + update 7
    assert res.iteration_time_us == pytest.approx(3 * (19 + 38) + 7.0)
    assert any("least-squares" in m for m in res.models)
    one = simulate(chain_trace(3), SimConfig(cluster="cpu-gloo"))
    assert any("one trace" in m for m in one.models)
