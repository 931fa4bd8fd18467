"""A multi-rank trace reproduces its own run (issue 20).

Real 2-process gloo jobs of the example GPT under DDP, FSDP2, tensor and pipeline
parallelism are traced here; ``python -m echo_sim simulate TRACE --json`` with no layout flag
(the traced layout) must give the run's traced iteration time (``collect``: the median over
steps of the slowest rank) within 5 %, with and without a ``--comm-profile``. Where the run's
own steps spread wider than that (half their inter-quartile range over the median: this
2-core host is shared by both ranks, their collectives' threads and whatever else runs),
within that spread: a test never claims a closer match than the measurement allows.

The fast tests pin the parts on the recorded real DDP trace of ``tests/data/load`` and on
hand-made inputs.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import numpy as np
import pytest

from echo_sim.cost.comm_profile import CommProfile, load_comm_profile, save_comm_profile
from echo_sim.cost.trace_comm import traced_comm_profile
from echo_sim.load import load_trace
from echo_sim.trace.model import Cat
from echo_sim.workload.ops import fold_micro_batches
from echo_sim.workload.traced_layout import traced_layout
from tests.harness import run_echo_sim, run_ranks

REPO = Path(__file__).resolve().parent.parent
REAL_DDP = REPO / "tests" / "data" / "load" / "echo_real_ddp"
PROFILE = REPO / "tests" / "data" / "comm" / "gloo2_calibrated.json"
LAYOUTS = {"ddp": (2, 1, 1, False), "fsdp": (2, 1, 1, True), "tp": (1, 2, 1, False),
           "pp": (1, 1, 2, False)}
TOLERANCE = 0.05


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return run_echo_sim(args, timeout=300, cwd=REPO)


def _json(*args: str) -> dict:
    done = _cli(*args, "--json")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def _tolerance(steps: np.ndarray) -> tuple[float, float, float]:
    """(tolerance, low, high): a simulated step passes inside ``[low · (1 - tolerance),
    high · (1 + tolerance)]``. The tolerance is the larger of 5 % and the steps' half-IQR
    over their median (a test never claims a closer match than the run's own steps allow);
    ``[low, high]`` is the distribution-free 95 % interval of the median step
    (:func:`benchmarks.accuracy.median_ci`, order statistics), since the measured median
    of 18 steps is itself a draw. A normal-theory standard error was used before: on a quiet
    host the FSDP2 and DDP steps came bimodal, where it is too narrow (one DDP run landed
    -8.3 % against a 7.9 % tolerance)."""
    from benchmarks.accuracy import median_ci

    q1, q3 = np.percentile(steps, [25, 75])
    med = float(np.median(steps))
    ci = median_ci([float(x) for x in steps], 0.95)
    lo, hi = (ci[0], ci[1]) if ci is not None else (float(steps.min()), float(steps.max()))
    return max(TOLERANCE, (q3 - q1) / 2 / med), lo, hi


# ------------------------------------------------------------------------------ fast
def test_traced_layout_of_the_recorded_ddp_run() -> None:
    tl = traced_layout(load_trace(REAL_DDP))
    assert (tl.world, tl.dp, tl.tp, tl.pp, tl.fsdp) == (2, 2, 1, 1, False)
    assert tl.stages == ((0, 1),) and tl.ranks_per_host == 2


def test_traced_comm_profile_is_the_collectives_as_the_ranks_met_them() -> None:
    trace = load_trace(REAL_DDP)
    prof = traced_comm_profile(trace)
    assert prof is not None and set(prof.samples) == {("all_reduce", 2)}
    ev = trace.events
    rows = [r for r in trace.comm_rows().tolist() if ev.step[r] >= 0]
    # by hand: per instance (group, seq) the median of the two ranks' own durations, then the
    # mean per size, scaled by median / mean of the per-step sums
    inst: dict[tuple[int, int], list[float]] = {}
    for r in rows:
        inst.setdefault((int(ev.step[r]), int(ev.seq[r])), []).append(float(ev.dur_us[r]))
    size_of = {(int(ev.step[r]), int(ev.seq[r])): int(ev.nbytes[r]) for r in rows}
    per_size: dict[int, list[float]] = {}
    per_step: dict[int, float] = {}
    for k, durs in inst.items():
        assert len(durs) == 2
        t = float(np.median(durs))
        per_size.setdefault(size_of[k], []).append(t)
        per_step[k[0]] = per_step.get(k[0], 0.0) + t
    sums = list(per_step.values())
    scale = float(np.median(sums) / np.mean(sums))
    want = [(s, float(np.mean(v)) * scale) for s, v in sorted(per_size.items())]
    got = prof.samples[("all_reduce", 2)]
    assert [s for s, _ in got] == [s for s, _ in want]  # (pytest 9.2's approx takes flat lists)
    assert [t for _, t in got] == pytest.approx([t for _, t in want], rel=1e-9)


def test_one_rank_of_a_job_has_no_traced_comm_profile(tmp_path: Path) -> None:
    """Rank 0 alone of the 2-rank job: no collective has every member, so no profile; the
    job's layout is still data parallel over its world size (meta.json)."""
    trace = load_trace(REAL_DDP)
    from echo_sim.trace.model import Trace

    keep = np.flatnonzero(trace.events.rank == 0)
    one = Trace(events=trace.events.take(keep), names=trace.names,
                ranks={0: trace.ranks[0]}, steps=trace.steps, groups=trace.groups,
                kinds=trace.kinds)
    assert traced_comm_profile(one) is None
    tl = traced_layout(one)
    assert (tl.world, tl.dp, tl.tp, tl.pp, tl.stages) == (2, 2, 1, 1, ((0,),))


def test_simulate_defaults_to_the_traced_layout_and_says_so() -> None:
    got = _json("simulate", str(REAL_DDP))
    assert (got["layout"]["dp"], got["layout"]["tp"], got["layout"]["pp"]) == (2, 1, 1)
    # the trace's own op times and collectives price its layout: no profile is missing
    assert not any("no --comm-profile" in w for w in got["warnings"])
    assert got["models"][0].startswith("layout: the traced one, dp=2")
    assert any("the trace's own collectives" in m for m in got["models"])
    # a flag naming a layout wins: the traced one is not applied
    one = _json("simulate", str(REAL_DDP), "--dp", "1")
    assert one["layout"]["dp"] == 1 and not one["models"][0].startswith("layout: the traced")


def test_recorded_ddp_run_reproduces_itself() -> None:
    measured = _json("collect", str(REAL_DDP))["iteration_time_us"]
    for extra in ((), ("--comm-profile", str(PROFILE))):
        got = _json("simulate", str(REAL_DDP), *extra)
        assert got["iteration_time_us"] == pytest.approx(measured, rel=TOLERANCE), extra


def test_the_stage_is_a_typical_rank_of_the_recorded_run() -> None:
    """Each op's time is the median (for two ranks, the mean) over the stage's ranks; the
    memory and parameters are the rank with the highest measured peak's."""
    from echo_sim.workload.ops import extract_workload
    from echo_sim.workload.traced import typical_rank_workload

    trace = load_trace(REAL_DDP)
    each = [extract_workload(trace, rank=r) for r in (0, 1)]
    got = typical_rank_workload(trace, (0, 1))
    assert [o.name for o in got.ops] == [o.name for o in each[0].ops]
    for i, o in enumerate(got.ops):
        assert o.dur_us == pytest.approx((each[0].ops[i].dur_us + each[1].ops[i].dur_us) / 2)
        assert o.gap_us == pytest.approx((each[0].ops[i].gap_us + each[1].ops[i].gap_us) / 2)
    top = max(each, key=lambda w: (w.peak_memory_bytes, -w.rank))
    assert (got.rank, got.peak_memory_bytes) == (top.rank, top.peak_memory_bytes)
    assert "median over 2 of the stage's 2 ranks" in got.pool_note
    assert typical_rank_workload(trace, (1,)) == each[1]


def test_a_rank_without_compute_events_is_left_out_of_the_typical_rank() -> None:
    """Rank 1's FW/BW events dropped (a rank whose module hooks never fired): the stage
    stands on rank 0 alone and says so; with no rank left, the first rank's error."""
    from echo_sim.errors import TraceFormatError
    from echo_sim.trace.model import Trace
    from echo_sim.workload.ops import extract_workload
    from echo_sim.workload.traced import typical_rank_workload

    trace = load_trace(REAL_DDP)
    ev = trace.events

    def without(ranks: tuple[int, ...]) -> Trace:
        keep = np.flatnonzero(~(np.isin(ev.rank, ranks) & np.isin(ev.cat, [Cat.FW, Cat.BW])))
        return Trace(events=ev.take(keep), names=trace.names, ranks=trace.ranks,
                     steps=trace.steps, groups=trace.groups, kinds=trace.kinds)

    one = without((1,))
    got = typical_rank_workload(one, (0, 1))
    alone = extract_workload(one, rank=0)
    assert [o.dur_us for o in got.ops] == pytest.approx([o.dur_us for o in alone.ops])
    assert "median over 1 of the stage's 2 ranks" in got.pool_note
    assert "rank(s) 1 ran other ops or none and are left out" in got.pool_note
    with pytest.raises(TraceFormatError, match="rank 0 needs both FW and BW events"):
        typical_rank_workload(without((0, 1)), (0, 1))


def test_fold_takes_a_pipeline_stages_interleaved_micro_batches() -> None:
    def op(name: str) -> dict:
        return {"name": name, "phase": name[0]}

    # 1F1B warm-up on stage 0: F(m0) F(m1) B(m0) B(m1), then the optimizer
    base = [op(n) for n in ("Fa", "Fb", "Fa", "Fb", "Bb", "Ba", "Bb", "Ba", "U")]
    dur = np.arange(1.0, 10.0)
    gap = np.zeros(9)
    folded, d, _, k = fold_micro_batches(base, dur, gap)
    assert k == 2 and [o["name"] for o in folded] == ["Fa", "Fb", "Bb", "Ba", "U"]
    assert d.tolist() == [2.0, 3.0, 6.0, 7.0, 9.0]
    # recomputation's extra forward is not a second micro-batch
    base2 = [op(n) for n in ("Fa", "Fb", "Bb", "Fa", "Ba", "U")]
    assert fold_micro_batches(base2, np.ones(6), np.zeros(6))[3] == 1


def test_an_untrusted_profile_is_said_and_not_used(tmp_path: Path) -> None:
    prof = load_comm_profile(PROFILE)
    assert prof.untrusted() is None  # records no spread: trusted as before
    noisy = CommProfile(**{**prof.__dict__, "stderr_pct": {
        k: [60.0] * len(v) for k, v in prof.samples.items()}})
    assert "vary too much" in (noisy.untrusted() or "")
    path = tmp_path / "noisy.json"
    save_comm_profile(noisy, path)
    assert load_comm_profile(path).stderr_pct == noisy.stderr_pct  # round trip
    got = _json("simulate", str(REAL_DDP), "--dp", "1", "--tp", "1", "--comm-profile",
                str(path))
    assert any("vary too much" in w and "priced without it" in w for w in got["warnings"])
    comm = next(m for m in got["models"] if m.startswith("comm: "))
    assert "measured profile" not in comm


# ------------------------------------------------------------------------------ slow
@pytest.fixture(scope="module")
def traced_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """One 2-process gloo run per layout of the example GPT, traced over 18 steps (with 10,
    about one DDP run in ten landed 6-7 % off its own median step on a 2-core VM while its
    steps spread under 5 %: the error of a median over 10 noisy steps, on both sides)."""
    root = tmp_path_factory.mktemp("selfrepro")
    out = {}
    for layout in LAYOUTS:
        d = root / layout
        # the ranks forked from a server that imported torch (torchrun's environment; the
        # launcher is not what these tests test): 3 fresh interpreters less per layout
        done = run_ranks(["examples/train.py", "--layout", layout, "--model", "gpt",
                          "--steps", "21", "--capture", "--trace-dir", str(d),
                          "--trace-start", "2", "--trace-end", "20"],
                         env={"OMP_NUM_THREADS": "1"}, timeout=300, cwd=REPO)
        assert done.returncode == 0, done.stderr[-2000:]
        out[layout] = d
    return out


@pytest.mark.slow
@pytest.mark.serial
@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_a_2_process_trace_reproduces_itself(layout: str, traced_runs: dict[str, Path]) -> None:
    trace = traced_runs[layout]
    tl = traced_layout(load_trace(trace))
    assert (tl.dp, tl.tp, tl.pp, tl.fsdp) == LAYOUTS[layout]
    col = _json("collect", str(trace))
    measured = col["iteration_time_us"]
    steps = np.asarray([s["iteration_us"] for s in col["per_step"]])
    tol, lo, hi = _tolerance(steps)
    for extra in ((), ("--comm-profile", str(PROFILE))):
        got = _json("simulate", str(trace), *extra)
        assert (got["layout"]["dp"], got["layout"]["tp"], got["layout"]["pp"],
                got["layout"]["fsdp"]) == LAYOUTS[layout]
        sim = got["iteration_time_us"]
        assert lo * (1 - tol) <= sim <= hi * (1 + tol), (
            f"{layout} {extra}: simulated {sim:.0f} us vs traced {measured:.0f} us "
            f"({100 * (sim / measured - 1):+.1f} %; tolerance {100 * tol:.1f} % around the "
            f"median step's 95 % interval {lo:.0f}..{hi:.0f} us)")
        if extra:
            assert any("not applied" in m for m in got["models"])  # the trace holds them


@pytest.mark.slow
@pytest.mark.serial  # shares traced_runs with the test above: one pass makes it once
def test_pipeline_trace_is_joined_and_cut_where_the_job_cut(
        traced_runs: dict[str, Path]) -> None:
    trace = load_trace(traced_runs["pp"])
    ev = trace.events
    fw = {r: {trace.names[int(i)] for i in np.unique(ev.name[(ev.rank == r)
                                                               & (ev.cat == Cat.FW)])}
          for r in (0, 1)}
    assert fw[0] and fw[1] and not (fw[0] & fw[1])
    got = _json("simulate", str(traced_runs["pp"]))
    assert [r["stage"] for r in got["ranks"]] == [0, 1]
    assert got["layout"]["micro_batches"] == 2


def test_benchmark_table_says_noise_and_load() -> None:
    from benchmarks.self_reproduction import main, table

    rows = [{"rep": i, "measured_us": 60e3, "spread": 0.04, "simulated_us": 60e3 * (1 + e),
             "simulated_profile_us": 60e3 * (1 + e), "error": e, "error_profile": e,
             "load_avg": [0.5, 1.5]} for i, e in enumerate((-0.03, 0.01, -0.02))]
    text = table({"layouts": {"ddp": rows, "tp": []}})
    assert "| ddp | 60.0 ms | -3.0, +1.0, -2.0 | -3.0, +1.0, -2.0 | -2.0 % (within noise) | "\
        "4.0 % | 0.50–1.50 |" in text
    assert "| tp |" not in text
    with pytest.raises(SystemExit):
        main(["--layouts", "ring"])


def test_search_prices_the_traced_layout_as_simulate_does() -> None:
    """One predictor: search's row for the traced layout of a multi-rank trace is what
    ``simulate TRACE`` (no flag) says, the trace's own collectives included."""
    found = _json("search", str(REAL_DDP), "--gpus", "2", "--global-batch", "16", "--top",
                  "100")
    row = next(r for r in found["ranked"] if r["label"] == "dp2 tp1 pp1 mb8 ddp")
    alone = _json("simulate", str(REAL_DDP))
    assert row["iteration_time_us"] == pytest.approx(alone["iteration_time_us"], rel=1e-9)
    again = _json("simulate", *row["simulate"].split()[4:])
    assert again["iteration_time_us"] == pytest.approx(row["iteration_time_us"], rel=1e-9)


@pytest.mark.slow
@pytest.mark.serial  # shares traced_runs with the test above
def test_the_tensor_parallel_runs_collectives_add_up_to_collects_communication(
        traced_runs: dict[str, Path]) -> None:
    """``collectives`` on the real 2-process TP trace: its blocking all-reduces never overlap
    one another, so the typical member's time in them per step is ``collect``'s
    communication time, by another path; one host, one clock: no negative transfer."""
    trace = str(traced_runs["tp"])
    an = _json("collectives", trace)
    assert an["collectives"] and {r["collective"] for r in an["collectives"]} == {"all_reduce"}
    assert all(r["negative"] == 0 for r in an["collectives"])
    assert an["per_step"]["own_us"] == pytest.approx(_json("collect", trace)["comm_us"],
                                                      rel=1e-6)


# A user's DDP job (benchmarks/workloads/user_job.py) whose rank 0 does extra work in every
# forward (a straggler): a synchronous job runs at the straggler's pace, so the traced step
# is rank 0's compute plus the transfers, and rank 1 spends the difference waiting in its
# collectives.
USER_JOB = REPO / "benchmarks" / "workloads" / "user_job.py"


@pytest.mark.slow
@pytest.mark.serial
def test_a_straggler_rank_is_neither_the_stage_nor_ignored(tmp_path: Path) -> None:
    """Every rank's step lasts as long in a synchronous job (the fast ones wait), so which
    rank has the longest step is chance; picking one rank to stand for the stage made this
    job's prediction the straggler's compute plus half the wait (over) or the fast rank's
    plus half the wait (under). A typical rank's compute (each op's median over the ranks)
    plus the collectives as a typical member met them reproduces it."""
    trace = tmp_path / "trace"
    done = run_ranks([str(USER_JOB), "--trace-dir", str(trace), "--straggle", "200"],
                     env={"OMP_NUM_THREADS": "1"}, timeout=300, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    stat = _json("statistic", str(trace))
    busy = {r["rank"]: r["fw_us"] + r["bw_us"] + r["update_us"] for r in stat["ranks"]}
    assert busy[0] > 1.6 * busy[1], busy  # rank 0 is the straggler, by a wide margin
    col = _json("collect", str(trace))
    measured = col["iteration_time_us"]
    steps = np.asarray([s["iteration_us"] for s in col["per_step"]])
    tol, lo, hi = _tolerance(steps)
    got = _json("simulate", str(trace))
    assert got["layout"]["dp"] == 2
    sim = got["iteration_time_us"]
    assert lo * (1 - tol) <= sim <= hi * (1 + tol), (
        f"simulated {sim:.0f} us vs traced {measured:.0f} us "
        f"({100 * (sim / measured - 1):+.1f} %; tolerance {100 * tol:.1f} % around the median "
        f"step's 95 % interval {lo:.0f}..{hi:.0f} us)")
    assert any("a typical rank, each op's median over 2 of the stage's 2 ranks" in m
               for m in got["models"])
    assert not any("straggler" in w for w in got["warnings"])
    # another layout is priced at the typical rank's compute: the straggler is named
    other = _json("simulate", str(trace), "--dp", "4")
    assert any(w.startswith("traced rank 0's ops took") and "straggler" in w
               for w in other["warnings"]), other["warnings"]
