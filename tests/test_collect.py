"""collect: iteration, FW+BW, exposed / overlapped communication, checked by hand.

Per (rank, step) of ``two_rank_trace`` (see tests/test_statistic.py), µs:

cell      iteration  fwbw  compute  comm  overlapped (comm ∩ compute)  exposed
r0 s1     100        70    80       30    15 ([55,70])                 15
r0 s2     110        75    85       40    15 ([160,175])               25
r1 s1     120        80    90       35    10 ([70,80])                 25
r1 s2     100        65    75       30    10 ([175,185])               20
"""

from __future__ import annotations

import math

import pytest

from echo_sim.analysis.collect import collect
from echo_sim.trace.model import Cat, TraceBuilder
from tests.test_statistic import two_rank_trace


def test_cells_golden():
    c = collect(two_rank_trace())
    assert c.ranks == [0, 1] and c.steps == [1, 2]
    assert c.cells["iteration_us"].tolist() == [[100, 110], [120, 100]]
    assert c.cells["fwbw_us"].tolist() == [[70, 75], [80, 65]]
    assert c.cells["compute_us"].tolist() == [[80, 85], [90, 75]]
    assert c.cells["comm_us"].tolist() == [[30, 40], [35, 30]]
    assert c.cells["overlapped_us"].tolist() == [[15, 15], [10, 10]]
    assert c.cells["exposed_us"].tolist() == [[15, 25], [25, 20]]


def test_summary_golden():
    c = collect(two_rank_trace())
    # slowest rank per step: step 1 -> rank 1 (120), step 2 -> rank 0 (110)
    assert [(s.step, s.iteration_us, s.slowest_rank, s.fastest_us, s.mean_us, s.median_us)
            for s in c.per_step] == [(1, 120.0, 1, 100.0, 110.0, 110.0),
                                     (2, 110.0, 0, 100.0, 105.0, 105.0)]
    assert c.iteration_time_us == 115.0
    assert (c.fwbw_us, c.comm_us, c.overlapped_us, c.exposed_us) == (72.5, 33.75, 12.5, 21.25)
    r0, r1 = c.per_rank
    assert (r0.iteration_mean_us, r0.iteration_median_us, r0.overlapped_mean_us,
            r0.exposed_mean_us) == (105.0, 105.0, 15.0, 20.0)
    assert (r1.iteration_mean_us, r1.fwbw_mean_us, r1.exposed_mean_us) == (110.0, 72.5, 22.5)


def test_median_over_steps_of_slowest_rank():
    """Three steps of 10, 30 and 11 µs on the slowest rank: median 11, mean 17."""
    b = TraceBuilder()
    for step, (a, c) in enumerate([(10, 4), (30, 5), (9, 11)]):
        b.add(rank=0, name="STEP", cat=Cat.STEP, ts_us=100.0 * step, dur_us=a, step=step, tid=1)
        b.add(rank=1, name="STEP", cat=Cat.STEP, ts_us=100.0 * step, dur_us=c, step=step, tid=1)
        b.add(rank=0, name="FW.x", cat=Cat.FW, ts_us=100.0 * step, dur_us=1, step=step)
        b.add(rank=1, name="FW.x", cat=Cat.FW, ts_us=100.0 * step, dur_us=1, step=step)
    c = collect(b.build())
    assert c.iteration_time_us == 11.0
    assert c.iteration_time_mean_us == pytest.approx(17.0)
    assert [s.slowest_rank for s in c.per_step] == [0, 0, 1]


def test_concurrent_comm_lanes_counted_once():
    b = TraceBuilder()
    b.add(rank=0, name="STEP", cat=Cat.STEP, ts_us=0, dur_us=100, step=0, tid=1)
    b.add(rank=0, name="BW.x", cat=Cat.BW, ts_us=0, dur_us=40, step=0)
    b.add(rank=0, name="Comm.a", cat=Cat.COMM, ts_us=20, dur_us=40, step=0, tid=100)
    b.add(rank=0, name="Comm.b", cat=Cat.COMM, ts_us=30, dur_us=50, step=0, tid=101)
    c = collect(b.build())
    assert c.comm_us == 60.0  # [20, 80]
    assert c.overlapped_us == 20.0  # [20, 40]
    assert c.exposed_us == 40.0


def test_to_dict_is_json_ready_with_missing_cells_as_none():
    import json

    b = TraceBuilder()
    b.add(rank=0, name="FW.x", cat=Cat.FW, ts_us=0, dur_us=5, step=1)
    b.add(rank=0, name="FW.x", cat=Cat.FW, ts_us=10, dur_us=5, step=2)
    b.add(rank=1, name="FW.x", cat=Cat.FW, ts_us=0, dur_us=7, step=1)
    d = json.loads(json.dumps(collect(b.build()).to_dict(), allow_nan=False))
    assert d["cells"]["iteration_us"] == [[5.0, 5.0], [7.0, None]]
    assert d["iteration_time_us"] == 6.0  # steps: max(5, 7) = 7 and 5 -> median 6
    assert not math.isnan(d["per_rank"][1]["iteration_mean_us"])
