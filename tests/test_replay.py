"""Replay on hand-built traces against hand-computed schedules."""

from __future__ import annotations

import json

import pytest

from echo_sim.errors import ConfigError
from echo_sim.sim.replay import parse_scale, replay
from echo_sim.trace.model import Cat, Trace, TraceBuilder

STEP_US = 60.0


def ddp_trace(*, straggle_us: float = 0.0, steps: int = 2) -> Trace:
    """2 ranks, DDP-like step: FW l1,l2; BW l2 → bucket b0; BW l1 → bucket b1; UPDATE.

    Symmetric (straggle 0), every step on every rank (µs from the step start T):
    FW.l1 1-11, FW.l2 12-22, BW.l2 24-34, Comm.b0 34-42, BW.l1 35-45, Comm.b1 45-53,
    UPDATE 54-59, STEP 0-60. Rank 1's BW.l2 takes ``straggle_us`` longer, and everything
    after it on rank 1 — and the collectives on both ranks — moves with it.
    """
    b = TraceBuilder()
    s = straggle_us
    for k in range(steps):
        step = k + 1
        t = k * (STEP_US + s)
        for r in (0, 1):
            d = s if r == 1 else 0.0
            # b0 ends when the last member issued it (34 + s) plus 8 us of transfer
            b0_end = 34 + s + 8
            # b1: rank 1 issues at 45 + s; channel free at b0_end
            b1_issue = 45 + d
            b1_end = max(45 + s, b0_end) + 8
            upd = b1_end + 1
            b.add(rank=r, name="STEP", cat=Cat.STEP, ts_us=t, dur_us=upd + 5 + 1, step=step,
                  tid=1)
            b.add(rank=r, name="FW.l1", cat=Cat.FW, ts_us=t + 1, dur_us=10, step=step)
            b.add(rank=r, name="FW.l2", cat=Cat.FW, ts_us=t + 12, dur_us=10, step=step)
            b.add(rank=r, name="BW.l2", cat=Cat.BW, ts_us=t + 24, dur_us=10 + d, step=step)
            b.add(rank=r, name="Comm.b0", cat=Cat.COMM, ts_us=t + 34 + d,
                  dur_us=b0_end - (34 + d), step=step, tid=100, collective="all_reduce",
                  nbytes=4000, group_ranks=(0, 1), seq=2 * k)
            b.add(rank=r, name="BW.l1", cat=Cat.BW, ts_us=t + 35 + d, dur_us=10, step=step)
            b.add(rank=r, name="Comm.b1", cat=Cat.COMM, ts_us=t + b1_issue,
                  dur_us=b1_end - b1_issue, step=step, tid=101, collective="all_reduce",
                  nbytes=4000, group_ranks=(0, 1), seq=2 * k + 1)
            b.add(rank=r, name="UPDATE.SGD", cat=Cat.UPDATE, ts_us=t + upd, dur_us=5,
                  step=step)
    return b.build()


def pipeline_trace() -> Trace:
    """Rank 0: FW.s0 0-10, send 10-15. Rank 1: recv issued at 2, done at 15, FW.s1 16-26."""
    b = TraceBuilder()
    b.add(rank=0, name="FW.s0", cat=Cat.FW, ts_us=0, dur_us=10, step=1)
    b.add(rank=0, name="Comm.send", cat=Cat.COMM, ts_us=10, dur_us=5, step=1, tid=100,
          collective="send", peer=1, seq=0, group_ranks=(0, 1), nbytes=64)
    b.add(rank=1, name="Comm.recv", cat=Cat.COMM, ts_us=2, dur_us=13, step=1, tid=100,
          collective="recv", peer=0, seq=0, group_ranks=(0, 1), nbytes=64)
    b.add(rank=1, name="FW.s1", cat=Cat.FW, ts_us=16, dur_us=10, step=1)
    return b.build()


def test_symmetric_ddp_replay_equals_measured():
    res = replay(ddp_trace())
    assert [s["measured_us"] for s in res.per_step] == [60.0, 60.0]
    assert [s["replayed_us"] for s in res.per_step] == pytest.approx([60.0, 60.0])
    assert res.replayed_iteration_time_us == pytest.approx(60.0)
    assert res.error_pct == pytest.approx(0.0)
    assert res.deps.n_inst == 4 and res.deps.n_unmatched == 0


def test_scale_comm_half_matches_hand_computed():
    # b0 34-38, b1 45-49 (issued at 45), UPDATE after 1 us host delay: 50-55, tail 1 -> 56
    res = replay(ddp_trace(), scale=["Comm.*=0.5"])
    assert [s["replayed_us"] for s in res.per_step] == pytest.approx([56.0, 56.0])
    assert res.error_pct == pytest.approx(100 * (56 - 60) / 60)


def test_straggler_delays_the_collective_for_both_ranks():
    tr = ddp_trace(straggle_us=4.0)
    res = replay(tr, steps=[1])
    # measured: b0 waits for rank 1 (issue 38) -> 38-46; b1 issue 49 -> 49-57; UPDATE 58-63
    assert res.per_step[0]["measured_us"] == 64.0
    assert res.per_step[0]["replayed_us"] == pytest.approx(64.0)
    ev = tr.events
    upd = [r for r in range(len(ev)) if tr.name_of(r) == "UPDATE.SGD" and ev.step[r] == 1]
    assert [res.row_start_us[r] for r in upd] == pytest.approx([58.0, 58.0])
    b0 = [r for r in range(len(ev)) if tr.name_of(r) == "Comm.b0" and ev.step[r] == 1]
    assert [res.row_end_us[r] for r in b0] == pytest.approx([46.0, 46.0])
    # the transfer time is rank 1's (the last to arrive), not rank 0's 12 us of waiting
    half = replay(tr, steps=[1], scale=["Comm.*=0.5"])
    # b0 38-42, b1 49-53 on both ranks, UPDATE 54-59, step 0-60
    assert half.per_step[0]["replayed_us"] == pytest.approx(60.0)
    assert [half.row_end_us[r] for r in b0] == pytest.approx([42.0, 42.0])


def test_last_matching_scale_expression_wins():
    res = replay(ddp_trace(), scale=["Comm.*=0.5", "Comm.b1=1"])
    # b0 34-38; b1 keeps 8 us: 45-53 -> same as measured
    assert res.replayed_iteration_time_us == pytest.approx(60.0)
    slow = replay(ddp_trace(), scale=["BW.*=2"])
    # BW.l2 24-44, b0 44-52, BW.l1 45-65, b1 65-73, UPDATE 74-79, tail 1 -> 80
    assert slow.replayed_iteration_time_us == pytest.approx(80.0)


def test_pipeline_send_recv_is_one_task_on_both_ranks():
    tr = pipeline_trace()
    res = replay(tr)
    assert res.deps.n_inst == 1 and bool(res.deps.inst_p2p[0])
    fw1 = tr.name_id("FW.s1")
    row = int((tr.events.name == fw1).nonzero()[0][0])
    assert res.row_start_us[row] == pytest.approx(16.0)
    assert res.per_step[0]["replayed_us"] == pytest.approx(24.0)  # rank 1: 2 -> 26
    slow = replay(tr, scale=["Comm.*=2"])  # transfer 10: 10-20, FW.s1 21-31
    assert slow.row_start_us[row] == pytest.approx(21.0)
    assert slow.per_step[0]["replayed_us"] == pytest.approx(29.0)


@pytest.mark.parametrize("expr", ["Comm.*", "Comm.*=fast", "=0.5", "Comm.*=-1",
                                  "Comm.*=nan", "Nope.*=0.5"])
def test_bad_scale_is_a_config_error(expr):
    with pytest.raises(ConfigError) as e:
        replay(ddp_trace(), scale=[expr])
    assert "\n" not in str(e.value) and "--scale" in str(e.value)


def test_parse_scale():
    rules = parse_scale(["Comm.*=0.5", "BW.blocks.*=0.8"])
    assert [(r.glob, r.factor) for r in rules] == [("Comm.*", 0.5), ("BW.blocks.*", 0.8)]


def test_unknown_step_is_a_config_error():
    with pytest.raises(ConfigError, match="step 9"):
        replay(ddp_trace(), steps=[9])


def test_host_delay_is_kept():
    # every gap (1 us before FW.l1, 1 us before FW.l2, ...) survives: replay == measured
    res = replay(ddp_trace(steps=3))
    assert res.replayed_iteration_time_us == pytest.approx(60.0)
    fw2 = [r for r in range(len(res.trace.events)) if res.trace.name_of(r) == "FW.l2"]
    assert sorted(res.row_start_us[r] for r in fw2) == pytest.approx(
        [12.0, 12.0, 72.0, 72.0, 132.0, 132.0])


def test_replayed_trace_is_sorted_and_retimed():
    res = replay(ddp_trace(straggle_us=4.0), scale=["Comm.*=0.5"])
    rt = res.replayed_trace()
    ev = rt.events
    assert len(ev) == 2 * 2 * 8
    key = list(zip(ev.rank.tolist(), ev.ts_us.tolist(), strict=True))
    assert key == sorted(key)
    steps = [i for i in range(len(ev)) if ev.cat[i] == Cat.STEP]
    assert sorted(round(float(ev.dur_us[i]), 6) for i in steps) == [60.0] * 4


def test_cli_replay_json_and_output(tmp_path, capsys):
    from echo_sim.cli import main
    from echo_sim.trace.export import write_echo_dirs

    write_echo_dirs(ddp_trace(straggle_us=4.0), tmp_path / "t")
    out = tmp_path / "replay.json"
    assert main(["replay", str(tmp_path / "t"), "--scale", "Comm.*=0.5", "--json",
                 "-o", str(out)]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["measured_iteration_time_us"] == pytest.approx(64.0)
    assert data["replayed_iteration_time_us"] == pytest.approx(60.0)
    assert data["error_pct"] == pytest.approx(-6.25)
    doc = json.loads(out.read_text())
    xs = [e for e in doc["traceEvents"] if e.get("ph") == "X"]
    assert len(xs) == 32
    assert main(["replay", str(tmp_path / "t"), "--scale", "Comm.*"]) == 2
    assert "--scale" in capsys.readouterr().err


def test_a_member_that_completes_later_keeps_its_lag():
    # transfer = first completion (20) - last start (12) = 8; rank 1 saw it end 5 us later
    b = TraceBuilder()
    for r, fw_end, comm_end in ((0, 10, 20), (1, 12, 25)):
        b.add(rank=r, name="FW.a", cat=Cat.FW, ts_us=0, dur_us=fw_end, step=1)
        b.add(rank=r, name="Comm.x", cat=Cat.COMM, ts_us=fw_end, dur_us=comm_end - fw_end,
              step=1, tid=100, collective="all_reduce", group_ranks=(0, 1), seq=0)
        b.add(rank=r, name="FW.b", cat=Cat.FW, ts_us=comm_end + 1, dur_us=10, step=1)
    tr = b.build()
    res = replay(tr)
    assert res.per_step[0]["replayed_us"] == pytest.approx(36.0)
    half = replay(tr, scale=["Comm.*=0.5"])
    fwb = [r for r in range(len(tr.events)) if tr.name_of(r) == "FW.b"]
    # instance 12-16, rank 1's lag 2.5 -> 18.5, FW.b after its 1 us host delay
    assert [half.row_start_us[r] for r in fwb] == pytest.approx([17.0, 19.5])
    assert half.per_step[0]["replayed_us"] == pytest.approx(29.5)


def test_send_and_recv_on_one_rank_run_concurrently():
    b = TraceBuilder()
    for r in (0, 1):
        b.add(rank=r, name="FW.a", cat=Cat.FW, ts_us=0, dur_us=10, step=1)
        b.add(rank=r, name="Comm.send", cat=Cat.COMM, ts_us=10, dur_us=5, step=1, tid=100,
              collective="send", peer=1 - r, seq=0, group_ranks=(0, 1))
        b.add(rank=r, name="Comm.recv", cat=Cat.COMM, ts_us=10, dur_us=5, step=1, tid=101,
              collective="recv", peer=1 - r, seq=0, group_ranks=(0, 1))
        b.add(rank=r, name="FW.b", cat=Cat.FW, ts_us=16, dur_us=4, step=1)
    res = replay(b.build())
    assert res.deps.n_inst == 2
    assert res.per_step[0]["replayed_us"] == pytest.approx(20.0)  # not 25: no queueing


def _three_straggle_steps(straggles: tuple[float, ...]) -> Trace:
    """Steps 1, 2, 3 of the DDP trace with rank 1 straggling by the given us, 100 us apart."""
    b = TraceBuilder()
    t = 0.0
    for step, s in enumerate(straggles, start=1):
        one = ddp_trace(straggle_us=s, steps=1)
        ev = one.events
        for r in range(len(ev)):
            b.add(rank=int(ev.rank[r]), name=one.name_of(r), cat=Cat(int(ev.cat[r])),
                  ts_us=t + float(ev.ts_us[r]), dur_us=float(ev.dur_us[r]), step=step,
                  tid=int(ev.tid[r]), collective=one.collective_of(r),
                  group_ranks=one.group_of(r), seq=int(ev.seq[r]) + 10 * step)
        t += 100.0
    return b.build()


def test_median_durations_replay_the_typical_step():
    # steps 1-3: rank 1 straggles by 0, 4 and 8 us -> medians are the straggle-4 trace
    tr = _three_straggle_steps((0.0, 4.0, 8.0))
    measured = replay(tr)
    assert [s["measured_us"] for s in measured.per_step] == [60.0, 64.0, 68.0]
    assert [s["replayed_us"] for s in measured.per_step] == pytest.approx([60.0, 64.0, 68.0])
    typical = replay(tr, durations="median")
    assert [s["replayed_us"] for s in typical.per_step] == pytest.approx([64.0, 64.0, 64.0])
    assert typical.error_pct == pytest.approx(0.0)
    with pytest.raises(ConfigError, match="measured, mean, median"):
        replay(tr, durations="average")


def test_mean_durations_add_up_to_the_mean_iteration():
    tr = _three_straggle_steps((0.0, 2.0, 10.0))
    typical = replay(tr, durations="mean")
    # means: BW.l2 on rank 1 lasts 10 + 4 = 14 us -> every step replays the 64 us step
    assert [s["replayed_us"] for s in typical.per_step] == pytest.approx([64.0] * 3)
    assert typical.measured_mean_iteration_time_us == pytest.approx(64.0)
    assert typical.mean_error_pct == pytest.approx(0.0)


def test_collectives_of_different_groups_overlap():
    """Rank 0 runs an all-reduce with rank 1 and one with rank 2 at the same time (two
    process groups, two communicators): the replay keeps them concurrent."""
    b = TraceBuilder()
    for r in (0, 1, 2):
        b.add(rank=r, name="FW.a", cat=Cat.FW, ts_us=0, dur_us=10, step=1)
        b.add(rank=r, name="FW.b", cat=Cat.FW, ts_us=21, dur_us=4, step=1)
    for r, name, grp, tid in ((0, "Comm.x", (0, 1), 100), (1, "Comm.x", (0, 1), 100),
                              (0, "Comm.y", (0, 2), 101), (2, "Comm.y", (0, 2), 100)):
        b.add(rank=r, name=name, cat=Cat.COMM, ts_us=10, dur_us=10, step=1, tid=tid,
              collective="all_reduce", group_ranks=grp, seq=0, nbytes=64)
    tr = b.build()
    res = replay(tr)
    assert res.deps.n_inst == 2
    assert res.per_step[0]["replayed_us"] == pytest.approx(25.0)
    # each collective's own transfer is its 10 us (on one channel per rank the second
    # would have counted as 10 us of queueing and 0 of transfer): twice as slow, y alone
    # ends at 30 and the ranks in it continue after it, while rank 1 is unaffected
    slow = replay(tr, scale=["Comm.y=2"])
    assert slow.per_step[0]["replayed_us"] == pytest.approx(35.0)
    fwb = {int(tr.events.rank[r]): r for r in range(len(tr.events)) if tr.name_of(r) == "FW.b"}
    assert [slow.row_start_us[fwb[k]] for k in (0, 1, 2)] == pytest.approx([31.0, 21.0, 31.0])
