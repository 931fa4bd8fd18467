"""CPU-host cost models (echo_sim.cost.cpu_overheads) on profiles measured on a 2-core
gloo host — tests/data/comm/gloo2_calibrated.json (an older profile: one-rank-mesh wall
times), gloo2_mesh.json (world-mesh thread CPU times, the tensor-parallel Linear pair) and
gloo2_block.json (``profile-comm`` of torch 2.13 with the tensor-parallel MLP block) — and
their use by simulate()."""

from __future__ import annotations

import dataclasses
import statistics
from pathlib import Path

import numpy as np
import pytest

from echo_sim.cost.comm_profile import CommProfile, load_comm_profile, save_comm_profile
from echo_sim.cost.cpu_overheads import (
    chain_skew,
    contention,
    dtensor_dispatch,
    fair_share_bound,
    floor,
    fsdp_copy_us,
    fsdp_unit,
    line_fit,
    optimizer_per_param,
    plane_fit,
    replay_skew,
    robust,
    skew,
    tp_optimizer_per_param,
)
from echo_sim.errors import ProfileError
from echo_sim.measure.host_overheads import OPTIM_PARAMS
from echo_sim.sim.host_costs import params_per_module
from echo_sim.sim.simulate import SimConfig, simulate
from echo_sim.workload.ops import extract_workload
from tests.test_workload import LinearComm, gpt_trace

FIXTURE = Path(__file__).parent / "data" / "comm" / "gloo2_calibrated.json"
MESH_FIXTURE = Path(__file__).parent / "data" / "comm" / "gloo2_mesh.json"
BLOCK_FIXTURE = Path(__file__).parent / "data" / "comm" / "gloo2_block.json"


@pytest.fixture(scope="module")
def prof() -> CommProfile:
    return load_comm_profile(FIXTURE)


@pytest.fixture(scope="module")
def mesh_prof() -> CommProfile:
    return load_comm_profile(MESH_FIXTURE)


def _med(p: CommProfile, key: str) -> float:
    return statistics.median(p.calibration[key])




def test_floor_is_the_fastest_sample() -> None:
    assert floor([5.0, 3.0, 9.0, 4.0])[0] == 3.0 and floor([])[0] == 0.0



def test_robust_median_and_spread() -> None:
    assert robust([1.0, 2.0, 3.0, 4.0, 100.0]) == (3.0, pytest.approx(100 * (52.0 - 1.5) / 2 / 3))
    assert robust([10.0, 12.0]) == (11.0, pytest.approx(100 * 2 / 2 / 11))
    assert robust([]) == (0.0, 0.0)


def test_contention_needs_oversubscribed_cores(prof: CommProfile) -> None:
    ratio = _med(prof, "contention_busy_us") / _med(prof, "contention_alone_us")
    assert ratio > 1.5  # measured: two ranks and the other tenants (load 13) on 2 cores
    # 2 ranks x 1 thread on 2 idle cores: no core is shared, the factor is 1 whatever
    # the samples say (the x1.36-on-an-idle-host failure)
    idle = contention(dataclasses.replace(prof, load_avg=0.0), 2)
    assert idle is not None and idle.value == 1.0 and "not applied" in idle.note
    # the same host with 1.5 cores' worth of other load: oversubscribed, factor applied up
    # to the fair-share bound min(1, 2/2.5) / min(1, 2/3.5) = 1.4
    assert fair_share_bound(2, 1, 2, 1.5) == pytest.approx(1.4)
    busy = contention(dataclasses.replace(prof, load_avg=1.5), 2)
    assert busy is not None and busy.value == pytest.approx(min(ratio, 1.4))
    assert busy.samples == 21 and busy.spread_pct > 0 and "0.5 free of 2 cores" in busy.note
    # the measured host (load 13 on 2 cores): two more threads can slow each by 14/15 only
    loaded = contention(prof, 2)
    assert loaded is not None and loaded.value == pytest.approx(
        (prof.load_avg + 2) / (prof.load_avg + 1))
    # clamped to [1, bound]; unknown cores: bound = ranks x threads
    fast = dataclasses.replace(prof, load_avg=1.5, calibration={
        **prof.calibration, "contention_busy_us": [1.0, 1.0, 1.0]})
    assert contention(fast, 2).value == 1.0  # type: ignore[union-attr]
    slow = dataclasses.replace(prof, cpu_count=0, calibration={
        **prof.calibration, "contention_busy_us": [1e9] * 3})
    assert contention(slow, 2).value == 2.0  # type: ignore[union-attr]
    assert fair_share_bound(2, 1, 16, 0.0) == 1.0 and fair_share_bound(2, 1, 1, 0.0) == 2.0
    # another rank count than profiled, or no samples: no model
    assert contention(prof, 4) is None and contention(None, 2) is None
    rows = {k: v for k, v in prof.samples.items() if not k[0].startswith("compute")}
    assert contention(dataclasses.replace(prof, calibration={}, samples=rows), 2) is None
    # profiles from before the calibration block: the busy-mode rows, one median each
    old = contention(dataclasses.replace(prof, calibration={}, load_avg=1.5), 2)
    (alone,), (busy_row,) = prof.samples[("compute_alone", 2)], prof.samples[("compute", 2)]
    assert old is not None and old.samples == 2
    assert old.value == pytest.approx(min(max(busy_row[1] / alone[1], 1.0), 2.0))


def test_dtensor_dispatch_and_optimizer(prof: CommProfile) -> None:
    got = dtensor_dispatch(prof)
    assert got is not None
    # older profile, per call: fastest DTensor pair minus fastest plain pair, over 2
    # Linears; no per-byte part (one size measured)
    for a, b, phase in ((got.fw_a_us, got.fw_b_us_per_byte, "fw"),
                        (got.bw_a_us, got.bw_b_us_per_byte, "bw")):
        d, p = prof.calibration[f"dtensor_{phase}_us"], prof.calibration[f"plain_{phase}_us"]
        assert a == pytest.approx((min(d) - min(p)) / 2) and b == 0.0
        assert a > 50  # DTensor dispatch costs tens of us per call
    assert got.fw_us(1e9) == got.fw_a_us and "one-rank mesh" in got.notes[0]
    loop = optimizer_per_param(prof, foreach=False, params=OPTIM_PARAMS)
    each = optimizer_per_param(prof, foreach=True, params=OPTIM_PARAMS)
    assert loop is not None and each is not None
    d, p = prof.calibration["optim_dtensor_loop_us"], prof.calibration["optim_plain_loop_us"]
    assert loop.value == pytest.approx((min(d) - min(p)) / OPTIM_PARAMS)
    assert loop.value > 5 * each.value  # the loop pays DTensor dispatch per parameter
    assert dtensor_dispatch(dataclasses.replace(prof, calibration={})) is None


def _per_size(p: CommProfile, phase: str, pre: str = "tp") -> dict[float, float]:
    """Per measured activation size: (median DTensor pair/block - median plain one) / 2."""
    cal = p.calibration
    sizes = cal["tp_act_bytes"]
    dt, pl = cal[f"{pre}_{phase}_cpu_us"], cal[f"{pre}_plain_{phase}_cpu_us"]
    k = len(sizes)
    return {x: max(statistics.median(dt[j::k]) - statistics.median(pl[j::k]), 0.0) / 2
            for j, x in enumerate(sizes)}


def test_dtensor_dispatch_on_the_world_mesh(mesh_prof: CommProfile) -> None:
    got = dtensor_dispatch(mesh_prof)
    assert got is not None and "profiled ranks' mesh" in got.notes[0]
    assert len(mesh_prof.calibration["tp_act_bytes"]) == 2
    for phase, a, b, at in (("fw", got.fw_a_us, got.fw_b_us_per_byte, got.fw_us),
                            ("bw", got.bw_a_us, got.bw_b_us_per_byte, got.bw_us)):
        pts = sorted(_per_size(mesh_prof, phase).items())
        (x0, y0), (x1, y1) = pts
        # least squares through the two sizes' medians with b >= 0: the line through both
        # where they rise, else flat at their mean (not the smaller size's value)
        slope = (y1 - y0) / (x1 - x0)
        assert b == pytest.approx(max(slope, 0.0))
        assert a == pytest.approx(y0 - slope * x0 if slope >= 0 else (y0 + y1) / 2)
        assert at(x0) >= 0 and at(x1) >= at(x0)
        # on the world mesh each call also issues collectives and books their waits:
        # hundreds of us per Linear on this host, not tens
        assert 100 < at(x1) < 5000
    # the world mesh costs more than the one-rank mesh of the older profile (its issue and
    # wait bookkeeping of real collectives)
    old = dtensor_dispatch(load_comm_profile(FIXTURE))
    assert old is not None and got.bw_us(0) > old.bw_us(0)
    # a sample list of the wrong length is no model
    bad = {**mesh_prof.calibration, "tp_fw_cpu_us": mesh_prof.calibration["tp_fw_cpu_us"][:-1]}
    assert dtensor_dispatch(dataclasses.replace(mesh_prof, calibration=bad)) is None


def test_dtensor_dispatch_from_the_transformer_mlp_block() -> None:
    block = load_comm_profile(BLOCK_FIXTURE)
    cal = block.calibration
    assert "tp_fw_cpu_us" not in cal  # a profile of the block has no pair samples
    got = dtensor_dispatch(block)
    assert got is not None and "transformer MLP block" in got.notes[0]
    assert "minus the plain shard block" in got.notes[1]
    for phase, a, b in (("fw", got.fw_a_us, got.fw_b_us_per_byte),
                        ("bw", got.bw_a_us, got.bw_b_us_per_byte)):
        (x0, y0), (x1, y1) = sorted(_per_size(block, phase, "tp_block").items())
        assert b == pytest.approx(max((y1 - y0) / (x1 - x0), 0.0))
        assert a == pytest.approx(max(y0 - b * x0, 0.0))
    # 8 KiB and 512 KiB of float32 activation, (batch, seq, hidden)
    assert cal["tp_act_bytes"] == [8192.0, 524288.0]
    # where a profile held both, the block (the way a job meets the pair) is the one used
    both = dataclasses.replace(block, calibration={
        **{k: v for k, v in load_comm_profile(MESH_FIXTURE).calibration.items()
           if k.startswith("tp_") and k != "tp_act_bytes"}, **cal})
    assert dtensor_dispatch(both) == got
    # and a block sample list of the wrong length is no model, not a fall back to the pair
    bad = {**cal, "tp_block_bw_cpu_us": cal["tp_block_bw_cpu_us"][:-1]}
    assert dtensor_dispatch(dataclasses.replace(block, calibration=bad)) is None


def test_tensor_parallel_optimizer_as_measured_after_a_backward(tmp_path: Path) -> None:
    block = load_comm_profile(BLOCK_FIXTURE)
    cal = block.calibration
    got = tp_optimizer_per_param(block)
    assert got is not None and "right after a backward" in got.note
    # the sharded block's fc1/fc2 weights and biases; its LayerNorm stays plain
    assert cal["tp_block_dtensor_params"] == [4.0]
    assert got.value == pytest.approx(max(statistics.median(cal["tp_block_optim_cpu_us"])
                                          - statistics.median(cal["tp_block_plain_optim_cpu_us"]),
                                          0.0) / 4)
    # the back-to-back step of the same profile costs less per DTensor parameter: the
    # backward leaves caches the optimizer pays for (a recorded host, not a law: > 0 here)
    back = optimizer_per_param(block, foreach=False, params=OPTIM_PARAMS)
    assert back is not None and got.value > back.value > 0
    assert tp_optimizer_per_param(load_comm_profile(MESH_FIXTURE)) is None  # made before
    # simulate adds it per DTensor parameter of a tensor-parallel stage's loop, not FSDP2's
    tr = gpt_trace(2)
    path = save_comm_profile(block, tmp_path / "b.json")
    bare = save_comm_profile(dataclasses.replace(block, calibration={
        k: v for k, v in cal.items() if not k.startswith("tp_block_optim")
        and not k.startswith("tp_block_plain_optim")}), tmp_path / "n.json")
    kw: dict = dict(tp=2, vocab_parallel=False, optimizer_foreach=False)
    tp = simulate(tr, SimConfig(comm_profile=str(path), **kw))
    old = simulate(tr, SimConfig(comm_profile=str(bare), **kw))
    assert any("right after a backward" in m for m in tp.models)
    assert not any("right after a backward" in m for m in old.models)
    wl = extract_workload(tr)
    owned = params_per_module(wl)
    n_dt = sum(owned.get(o.module, 0) for o in wl.ops
               if o.phase == "F" and o.role in ("column", "row"))
    assert n_dt > 0
    slowdown = tp.calibration["compute_contention"]["value"]  # scales every op alike
    assert tp.ranks[0].compute_us - old.ranks[0].compute_us == pytest.approx(
        n_dt * (got.value - back.value) * slowdown, rel=1e-6)
    fsdp = simulate(tr, SimConfig(dp=2, fsdp=True, optimizer_foreach=False,
                                  comm_profile=str(path)))
    assert not any("right after a backward" in m for m in fsdp.models)


def test_optimizer_per_param_from_thread_cpu_medians(mesh_prof: CommProfile) -> None:
    cal = mesh_prof.calibration
    for foreach, impl in ((False, "loop"), (True, "foreach")):
        got = optimizer_per_param(mesh_prof, foreach=foreach, params=OPTIM_PARAMS)
        d, p = cal[f"optim_dtensor_{impl}_cpu_us"], cal[f"optim_plain_{impl}_cpu_us"]
        assert got is not None and "median thread CPU time" in got.note
        assert got.value == pytest.approx(
            max(statistics.median(d) - statistics.median(p), 0.0) / OPTIM_PARAMS)
    assert optimizer_per_param(mesh_prof, foreach=False, params=0) is None


def test_plane_fit_is_nonnegative_least_squares() -> None:
    ps, bs = [2.0, 6.0, 2.0, 2.0], [4e3, 12e3, 263e3, 263e3]
    ys = [100 + 5 * p + 1e-3 * b for p, b in zip(ps, bs, strict=True)]
    assert plane_fit(ps, bs, ys) == pytest.approx((100.0, 5.0, 1e-3))
    # a cost that falls with bytes is noise: that term is dropped, the rest refitted
    ys = [300.0, 340.0, 250.0, 250.0]
    a, b, c = plane_fit(ps, bs, ys)
    assert c == 0.0 and b >= 0 and a > 0
    assert min(plane_fit(ps, bs, [-5.0, -6.0, -7.0, -7.0])) == 0.0


def test_fsdp_unit_on_the_world_mesh(mesh_prof: CommProfile) -> None:
    c = fsdp_unit(mesh_prof)
    assert c is not None and "copies and allocation included" in c.note
    assert "units of Linears, an older profile's" in c.note  # no fsdp_blocks in it
    cal = mesh_prof.calibration
    ps, nb = cal["fsdp_params"], cal["fsdp_unit_bytes"]
    assert len(ps) == len(nb) == 3 and len(set(zip(ps, nb, strict=True))) == 3
    k = len(ps)
    for phase, at in (("fw", c.fw_us), ("bw", c.bw_us)):
        meds = [statistics.median(cal[f"fsdp_{phase}_cpu_us"][j::k]) for j in range(k)]
        fit = [at(int(p), b) for p, b in zip(ps, nb, strict=True)]
        # the fitted plane stays within the spread of the three configurations' medians
        assert min(meds) * 0.8 <= min(fit) and max(fit) <= max(meds) * 1.2
    assert min(c.fw_a_us, c.fw_b_us, c.fw_c_us_per_byte, c.bw_a_us, c.bw_b_us,
               c.bw_c_us_per_byte) >= 0
    # copies are inside the CPU times: no separate memcpy term
    assert c.copy_bytes_per_us == 0.0 and fsdp_copy_us(1e6, 2, c.copy_bytes_per_us) == (0, 0)


def test_ddp_host_cost_fit_and_where_simulate_adds_it(prof: CommProfile,
                                                      tmp_path: Path) -> None:
    """DDP's reducer cost: a plane through the configurations' medians (forward per call,
    backward per call + per parameter + per byte), added to a DDP plan only: the forward
    part on the first forward op, each backward op's own parameters and bytes on it, the
    per-call part on the last backward op."""
    from echo_sim.cost.cpu_overheads import ddp_hooks
    from echo_sim.measure.host_overheads import DDP_CONFIGS, ddp_block_params
    from echo_sim.sim.host_costs import apply_host_costs
    from echo_sim.workload.build import Layout, make_plan

    assert ddp_hooks(prof) is None  # a profile from before the microbenchmark
    ps = [float(ddp_block_params(n, h)[0]) for n, h in DDP_CONFIGS]
    nb = [float(ddp_block_params(n, h)[1]) for n, h in DDP_CONFIGS]
    fw = [100.0] * (2 * len(DDP_CONFIGS))  # ranks in turn
    bw = [100.0 + 3.0 * p + 1e-4 * b for p, b in zip(ps, nb, strict=True)] * 2
    cal = {"ddp_fw_cpu_us": fw, "ddp_bw_cpu_us": bw, "ddp_params": ps, "ddp_bytes": nb}
    older = ddp_hooks(dataclasses.replace(prof, calibration=cal))
    assert older is not None and "stacks of Linears, an older profile's" in older.note
    synth = dataclasses.replace(prof, calibration={
        **cal, "ddp_blocks": [float(n) for n, _ in DDP_CONFIGS]})
    c = ddp_hooks(synth)
    assert c is not None and "DDP host cost" in c.note and "transformer MLP blocks" in c.note
    assert c.bw == pytest.approx(older.bw)  # the same fit: only where the samples came from
    assert c.fw == pytest.approx((100.0, 0.0, 0.0), abs=1e-6)
    assert c.bw == pytest.approx((100.0, 3.0, 1e-4))
    wl = extract_workload(gpt_trace(2))
    layout = Layout(dp=2, tp=1, pp=1)
    base = np.array([o.time_us for o in wl.ops])
    plans = [make_plan(wl, layout, base.copy()) for _ in range(2)]
    notes = apply_host_costs(plans[1], wl, layout, profile=synth, fsdp=False,
                             vocab_parallel=False, foreach=True, ddp=True)
    assert notes == [c.note]
    added = plans[1].time_us - plans[0].time_us
    owned = params_per_module(wl)
    fw_ops = [o for o in wl.ops if o.phase == "F"]
    bw_ops = [o for o in wl.ops if o.phase == "B"]
    n_all = sum(owned.get(o.module, 0) for o in fw_ops)
    assert added[fw_ops[0].index] == pytest.approx(c.fw_us(n_all, sum(o.param_bytes
                                                                        for o in fw_ops)))
    pbytes = {o.module: o.param_bytes for o in fw_ops}
    want_bw = sum(3.0 * owned.get(o.module, 0) + 1e-4 * pbytes[o.module] * (
        owned.get(o.module, 0) > 0) for o in bw_ops) + 100.0
    assert sum(added[o.index] for o in bw_ops) == pytest.approx(want_bw)
    assert added[bw_ops[-1].index] >= 100.0
    # FSDP2 or no DDP: nothing of it
    for kw in ({"fsdp": True, "ddp": True}, {"fsdp": False, "ddp": False}):
        again = make_plan(wl, layout, base.copy())
        got = apply_host_costs(again, wl, layout, profile=synth, vocab_parallel=False,
                               foreach=True, **kw)
        assert not any("DDP host cost" in m for m in got)


def test_fsdp_unit_line_through_two_parameter_counts(prof: CommProfile) -> None:
    c = fsdp_unit(prof)
    assert c is not None
    fw = prof.calibration["fsdp_fw_us"]  # ranks in turn, configurations 2 and 6 params
    m2, m6 = statistics.median(fw[0::2]), statistics.median(fw[1::2])
    b = max((m6 - m2) / 4, 0.0)
    assert c.fw_b_us == pytest.approx(b) and c.fw_a_us == pytest.approx(max(m2 - 2 * b, 0))
    assert c.fw_us(6) >= c.fw_us(2) >= 0 and c.bw_us(2) >= 0
    assert c.copy_bytes_per_us == pytest.approx(max(prof.calibration["copy_bytes_per_us"]))
    # copies: forward S(1 + 1/dp), backward twice that, at the memcpy bandwidth
    assert fsdp_copy_us(3000.0, 2, 1000.0) == (4.5, 9.0)
    assert fsdp_copy_us(3000.0, 2, 0.0) == (0.0, 0.0)


def test_calibration_round_trip_and_errors(prof: CommProfile, tmp_path: Path) -> None:
    out = save_comm_profile(dataclasses.replace(prof, load_avg=0.75), tmp_path / "p.json")
    q = load_comm_profile(out)
    assert q.cpu_count == 2 and q.threads_per_rank == 1 and q.load_avg == 0.75
    assert q.calibration.keys() == prof.calibration.keys()
    text = out.read_text().replace('"cpu_count": 2', '"cpu_count": -1')
    (tmp_path / "bad.json").write_text(text)
    with pytest.raises(ProfileError, match="'cpu_count' must be a non-negative integer"):
        load_comm_profile(tmp_path / "bad.json")


def test_simulate_adds_host_costs_only_for_dtensor_layouts(prof: CommProfile,
                                                           tmp_path: Path) -> None:
    tr = gpt_trace(2)  # CPU trace, heads 2: tp=2 works
    path = save_comm_profile(dataclasses.replace(prof, load_avg=0.0), tmp_path / "c.json")
    kw = dict(comm_profile=str(path))
    comm = LinearComm(10.0, 1e3)
    plain = simulate(tr, SimConfig(tp=2, **kw), comm=comm)  # comm given: no profile read
    tp = simulate(tr, SimConfig(tp=2, optimizer_foreach=False, **kw))
    ddp = simulate(tr, SimConfig(dp=2, **kw))
    assert not any("DTensor" in m for m in ddp.models + plain.models)
    assert any(m.startswith("DTensor forward") for m in tp.models)
    assert any(m.startswith("optimizer:") and "per-parameter loop" in m for m in tp.models)
    assert any(m.startswith("rank skew") for m in tp.models + ddp.models)
    assert tp.calibration["rank_skew_us_per_us"]["value"] == pytest.approx(skew(prof).kappa)
    # the added compute: per sharded call (column, row, vocab-parallel; F and B) plus
    # the optimizer's per-DTensor-parameter cost
    disp = dtensor_dispatch(prof)
    assert disp is not None
    wl = extract_workload(tr)
    owned = params_per_module(wl)
    sharded = [o for o in wl.ops if o.role in ("column", "row", "vocab")]  # vocab-parallel
    n_dt = sum(owned.get(o.module, 0) for o in sharded if o.phase == "F")
    per = optimizer_per_param(prof, foreach=False, params=OPTIM_PARAMS)
    assert per is not None
    added = sum(disp.fw_a_us if o.phase == "F" else disp.bw_a_us for o in sharded) \
        + n_dt * per.value
    tp_free = simulate(tr, SimConfig(tp=2, **kw), comm=comm)
    tp_cost = simulate(tr, SimConfig(tp=2, optimizer_foreach=False, **kw), comm=comm)
    assert tp_free.iteration_time_us == plain.iteration_time_us
    assert tp_cost.iteration_time_us == tp_free.iteration_time_us  # comm given: no profile
    base = tp.ranks[0].compute_us
    no_cal = save_comm_profile(dataclasses.replace(prof, calibration={}, load_avg=0.0),
                               tmp_path / "n.json")
    bare = simulate(tr, SimConfig(tp=2, comm_profile=str(no_cal)))
    assert base - bare.ranks[0].compute_us == pytest.approx(added, rel=1e-6)
    fsdp = simulate(tr, SimConfig(dp=2, fsdp=True, optimizer_foreach=True, **kw))
    fsdp_bare = simulate(tr, SimConfig(dp=2, fsdp=True, comm_profile=str(no_cal)))
    assert any(m.startswith("FSDP2 hooks per unit") for m in fsdp.models)
    assert fsdp.ranks[0].compute_us > fsdp_bare.ranks[0].compute_us


def test_the_chained_probe_prices_a_wait_by_its_levels(prof: CommProfile) -> None:
    """Chained all-reduces (no barrier) after four levels of compute, in turn: each level's
    mean compute and mean arrival gap are the curve, linear between, flat past the ends;
    it takes the place of the 4 KiB probe's line, and a replay's gaps take its place."""
    fractions = [0.0, 0.25, 0.75, 2.0]
    # two rounds of the four levels: compute 0 / 1000 / 3000 / 8000 us (both rounds alike),
    # gaps 100 and 300 (mean 200) at no compute, then 600, 900, 1000 on average
    work = [0.0, 1000.0, 3000.0, 8000.0] * 2
    gaps = [100.0, 500.0, 800.0, 1000.0, 300.0, 700.0, 1000.0, 1000.0]
    cal = {**prof.calibration, "chain_gap_us": gaps, "chain_work_us": work,
           "chain_work_fractions": fractions}
    chained = dataclasses.replace(prof, run_time="last_arrival", calibration=cal)
    sk = skew(chained)
    assert sk is not None and sk == chain_skew(chained)
    assert sk.points == ((0.0, 200.0), (1000.0, 600.0), (3000.0, 900.0), (8000.0, 1000.0))
    assert sk.gap_at(0.0) == 200.0 and sk.gap_at(2000.0) == pytest.approx(750.0)
    assert sk.gap_at(50_000.0) == 1000.0  # flat past the last level
    assert sk.wait_us(2000.0) == pytest.approx(0.5 * 750.0)
    assert sk.kappa == pytest.approx(800.0 / 8000.0)  # reported: first to last level
    assert sk.samples == 8 and "chained" in sk.note and "600 us apart after 1.0 ms" in sk.note
    # an idle-mode profile's collectives hold no wait of their own
    assert sk.w_busy_us == 0.0 and sk.collective_us(1000.0, 2000.0) == pytest.approx(1375.0)
    # a replay's gaps win over the chain; without the chain, the 4 KiB probe's line
    rep = dataclasses.replace(chained, calibration={**cal, "replay_gap_us": [400.0]})
    assert skew(rep).gap_us == 400.0  # type: ignore[union-attr]
    assert chain_skew(prof) is None and skew(prof).points == ()  # type: ignore[union-attr]
    # lists that do not fit their levels are not read as a curve
    bad = dataclasses.replace(chained, calibration={**cal, "chain_gap_us": gaps[:7],
                                                    "chain_work_us": work[:7]})
    assert chain_skew(bad) is None


def test_a_replays_arrival_gaps_price_every_synchronisation(prof: CommProfile) -> None:
    """A replay of the job (``replay-comm``) timed on the last arrival measured the ranks'
    arrival gap at each of its calls: each synchronisation costs half their mean, whatever
    the compute before it (the gap is mostly the previous collective's exit gap carried
    over, not drift in proportion to the compute)."""
    cal = {**prof.calibration, "replay_gap_us": [100.0, 3300.0, 50.0, 150.0],
           "replay_work_us": [2000.0, 3000.0, 2000.0, 1000.0]}
    rep = dataclasses.replace(prof, run_time="last_arrival", calibration=cal)
    sk = skew(rep)
    assert sk is not None and sk == replay_skew(rep)
    assert sk.gap_us == pytest.approx(900.0) and sk.samples == 4
    assert sk.kappa == pytest.approx(900.0 / 2000.0)  # reported: gap per us of compute
    for w in (0.0, 500.0, 50_000.0):
        assert sk.wait_us(w) == pytest.approx(450.0)
    # a last-arrival time holds no wait of its own: nothing is taken off it
    assert sk.w_busy_us == 0.0 and sk.collective_us(1000.0, 123.0) == pytest.approx(1450.0)
    assert "900 us apart" in sk.note and "replay-comm" in sk.note
    # on another clock the replayed times hold the waits already: the probe's line instead
    other = dataclasses.replace(rep, run_time="slowest")
    assert replay_skew(other) is None and skew(other) == skew(prof)
    # no gaps recorded (a replay made before 2026-11-29): the probe's line
    bare = dataclasses.replace(rep, calibration=prof.calibration)
    line = skew(bare)
    assert replay_skew(bare) is None and line is not None and line.gap_us is None


def test_skew_slope_and_collective_correction(prof: CommProfile) -> None:
    sk = skew(prof)
    assert sk is not None and sk.kappa >= 0 and sk.samples == len(prof.calibration["sync_us"])
    assert sk.w_busy_us == pytest.approx(_med(prof, "contention_busy_us"))
    # a synthetic host: the sync waits 0.25 us per us of work before it
    work = [0.0, 1000.0, 2000.0] * 5
    sync = [100.0 + 0.25 * w for w in work]
    synth = dataclasses.replace(prof, calibration={
        "sync_work_us": work, "sync_us": sync, "contention_busy_us": [4000.0] * 3})
    s2 = skew(synth)
    assert s2 is not None and s2.kappa == pytest.approx(0.25) and s2.w_busy_us == 4000.0
    # measured 1500 us after 4000 us of busy work (slowest rank's clock: the first arriver's
    # whole wait) -> 500 intrinsic, + half the job's expected arrival gap 0.25 x 800: the
    # later of two ranks is |X0 - X1| / 2 over their mean, max(a, b) = (a + b + |a - b|) / 2
    assert s2.wait_us(800.0) == pytest.approx(0.5 * 0.25 * 800.0)
    assert s2.collective_us(1500.0, 800.0) == pytest.approx(600.0)
    assert s2.collective_us(600.0, 0.0) == 0.0  # never below zero
    flat = dataclasses.replace(synth, calibration={**synth.calibration,
                                                   "sync_us": [100.0 - 0.01 * w for w in work]})
    assert skew(flat).kappa == 0.0  # type: ignore[union-attr]
    assert skew(dataclasses.replace(prof, calibration={})) is None
    # a busy profile timed on the last arrival holds no skew of its own: nothing taken off
    last = skew(dataclasses.replace(synth, run_time="last_arrival"))
    assert last is not None and last.w_busy_us == 0.0
    assert last.collective_us(1500.0, 800.0) == pytest.approx(1500.0 + 0.5 * 0.25 * 800.0)


def test_simulate_prices_dtensor_calls_by_their_activation_bytes(mesh_prof: CommProfile,
                                                                 tmp_path: Path) -> None:
    tr = gpt_trace(2)  # traced micro-batch 2
    kw: dict = dict(vocab_parallel=False, optimizer_foreach=False)
    with_cal = save_comm_profile(mesh_prof, tmp_path / "m.json")
    no_cal = save_comm_profile(dataclasses.replace(mesh_prof, calibration={}),
                               tmp_path / "n.json")
    disp = dtensor_dispatch(mesh_prof)
    per = optimizer_per_param(mesh_prof, foreach=False, params=OPTIM_PARAMS)
    assert disp is not None and per is not None
    wl = extract_workload(tr)
    fw_ops = {o.index: o for o in wl.ops if o.phase == "F"}
    owned = params_per_module(wl)
    n_dt = sum(owned.get(o.module, 0) for o in wl.ops
               if o.phase == "F" and o.role in ("column", "row"))
    for mb in (2, 8):
        tp = simulate(tr, SimConfig(tp=2, micro_batch=mb, comm_profile=str(with_cal), **kw))
        bare = simulate(tr, SimConfig(tp=2, micro_batch=mb, comm_profile=str(no_cal), **kw))
        assert tp.calibration["compute_contention"]["value"] == 1.0  # 2 ranks, 2 idle cores
        added = n_dt * per.value
        for o in wl.ops:
            if o.role not in ("column", "row"):
                continue
            f = o if o.phase == "F" else fw_ops[o.fw]
            # the replicated side of the pair, at the target micro-batch
            nbytes = (f.in_bytes if o.role == "column" else f.out_bytes) * mb / 2
            added += disp.fw_us(nbytes) if o.phase == "F" else disp.bw_us(nbytes)
        assert tp.ranks[0].compute_us - bare.ranks[0].compute_us == pytest.approx(added,
                                                                                  rel=1e-6)
        assert any("us/MiB of activation" in m for m in tp.models)


def test_line_fit_is_least_squares_with_non_negative_terms() -> None:
    """Through the medians per x; a falling slope is dropped and the level refitted (the
    mean), a negative intercept likewise (the slope through the origin); three x's are a
    least-squares line, not the line through the ends."""
    assert line_fit([1, 1, 1, 3], [5, 1, 9, 9]) == pytest.approx((3.0, 2.0))  # medians 5, 9
    assert line_fit([8, 512], [600, 450]) == pytest.approx((525.0, 0.0))
    assert line_fit([1, 2], [1, 5]) == pytest.approx((0.0, 11 / 5))  # a = -3 dropped
    assert line_fit([0, 1, 2], [0, 3, 2]) == pytest.approx((2 / 3, 1.0))
