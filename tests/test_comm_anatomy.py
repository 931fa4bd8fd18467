"""``collectives``: each collective's time split into the wait for the last member, the
transfer and the late return (:mod:`echo_sim.analysis.comm_anatomy`), golden on a built
trace and checked on real gloo traces (the recorded DDP run here, a fresh tensor-parallel
run in ``tests/test_self_reproduction.py``)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from echo_sim.analysis.comm_anatomy import comm_anatomy
from echo_sim.errors import EchoError
from echo_sim.load import load_trace
from echo_sim.trace.model import COLLECTIVES, Cat, Trace, TraceBuilder

REPO = Path(__file__).resolve().parent.parent
REAL_DDP = REPO / "tests" / "data" / "load" / "echo_real_ddp"

# (rank, step, start, end) of two all-reduces of 1,000 bytes per step, seq 2·(step-1) + k
ALL_REDUCES = [
    (0, 1, 100, 400), (1, 1, 150, 420),  # wait 50 / 0; transfer 400 - 150 = 250; lag 0 / 20
    (0, 1, 500, 900), (1, 1, 500, 700),  # wait 0 / 0; transfer 200; lag 200 / 0
    (0, 2, 1100, 1300), (1, 2, 1000, 1300),  # wait 0 / 100; transfer 200; lag 0 / 0
    (0, 2, 1500, 1600), (1, 2, 1540, 1600),  # wait 40 / 0; transfer 60; lag 0 / 0
]


def _built(extra: bool = True) -> Trace:
    b = TraceBuilder(source="built")
    for rank in (0, 1):
        for step in (1, 2):
            b.add(rank=rank, name="STEP", cat=Cat.STEP, ts_us=1000.0 * (step - 1),
                  dur_us=1000.0, step=step, tid=1)
    seq = {0: 0, 1: 0}
    for rank, step, s, e in ALL_REDUCES:
        b.add(rank=rank, name="Comm.ar", cat=Cat.COMM, ts_us=float(s), dur_us=float(e - s),
              step=step, tid=100, collective="all_reduce", nbytes=1000, group_ranks=(0, 1),
              seq=seq[rank])
        seq[rank] += 1
    if extra:
        # a send/recv pair and a collective rank 1 never traced: both left out
        b.add(rank=0, name="Comm.send", cat=Cat.COMM, ts_us=950, dur_us=10, step=1, tid=100,
              collective="send", group_ranks=(0, 1), seq=0, peer=1, nbytes=8)
        b.add(rank=1, name="Comm.recv", cat=Cat.COMM, ts_us=960, dur_us=10, step=1, tid=100,
              collective="recv", group_ranks=(0, 1), seq=0, peer=0, nbytes=8)
        b.add(rank=0, name="Comm.ag", cat=Cat.COMM, ts_us=1700, dur_us=50, step=2, tid=100,
              collective="all_gather", nbytes=64, group_ranks=(0, 1), seq=9)
    return b.build()


def test_golden_split_of_a_built_trace() -> None:
    an = comm_anatomy(_built())
    (row,) = an.rows  # the send/recv pair and the half-traced all-gather are left out
    assert (row.collective, row.group_size, row.nbytes, row.instances, row.per_step) == (
        "all_reduce", 2, 1000, 4, 2.0)
    assert an.steps == 2
    own = [400 - 100, 420 - 150, 900 - 500, 700 - 500, 1300 - 1100, 1300 - 1000, 100, 60]
    assert row.own_mean_us == pytest.approx(sum(own) / 8)
    assert row.wait_mean_us == pytest.approx((50 + 100 + 40) / 8)
    assert row.transfer_mean_us == pytest.approx((250 + 200 + 200 + 60) / 4)
    assert row.transfer_median_us == pytest.approx(200.0)
    assert row.transfer_p90_us == pytest.approx(235.0)  # numpy's linear: 200 + 0.7 · 50
    assert row.lag_mean_us == pytest.approx((20 + 200) / 8)
    # own = wait + transfer + lag, and the step pays the typical member's own time
    assert row.own_mean_us == pytest.approx(
        row.wait_mean_us + row.transfer_mean_us + row.lag_mean_us)
    assert row.per_step_us == pytest.approx(sum(own) / 2 / 2)
    assert an.total["own_us"] == pytest.approx(row.per_step_us)
    assert row.negative == 0
    assert row.stalled == 0.0  # no transfer 2 ms over the median
    assert json.loads(json.dumps(an.to_dict()))["collectives"][0]["instances"] == 4


def test_a_collective_queued_behind_the_ranks_own_earlier_one_counts_from_its_turn() -> None:
    """Rank 1 issues both buckets at 0 and 10 us; rank 0, the straggler, at 1000 and 1010.
    Rank 1 waits ~1000 us in bucket 0, and its bucket 1 spans the same wait (queued behind
    bucket 0): it counts from bucket 0's end, so the wait is paid once, not per bucket."""
    b = TraceBuilder(source="straggler")
    for rank in (0, 1):
        b.add(rank=rank, name="STEP", cat=Cat.STEP, ts_us=0.0, dur_us=2000.0, step=0, tid=1)
    for rank, seq, s, e in ((1, 0, 0, 1100), (1, 1, 10, 1200),
                            (0, 0, 1000, 1100), (0, 1, 1010, 1200)):
        b.add(rank=rank, name=f"Comm.bucket{seq}", cat=Cat.COMM, ts_us=float(s),
              dur_us=float(e - s), step=0, tid=100, collective="all_reduce", nbytes=1000,
              group_ranks=(0, 1), seq=seq)
    from echo_sim.cost.trace_comm import queued_us, traced_comm_profile
    from echo_sim.trace.model import RankInfo

    b.ranks = {r: RankInfo(rank=r, world_size=2, local_rank=r, backend="gloo") for r in (0, 1)}
    tr = b.build()

    comm = tr.comm_rows()
    q = dict(zip(((int(tr.events.rank[r]), int(tr.events.seq[r])) for r in comm),
                 queued_us(tr, comm).tolist(), strict=True))
    assert q == {(1, 0): 0.0, (1, 1): 1090.0, (0, 0): 0.0, (0, 1): 90.0}
    # a collective of another kind on the same group is not queued behind them: the
    # simulator runs FSDP's all-gathers and reduce-scatters on channels of their own
    b.add(rank=1, name="Comm.ag", cat=Cat.COMM, ts_us=20.0, dur_us=1200.0, step=0, tid=100,
          collective="all_gather", nbytes=64, group_ranks=(0, 1), seq=2)
    mixed = b.build()
    rows = mixed.comm_rows()
    ag = [i for i, r in enumerate(rows) if mixed.events.coll[r] == COLLECTIVES.index(
        "all_gather")]
    assert queued_us(mixed, rows)[ag].tolist() == [0.0]
    (row,) = comm_anatomy(tr).rows
    # bucket 0: wait 1000 / 0, transfer 100; bucket 1 from 1100 on both: transfer 100
    assert row.wait_mean_us == pytest.approx(1000 / 4)
    assert row.transfer_mean_us == pytest.approx(100.0)
    assert row.queued_mean_us == pytest.approx((1090 + 90) / 4)
    assert row.per_step_us == pytest.approx((1100 + 100 + 100 + 100) / 2)
    # the profile a simulation prices them with: the median member's own time per bucket
    prof = traced_comm_profile(tr)
    assert prof is not None
    assert prof.samples[("all_reduce", 2)] == [(1000, pytest.approx((600 + 100) / 2))]


def test_a_member_done_before_the_last_arrived_is_counted_negative() -> None:
    b = TraceBuilder(source="skewed clocks")
    for rank, s in ((0, 0.0), (1, 500.0)):  # rank 1's clock runs 500 us ahead
        b.add(rank=rank, name="STEP", cat=Cat.STEP, ts_us=s, dur_us=1000.0, step=0, tid=1)
        b.add(rank=rank, name="Comm.ar", cat=Cat.COMM, ts_us=s + 100, dur_us=100.0, step=0,
              tid=100, collective="all_reduce", nbytes=4, group_ranks=(0, 1), seq=0)
    (row,) = comm_anatomy(b.build()).rows
    assert row.negative == 1 and row.transfer_mean_us == pytest.approx(-400.0)


def test_one_rank_or_no_matched_collective_is_a_clear_error() -> None:
    b = TraceBuilder(source="one")
    b.add(rank=0, name="STEP", cat=Cat.STEP, ts_us=0, dur_us=10, step=0, tid=1)
    with pytest.raises(EchoError, match="one rank"):
        comm_anatomy(b.build())
    b.add(rank=1, name="STEP", cat=Cat.STEP, ts_us=0, dur_us=10, step=0, tid=1)
    with pytest.raises(EchoError, match="no collective with every member traced"):
        comm_anatomy(b.build())


def test_the_recorded_ddp_run_splits_into_its_buckets() -> None:
    """A real 2-process gloo DDP trace: on one host the ranks share a clock, so every
    transfer is >= 0; the parts add up; the buckets per step are the trace's own."""
    tr = load_trace(REAL_DDP)
    an = comm_anatomy(tr)
    ev = tr.events
    comm = [int(i) for i in tr.comm_rows() if ev.step[i] >= 0 and ev.rank[i] == 0]
    steps = {int(ev.step[i]) for i in comm}
    assert an.steps == len(steps)
    assert sum(r.per_step for r in an.rows) == pytest.approx(len(comm) / len(steps))
    for r in an.rows:
        assert r.collective == "all_reduce" and r.group_size == 2 and r.negative == 0
        assert r.own_mean_us == pytest.approx(r.wait_mean_us + r.transfer_mean_us
                                              + r.lag_mean_us)
        assert 0 <= r.transfer_median_us <= r.transfer_p90_us


def test_cli_table_json_and_errors(tmp_path: Path) -> None:
    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "echo_sim", "collectives", *args],
                              capture_output=True, text=True, timeout=120, cwd=REPO)

    done = cli(str(REAL_DDP))
    assert done.returncode == 0, done.stderr
    assert "a typical member spends" in done.stdout and "transfer_median" in done.stdout
    got = json.loads(cli(str(REAL_DDP), "--json").stdout)
    assert got["collectives"] and set(got["per_step"]) == {"own_us", "wait_us",
                                                           "transfer_us", "lag_us",
                                                           "queued_us"}
    one = tmp_path / "one"
    (one / "0_0").mkdir(parents=True)
    for f in (REAL_DDP / "0_0").iterdir():
        (one / "0_0" / f.name).write_bytes(f.read_bytes())
    bad = cli(str(one))
    assert bad.returncode == 2 and "one rank" in bad.stderr and "Traceback" not in bad.stderr


def test_stalled_transfers_are_counted_as_profile_comm_counts_its_runs() -> None:
    """A transfer >= STALL_US over the median of its collective is a stall (the fraction is
    the job's stall rate, to hold against profile-comm's for the same operation)."""
    from echo_sim.cost.comm_profile import STALL_US

    b = TraceBuilder(source="built")
    for rank in (0, 1):
        b.add(rank=rank, name="STEP", cat=Cat.STEP, ts_us=0.0, dur_us=1e5, step=1, tid=1)
    transfers = [200.0, 210.0, 190.0, 210.0 + STALL_US]  # median 205: one stall
    t0 = 0.0
    for k, tr in enumerate(transfers):
        for rank in (0, 1):
            b.add(rank=rank, name="Comm.ar", cat=Cat.COMM, ts_us=t0, dur_us=tr, step=1,
                  tid=100, collective="all_reduce", nbytes=1000, group_ranks=(0, 1), seq=k)
        t0 += 5000.0
    (row,) = comm_anatomy(b.build()).rows
    assert row.stalled == pytest.approx(0.25)
