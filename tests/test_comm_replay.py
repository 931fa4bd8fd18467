"""replay-comm: a job's collectives replayed on gloo as the job meets them, into a profile."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest

from echo_sim.cost.comm_profile import load_comm_profile, save_comm_profile
from echo_sim.errors import ConfigError
from echo_sim.load import load_trace
from echo_sim.measure.comm_replay import REPLAY_OPS, _union_us, schedule
from echo_sim.trace.export import write_echo_dirs
from echo_sim.trace.model import Cat
from tests.cli_util import run
from tests.test_workload import gpt_trace

DATA = Path(__file__).parent / "data"
REAL_DDP = DATA / "load" / "echo_real_ddp"  # a real 2-rank gloo DDP capture
HOST_PROFILE = DATA / "comm" / "gloo2_host.json"  # a real profile of a 2-core host


@pytest.fixture(scope="module")
def fsdp_timeline(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The timeline simulate writes for the real DDP trace re-laid out as FSDP2 over 2."""
    from echo_sim.cli import main

    out = tmp_path_factory.mktemp("replay") / "fsdp-sim"
    assert main(["simulate", str(REAL_DDP), "--dp", "2", "--fsdp", "--comm-profile",
                 str(HOST_PROFILE), "--output", str(out)]) == 0
    return out


def test_union_counts_nested_and_overlapping_spans_once() -> None:
    spans = [(0.0, 10.0), (2.0, 5.0), (8.0, 12.0), (20.0, 30.0)]
    assert _union_us(spans, 0.0, 25.0) == 12.0 + 5.0
    assert _union_us(spans, 11.0, 21.0) == 1.0 + 1.0
    assert _union_us([], 0.0, 5.0) == 0.0


def test_schedule_of_a_real_ddp_capture_follows_its_median_step() -> None:
    tr = load_trace(REAL_DDP)
    s = schedule(tr)
    assert s.world == 2 and s.step in tr.steps
    rows = tr.step_rows(0, s.step)
    ev = tr.events
    comm = [int(i) for i in rows if ev.cat[i] == Cat.COMM]
    # every collective of the step, in time order, with its own size
    assert [(c.op, c.nbytes) for c in s.calls] == [
        (tr.collective_of(i), int(ev.nbytes[i])) for i in comm]
    lo, hi = tr.iteration_bounds(0, s.step)
    assert all(c.work_us >= 0 for c in s.calls) and s.calls[0].work_us > 0
    assert sum(c.work_us for c in s.calls) + s.tail_us <= hi - lo + 1e-6
    lengths = sorted(np.subtract(*reversed(tr.iteration_bounds(0, st))) for st in tr.steps)
    assert np.subtract(*reversed(tr.iteration_bounds(0, s.step))) == lengths[
        (len(lengths) - 1) // 2]


def test_schedule_of_a_simulated_fsdp_timeline(fsdp_timeline: Path) -> None:
    tr = load_trace(fsdp_timeline)
    s = schedule(tr)
    ev = tr.events
    step_comm = [int(i) for i in tr.step_rows(int(ev.rank.min()), s.step)
                 if ev.cat[i] == Cat.COMM]
    assert {c.op for c in s.calls} == {"all_gather", "reduce_scatter"} <= set(REPLAY_OPS)
    assert len(s.calls) == len(step_comm) and not s.skipped
    # the compute between the collectives: the step's span less what ran in none of them
    lo, hi = tr.iteration_bounds(int(ev.rank.min()), s.step)
    assert 0 < sum(c.work_us for c in s.calls) + s.tail_us <= hi - lo + 1e-6


def test_a_trace_without_collectives_is_one_line_exit_2(tmp_path: Path, capsys) -> None:
    d = tmp_path / "one"
    write_echo_dirs(gpt_trace(2), d)
    code, out, err = run(capsys, "replay-comm", d, "--comm-profile", HOST_PROFILE, "--output",
                         tmp_path / "r.json")
    assert code == 2 and out == ""
    assert err.strip().count("\n") == 0 and "no collective to replay" in err
    assert not (tmp_path / "r.json").exists()


def test_a_profile_of_another_world_or_backend_is_refused(tmp_path: Path,
                                                          fsdp_timeline: Path, capsys) -> None:
    base = load_comm_profile(HOST_PROFILE)
    four = save_comm_profile(dataclasses.replace(base, world_size=4), tmp_path / "w4.json")
    code, _, err = run(capsys, "replay-comm", fsdp_timeline, "--comm-profile", four,
                       "--output", tmp_path / "r.json")
    assert code == 2 and "measured 4 processes" in err and "span 2" in err
    nccl = save_comm_profile(dataclasses.replace(base, backend="nccl"), tmp_path / "n.json")
    code, _, err = run(capsys, "replay-comm", fsdp_timeline, "--comm-profile", nccl,
                       "--output", tmp_path / "r.json")
    assert code == 2 and "nccl profile" in err
    with pytest.raises(ConfigError, match="--steps 0"):
        from echo_sim.measure.comm_replay import ReplaySpec

        ReplaySpec(steps=0)


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_replay_writes_the_base_profile_with_the_jobs_collectives_replaced(
        tmp_path: Path, fsdp_timeline: Path, capsys, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    out = tmp_path / "replay.json"
    code, stdout, err = run(capsys, "replay-comm", fsdp_timeline, "--comm-profile",
                            HOST_PROFILE, "--output", out, "--steps", "2", "--warmup", "1",
                            "--json")
    assert code == 0, err
    data = json.loads(stdout)
    prof, base = load_comm_profile(out), load_comm_profile(HOST_PROFILE)
    sched = schedule(load_trace(fsdp_timeline))
    for op in ("all_gather", "reduce_scatter"):
        sizes = sorted({c.nbytes for c in sched.calls if c.op == op})
        assert [s for s, _ in prof.samples[(op, 2)]] == sizes
        # every call of a size in every timed repetition is one run of it
        assert [len(r) for r in prof.runs_us[(op, 2)]] == [
            2 * sum(c.op == op and c.nbytes == s for c in sched.calls) for s in sizes]
        assert all(t > 0 for _, t in prof.samples[(op, 2)])
    # what the job does not run is the base profile's, and so is the host calibration
    for key in (("all_reduce", 2), ("send", 2), ("broadcast", 2)):
        assert prof.samples[key] == base.samples[key] and prof.fits[key] == base.fits[key]
    # the host calibration kept, plus the ranks' arrival gap at every timed call and the
    # compute before it (2 timed repetitions of the step), one host clock: never negative
    gaps, work = prof.calibration.pop("replay_gap_us"), prof.calibration.pop("replay_work_us")
    assert prof.calibration == base.calibration and prof.run_time == base.run_time
    assert len(gaps) == len(work) == 2 * len(sched.calls) and min(gaps) >= 0.0
    assert work[:len(sched.calls)] == pytest.approx([c.work_us for c in sched.calls])
    assert str(fsdp_timeline) in prof.replay and "all_gather, reduce_scatter" in prof.replay
    rows = {(r["op"], r["bytes"]): r for r in data["rows"]}
    assert set(rows) == {(c.op, c.nbytes) for c in sched.calls}
    for (op, size), r in rows.items():
        assert r["looped_us"] == pytest.approx(base.time_us(op, 2, size))
        assert r["replayed_us"] == pytest.approx(dict(prof.samples[(op, 2)])[size])
    # simulate takes it as any profile
    code, _, err = run(capsys, "simulate", REAL_DDP, "--dp", "2", "--fsdp", "--comm-profile",
                       out, "--json")
    assert code == 0, err
    # the output is never overwritten without --force
    before = out.read_bytes()
    code, _, err = run(capsys, "replay-comm", fsdp_timeline, "--comm-profile", HOST_PROFILE,
                       "--output", out)
    assert code == 2 and "--force" in err and out.read_bytes() == before
