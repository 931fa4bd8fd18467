"""GPU attribution offline, on real H100 recordings (no GPU needed).

The fixtures in tests/data/gpu/ are one step (STEP4) of the shared torch.profiler traces
(made by tests/data/gpu/make_fixture.py); the full recordings are tested too when
``../shared/reference/gpu-h100`` sits beside the clone (or ``$ECHO_SHARED_DIR`` names
the shared folder).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from echo_trace.gpu.attribute import Activity, CpuOp, Launch, Mark, attribute
from echo_trace.gpu.kineto_json import load_kineto

DATA = Path(__file__).resolve().parent / "data" / "gpu"
SHARED = Path(os.environ.get("ECHO_SHARED_DIR", Path(__file__).resolve().parents[2] / "shared")
              ) / "reference" / "gpu-h100"
FIXTURES = {"single": DATA / "kineto_gpt12_single_step4.json.gz",
            "ddp": DATA / "kineto_gpt12_ddp_nccl_1rank_step4.json.gz"}
FULL = {"single": SHARED / "kineto" / "kineto_gpt12_single.json.gz",
        "ddp": SHARED / "kineto" / "kineto_gpt12_ddp_nccl_1rank.json.gz"}


def _run(path: Path):  # type: ignore[no-untyped-def]
    k = load_kineto(path)
    return k, attribute(k.marks, k.ops, k.launches, k.activities, root="GPT")


def _check_recording(path: Path, steps: int) -> None:
    k, a = _run(path)
    launch = {la.correlation: la.ts_us for la in k.launches}
    marks = [m for m in k.marks if m.cat == "STEP"]
    inside = sum(x.dur_us for x in k.activities if x.correlation in launch and any(
        m.ts_us <= launch[x.correlation] <= m.end_us for m in marks))
    # every activity launched inside the window is given to an event
    assert a.window_us == pytest.approx(inside)
    assert a.attributed_fraction >= 0.98
    # ... and >= 98 % to a module / optimizer / comm range, not the remainder
    assert a.attributed_us / a.window_us >= 0.98
    assert sum(e.busy_us for e in a.events) == pytest.approx(a.window_us)
    names = {e.name for e in a.events}
    # attention runs in the non-leaf attn module (SDPA between qkv and proj)
    assert {"FW.blocks.3.attn", "BW.blocks.3.attn"} <= names
    for leaf in ("tok_emb", "blocks.0.attn.qkv", "blocks.11.mlp.fc2", "head"):
        assert f"FW.{leaf}" in names and f"BW.{leaf}" in names
    assert "UPDATE.AdamW" in names
    # events on one stream never overlap: the gaps between them are GPU idle
    comp = sorted((e for e in a.events if e.cat != "Comm"), key=lambda e: (e.stream, e.ts_us))
    for x, y in zip(comp, comp[1:], strict=False):
        if x.stream == y.stream:
            assert y.ts_us >= x.end_us - 1e-3
    assert len({e.step for e in a.events}) == steps
    # backward of a module follows its forward, per step
    for st in {e.step for e in a.events}:
        fw = min(e.ts_us for e in a.events if e.name == "FW.head" and e.step == st)
        bw = min(e.ts_us for e in a.events if e.name == "BW.head" and e.step == st)
        assert bw > fw


def _check_comm_after_backward(path: Path) -> None:
    _, a = _run(path)
    comm = [e for e in a.events if e.cat == "Comm"]
    assert comm and all(e.args.get("collective") == "allreduce" for e in comm)
    assert all(e.args["bytes"] > 0 and e.args["group_ranks"] == [0] for e in comm)
    for st in {e.step for e in comm}:
        first_bw = min(e.ts_us for e in a.events if e.cat == "BW" and e.step == st)
        head_bw = min(e.ts_us for e in a.events if e.name == "BW.head" and e.step == st)
        mine = sorted((e for e in comm if e.step == st), key=lambda e: e.ts_us)
        assert len(mine) == 14  # DDP's 14 buckets
        # the first bucket holds head.weight: never before the backward producing it
        assert mine[0].ts_us >= head_bw >= first_bw
        assert all(e.ts_us >= first_bw for e in mine)


def test_fixture_single_attributed() -> None:
    _check_recording(FIXTURES["single"], steps=1)


def test_fixture_ddp_attributed_and_comm_after_backward() -> None:
    _check_recording(FIXTURES["ddp"], steps=1)
    _check_comm_after_backward(FIXTURES["ddp"])


def test_fixture_golden_values() -> None:
    """FW.blocks.3.attn (the parent: SDPA, reshapes) and FW.head, summed straight from the
    marks: kernels launched inside the range and outside its children's ranges."""
    k, a = _run(FIXTURES["single"])
    launch = {la.correlation: la for la in k.launches}

    def own_us(path: str) -> float:
        m = next(x for x in k.marks if x.name == "FW." + path)
        kids = [x for x in k.marks if x.name.startswith(f"FW.{path}.")]
        total = 0.0
        for x in k.activities:
            la = launch.get(x.correlation)
            if la is None or la.tid != m.tid or not m.ts_us <= la.ts_us <= m.end_us:
                continue
            if not any(c.ts_us <= la.ts_us <= c.end_us for c in kids):
                total += x.dur_us
        return total

    for path in ("blocks.3.attn", "head", "blocks.0.mlp.fc1"):
        got = sum(e.busy_us for e in a.events if e.name == "FW." + path)
        assert got == pytest.approx(own_us(path)) and got > 0
    # regression figures of this rule on STEP4 (H100, fp32 GPT 12x768, micro-batch 8)
    assert a.window_us == pytest.approx(76032.682, abs=0.01)
    assert a.attributed_us / a.window_us == pytest.approx(0.99597, abs=1e-5)
    assert a.by_rule["backward"] == pytest.approx(47162.033, abs=0.01)


@pytest.mark.skipif(not SHARED.is_dir(), reason="../shared/reference/gpu-h100 not present")
@pytest.mark.parametrize("which", ["single", "ddp"])
def test_full_recordings(which: str) -> None:
    _check_recording(FULL[which], steps=4)
    if which == "ddp":
        _check_comm_after_backward(FULL[which])


def test_rules_on_a_small_hand_made_case() -> None:
    """Forward in a parent between children, backward via sequence numbers, AccumulateGrad
    after a node, a loss outside every module, the optimizer, a kernel-less collective."""
    marks = [Mark("STEP", "STEP", 0, 100, 1, {"step": 7}),
             Mark("FW.net", "FW", 1, 30, 1), Mark("FW.net.a", "FW", 2, 5, 1),
             Mark("FW.net.b", "FW", 20, 25, 1),
             Mark("Comm.bucket0", "Comm", 60, 61, 2, {"bucket": 0}),
             Mark("UPDATE.SGD", "UPDATE", 80, 90, 1)]
    ops = [CpuOp(3, 4, 1, 10, 0), CpuOp(10, 11, 1, 11, 0), CpuOp(35, 36, 1, 12, 0),
           CpuOp(40, 45, 2, 12, 1), CpuOp(46, 50, 2, 10, 1), CpuOp(51, 55, 2, -1, -1),
           CpuOp(56, 58, 2, 11, 1)]
    launch_ts = {1: (3.5, 1), 2: (10.5, 1), 3: (35.5, 1), 4: (41, 2), 5: (47, 2),
                 6: (52, 2), 7: (57, 2), 8: (85, 1), 9: (95, 1), 10: (200, 1)}
    launches = [Launch(c, t, tid) for c, (t, tid) in launch_ts.items()]
    acts = [Activity(f"k{c}", "kernel", 7, 100 + 10 * c, 5, c) for c in launch_ts]
    a = attribute(marks, ops, launches, acts, root="Net")
    got = {(e.name, e.ts_us) for e in a.events}
    assert ("FW.net.a", 110) in got  # launched in the leaf
    assert ("FW.net", 120) in got  # launched in the parent, between its children
    assert ("FW.Net", 130) in got  # the loss: outside every module, before backward
    assert ("BW.Net", 140) in got  # its backward node was made outside every module
    assert ("BW.net.a", 150) in got  # seq 10 was made in FW.net.a
    assert ("BW.net.a", 160) not in got  # AccumulateGrad joins the run of the node before
    assert any(e.name == "BW.net.a" and e.end_us == 165 for e in a.events)
    assert ("BW.net", 170) in got  # seq 11 was made in the parent
    assert ("UPDATE.SGD", 180) in got
    assert ("UPDATE.other", 190) in got  # outside every range, after the backward
    assert a.window_us == 45  # 9 kernels of 5 us: the launch at 200 is outside the step
    comm = [e for e in a.events if e.cat == "Comm"]
    # no kernel: a 0-length event when the compute queued before it (launch 57) is done
    assert len(comm) == 1 and comm[0].ts_us == comm[0].end_us == 175



def test_a_kernel_less_collective_keeps_the_step_it_was_issued_in() -> None:
    """A collective with no kernel (gloo, one rank) whose c10d op starts outside every STEP
    range — matched up to the slack before echo's event, or shifted by a clock pairing a
    preemption spoiled — is kept, in the step echo recorded it in (it was dropped: a
    one-rank gloo all-reduce lost its Comm event in CI's loaded parallel pass). A mark
    without a recorded step still takes the STEP range around it, and one inside none is
    left out."""
    steps = [Mark("STEP", "STEP", 0, 100, 1, {"step": 7}),
             Mark("STEP", "STEP", 100, 200, 1, {"step": 8})]
    comm = [Mark("Comm.all_reduce", "Comm", 205, 206, 2, {"step": 8, "occ": 0}),
            Mark("Comm.bucket0", "Comm", 150, 151, 2, {"bucket": 0}),
            Mark("Comm.lost", "Comm", 300, 301, 2, {"bucket": 1})]
    a = attribute([*steps, *comm], [], [], [], root="Net")
    got = sorted((e.name, e.step, e.ts_us, e.kernels) for e in a.events if e.cat == "Comm")
    assert got == [("Comm.all_reduce", 8, 205, 0), ("Comm.bucket0", 8, 150, 0)]


def test_the_clock_pairing_takes_its_tightest_read(monkeypatch: pytest.MonkeyPatch) -> None:
    """Unix time against the perf counter at one instant, as ClockMap and the GPU timer
    take it: of the bracketed reads (perf, unix, perf), the tightest one's Unix read against
    its perf midpoint — not a read preempted between its perf-counter calls."""
    from echo_trace.timing import clock

    # three reads: preempted 1 ms after its Unix read, tight (gap 20 ns), preempted before
    perf = iter([0, 1_000_000, 2_000_000, 2_000_020, 3_000_000, 3_900_000])
    unix = iter([10_000, 5_002_000_010, 6_800_000])

    class FakeTime:
        perf_counter_ns = staticmethod(lambda: next(perf))
        time_ns = staticmethod(lambda: next(unix))

    monkeypatch.setattr(clock, "time", FakeTime)
    assert clock.pair_clocks(tries=3) == (5_002_000_010, 2_000_010)


def test_attributed_ddp_buckets_pass_validate() -> None:
    """The attributed DDP recording, with the k-th all_reduce of a step named as echo's
    bucket k (parameter names from the echo recording of the same run), passes validate's
    gradient_comm_order rule, which flags the CUPTI-less echo recording (see
    test_validate_gpu_comm.py)."""
    import json

    from echo_sim.trace.model import Cat, TraceBuilder
    from echo_sim.trace.validate import check_gradient_comm_order

    meta = json.loads((DATA / "echo_ddp_nccl_1rank" / "0_0" / "meta.json").read_text())
    buckets = {b["index"]: b["params"] for b in meta["buckets"]}
    nbytes = {b["index"]: b["bytes"] for b in meta["buckets"]}
    _, a = _run(FIXTURES["ddp"])
    b = TraceBuilder()
    k = 0
    for e in sorted(a.events, key=lambda e: e.ts_us):
        cat = {"FW": Cat.FW, "BW": Cat.BW, "UPDATE": Cat.UPDATE, "Comm": Cat.COMM}[e.cat]
        if e.cat == "Comm":
            assert e.args["bytes"] == nbytes[k]  # the same bucket in both recordings
            b.add(rank=0, name=f"Comm.bucket{k}", cat=cat, ts_us=e.ts_us, dur_us=e.dur_us,
                  step=e.step, tid=100, collective="all_reduce", nbytes=e.args["bytes"],
                  group_ranks=[0], seq=k, comm_args={"bucket": k, "params": buckets[k]})
            k += 1
        else:
            b.add(rank=0, name=e.name, cat=cat, ts_us=e.ts_us, dur_us=e.dur_us, step=e.step)
    assert k == len(buckets) == 14
    assert check_gradient_comm_order(b.build()) == []
