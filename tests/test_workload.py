"""Workload extraction and the per-parallelism task-graph passes, on tiny hand-built traces.

Golden iteration times are worked out by hand in each test from uniform op times and a
stand-in collective model (``LinearComm``: ``alpha + bytes / bandwidth``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import pytest

from echo_sim.trace.model import Cat, RankInfo, Trace, TraceBuilder
from echo_sim.workload import (
    Layout,
    apply_data_parallel,
    assign_buckets,
    block_index,
    build_graph,
    ddp_buffer_hooks,
    extract_workload,
    fsdp_units,
    make_plan,
    max_in_flight,
    split_units,
    stage_actions,
    structural_blocks,
    tp_role,
)

MiB = 1 << 20


class LinearComm:
    """Stand-in collective model: ``alpha_us + nbytes / bytes_per_us`` for groups of 2+."""

    def __init__(self, alpha_us: float = 10.0, bytes_per_us: float = 1e4) -> None:
        self.alpha_us = alpha_us
        self.bytes_per_us = bytes_per_us
        self.calls: list[tuple[str, int, tuple[int, ...]]] = []

    def time_us(self, op: str, nbytes: int, ranks: Sequence[int], *, concurrent: int = 1
                ) -> float:
        self.calls.append((op, int(nbytes), tuple(ranks)))
        if len(set(ranks)) < 2:
            return 0.0
        return self.alpha_us + nbytes / self.bytes_per_us

    def links(self, ranks: Sequence[int]) -> list[str]:
        return []


def gpt_modules(layers: int, hidden: int = 8, seq: int = 4, mb: int = 2, vocab: int = 16,
                param_bytes: dict[str, int] | None = None) -> list[dict]:
    """Leaf modules of examples.models.GPT in forward order, with their byte sizes."""
    act = mb * seq * hidden * 4
    h = hidden
    mods = [dict(m="tok_emb", k="Embedding", p=vocab * h * 4, i=mb * seq * 8, o=act, f=0.0),
            dict(m="pos_emb", k="Embedding", p=seq * h * 4, i=seq * 8, o=seq * h * 4, f=0.0)]
    for b in range(layers):
        pre = f"blocks.{b}."
        rows = mb * seq
        mods += [
            dict(m=pre + "ln1", k="LayerNorm", p=2 * h * 4, i=act, o=act, f=0.0),
            dict(m=pre + "attn.qkv", k="Linear", p=(3 * h * h + 3 * h) * 4, i=act, o=3 * act,
                 f=2.0 * rows * h * 3 * h),
            dict(m=pre + "attn.proj", k="Linear", p=(h * h + h) * 4, i=act, o=act,
                 f=2.0 * rows * h * h),
            dict(m=pre + "ln2", k="LayerNorm", p=2 * h * 4, i=act, o=act, f=0.0),
            dict(m=pre + "mlp.fc1", k="Linear", p=(4 * h * h + 4 * h) * 4, i=act, o=4 * act,
                 f=2.0 * rows * h * 4 * h),
            dict(m=pre + "mlp.act", k="GELU", p=0, i=4 * act, o=4 * act, f=0.0),
            dict(m=pre + "mlp.fc2", k="Linear", p=(4 * h * h + h) * 4, i=4 * act, o=act,
                 f=2.0 * rows * 4 * h * h),
        ]
    mods += [dict(m="ln_f", k="LayerNorm", p=2 * h * 4, i=act, o=act, f=0.0),
             dict(m="head", k="Linear", p=vocab * h * 4, i=act, o=mb * seq * vocab * 4,
                  f=2.0 * mb * seq * h * vocab)]
    for d in mods:
        if param_bytes and d["m"] in param_bytes:
            d["p"] = param_bytes[d["m"]]
    return mods


def make_trace(mods: list[dict], *, fw_us: float | Sequence[float] = 10.0,
               bw_us: float | Sequence[float] = 20.0, update_us: float = 5.0,
               steps: Sequence[int] = (0, 1), gap_us: float = 0.0, pre_us: float = 0.0,
               post_us: float = 0.0, mb: int = 2, model: dict | None = None,
               device: str = "cpu", device_name: str = "", step_scale: Sequence[float] = (),
               comm: Sequence[tuple[int, float, float]] = (),
               comm_args: dict | None = None) -> Trace:
    """One-rank trace: per step FW ops, BW ops (reverse), UPDATE.AdamW, STEP marker.

    ``gap_us`` idle after every op but the last; ``step_scale[k]`` multiplies step k's times;
    ``comm``: (step, ts offset from step start, dur) Comm slices on tid 100, with the event
    args ``comm_args`` (e.g. ``{"async": True}``).
    """
    fw = [fw_us] * len(mods) if isinstance(fw_us, (int, float)) else list(fw_us)
    bw = [bw_us] * len(mods) if isinstance(bw_us, (int, float)) else list(bw_us)
    b = TraceBuilder(source="hand-built")
    t = 0.0
    for k, step in enumerate(steps):
        sc = step_scale[k] if k < len(step_scale) else 1.0
        start = t
        t += pre_us * sc
        seq = [("F", d, fw[i]) for i, d in enumerate(mods)]
        seq += [("B", d, bw[i]) for i, d in reversed(list(enumerate(mods)))]
        for ph, d, dur in seq:
            if ph == "F":
                b.add(rank=0, name="FW." + d["m"], cat=Cat.FW, ts_us=t, dur_us=dur * sc,
                      step=step, kind=d["k"], param_bytes=d["p"], in_bytes=d["i"],
                      out_bytes=d["o"], flops=d["f"])
            else:
                b.add(rank=0, name="BW." + d["m"], cat=Cat.BW, ts_us=t, dur_us=dur * sc,
                      step=step, kind=d["k"], param_bytes=d["p"])
            t += dur * sc + gap_us * sc
        b.add(rank=0, name="UPDATE.AdamW", cat=Cat.UPDATE, ts_us=t, dur_us=update_us * sc,
              step=step, param_bytes=sum(d["p"] for d in mods))
        t += update_us * sc + post_us * sc
        b.add(rank=0, name="STEP", cat=Cat.STEP, ts_us=start, dur_us=t - start, step=step,
              tid=1)
        for (cs, off, dur) in comm:
            if cs == step:
                b.add(rank=0, name="Comm.x", cat=Cat.COMM, ts_us=start + off, dur_us=dur,
                      step=step, tid=100, collective="all_reduce", nbytes=4,
                      group_ranks=[0, 1], seq=0, comm_args=comm_args)
    meta = {"micro_batch_size": mb, "device": device, "device_name": device_name,
            "params": [{"name": d["m"] + ".weight", "bytes": d["p"], "dtype": "float32",
                        "shape": [d["p"] // 4]} for d in mods if d["p"]]}
    if model:
        meta["model"] = model
    b.ranks[0] = RankInfo(rank=0, world_size=1, device=device, meta=meta)
    return b.build()


def gpt_trace(layers: int = 2, **kw) -> Trace:
    geo = {k: kw.pop(k) for k in ("hidden", "seq", "vocab", "param_bytes") if k in kw}
    mb = kw.get("mb", 2)
    model = kw.pop("model", {"layers": layers, "hidden": geo.get("hidden", 8), "heads": 2,
                             "seq": geo.get("seq", 4), "vocab": geo.get("vocab", 16)})
    return make_trace(gpt_modules(layers, mb=mb, **geo), model=model, **kw)


def chain_trace(n: int = 4, **kw) -> Trace:
    """A model with no blocks: ``n`` top-level Linear children ``l0..l{n-1}``."""
    mods = [dict(m=f"l{i}", k="Linear", p=1024, i=64, o=64, f=0.0) for i in range(n)]
    return make_trace(mods, **kw)


def run_plan(trace: Trace, layout: Layout, comm=None, **kw):
    from echo_sim.sim.engine import run

    wl = extract_workload(trace)
    import numpy as np

    base = np.array([o.time_us for o in wl.ops])
    plan = make_plan(wl, layout, base, **kw)
    built = build_graph(plan, layout, comm or LinearComm())
    return wl, plan, built, run(built.graph)


# --------------------------------------------------------------------------- extraction
def test_extract_gpt_ops_roles_blocks_and_flops():
    wl = extract_workload(gpt_trace(2))
    fw, bw = wl.fw_ops, wl.bw_ops
    assert len(fw) == len(bw) == 2 + 7 * 2 + 2
    assert [o.module for o in fw[:3]] == ["tok_emb", "pos_emb", "blocks.0.ln1"]
    assert bw[0].module == "head" and bw[-1].module == "tok_emb"
    roles = {o.module: o.role for o in fw}
    assert roles["blocks.1.attn.qkv"] == "column" and roles["blocks.1.mlp.fc1"] == "column"
    assert roles["blocks.1.attn.proj"] == "row" and roles["blocks.1.mlp.fc2"] == "row"
    assert roles["blocks.1.mlp.act"] == "inner"
    assert roles["blocks.0.ln2"] == "replicated" and roles["pos_emb"] == "replicated"
    assert roles["tok_emb"] == "vocab" and roles["head"] == "vocab"
    assert {o.module: o.role for o in bw} == roles
    assert [o.block for o in fw].count(1) == 7 and fw[0].block == -1
    qkv_f = next(o for o in fw if o.module == "blocks.0.attn.qkv")
    qkv_b = next(o for o in bw if o.module == "blocks.0.attn.qkv")
    assert qkv_b.flops == 2 * qkv_f.flops == 2 * 2.0 * 8 * 8 * 24
    assert qkv_b.fw == qkv_f.index and qkv_b.in_bytes == qkv_f.in_bytes == 2 * 4 * 8 * 4
    assert qkv_f.unit == "blocks.0" and fw[0].unit == "tok_emb"
    assert wl.num_blocks == 2 and wl.micro_batch == 2 and wl.model["seq"] == 4


def test_extract_gaps_pre_post_and_comm_covered_gap():
    mods = [dict(m=f"l{i}", k="Linear", p=4, i=4, o=4, f=0.0) for i in range(2)]
    # per step: pre 7, F l0 10, gap 3, F l1 10, gap 3, B l1 20, gap 3, B l0 20, gap 3,
    # UPDATE 5, post 2; a Comm slice covers 2 us of the gap after F.l1 (ts 7+10+3+10=30)
    tr = make_trace(mods, gap_us=3.0, pre_us=7.0, post_us=2.0, steps=[0],
                    comm=[(0, 30.0, 2.0)])
    wl = extract_workload(tr)
    g = {o.name: o.gap_us for o in wl.ops}
    assert g == {"FW.l0": 3.0, "FW.l1": 1.0, "BW.l1": 3.0, "BW.l0": 3.0,
                 "UPDATE.AdamW": 0.0}
    assert wl.pre_us == pytest.approx(7.0) and wl.post_us == pytest.approx(2.0)
    # the 2 us covered by communication are left out of the simulated step
    total = sum(o.time_us for o in wl.ops) + wl.pre_us + wl.post_us
    assert total == pytest.approx(84.0) and wl.step_time_us == pytest.approx(86.0)


def test_asynchronous_comm_blocks_the_host_only_from_its_wait():
    """A pipeline stage's isend runs on under the host's next ops (issue 20: PP reproduced
    itself 3-8 % low while its gaps under the send were dropped): only the part after the
    last op before its end is a wait."""
    mods = [dict(m=f"l{i}", k="Linear", p=4, i=4, o=4, f=0.0) for i in range(3)]
    # per step: F l0 [0,10], gap 3, F l1 [13,23], gap 3, F l2 [26,36], gap 3, B l2 [39,59],
    # ...; a send issued at 11 ends at 38, in the gap before B.l2: the host waited 36..38
    kw = dict(gap_us=3.0, steps=[0], comm=[(0, 11.0, 27.0)])
    got = {o.name: o.gap_us for o in extract_workload(
        make_trace(mods, comm_args={"async": True, "path": "c10d"}, **kw)).ops}
    assert got["FW.l0"] == pytest.approx(3.0) and got["FW.l1"] == pytest.approx(3.0)
    assert got["FW.l2"] == pytest.approx(1.0)
    # the same slice, synchronous (the host blocked in it from its start): every gap under it
    sync = {o.name: o.gap_us for o in extract_workload(
        make_trace(mods, comm_args={"async": False}, **kw)).ops}
    assert (sync["FW.l0"], sync["FW.l1"], sync["FW.l2"]) == pytest.approx((1.0, 0.0, 1.0))
    # an asynchronous slice that ends inside an op never held the host between ops
    inside = {o.name: o.gap_us for o in extract_workload(make_trace(
        mods, comm_args={"async": True}, gap_us=3.0, steps=[0], comm=[(0, 11.0, 20.0)])).ops}
    assert (inside["FW.l0"], inside["FW.l1"]) == pytest.approx((3.0, 3.0))


def test_extract_medians_over_steps_rescaled_to_median_step():
    tr = gpt_trace(1, steps=[0, 1, 2], step_scale=[1.0, 3.0, 1.2])
    wl = extract_workload(tr)
    assert wl.steps_used == 3
    assert wl.step_time_us == pytest.approx(1.2 * (11 * 10 + 11 * 20 + 5))
    assert sum(o.time_us for o in wl.ops) == pytest.approx(wl.step_time_us)
    assert wl.ops[0].dur_us == pytest.approx(12.0)


def test_block_index_and_tp_role_names():
    assert block_index("blocks.12.attn.qkv") == 12
    assert block_index("model.layers.3.mlp.down_proj") == 3
    assert block_index("transformer.h.0.attn.c_attn") == 0
    assert block_index("features.0") == -1 and block_index("head") == -1
    assert tp_role("model.layers.3.mlp.down_proj", "Linear") == "row"
    assert tp_role("model.layers.3.self_attn.q_proj", "Linear") == "column"
    assert tp_role("lm_head", "Linear") == "vocab"
    assert tp_role("conv1", "Conv2d") == "replicated"


def test_structural_blocks_where_names_do_not_say():
    mods = ["stem.0", "stem.1", "stages.0.0.conv1", "stages.0.0.bn1", "stages.0.1.conv1",
            "stages.1.0.conv1", "stages.1.0.shortcut.0", "stages.1.0.shortcut.1", "head"]
    got = structural_blocks(mods)
    assert got == {"stages.0.0.conv1": "stages.0.0", "stages.0.0.bn1": "stages.0.0",
                   "stages.0.1.conv1": "stages.0.1", "stages.1.0.conv1": "stages.1.0",
                   "stages.1.0.shortcut.0": "stages.1.0",
                   "stages.1.0.shortcut.1": "stages.1.0"}
    # a candidate inside another one belongs to the outer block
    assert structural_blocks(["f.0.a", "f.0.b.1.c", "f.1.a"]) == \
        {"f.0.a": "f.0", "f.0.b.1.c": "f.0", "f.1.a": "f.1"}
    # a plain Sequential of layers, or one block only: no repeated blocks
    assert structural_blocks(["net.0", "net.1", "net.2"]) == {}
    assert structural_blocks(["body.0.conv", "body.0.bn", "head"]) == {}


def test_resnet_like_trace_gets_one_fsdp_unit_per_residual_block():
    names = ["stem.0", "stages.0.0.conv1", "stages.0.0.conv2", "stages.0.1.conv1",
             "stages.0.1.conv2", "stages.1.0.conv1", "stages.1.0.shortcut.0", "head"]
    mods = [{"m": m, "k": "Conv2d", "p": 64, "i": 32, "o": 32, "f": 100.0} for m in names]
    wl = extract_workload(make_trace(mods))
    assert wl.has_blocks and wl.num_blocks == 3
    fw = wl.fw_ops
    assert [o.unit for o in fw] == ["stem", "stages.0.0", "stages.0.0", "stages.0.1",
                                    "stages.0.1", "stages.1.0", "stages.1.0", "head"]
    assert [o.block for o in fw] == [-1, 0, 0, 1, 1, 2, 2, -1]
    # FSDP: the root (stem, head) plus one unit per block, as fully_shard(block) wraps it
    assert list(fsdp_units(fw, wl.has_blocks)) == ["<root>", "stages.0.0", "stages.0.1",
                                                   "stages.1.0"]


# --------------------------------------------------------------------------- pipeline
def test_split_units_balanced_and_even():
    units = list("abcdefg")
    t = [1, 5, 5, 5, 5, 5, 9]
    blk = [False, True, True, True, True, True, False]
    # embeddings (a) pinned to the first stage, head (g) to the last: loads 11 | 10 | 14
    assert split_units(units, t, blk, 3) == [0, 0, 0, 1, 1, 2, 2]
    assert split_units(units, t, blk, 3, how="even") == [0, 0, 0, 1, 1, 2, 2]
    assert split_units(units, [1, 1, 1, 1, 1, 1, 1], blk, 5, how="even") == \
        [0, 0, 1, 2, 3, 4, 4]
    assert split_units(list("abcd"), [1, 1, 1, 9], [False] * 4, 2) == [0, 0, 0, 1]


def test_stage_actions_orders():
    assert stage_actions("gpipe", 2, 2, 0) == [("F", 0, 0), ("F", 0, 1), ("B", 0, 0),
                                               ("B", 0, 1)]
    assert stage_actions("1f1b", 3, 4, 0) == [
        ("F", 0, 0), ("F", 0, 1), ("F", 0, 2), ("B", 0, 0), ("F", 0, 3), ("B", 0, 1),
        ("B", 0, 2), ("B", 0, 3)]
    assert stage_actions("1f1b", 3, 4, 2) == [
        ("F", 0, 0), ("B", 0, 0), ("F", 0, 1), ("B", 0, 1), ("F", 0, 2), ("B", 0, 2),
        ("F", 0, 3), ("B", 0, 3)]
    for s in range(4):  # 1F1B: stage s holds pp - s micro-batches
        assert max_in_flight(stage_actions("1f1b", 4, 8, s)) == 4 - s
    assert max_in_flight(stage_actions("gpipe", 4, 8, 1)) == 8
    acts = stage_actions("interleaved", 2, 4, 0, 2)
    assert len(acts) == 16 and acts[:4] == [("F", 0, 0), ("F", 0, 1), ("F", 1, 0),
                                            ("F", 1, 1)]
    assert sorted(a for a in acts if a[0] == "B") == sorted(
        ("B", c, m) for c in range(2) for m in range(4))


@pytest.mark.parametrize("schedule", ["gpipe", "1f1b"])
def test_pipeline_bubble_fraction_equal_stages(schedule):
    # 4 equal units, 2 stages: per stage and micro-batch F = 20, B = 40 us; free transfers
    p, m = 2, 4
    tr = chain_trace(4, update_us=0.0)
    lay = Layout(pp=p, micro_batches=m, schedule=schedule)
    _, _, built, sched = run_plan(tr, lay, LinearComm(0.0, 1e30))
    T = sched.makespan_us
    assert T == pytest.approx((m + p - 1) * 60.0)
    from echo_sim.sim.simulate import _breakdown

    comp, exposed, bubble, idle = _breakdown(built, sched, 0, T)
    assert comp == pytest.approx(m * 60.0)
    assert bubble / T == pytest.approx((p - 1) / (m + p - 1))
    assert exposed == 0.0 and idle == pytest.approx(0.0)


def test_interleaved_bubble_is_smaller():
    p, m, v = 2, 4, 2
    tr = chain_trace(4, update_us=0.0)
    lay = Layout(pp=p, micro_batches=m, schedule="interleaved", virtual=v)
    _, plan, _, sched = run_plan(tr, lay, LinearComm(0.0, 1e30))
    assert [len(sp.fw) for sp in plan.stages] == [1, 1, 1, 1]
    T = sched.makespan_us
    # each chunk: f = 10, b = 20; bubble (p - 1)(f + b) = 30 against 60 without interleaving
    assert T == pytest.approx(m * v * 30.0 + (p - 1) * 30.0)
    assert (T - m * 60.0) / T < (p - 1) / (m + p - 1)


def test_pipeline_p2p_transfers_are_priced_on_the_boundary_activation():
    tr = chain_trace(4, update_us=0.0)
    comm = LinearComm(5.0, 1e30)
    _, plan, built, sched = run_plan(tr, Layout(pp=2, micro_batches=1), comm)
    sends = [c for c in comm.calls if c[0] == "send"]
    assert sends == [("send", 64, (0, 1)), ("send", 64, (1, 0))]
    # F0(20) -> send(5) -> F1(20) B1(40) -> send(5) -> B0(40)
    assert sched.makespan_us == pytest.approx(20 + 5 + 20 + 40 + 5 + 40)


# --------------------------------------------------------------------------- data parallel
def test_assign_buckets_first_bucket_and_cap():
    sizes = [MiB // 2, MiB // 2, MiB, 20 * MiB, 10 * MiB, MiB]
    assert assign_buckets(sizes) == [[0, 1], [2, 3, 4], [5]]
    assert assign_buckets([3, 3, 3], cap_bytes=5, first_bytes=5) == [[0, 1], [2]]


def test_ddp_hooks_reverse_order_and_ready_points():
    wl = extract_workload(gpt_trace(1, param_bytes={"head": 2 * MiB}))
    bw = wl.bw_ops
    params = [(n, float(b)) for n, b, _ in wl.params]
    hooks = apply_data_parallel(bw, params)
    assert [h.name for h in hooks] == ["ddp.bucket0", "ddp.bucket1"]
    assert hooks[0].nbytes == 2 * MiB and hooks[0].issue == bw[0].index  # BW.head
    assert hooks[1].issue == bw[-1].index  # ready when BW.tok_emb ends
    assert hooks[1].nbytes == sum(b for n, b, _ in wl.params if n != "head.weight")
    assert all(h.when == "last" and h.wait == -1 and h.chain for h in hooks)


def test_ddp_allreduce_overlaps_backward_golden():
    tr = gpt_trace(1, param_bytes={"head": 2 * MiB})
    wl, plan, built, sched = run_plan(tr, Layout(dp=2))
    rest = sum(b for n, b, _ in wl.params if n != "head.weight")
    ar0 = 10 + 2 * MiB / 1e4
    # BW.head ends at 110 + 20: bucket 0 runs 130 .. 130 + ar0, overlapping backward (ends
    # at 330); bucket 1 waits for bucket 0, then the optimizer (5 us) waits for it
    t1 = max(330.0, 130 + ar0) + 10 + rest / 1e4
    assert sched.makespan_us == pytest.approx(t1 + 5.0)
    from echo_sim.sim.simulate import _breakdown

    comp, exposed, bubble, idle = _breakdown(built, sched, 0, sched.makespan_us)
    assert comp == pytest.approx(335.0) and exposed == pytest.approx(t1 - 330.0)


def test_parameter_server_push_then_pull():
    tr = gpt_trace(1, param_bytes={"head": 2 * MiB})
    wl, plan, built, sched = run_plan(tr, Layout(dp=2), dp_mode="ps")
    names = [h.name for h in plan.stages[0].hooks]
    assert names == ["ps.push0", "ps.pull0", "ps.push1", "ps.pull1"]
    rest = sum(b for n, b, _ in wl.params if n != "head.weight")
    c0, c1 = 10 + 2 * MiB / 1e4, 10 + rest / 1e4
    push1_end = max(330.0, 130 + c0) + c1
    pull1_end = max(push1_end, 130 + 2 * c0) + c1
    assert sched.makespan_us == pytest.approx(pull1_end + 5.0)


def test_gradient_accumulation_reduces_once():
    tr = gpt_trace(1, param_bytes={"head": 2 * MiB})
    comm = LinearComm()
    _, _, _, sched = run_plan(tr, Layout(dp=2, micro_batches=3), comm)
    assert len([c for c in comm.calls if c[0] == "all_reduce"]) == 2
    rest = sum(d["p"] for d in gpt_modules(1, param_bytes={"head": 2 * MiB})) - 2 * MiB
    # two micro-batches of 330, then the last one with the DDP tail as before
    t1 = max(2 * 330 + 330.0, 2 * 330 + 130 + 10 + 2 * MiB / 1e4) + 10 + rest / 1e4
    assert sched.makespan_us == pytest.approx(t1 + 5.0)


# --------------------------------------------------------------------------- FSDP
def _unit_bytes(layers: int = 1) -> tuple[int, int]:
    mods = gpt_modules(layers)
    block = sum(d["p"] for d in mods if d["m"].startswith("blocks."))
    return block, sum(d["p"] for d in mods) - block


def test_fsdp_blocking_collectives_golden():
    block, root = _unit_bytes()
    comm = LinearComm()
    _, plan, _, sched = run_plan(gpt_trace(1), Layout(dp=2), comm, fsdp=True,
                                 fsdp_overlap=False)
    names = [h.name for h in plan.stages[0].hooks]
    assert names == ["fsdp.ag.fw.<root>", "fsdp.ag.fw.blocks.0", "fsdp.ag.bw.blocks.0",
                     "fsdp.rs.blocks.0", "fsdp.rs.<root>"]
    ag_b, ag_r = 10 + block / 1e4, 10 + root / 1e4
    # everything blocks: compute 330 + AG root + 2 AG block + RS block + RS root + update/2
    assert sched.makespan_us == pytest.approx(330 + ag_r + 2 * ag_b + ag_b + ag_r + 2.5)
    assert sorted(c[0] for c in comm.calls) == ["all_gather"] * 3 + ["reduce_scatter"] * 2


def test_fsdp_prefetch_overlap_is_faster_but_not_free():
    block, root = _unit_bytes(2)
    blocking = run_plan(gpt_trace(2), Layout(dp=2), fsdp=True, fsdp_overlap=False)[3]
    overlap = run_plan(gpt_trace(2), Layout(dp=2), fsdp=True, fsdp_overlap=True)[3]
    compute = (2 + 14 + 2) * 30 + 2.5
    assert compute < overlap.makespan_us < blocking.makespan_us
    # the root all-gather cannot overlap anything: it precedes the first op
    assert overlap.makespan_us >= compute + 10 + root / 1e4


# --------------------------------------------------------------------------- TP
def test_tensor_parallel_allreduce_count_sizes_and_time():
    act = 2 * 4 * 8 * 4  # micro-batch 2, seq 4, hidden 8, fp32
    comm = LinearComm()
    tr = gpt_trace(2, update_us=0.0)
    wl, plan, built, sched = run_plan(tr, Layout(tp=2), comm)
    hooks = plan.stages[0].hooks
    fw = [h for h in hooks if h.phase == "F"]
    bw = [h for h in hooks if h.phase == "B"]
    assert [h.name for h in fw] == ["tp.fw.tok_emb", "tp.fw.blocks.0.attn.proj",
                                    "tp.fw.blocks.0.mlp.fc2", "tp.fw.blocks.1.attn.proj",
                                    "tp.fw.blocks.1.mlp.fc2"]
    assert [h.name for h in bw] == ["tp.bw.head", "tp.bw.blocks.1.mlp.fc1",
                                    "tp.bw.blocks.1.attn.qkv", "tp.bw.blocks.0.mlp.fc1",
                                    "tp.bw.blocks.0.attn.qkv"]
    assert all(h.nbytes == act and h.collective == "all_reduce" and h.wait == -2
               for h in hooks)
    assert comm.calls == [("all_reduce", act, (0, 1))] * 10
    # sharded ops (qkv, proj, fc1, act, fc2, tok_emb, head) at half time; all-reduces block
    fw_t = 2 * (5 * 5 + 2 * 10) + 5 + 10 + 10 + 5
    bw_t = 2 * (5 * 10 + 2 * 20) + 10 + 20 + 20 + 10
    assert sched.makespan_us == pytest.approx(fw_t + bw_t + 10 * (10 + act / 1e4))


def test_symmetric_equals_full():
    from echo_sim.cost.collectives import CommModel
    from echo_sim.cost.hardware import get_cluster

    comm = CommModel(get_cluster("dgx-h100", nodes=1, gpus_per_node=8))
    tr = gpt_trace(4, param_bytes={"head": 2 * MiB})
    for kw in ({}, {"fsdp": True}, {"fsdp": True, "fsdp_overlap": False}, {"dp_mode": "ps"}):
        for sched_name in ("1f1b", "gpipe"):
            res = {}
            for full in (False, True):
                lay = Layout(dp=2, tp=2, pp=2, micro_batches=4, schedule=sched_name, full=full)
                _, _, built, sched = run_plan(tr, lay, comm, **kw)
                res[full] = (sched.makespan_us, built)
            assert res[True][0] == pytest.approx(res[False][0], rel=1e-12)
            assert len(res[True][1].ranks) == 8 and len(res[False][1].ranks) == 2


# ------------------------------------------------------------------- H12: accuracy fixes
def test_unix_epoch_timestamps_overlapping_by_rounding_stay_leaves():
    """At Unix-epoch µs (1.8e15) float64 spacing is 0.25 µs: consecutive siblings overlap
    by that much. They are leaves; only an event containing the next one is a parent."""
    t0 = 1.795357e15
    b = TraceBuilder(source="epoch")
    for step in (0, 1):
        s = t0 + step * 1000.0
        b.add(rank=0, name="FW.blocks.0", cat=Cat.FW, ts_us=s, dur_us=100.0, step=step,
              kind="Block")
        for k, m in enumerate(("blocks.0.ln1", "blocks.0.attn.qkv", "blocks.0.attn.proj")):
            # each child starts 0.25 µs before the previous one ends
            b.add(rank=0, name="FW." + m, cat=Cat.FW, ts_us=s + k * 30.0 - (0.25 if k else 0),
                  dur_us=30.0, step=step, kind="Linear" if "attn" in m else "LayerNorm")
        b.add(rank=0, name="BW.blocks.0.attn.qkv", cat=Cat.BW, ts_us=s + 200.0, dur_us=50.0,
              step=step, kind="Linear")
        b.add(rank=0, name="UPDATE.AdamW", cat=Cat.UPDATE, ts_us=s + 300.0, dur_us=10.0,
              step=step)
        b.add(rank=0, name="STEP", cat=Cat.STEP, ts_us=s, dur_us=400.0, step=step, tid=1)
    b.ranks[0] = RankInfo(rank=0, world_size=1, device="cpu", meta={"micro_batch_size": 1})
    wl = extract_workload(b.build())
    assert [o.name for o in wl.ops] == ["FW.blocks.0.ln1", "FW.blocks.0.attn.qkv",
                                        "FW.blocks.0.attn.proj", "BW.blocks.0.attn.qkv",
                                        "UPDATE.AdamW"]
    assert wl.steps_used == 2


def test_ddp_buffer_broadcast_before_forward():
    mods = [dict(m="conv", k="Conv2d", p=4096, i=64, o=64, f=0.0),
            dict(m="bn", k="BatchNorm2d", p=2 * 16 * 4, i=64, o=64, f=0.0),
            dict(m="fc", k="Linear", p=1024, i=64, o=64, f=0.0)]
    wl = extract_workload(make_trace(mods))
    (h,) = ddp_buffer_hooks(wl.fw_ops)
    # running_mean + running_var (= weight + bias bytes) + int64 num_batches_tracked
    assert (h.collective, h.nbytes, h.phase, h.issue, h.wait) == (
        "broadcast", 128 + 8, "F", -1, wl.fw_ops[0].index)
    assert ddp_buffer_hooks(extract_workload(gpt_trace(1)).fw_ops) == []
    # dp=2: the broadcast (alpha 10 + 136 B / 1e4 B/us) delays the forward's start
    _, _, _, s1 = run_plan(make_trace(mods), Layout(dp=1))
    _, _, _, s2 = run_plan(make_trace(mods), Layout(dp=2))
    ar = 10.0 + (4096 + 128 + 1024) / 1e4  # the one gradient bucket, after the update waits
    assert s2.makespan_us == pytest.approx(s1.makespan_us + 10.0 + 136 / 1e4 + ar, rel=1e-6)


def test_ddp_broadcasts_the_buffers_meta_json_lists():
    """A trace whose meta.json lists the model's buffers (a transformer's position ids: no
    BatchNorm) broadcasts their bytes before the forward; an empty list broadcasts nothing,
    even with a BatchNorm op (the list is what the model holds); under a pipeline each stage
    broadcasts its own modules' buffers, a root-level one going to the first stage."""
    wl = extract_workload(gpt_trace(2))
    assert wl.buffers is None  # a trace made before meta.json listed them
    fw = wl.fw_ops
    (h,) = ddp_buffer_hooks(fw, [4096, 8])
    assert (h.collective, h.nbytes, h.wait) == ("broadcast", 4104, fw[0].index)
    assert ddp_buffer_hooks(fw, []) == []
    with_pos = dataclasses.replace(wl, buffers=(("blocks.0.attn.pos", 4096),
                                                (f"{fw[-1].module}.mask", 64), ("step", 8)))
    def build_plan(w, layout):  # noqa: ANN001, ANN202
        import numpy as np

        return make_plan(w, layout, np.array([o.time_us for o in w.ops]))

    one = build_plan(with_pos, Layout(dp=2))
    assert [h.nbytes for st in one.stages for h in st.hooks if h.name == "ddp.buffers"] == [
        4096 + 64 + 8]
    two = build_plan(with_pos, Layout(dp=2, pp=2))
    per_stage = [[h.nbytes for h in st.hooks if h.name == "ddp.buffers"] for st in two.stages]
    assert per_stage == [[4096 + 8], [64]]
