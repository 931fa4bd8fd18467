"""Compute scaling between devices: roofline, peak ratio, user factor."""

from __future__ import annotations

import numpy as np
import pytest

from echo_sim.cost.compute_scaling import (
    compute_scaling,
    op_traffic_bytes,
    resolve_device,
    roofline_us,
)
from echo_sim.cost.hardware import get_gpu
from echo_sim.errors import ConfigError
from echo_sim.workload import extract_workload
from tests.test_workload import make_trace


def test_roofline_bound():
    a100 = get_gpu("a100")
    # 19.5e12 fp32 FLOP/s: 19.5e6 FLOPs take 1 us; 2039 GB/s: 2.039e6 bytes take 1 us
    assert roofline_us(19.5e6, 0, a100, "fp32") == pytest.approx(1.0)
    assert roofline_us(0, 2.039e6, a100, "fp32") == pytest.approx(1.0)
    assert roofline_us(19.5e6, 4.078e6, a100, "fp32") == pytest.approx(2.0)


def test_resolve_device():
    assert resolve_device("cuda", "NVIDIA H100 80GB HBM3").name == "h100"
    assert resolve_device("cuda", "a100").name == "a100"
    assert resolve_device("cpu", "").name == "cpu"
    assert resolve_device("cuda", "NVIDIA GeForce RTX 4090") is None


def _wl(device: str, name: str):
    mods = [dict(m="big", k="Linear", p=4, i=4, o=4, f=1e12),  # compute bound
            dict(m="ln", k="LayerNorm", p=0, i=1 << 30, o=1 << 30, f=0.0),  # memory bound
            dict(m="act", k="GELU", p=0, i=0, o=0, f=0.0)]  # nothing known
    return extract_workload(make_trace(mods, device=device, device_name=name))


def test_roofline_factors_a100_to_h100():
    wl = _wl("cuda", "a100")
    cs = compute_scaling(wl, "h100")
    f = {o.name: cs.factors[o.index] for o in wl.ops}
    assert f["FW.big"] == pytest.approx(19.5 / 67.0)  # fp32 peak ratio
    assert f["BW.big"] == pytest.approx(19.5 / 67.0)
    assert f["FW.ln"] == pytest.approx(2039.0 / 3350.0)  # bandwidth ratio
    assert f["FW.act"] == pytest.approx(19.5 / 67.0)  # no flops/bytes: peak ratio
    assert f["UPDATE.AdamW"] == pytest.approx(2039.0 / 3350.0)
    assert "roofline a100 -> h100" in cs.description
    assert op_traffic_bytes(wl.ops[0]) == 12


def test_same_device_user_factor_and_unknown_device():
    wl = _wl("cuda", "h100")
    np.testing.assert_allclose(compute_scaling(wl, "h100").factors, 1.0)
    cs = compute_scaling(wl, "a100", factor=0.5)
    np.testing.assert_allclose(cs.factors, 0.5)
    assert "user factor" in cs.description
    unknown = compute_scaling(_wl("cuda", "RTX 4090"), "h100")
    np.testing.assert_allclose(unknown.factors, 1.0)
    assert "not a preset" in unknown.description
    with pytest.raises(ConfigError):
        compute_scaling(wl, "h100", factor=0.0)
