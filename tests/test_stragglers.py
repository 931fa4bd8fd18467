"""stragglers: collective entry lateness and compute excess on ``two_rank_trace``.

bucket0 seq 0: rank 0 enters at 55, rank 1 at 70 (15 late); seq 1: 160 vs 175 (15 late).
Compute (FW/BW/UPDATE covered) per step: step 1 r0 80, r1 90 (median 85); step 2 r0 85,
r1 75 (median 80): excess r0 -5/+5, r1 +5/-5. Default threshold: 5% of 115 = 5.75 µs.
"""

from __future__ import annotations

import pytest

from echo_sim.analysis.stragglers import stragglers
from echo_sim.errors import EchoError
from echo_sim.trace.model import Cat, TraceBuilder
from tests.test_statistic import two_rank_trace


def _cell(rep, step, rank):
    return next(c for c in rep.cells if (c.step, c.rank) == (step, rank))


def test_default_threshold_golden():
    rep = stragglers(two_rank_trace())
    assert rep.threshold_us == pytest.approx(5.75)
    c = _cell(rep, 1, 1)
    assert (c.collectives, c.max_late_us, c.mean_late_us, c.compute_us,
            c.compute_excess_us) == (1, 15.0, 15.0, 90.0, 5.0)
    assert _cell(rep, 2, 0).compute_excess_us == 5.0 and _cell(rep, 2, 0).max_late_us == 0.0
    assert [(c.step, c.rank, c.reason) for c in rep.flagged] == [
        (1, 1, "collective"), (2, 1, "collective")]
    r0, r1 = rep.ranks
    assert (r0.times_last, r1.times_last) == (0, 2)
    assert (r1.mean_late_us, r1.max_late_us, r1.straggler_steps) == (15.0, 15.0, 2)
    assert r0.mean_compute_excess_us == 0.0
    assert [(s.seq, s.first_rank, s.last_rank, s.spread_us, s.members) for s in
            rep.collectives] == [(0, 0, 1, 15.0, 2), (1, 0, 1, 15.0, 2)]
    assert rep.collectives[0].group_ranks == [0, 1]


def test_threshold_option():
    rep = stragglers(two_rank_trace(), threshold_us=4.0)
    assert sorted((c.step, c.rank, c.reason) for c in rep.flagged) == [
        (1, 1, "collective+compute"), (2, 0, "compute"), (2, 1, "collective")]
    assert stragglers(two_rank_trace(), threshold_us=20.0).flagged == []
    with pytest.raises(EchoError, match="threshold"):
        stragglers(two_rank_trace(), threshold_us=-1.0)


def test_groups_and_p2p_matched_separately():
    """Same seq in two groups are different ops; send/recv are not collectives."""
    b = TraceBuilder()
    for r in range(4):
        b.add(rank=r, name="STEP", cat=Cat.STEP, ts_us=0, dur_us=1000, step=0, tid=1)
        b.add(rank=r, name="FW.x", cat=Cat.FW, ts_us=0, dur_us=10, step=0)
        grp = (0, 1) if r < 2 else (2, 3)
        b.add(rank=r, name="Comm.ar", cat=Cat.COMM, ts_us=100.0 + 10 * r, dur_us=5, step=0,
              tid=100, collective="all_reduce", group_ranks=grp, seq=0)
    b.add(rank=0, name="Comm.send", cat=Cat.COMM, ts_us=500, dur_us=5, step=0, tid=100,
          collective="send", group_ranks=(0, 3), seq=0, peer=3)
    b.add(rank=3, name="Comm.recv", cat=Cat.COMM, ts_us=900, dur_us=5, step=0, tid=100,
          collective="recv", group_ranks=(0, 3), seq=0, peer=0)
    rep = stragglers(b.build(), threshold_us=0.0)
    late = {c.rank: c.max_late_us for c in rep.cells}
    assert late == {0: 0.0, 1: 10.0, 2: 0.0, 3: 10.0}
    assert len(rep.collectives) == 2
