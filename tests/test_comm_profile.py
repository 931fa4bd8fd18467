"""Communication profiles: fit, interpolation, file round trip, errors, CommModel use."""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path

import pytest

from echo_sim.cost.collectives import CommModel, calibrate_cluster, collective_time_us
from echo_sim.cost.comm_profile import (
    CommProfile,
    fit_alpha_beta,
    load_comm_profile,
    save_comm_profile,
)
from echo_sim.cost.hardware import get_cluster
from echo_sim.errors import ConfigError, ProfileError
from echo_sim.trace.outfiles import OutputError

DATA = Path(__file__).parent / "data" / "comm"


def test_fit_recovers_exact_line() -> None:
    pts = [(s, 100.0 + 0.001 * s) for s in (1000, 10000, 100000, 1000000)]
    a, b = fit_alpha_beta(pts)
    assert a == pytest.approx(100.0) and b == pytest.approx(0.001)


def test_fit_is_positive_on_noise() -> None:
    # flat / decreasing times (noise on a latency-bound range) still give positive terms
    a, b = fit_alpha_beta([(1000, 50.0), (2000, 49.0), (4000, 48.0)])
    assert a > 0 and b > 0
    a, b = fit_alpha_beta([(4096, 10.0)])
    assert a == 5.0 and b == pytest.approx(5.0 / 4096)


def test_load_fixture_and_interpolate() -> None:
    p = load_comm_profile(DATA / "gloo2.json")
    assert p.backend == "gloo" and p.world_size == 2 and p.nodes == 1
    assert p.ops == [("all_reduce", 2), ("send", 2)]
    a, b = p.fits[("all_reduce", 2)]
    assert a == pytest.approx(100.0) and b == pytest.approx(0.001)  # fitted: exact line
    assert p.fits[("send", 2)] == (19.0, 0.001)  # stored fit kept
    # measured sizes give the measured values
    assert p.time_us("all_reduce", 2, 100000) == pytest.approx(200.0)
    # halfway in log-size between 1e4 and 1e5 (10**4.5): halfway in time
    assert p.time_us("all_reduce", 2, round(10**4.5)) == pytest.approx(155.0, abs=1e-3)
    # above: last point + beta * extra; below: first point - beta * missing
    assert p.time_us("all_reduce", 2, 2_000_000) == pytest.approx(2100.0)
    assert p.time_us("all_reduce", 2, 500) == pytest.approx(100.5)
    with pytest.raises(ConfigError, match="all_gather over 2 ranks"):
        p.time_us("all_gather", 2, 10)


def test_round_trip_and_overwrite(tmp_path: Path) -> None:
    p = CommProfile(backend="nccl", device="cuda", host="h", world_size=4,
                    samples={("all_gather", 4): [(4096, 30.0), (1024, 20.0), (65536, 90.0)]})
    assert p.samples[("all_gather", 4)][0] == (1024, 20.0)  # sorted
    (tmp_path / "sub").mkdir()
    out = save_comm_profile(p, tmp_path / "sub" / "c.json")
    q = load_comm_profile(out)
    assert q.samples == p.samples and q.fits.keys() == p.fits.keys()
    for key, (a, b) in p.fits.items():  # pytest >= 9.2: approx takes no nested dicts
        assert q.fits[key] == (pytest.approx(a), pytest.approx(b))
    assert q.source == str(out)
    assert q.run_time == "slowest"  # the default, and what a profile without the field reads as
    from dataclasses import replace

    last = load_comm_profile(save_comm_profile(replace(p, run_time="last_arrival"),
                                               tmp_path / "last.json"))
    assert last.run_time == "last_arrival"
    with pytest.raises(OutputError, match="exists"):
        save_comm_profile(p, out)
    save_comm_profile(p, out, overwrite=True)
    assert not list(out.parent.glob("*.tmp"))


@pytest.mark.parametrize(
    "name, content, needle",
    [
        ("missing.json", None, "no such communication profile"),
        ("truncated.json", "file", "not a JSON communication profile"),
        ("bad_lengths.json", "file", "as many times_us"),
        ("other.json", {"format": "something/2"}, "is not 'echo-comm-profile/1'"),
        ("noops.json", {"format": "echo-comm-profile/1", "ops": []}, "no measurements"),
        ("negative.json", {"format": "echo-comm-profile/1", "ops": [
            {"op": "all_reduce", "group_size": 2, "sizes_bytes": [8], "times_us": [-1.0]}]},
         "positive numbers"),
        ("types.json", {"format": "echo-comm-profile/1", "ops": [
            {"op": "all_reduce", "group_size": "2", "sizes_bytes": [8], "times_us": [1.0]}]},
         "'group_size' has the wrong type"),
    ],
)
def test_malformed_profiles(tmp_path: Path, name: str, content, needle: str) -> None:
    path = DATA / name if content == "file" else tmp_path / name
    if isinstance(content, dict):
        path.write_text(json.dumps(content))
    with pytest.raises(ProfileError) as e:
        load_comm_profile(path)
    msg = str(e.value)
    assert needle in msg and name in msg and "\n" not in msg


def test_comm_model_uses_profile_where_it_covers() -> None:
    prof = load_comm_profile(DATA / "gloo2.json")
    cluster = get_cluster("cpu-gloo", nodes=2)  # 2 GPUs per node
    m = CommModel(cluster, prof)
    assert m.covered("all_reduce", [0, 1])
    assert m.time_us("all_reduce", 100000, [0, 1]) == pytest.approx(200.0)
    assert m.time_us("p2p", 1048576, [0, 1]) == pytest.approx(1044.0)
    assert m.time_us("recv", 1024, [1, 0]) == pytest.approx(20.0)
    # concurrent: the part above alpha doubles
    assert m.time_us("all_reduce", 100000, [0, 1], concurrent=2) == pytest.approx(300.0)
    # not covered: other node count, other group size, other op -> analytic model on the
    # cluster calibrated to the profile (or the preset itself with calibrate=False)
    calibrated = calibrate_cluster(cluster, prof)
    raw = CommModel(cluster, prof, calibrate=False)
    for op, ranks in (("all_reduce", [0, 2]), ("all_reduce", [0, 1, 2]),
                      ("all_gather", [0, 1])):
        assert not m.covered(op, ranks)
        assert m.time_us(op, 100000, ranks) == collective_time_us(op, 100000, ranks, calibrated)
        assert raw.time_us(op, 100000, ranks) == collective_time_us(op, 100000, ranks, cluster)
    assert math.isfinite(m.time_us("all_reduce", 1, [0, 1]))


def test_calibrate_cluster_inverts_ring_fit() -> None:
    prof = load_comm_profile(DATA / "gloo2.json")  # all_reduce/2: alpha 100 us, beta 1e-3 us/B
    c = calibrate_cluster(get_cluster("cpu-gloo", nodes=2), prof)
    # alpha = 2(n-1)·a -> a = 50 us; beta = 2(n-1)/n / B -> B = 1000 B/us = 1 GB/s
    assert c.intra_latency_us == pytest.approx(50.0)
    assert c.intra_bw_gbps == pytest.approx(1.0)
    assert c.inter_bw_gbps == get_cluster("cpu-gloo").inter_bw_gbps
    # the calibrated analytic model reproduces the fitted line for the measured group
    assert collective_time_us("all_reduce", 10**6, [0, 1], c, algorithm="ring") == \
        pytest.approx(100.0 + 1e-3 * 10**6)
    multi = dataclasses.replace(prof, nodes=2)
    assert calibrate_cluster(get_cluster("cpu-gloo"), multi) == get_cluster("cpu-gloo")
