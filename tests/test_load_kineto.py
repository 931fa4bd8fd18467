"""PyTorch profiler (Kineto) traces -> Trace, from real torch.profiler runs made in the test."""

from __future__ import annotations

import gzip
from collections import Counter
from pathlib import Path

import pytest

from echo_sim.errors import TraceFormatError
from echo_sim.load import discover, load_trace
from echo_sim.load.kineto import collective_of
from echo_sim.trace.model import Cat
from tests.harness import spawn

torch = pytest.importorskip("torch")


def _train(out: Path, *, with_stack: bool, steps: int = 4, ddp: bool = False) -> None:
    from torch import nn

    torch.manual_seed(0)
    model: nn.Module = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))
    if ddp:
        model = nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.AdamW(model.parameters())
    sched = torch.profiler.schedule(wait=0, warmup=1, active=2, repeat=1)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU],
                                schedule=sched, with_stack=with_stack,
                                record_shapes=True) as prof:
        for _ in range(steps):
            loss = model(torch.randn(4, 8)).sum()
            loss.backward()
            opt.step()
            opt.zero_grad()
            prof.step()
    prof.export_chrome_trace(str(out))


def _names(t, cat: Cat, step: int, rank: int = 0) -> Counter[str]:
    ev = t.events
    rows = t.step_rows(rank, step)
    return Counter(t.name_of(int(i)) for i in rows if ev.cat[i] == cat)


@pytest.fixture(scope="module")
def single(tmp_path_factory: pytest.TempPathFactory) -> Path:
    p = tmp_path_factory.mktemp("kineto") / "single.json"
    _train(p, with_stack=False)
    return p


def test_single_process_aten_mode(single: Path) -> None:
    t = load_trace(single)
    assert t.source_format == "kineto"
    assert list(t.ranks) == [0] and t.world_size == 1
    # schedule(wait=0, warmup=1, active=2): ProfilerStep#1 and #2 are recorded
    assert t.steps == [1, 2]
    for step in t.steps:
        fw = _names(t, Cat.FW, step)
        assert fw["FW.aten::linear"] == 2 and fw["FW.aten::relu"] == 1
        bw = _names(t, Cat.BW, step)
        assert bw["BW.AddmmBackward0"] == 2 and bw["BW.ReluBackward0"] == 1
        assert bw["BW.torch::autograd::AccumulateGrad"] == 4  # 2 weights + 2 biases
        assert _names(t, Cat.UPDATE, step) == Counter({"UPDATE.AdamW": 1})
        assert _names(t, Cat.STEP, step) == Counter({"STEP": 1})
    ev = t.events
    # every FW of a step starts before its first BW, every UPDATE after its last BW
    for step in t.steps:
        rows = t.step_rows(0, step)
        fw_end = ev.ts_us[rows[ev.cat[rows] == Cat.FW]].max()
        bw = ev.ts_us[rows[ev.cat[rows] == Cat.BW]]
        up = ev.ts_us[rows[ev.cat[rows] == Cat.UPDATE]]
        assert fw_end < bw.min() and up.min() > bw.max()
    assert len(t.comm_rows()) == 0


def test_single_process_module_mode_gzip(tmp_path: Path) -> None:
    p = tmp_path / "prof.json"
    _train(p, with_stack=True, steps=3)
    gz = tmp_path / "rank0.pt.trace.json.gz"
    gz.write_bytes(gzip.compress(p.read_bytes()))
    p.unlink()
    fmt, sources = discover(tmp_path)
    assert fmt == "kineto" and len(sources) == 1
    t = load_trace(tmp_path)
    fw = _names(t, Cat.FW, t.steps[0])
    assert fw == Counter({"FW.Linear_0": 1, "FW.ReLU_0": 1, "FW.Linear_1": 1})
    ev = t.events
    row = int(next(i for i in t.step_rows(0, t.steps[0]) if t.name_of(int(i)) == "FW.Linear_0"))
    assert t.kinds[int(ev.kind[row])] == "Linear"


def test_collective_names() -> None:
    assert collective_of("c10d::allreduce_") == "all_reduce"
    assert collective_of("gloo:all_reduce") == "all_reduce"
    assert collective_of("nccl:_allgather_base") == "all_gather"
    assert collective_of("_reduce_scatter_base") == "reduce_scatter"
    assert collective_of("ncclDevKernel_AllReduce_Sum_f32_RING_LL") == "all_reduce"
    assert collective_of("c10d::alltoall_base_") == "all_to_all"
    assert collective_of("aten::mm") is None


def test_not_a_profile_and_truncated(tmp_path: Path, single: Path) -> None:
    bad = tmp_path / "cut.json"
    raw = single.read_bytes()
    bad.write_bytes(raw[: len(raw) // 3])
    with pytest.raises(TraceFormatError, match="truncated JSON"):
        load_trace(bad)


def _ddp_rank(rank: int, world_size: int, out: str) -> None:
    import torch.distributed as dist

    _train(Path(out) / f"rank{rank}.json", with_stack=False, ddp=True)
    dist.barrier()


@pytest.mark.slow
def test_two_process_gloo_ddp(tmp_path: Path) -> None:
    spawn(_ddp_rank, 2, str(tmp_path), timeout=120)
    t = load_trace(tmp_path)
    assert sorted(t.ranks) == [0, 1] and t.world_size == 2
    assert t.ranks[1].backend == "gloo" and t.steps == [1, 2]
    ev = t.events
    comm = t.comm_rows()
    assert len(comm) > 0
    for r in (0, 1):
        rows = comm[ev.rank[comm] == r]
        colls = Counter(t.collective_of(int(i)) for i in rows)
        assert colls["all_reduce"] == 2  # one DDP bucket per step
        ar = [int(i) for i in rows if t.collective_of(int(i)) == "all_reduce"]
        # 8*16+16 + 16*4+4 = 212 float32 gradients in the bucket
        assert [int(ev.nbytes[i]) for i in ar] == [848, 848]
        assert all(t.group_of(i) == (0, 1) for i in ar)
    # the same collectives carry the same seq on both ranks
    seqs = [sorted(ev.seq[comm[ev.rank[comm] == r]].tolist()) for r in (0, 1)]
    assert seqs[0] == seqs[1]
    from echo_sim.trace.validate import check_collective_matching

    assert check_collective_matching(t) == []
