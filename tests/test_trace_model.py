"""The columnar trace model: sorting, interning, occurrences, lookups."""

import numpy as np

from echo_sim.trace import Cat, RankInfo, TraceBuilder


def _builder():
    b = TraceBuilder()
    for rank in (1, 0):
        b.ranks[rank] = RankInfo(rank=rank, world_size=2)
        b.add(rank=rank, name="STEP", cat=Cat.STEP, ts_us=0, dur_us=100, step=3, tid=1)
        b.add(rank=rank, name="FW.a", cat=Cat.FW, ts_us=30, dur_us=10, step=3)
        b.add(rank=rank, name="FW.a", cat=Cat.FW, ts_us=10, dur_us=10, step=3)
        b.add(rank=rank, name="Comm.bucket0", cat=Cat.COMM, ts_us=50, dur_us=20, step=3,
              tid=100, collective="all_reduce", nbytes=4096, group_ranks=[1, 0], seq=7)
    b.add_counter(rank=0, ts_us=5, series="rss_bytes", value=1e6)
    return b


def test_rows_sorted_by_rank_then_time_and_occurrences_numbered():
    t = _builder().build()
    ev = t.events
    assert list(ev.rank) == [0, 0, 0, 0, 1, 1, 1, 1]
    assert np.all(np.diff(ev.ts_us[:4]) >= 0)
    fw = [i for i in range(4) if t.name_of(i) == "FW.a"]
    assert [int(ev.ts_us[i]) for i in fw] == [10, 30]
    assert [int(ev.occ[i]) for i in fw] == [0, 1]


def test_comm_columns_and_groups():
    t = _builder().build()
    rows = t.comm_rows()
    assert len(rows) == 2
    assert all(t.collective_of(int(r)) == "all_reduce" for r in rows)
    assert t.group_of(int(rows[0])) == (0, 1)
    assert list(t.events.seq[rows]) == [7, 7]
    assert list(t.events.nbytes[rows]) == [4096, 4096]


def test_steps_bounds_and_rank_rows():
    t = _builder().build()
    assert t.steps == [3]
    assert t.world_size == 2
    assert list(t.rank_rows(1)) == [4, 5, 6, 7]
    assert t.iteration_bounds(0, 3) == (0.0, 100.0)
    assert len(t.step_rows(0, 3)) == 4
    assert np.isnan(t.iteration_bounds(0, 9)[0])
    assert len(t.counters) == 1 and t.counter_names == ["rss_bytes"]


def test_comm_args_follow_their_row_through_the_sort():
    b = TraceBuilder()
    b.add(rank=1, name="Comm.x", cat=Cat.COMM, ts_us=0, dur_us=1, comm_args={"bucket": 1})
    b.add(rank=0, name="Comm.y", cat=Cat.COMM, ts_us=0, dur_us=1, comm_args={"bucket": 0})
    t = b.build()
    assert t.comm_args == {0: {"bucket": 0}, 1: {"bucket": 1}}
    assert t.name_of(0) == "Comm.y"
