"""profile-comm: size parsing, option checks, and a real 2-process gloo measurement."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import pytest

from echo_sim.cli import build_parser
from echo_sim.commands.profile_comm import COMMAND
from echo_sim.cost.collectives import CommModel
from echo_sim.cost.comm_profile import load_comm_profile
from echo_sim.cost.hardware import get_cluster
from echo_sim.errors import ConfigError, ProfileError
from echo_sim.measure.profile_comm import (
    COMPUTE_OPS,
    DEFAULT_ITERS,
    DEFAULT_SIZES,
    HOST_ROUNDS_RANGE,
    PROFILE_OPS,
    RUN_CUT,
    ProfileSpec,
    _run_time,
    measure_comm_profile,
    other_load,
    parse_size,
    parse_sizes,
    trimmed_mean,
)
from tests.marks import without_cuda


def _opts(*argv: str):
    return build_parser([COMMAND]).parse_args(["profile-comm", *argv])


def test_parse_sizes() -> None:
    assert parse_size("64MB") == 64 << 20
    assert parse_size("1.5KB") == 1536
    assert parse_size("100") == 100
    assert parse_sizes("1KB..64KB") == (1024, 4096, 16384, 65536)
    assert parse_sizes("1KB..8KBx2") == (1024, 2048, 4096, 8192)
    assert parse_sizes("1MB,1KB,1KB") == (1024, 1 << 20)
    assert DEFAULT_SIZES[0] == 1024 and DEFAULT_SIZES[-1] == 64 << 20 and len(DEFAULT_SIZES) == 9
    for bad in ("1XB", "64MB..1KB", "", "1KB..4KBx1", "0B"):
        with pytest.raises(ConfigError):
            parse_sizes(bad)


@pytest.mark.parametrize("kw, needle", [
    ({"nproc": 1}, "at least 2"),
    ({"backend": "mpi"}, "valid: auto, gloo, nccl"),
    ({"ops": ("all_reduce", "gossip")}, "--ops gossip"),
    ({"iters": 0}, "iters"),
])
def test_spec_validation(kw, needle: str) -> None:
    with pytest.raises(ConfigError, match=needle):
        ProfileSpec(**kw)


def test_a_sizes_mean_leaves_out_one_run_in_15_at_each_end_however_many_runs() -> None:
    """The estimand stays what 15 runs per size measured (one run cut at each end) as the
    default count grows: more runs make it more precise, not lower (a 10 % cut of 60 runs
    would drop most of the stalls a job pays)."""
    assert DEFAULT_ITERS == 60 and RUN_CUT == pytest.approx(1 / 15)
    stalls = [3000.0] * 9 + [500.0] * 51  # 15 % of the runs stall
    # 60 runs: 4 cut at each end, so 5 of the 9 stalls stay in the mean
    assert trimmed_mean(stalls, RUN_CUT) == pytest.approx((5 * 3000 + 47 * 500) / 52)
    assert trimmed_mean(stalls[:15], RUN_CUT) == pytest.approx(
        trimmed_mean(stalls[:15], 0.1))  # 15 runs: one cut either way
    assert trimmed_mean([1.0, 2.0, 3.0, 4.0, 100.0], RUN_CUT) == pytest.approx(22.0)


@without_cuda
def test_nccl_without_cuda_is_config_error() -> None:
    with pytest.raises(ConfigError, match="needs CUDA"):
        measure_comm_profile(ProfileSpec(backend="nccl"))


def test_refuses_to_overwrite(tmp_path: Path) -> None:
    out = tmp_path / "comm.json"
    out.write_text("{}")
    with pytest.raises(ConfigError, match="exists; pass --force"):
        COMMAND.run(_opts("--output", str(out)))
    assert out.read_text() == "{}"


@pytest.mark.slow
def test_real_two_process_profile(tmp_path: Path) -> None:
    out = tmp_path / "comm.json"
    opts = _opts("--nproc", "2", "--output", str(out), "--sizes", "4KB..1MBx16",
                 "--iters", "5", "--warmup", "2", "--backend", "gloo", "--no-progress",
                 "--timeout", "120", "--no-host-overheads")
    result = COMMAND.run(opts)
    assert result.data["output"] == str(out) and "all_reduce" in result.text
    prof = load_comm_profile(out)
    # the stall summary of every measured op: printed, and in the JSON, over all its runs
    assert "stalls (runs >= 2 ms over their size's median" in result.text
    assert {(st["op"], st["runs"]) for st in result.data["stalls"]} == {
        (op, 15) for op in PROFILE_OPS}
    assert prof.backend == "gloo" and prof.device == "cpu" and prof.world_size == 2
    assert sorted(prof.samples) == sorted((op, 2) for op in PROFILE_OPS)
    sizes = [4096, 65536, 1 << 20]
    for key, pts in prof.samples.items():
        assert [s for s, _ in pts] == sizes, key
        assert all(t > 0 and math.isfinite(t) for _, t in pts)
        alpha, beta = prof.fits[key]
        assert alpha > 0 and beta > 0
        # every timed run is kept (as saved: rounded to 0.1 us) and the time is their
        # mean without one run in 15 at each end (none of 5)
        runs = prof.runs_us[key]
        assert [len(r) for r in runs] == [5] * len(sizes), key
        for (_, t), r in zip(pts, runs, strict=True):
            assert t == pytest.approx(sum(r) / 5, rel=1e-3, abs=0.1), key
    # CommModel: the measured value at a measured size, interpolation between two
    model = CommModel(get_cluster("cpu-gloo"), prof)
    pts = prof.samples[("all_reduce", 2)]
    for s, t in pts:
        assert model.time_us("all_reduce", s, [0, 1]) == pytest.approx(t)
    mid = round(math.sqrt(pts[0][0] * pts[1][0]))  # halfway in log-size
    assert model.time_us("all_reduce", mid, [0, 1]) == pytest.approx(
        (pts[0][1] + pts[1][1]) / 2, rel=1e-3)
    lo, hi = sorted((pts[1][1], pts[2][1]))
    assert lo <= model.time_us("all_reduce", 300_000, [0, 1]) <= hi
    # beyond the largest size: the fitted slope
    big = model.time_us("all_reduce", 2 << 20, [0, 1])
    assert big == pytest.approx(pts[2][1] + prof.fits[("all_reduce", 2)][1] * (1 << 20))


@pytest.mark.slow
def test_hard_timeout_kills_processes() -> None:
    spec = ProfileSpec(sizes_bytes=(64 << 20,), iters=50, timeout_s=1.0, progress=False,
                       backend="gloo")
    with pytest.raises(ProfileError, match="still running after 1 s"):
        measure_comm_profile(spec)


@pytest.mark.slow
def test_sub_groups(tmp_path: Path) -> None:
    out = tmp_path / "comm3.json"
    COMMAND.run(_opts("--nproc", "3", "--group-sizes", "2", "--ops", "all_reduce,all_gather,send",
                      "--output", str(out), "--sizes", "12KB,96KB", "--iters", "3",
                      "--backend", "gloo", "--no-progress", "--timeout", "120",
                      "--no-host-overheads"))
    prof = load_comm_profile(out)
    assert prof.ops == [("all_gather", 2), ("all_gather", 3), ("all_reduce", 2),
                        ("all_reduce", 3), ("send", 2)]
    # float32 elements, a multiple of the group size: 12 KB = 3072 elements
    assert [s for s, _ in prof.samples[("all_reduce", 3)]] == [12288, 98304]
    assert [s for s, _ in prof.samples[("all_reduce", 2)]] == [12288, 98304]
    model = CommModel(get_cluster("cpu-gloo", gpus_per_node=3), prof)
    assert model.covered("all_reduce", [0, 2]) and model.covered("all_gather", [0, 1, 2])
    assert not model.covered("all_to_all", [0, 1])


def test_group_sizes_validation() -> None:
    with pytest.raises(ConfigError, match="each must be in 2..2"):
        ProfileSpec(nproc=2, group_sizes=(4,))
    with pytest.raises(ConfigError, match="comma list of integers"):
        COMMAND.run(_opts("--output", "/nonexistent/x.json", "--group-sizes", "two"))


def test_busy_us_validation() -> None:
    with pytest.raises(ConfigError, match="--busy-us -1"):
        ProfileSpec(busy_us=-1.0)


def test_host_rounds_validation() -> None:
    """Each host quantity is a median of its rounds: at least 3, by parameter name; the
    command's flag is bounded the same."""
    lo, hi = HOST_ROUNDS_RANGE
    assert ProfileSpec(host_rounds=lo).host_rounds == lo and lo == 3
    for bad in (lo - 1, hi + 1):
        with pytest.raises(ConfigError, match=f"host_rounds {bad}: must be in {lo}..{hi}"):
            ProfileSpec(host_rounds=bad)
    assert _opts("-o", "p.json", "--host-rounds", "5").host_rounds == 5
    assert _opts("-o", "p.json").host_rounds == 15


@pytest.mark.slow
def test_busy_mode_records_compute_contention() -> None:
    """Busy mode: fixed compute before each timed run; compute rows alone vs all ranks."""
    prof = measure_comm_profile(ProfileSpec(nproc=2, sizes_bytes=(4096, 65536), iters=3,
                                            warmup=1, ops=("all_reduce",), backend="gloo",
                                            progress=False, busy_us=2000.0, timeout_s=120,
                                            host_overheads=False))
    assert sorted(prof.samples) == [("all_reduce", 2), ("compute", 2), ("compute_alone", 2)]
    (reps_a, alone), = prof.samples[("compute_alone", 2)]
    (reps_b, together), = prof.samples[("compute", 2)]
    assert reps_a == reps_b >= 1 and alone > 0 and together > 0
    assert [s for s, _ in prof.samples[("all_reduce", 2)]] == [4096, 65536]
    assert COMPUTE_OPS == ("compute_alone", "compute")
    # busy mode on gloo: a run is the mean over the ranks of each one's own time (what a
    # synchronous job pays per collective: the transfer plus half the arrival and exit gaps)
    assert prof.run_time == "rank_mean"
    assert [len(r) for r in prof.runs_us[("all_reduce", 2)]] == [3, 3]


@pytest.mark.slow
@pytest.mark.timeout(150)
def test_busy_mode_calibrates_the_host_on_the_idle_modes_work() -> None:
    """The host calibration (contention, skew) runs its own ~5 ms work in either mode, not
    busy mode's lead-in work, so the calibration does not depend on how collectives were
    timed; with it, busy-mode collectives are timed on the last arrival (the transfer)."""
    prof = measure_comm_profile(ProfileSpec(nproc=2, sizes_bytes=(4096,), iters=2, warmup=1,
                                            ops=("all_reduce",), backend="gloo",
                                            progress=False, busy_us=200.0, timeout_s=140,
                                            host_rounds=3))
    assert prof.run_time == "last_arrival"
    (lead_in, _), = prof.samples[("compute_alone", 2)]
    (calibration_work,) = prof.calibration["contention_work_products"]
    assert calibration_work > 5 * lead_in  # ~5000 us of products against ~200


@pytest.mark.slow
@pytest.mark.timeout(150)
def test_gloo_profile_carries_host_calibration() -> None:
    """gloo on CPU: the host microbenchmarks run in the same processes, raw samples kept."""
    from echo_sim.cost.cpu_overheads import (
        comm_overlap,
        contention,
        ddp_hooks,
        dtensor_dispatch,
        fsdp_unit,
        skew,
    )
    from echo_sim.measure.host_overheads import (
        CHAIN_WORK_FRACTIONS,
        DDP_CONFIGS,
        FSDP_CONFIGS,
        FSDP_UNITS,
        OPTIM_PARAMS,
        OVERLAP_BYTES,
        SYNC_ROUNDS_FACTOR,
        TP_SHAPES,
    )

    rounds = 4  # host_rounds: every quantity's samples (15 by default)
    prof = measure_comm_profile(ProfileSpec(nproc=2, sizes_bytes=(4096,), iters=2, warmup=1,
                                            ops=("all_reduce",), backend="gloo",
                                            progress=False, timeout_s=140,
                                            host_rounds=rounds))
    cal = prof.calibration
    assert prof.cpu_count >= 1 and prof.threads_per_rank >= 1 and prof.load_avg >= 0
    assert len(cal["contention_alone_us"]) == rounds
    assert len(cal["contention_busy_us"]) == 2 * rounds
    for key in ("optim_dtensor_loop_cpu_us", "optim_plain_foreach_cpu_us", "copy_bytes_per_us"):
        assert len(cal[key]) == 2 * rounds and min(cal[key]) > 0, key  # rounds per rank
    # the tensor-parallel MLP block: rounds x every size x 2 ranks, thread CPU times
    assert cal["tp_act_bytes"] == [float(b * t * h * 4) for b, t, h in TP_SHAPES]
    for key in ("tp_block_fw_cpu_us", "tp_block_bw_cpu_us", "tp_block_plain_fw_cpu_us",
                "tp_block_plain_bw_cpu_us", "tp_block_optim_cpu_us",
                "tp_block_plain_optim_cpu_us"):
        assert len(cal[key]) == rounds * len(TP_SHAPES) * 2 and min(cal[key]) > 0, key
    assert cal["tp_block_dtensor_params"] == [4.0]  # kept once: the same on every rank
    assert "tp_fw_cpu_us" not in cal  # the isolated pair of older profiles
    # FSDP2 on the world mesh: one median per configuration and rank
    # (MLP blocks per unit, width): 6 parameters a block, as DDP's
    assert cal["fsdp_params"] == [6.0 * n for n, _ in FSDP_CONFIGS]
    assert cal["fsdp_unit_bytes"] == [4.0 * n * (8 * h * h + 7 * h) for n, h in FSDP_CONFIGS]
    assert cal["fsdp_blocks"] == [float(n) for n, _ in FSDP_CONFIGS]
    assert len(cal["fsdp_fw_cpu_us"]) == len(cal["fsdp_bw_cpu_us"]) == 2 * len(FSDP_CONFIGS)
    # DDP over the world group: one median per configuration and rank
    # (MLP blocks, width): 6 parameters a block (LayerNorm, two Linears, their biases)
    assert cal["ddp_params"] == [6.0 * n for n, _ in DDP_CONFIGS]
    assert cal["ddp_bytes"] == [4.0 * n * (8 * h * h + 7 * h) for n, h in DDP_CONFIGS]
    assert cal["ddp_blocks"] == [float(n) for n, _ in DDP_CONFIGS]
    assert len(cal["ddp_fw_cpu_us"]) == len(cal["ddp_bw_cpu_us"]) == 2 * len(DDP_CONFIGS)
    assert "dtensor_fw_us" not in cal  # the one-rank-mesh samples of older profiles
    # rounds x SYNC_ROUNDS_FACTOR x 3 amounts of work x 2 ranks
    assert len(cal["sync_us"]) == len(cal["sync_work_us"]) == rounds * SYNC_ROUNDS_FACTOR * 3 * 2
    # the chained all-reduces: rounds x SYNC_ROUNDS_FACTOR / 2 rounds of every level, the
    # same lists on both ranks (kept once); one host clock: no gap below zero; the levels'
    # compute grows with their share of the work
    chain = rounds * SYNC_ROUNDS_FACTOR // 2 * len(CHAIN_WORK_FRACTIONS)
    assert len(cal["chain_gap_us"]) == len(cal["chain_work_us"]) == chain
    assert cal["chain_work_fractions"] == list(CHAIN_WORK_FRACTIONS)
    assert min(cal["chain_gap_us"]) >= 0.0
    k = len(CHAIN_WORK_FRACTIONS)
    means = [sum(cal["chain_work_us"][i::k]) / (chain // k) for i in range(k)]
    assert means == sorted(means) and means[-1] > means[0]
    # overlap rounds: every size in every round, on both ranks, aligned lists
    n = rounds * len(OVERLAP_BYTES) * 2
    assert all(len(cal[k]) == n for k in cal if k.startswith("overlap_"))
    assert sorted(set(cal["overlap_bytes"])) == [float(b) for b in OVERLAP_BYTES]
    assert min(cal["overlap_comm_busy_us"]) > 0 and min(cal["overlap_work_busy_us"]) > 0
    assert OPTIM_PARAMS >= 1 and FSDP_UNITS >= 1
    assert contention(prof, 2) is not None and dtensor_dispatch(prof) is not None
    unit = fsdp_unit(prof)
    assert unit is not None and "units of transformer MLP blocks" in unit.note
    sk = skew(prof)
    assert sk is not None and len(sk.points) == k and "chained" in sk.note
    assert comm_overlap(prof, 2) is not None and ddp_hooks(prof) is not None
    off = measure_comm_profile(ProfileSpec(nproc=2, sizes_bytes=(4096,), iters=1, warmup=0,
                                           ops=("all_reduce",), backend="gloo", progress=False,
                                           host_overheads=False, timeout_s=60))
    assert off.calibration == {}
    # with the rank-skew calibration a run is timed on its last-arriving rank (the transfer
    # alone: simulate adds the job's skew); without it, on its slowest rank
    assert prof.run_time == "last_arrival" and off.run_time == "slowest"


@pytest.mark.parametrize(("busy_us", "host", "backend", "clock"), [
    (0.0, True, "gloo", "last_arrival"), (2000.0, True, "gloo", "last_arrival"),
    (2000.0, False, "gloo", "rank_mean"), (0.0, False, "gloo", "slowest"),
    (2000.0, True, "nccl", "slowest"), (0.0, True, "nccl", "slowest")])
def test_run_clock_is_the_transfer_wherever_simulate_adds_the_skew(
        busy_us: float, host: bool, backend: str, clock: str) -> None:
    """With gloo's host calibrations simulate adds the job's rank skew to every collective,
    so a run is the transfer alone (last arrival) in busy mode too: the ranks' mean would
    count half the busy work's arrival gap a second time."""
    spec = ProfileSpec(nproc=2, busy_us=busy_us, host_overheads=host, backend=backend)
    assert _run_time(spec, backend) == clock


def test_ranks_run_one_thread_each_unless_the_user_says(monkeypatch: pytest.MonkeyPatch
                                                        ) -> None:
    """As torchrun sets OMP_NUM_THREADS=1 for the job's workers: without the variable the
    profiled ranks take one intra-op thread each (not the core count: the ranks would
    oversubscribe the cores they share and time thread thrashing); with it, its value."""
    spec = ProfileSpec(nproc=2, sizes_bytes=(4096,), iters=1, warmup=0, ops=("all_reduce",),
                       backend="gloo", progress=False, host_overheads=False, timeout_s=60)
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    assert measure_comm_profile(spec).threads_per_rank == 1
    monkeypatch.setenv("OMP_NUM_THREADS", "2")
    assert measure_comm_profile(spec).threads_per_rank == 2


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity") or len(os.sched_getaffinity(0)) < 2,
                    reason="needs Linux and two usable cores")
def test_the_profile_counts_the_cores_its_ranks_may_use() -> None:
    """Under ``taskset`` (or a cgroup's cpuset) the profile records the cores the ranks may
    run on, not the machine's: contention is judged against those."""
    spec = ProfileSpec(nproc=2, sizes_bytes=(4096,), iters=1, warmup=0, ops=("all_reduce",),
                       backend="gloo", progress=False, host_overheads=False, timeout_s=60)
    allowed = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {min(allowed)})  # the ranks inherit it
    try:
        assert measure_comm_profile(spec).cpu_count == 1
    finally:
        os.sched_setaffinity(0, allowed)
    assert os.cpu_count() != 1  # the machine's count would have said otherwise


def test_trimmed_mean_keeps_the_slow_mode_and_drops_hiccups() -> None:
    # a bimodal collective (a third of the runs wait for a vCPU to wake) plus one hiccup:
    # the median (500) hides the slow third; the trimmed mean keeps it, not the hiccup
    runs = [500.0] * 13 + [3000.0] * 6 + [40000.0]
    assert trimmed_mean(runs) == pytest.approx((500.0 * 11 + 3000.0 * 5) / 16)
    assert trimmed_mean([7.0]) == 7.0 and trimmed_mean([1.0, 3.0]) == 2.0


def test_profile_runs_round_trip_and_bad_runs_are_refused(tmp_path: Path) -> None:
    from echo_sim.cost.comm_profile import CommProfile, save_comm_profile

    prof = CommProfile(backend="gloo", device="cpu", host="h", world_size=2,
                       samples={("all_reduce", 2): [(1024, 110.0), (4096, 130.0)]},
                       runs_us={("all_reduce", 2): [[100.0, 120.0], [125.0, 135.0]]})
    path = tmp_path / "p.json"
    save_comm_profile(prof, path)
    assert load_comm_profile(path).runs_us == prof.runs_us
    raw = json.loads(path.read_text())
    for bad in ([[100.0]], [[100.0], []], [[100.0], [-1.0]], [[100.0], "x"],
                [[100.0], [True]], [[100.0], [1.0, "2"]], [[100.0], [1.0, None]],
                [[100.0], [10 ** 400]], "[[100.0], [NaN]]", "[[100.0], [Infinity]]"):
        raw["ops"][0]["runs_us"] = bad
        # NaN and Infinity: what Python's json writes for them (not JSON, but read)
        path.write_text(json.dumps(raw) if not isinstance(bad, str)
                        else json.dumps(raw).replace(json.dumps(bad), bad))
        with pytest.raises(ProfileError, match="runs_us must hold one non-empty list"):
            load_comm_profile(path)
    # an integer past float's range anywhere is one line, not an OverflowError
    raw["ops"][0]["runs_us"] = [[100.0], [1.0]]
    raw["ops"][0]["times_us"][0] = 10 ** 400
    path.write_text(json.dumps(raw))
    with pytest.raises(ProfileError, match="times_us positive numbers"):
        load_comm_profile(path)


def test_other_load_is_a_core_count() -> None:
    load = other_load(0.05)
    assert 0.0 <= load <= (os.cpu_count() or 1) + 1e-9


def test_stalls_count_runs_over_their_sizes_median() -> None:
    """A stall: a run >= STALL_US over the median of its own size; the excess is the mean
    of max(run - median, 0) over every run of the op (what each collective pays)."""
    from echo_sim.cost.comm_profile import STALL_US, CommProfile, stalls

    prof = CommProfile(backend="gloo", device="cpu", host="h", world_size=2,
                       samples={("all_reduce", 2): [(1024, 1.0), (4096, 1.0)],
                                ("broadcast", 2): [(1024, 1.0)]},
                       runs_us={("all_reduce", 2): [[100.0, 100.0, 100.0 + STALL_US + 1],
                                                    [300.0, 310.0, 310.0 + STALL_US]],
                                ("broadcast", 2): [[50.0, 60.0, 70.0]]})
    got = {(st.op, st.group_size): st for st in stalls(prof)}
    ar = got[("all_reduce", 2)]
    assert ar.runs == 6 and ar.rate == pytest.approx(2 / 6)
    # over the medians 100 and 310: STALL_US + 1, and STALL_US (300 is under its median)
    assert ar.excess_us == pytest.approx((2 * STALL_US + 1) / 6)
    bc = got[("broadcast", 2)]
    assert bc.rate == 0.0 and bc.excess_us == pytest.approx(10 / 3)
    assert stalls(CommProfile(backend="gloo", device="cpu", host="h", world_size=2,
                              samples={("all_reduce", 2): [(1024, 1.0)]})) == []


@pytest.mark.slow
@pytest.mark.timeout(200)
def test_three_processes_time_a_sub_group_on_its_members_only() -> None:
    """``--nproc 3 --group-sizes 2`` on gloo: the host calibrations run on a 3-rank mesh
    (the tensor-parallel block's width rounded up to shard evenly over 3), and the
    2-rank group's runs are its members' last arrival: the rank outside the group times
    nothing and must not count as the fastest (it did: every sub-group run was 0 µs)."""
    prof = measure_comm_profile(ProfileSpec(nproc=3, group_sizes=(2,), sizes_bytes=(4096,),
                                            iters=3, warmup=1,
                                            ops=("all_reduce",), backend="gloo",
                                            progress=False, timeout_s=180,
                                            host_rounds=3))
    assert prof.run_time == "last_arrival"
    assert sorted(prof.samples) == [("all_reduce", 2), ("all_reduce", 3)]
    for key in prof.samples:
        (runs,) = prof.runs_us[key]
        assert len(runs) == 3 and min(runs) > 0 and all(math.isfinite(t) for t in runs), key
    assert len(prof.calibration["tp_block_fw_cpu_us"]) > 0
