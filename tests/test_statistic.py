"""statistic: operator / category / rank figures on hand-built traces, checked by hand.

``two_rank_trace`` (also used by the other analysis tests) — 2 ranks, steps 1 and 2, all µs:

rank 0 step 1: STEP [0,100]  FW.a [0,20] FW.b [20,30] BW.b [30,50] BW.a [50,70]
               Comm.bucket0 [55,85] (seq 0)  UPDATE.SGD [85,95]
rank 0 step 2: STEP [100,210] FW.a [100,125] FW.b [125,135] BW.b [135,155] BW.a [155,175]
               Comm.bucket0 [160,200] (seq 1)  UPDATE.SGD [200,210]
rank 1 step 1: STEP [0,120]  FW.a [0,30] FW.b [30,40] BW.b [40,60] BW.a [60,80]
               Comm.bucket0 [70,105] (seq 0)  UPDATE.SGD [105,115]
rank 1 step 2: STEP [120,220] FW.a [120,140] FW.b [140,150] BW.b [150,170] BW.a [170,185]
               Comm.bucket0 [175,205] (seq 1)  UPDATE.SGD [205,215]
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from echo_sim.analysis.statistic import covered_us, statistic, step_grid
from echo_sim.errors import EchoError, TraceFormatError
from echo_sim.trace.model import Cat, RankInfo, Trace, TraceBuilder

# (rank, step, STEP, FW.a, FW.b, BW.b, BW.a, Comm, UPDATE) as (start, end) pairs
LAYOUT = [
    (0, 1, (0, 100), (0, 20), (20, 30), (30, 50), (50, 70), (55, 85), (85, 95)),
    (0, 2, (100, 210), (100, 125), (125, 135), (135, 155), (155, 175), (160, 200), (200, 210)),
    (1, 1, (0, 120), (0, 30), (30, 40), (40, 60), (60, 80), (70, 105), (105, 115)),
    (1, 2, (120, 220), (120, 140), (140, 150), (150, 170), (170, 185), (175, 205), (205, 215)),
]


def two_rank_trace() -> Trace:
    b = TraceBuilder(source="two_rank")
    for rank in (0, 1):
        b.ranks[rank] = RankInfo(rank=rank, world_size=2, host="node0", local_rank=rank)
    for rank, step, st, fa, fb, bb, ba, cm, up in LAYOUT:
        def add(name: str, cat: Cat, span: tuple[int, int], rank: int = rank, step: int = step,
                **kw: object) -> None:
            b.add(rank=rank, name=name, cat=cat, ts_us=float(span[0]),
                  dur_us=float(span[1] - span[0]), step=step, **kw)  # type: ignore[arg-type]
        add("STEP", Cat.STEP, st, tid=1)
        add("FW.a", Cat.FW, fa, kind="Linear", param_bytes=400, in_bytes=64, out_bytes=32,
            flops=1000.0)
        add("FW.b", Cat.FW, fb, kind="ReLU")
        add("BW.b", Cat.BW, bb, kind="ReLU")
        add("BW.a", Cat.BW, ba, kind="Linear", param_bytes=400)
        add("Comm.bucket0", Cat.COMM, cm, tid=100, collective="all_reduce", nbytes=400,
            group_ranks=(0, 1), seq=step - 1, comm_args={"dtype": "float32", "path": "ddp"})
        add("UPDATE.SGD", Cat.UPDATE, up, param_bytes=400)
    b.add_counter(rank=0, ts_us=5.0, series="rss_bytes", value=1e6)
    return b.build()


def _op(stats, name):
    return next(o for o in stats.ops if o.name == name)


def test_operator_table_golden():
    s = statistic(two_rank_trace())
    assert s.step_time_us == 430.0  # 100 + 110 + 120 + 100
    fa = _op(s, "FW.a")  # durations 20, 25, 30, 20
    assert (fa.category, fa.count, fa.total_us, fa.mean_us) == ("FW", 4, 95.0, 23.75)
    assert fa.median_us == 22.5
    assert fa.p95_us == pytest.approx(29.25)  # 25 + 0.85 * (30 - 25)
    assert fa.std_us == pytest.approx(math.sqrt(68.75 / 4))
    assert fa.share == pytest.approx(95 / 430)
    cm = _op(s, "Comm.bucket0")  # 30, 40, 35, 30
    assert (cm.category, cm.total_us, cm.median_us) == ("Comm", 135.0, 32.5)
    assert cm.p95_us == pytest.approx(39.25)
    assert _op(s, "FW.b").std_us == 0.0
    assert _op(s, "BW.a").total_us == 75.0
    assert "STEP" not in {o.name for o in s.ops}
    # default sort: total descending, ties by name
    assert [o.name for o in s.ops] == ["Comm.bucket0", "FW.a", "BW.b", "BW.a", "FW.b",
                                       "UPDATE.SGD"]


def test_categories_and_idle_golden():
    # rank 0 step 1: FW [0,30] alone; BW [30,55] alone, [55,70] under Comm; Comm alone
    # [70,85]; UPDATE [85,95]; idle [95,100]. The other cells likewise (module docstring).
    s = statistic(two_rank_trace())
    cats = {c.category: c for c in s.categories}
    assert [c.category for c in s.categories] == ["FW", "BW", "UPDATE", "other",
                                                  "Comm_overlapped", "Comm_exposed", "idle"]
    assert cats["FW"].total_us == 135.0
    assert cats["BW"].total_us == 105.0  # 155 of BW, 50 of it under communication
    assert cats["Comm_overlapped"].total_us == 50.0  # 15 + 15 + 10 + 10
    assert cats["Comm_exposed"].total_us == 85.0  # 15 + 25 + 25 + 20
    assert cats["UPDATE"].total_us == 40.0
    assert cats["other"].total_us == 0.0
    assert cats["idle"].total_us == 15.0  # 5 + 0 + 5 + 5
    assert cats["FW"].per_step_us == 33.75
    assert cats["idle"].share == pytest.approx(15 / 430)
    assert sum(c.total_us for c in s.categories) == pytest.approx(s.step_time_us)
    assert sum(c.share for c in s.categories) == pytest.approx(1.0)


def test_per_rank_golden():
    s = statistic(two_rank_trace())
    r0, r1 = s.ranks
    assert (r0.rank, r0.steps, r0.step_us, r0.fw_us, r0.bw_us, r0.update_us,
            r0.comm_overlapped_us, r0.comm_exposed_us, r0.idle_us, r0.comm_us) == (
        0, 2, 105.0, 32.5, 25.0, 10.0, 15.0, 20.0, 2.5, 35.0)
    assert (r1.step_us, r1.fw_us, r1.bw_us, r1.comm_overlapped_us, r1.comm_exposed_us,
            r1.idle_us, r1.comm_us) == (110.0, 35.0, 27.5, 10.0, 22.5, 5.0, 32.5)
    for r in s.ranks:  # the parts add up to the step
        assert (r.fw_us + r.bw_us + r.update_us + r.other_us + r.comm_overlapped_us
                + r.comm_exposed_us + r.idle_us) == pytest.approx(r.step_us)


def test_sort_head_and_bad_sort():
    t = two_rank_trace()
    s = statistic(t, sort="mean", head=2)
    assert [o.name for o in s.ops] == ["Comm.bucket0", "FW.a"]
    assert s.num_ops == 6
    assert [o.name for o in statistic(t, sort="name").ops][0] == "BW.a"
    with pytest.raises(EchoError, match="choose from"):
        statistic(t, sort="bogus")
    with pytest.raises(EchoError, match="--head"):
        statistic(t, head=-1)


def test_nested_modules_and_no_step_marker():
    """Covered time counts a parent and its children once; without STEP the span is used."""
    b = TraceBuilder()
    b.add(rank=0, name="FW.block", cat=Cat.FW, ts_us=10, dur_us=50, step=0)
    b.add(rank=0, name="FW.block.l1", cat=Cat.FW, ts_us=12, dur_us=20, step=0)
    b.add(rank=0, name="FW.block.l2", cat=Cat.FW, ts_us=35, dur_us=20, step=0)
    b.add(rank=0, name="BW.block", cat=Cat.BW, ts_us=70, dur_us=30, step=0)
    s = statistic(b.build())
    cats = {c.category: c.total_us for c in s.categories}
    assert s.step_time_us == 90.0  # span 10..100
    assert cats["FW"] == 50.0
    assert cats["BW"] == 30.0
    assert cats["idle"] == 10.0  # 60..70


def test_events_outside_steps_are_ignored_and_empty_is_an_error():
    b = TraceBuilder()
    b.add(rank=0, name="FW.x", cat=Cat.FW, ts_us=0, dur_us=5, step=-1)
    with pytest.raises(TraceFormatError, match="no events in captured steps"):
        statistic(b.build(steps=[3]))


def test_covered_us_unions_per_group():
    g = np.array([0, 0, 0, 1, 1, 2])
    s = np.array([0.0, 5.0, 20.0, 1e15, 1e15 + 2.0, 7.0])
    e = np.array([10.0, 12.0, 25.0, 1e15 + 3.0, 1e15 + 4.0, 7.0])
    assert covered_us(g, s, e, 4).tolist() == [17.0, 4.0, 0.0, 0.0]
    assert covered_us(np.zeros(0, np.int64), np.zeros(0), np.zeros(0), 2).tolist() == [0, 0]


def test_step_grid_marks_missing_cells_nan():
    b = TraceBuilder()
    b.add(rank=0, name="FW.x", cat=Cat.FW, ts_us=0, dur_us=5, step=1)
    b.add(rank=0, name="FW.x", cat=Cat.FW, ts_us=10, dur_us=5, step=2)
    b.add(rank=1, name="FW.x", cat=Cat.FW, ts_us=0, dur_us=7, step=1)
    grid = step_grid(b.build())
    it = grid.grid(grid.iteration_us)
    assert it[0].tolist() == [5.0, 5.0]
    assert it[1, 0] == 7.0 and math.isnan(it[1, 1])


def _big_trace(n_events: int, n_ranks: int) -> Trace:
    """A synthetic trace built column-wise (TraceBuilder per row would dominate the time)."""
    from echo_sim.trace.model import Events

    rng = np.random.default_rng(0)
    per_rank = n_events // n_ranks
    steps = 10
    per_step = per_rank // steps
    rank = np.repeat(np.arange(n_ranks), per_rank)
    slot = np.tile(np.arange(per_rank), n_ranks)
    step = np.minimum(slot // per_step, steps - 1)
    ts = slot * 10.0 + rng.uniform(0, 1, rank.size)
    dur = rng.uniform(1, 9, rank.size)
    cat = rng.integers(0, 4, rank.size).astype(np.int8)
    name = rng.integers(0, 500, rank.size).astype(np.int32)
    z32 = np.zeros(rank.size, np.int32)
    z64 = np.zeros(rank.size, np.int64)
    ev = Events(rank=rank.astype(np.int32), step=step.astype(np.int32), cat=cat, name=name,
                tid=z32, ts_us=ts, dur_us=dur, occ=z32, coll=np.full(rank.size, -1, np.int16),
                nbytes=z64, group=z32 - 1, seq=z64 - 1, peer=z32 - 1, kind=z32 - 1,
                param_bytes=z64, in_bytes=z64, out_bytes=z64, flops=np.zeros(rank.size))
    return Trace(events=ev, names=[f"FW.op{i}" for i in range(500)],
                 ranks={r: RankInfo(rank=r, world_size=n_ranks) for r in range(n_ranks)},
                 steps=list(range(steps)))


def test_million_events_over_64_ranks():
    """The vectorised path at scale (timed in benchmarks, not here): every event counted."""
    t = _big_trace(1_000_000, 64)
    s = statistic(t)
    assert sum(o.count for o in s.ops) == 1_000_000
    assert len(s.ranks) == 64 and all(r.steps == 10 for r in s.ranks)
    assert s.step_time_us == pytest.approx(
        sum(r.step_us * r.steps for r in s.ranks))


def test_step_breakdown_parts_sum_to_step_time(tmp_path):
    """Rank 0 per step: FW 32.5, BW alone 25, UPDATE 10, Comm under BW 15, exposed 20
    (15, 25), idle 2.5: 105."""
    from echo_sim.render.plots import plot_step_breakdown, step_breakdown

    stats = statistic(two_rank_trace())
    parts = step_breakdown(stats)
    assert parts[0] == {"FW": 32.5, "BW": 25.0, "UPDATE": 10.0, "other": 0.0,
                        "Comm_overlapped": 15.0, "Comm_exposed": 20.0, "idle": 2.5}
    assert sum(parts[1].values()) == stats.ranks[1].step_us == 110.0
    p = plot_step_breakdown(parts, tmp_path / "b.svg")
    assert p.read_text().lstrip().startswith("<?xml")
    with pytest.raises(EchoError, match="unknown image type"):
        plot_step_breakdown(parts, tmp_path / "b.bmp")
