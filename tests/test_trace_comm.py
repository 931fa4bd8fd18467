"""CommTracer on real gloo process groups (2 ranks): c10d, DDP buckets, DTensor TP, FSDP2.

Each ``_w_*`` worker runs in a spawned rank, captures with a real Recorder and writes its
``Comm`` events (and the values the collectives returned) to ``<tmp>/rank<r>.json``; the
test compares ranks in the parent.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch
import torch.distributed as dist
import torch.distributed.distributed_c10d as c10d

from echo_trace.comm import CommTracer
from echo_trace.recorder import Recorder
from tests.harness import spawn

F32 = 4  # bytes per float32


def _recorder(rank: int) -> Recorder:
    rec = Recorder(rank=rank)
    rec.recording = True
    rec.new_step(0)
    return rec


def _grad(p: torch.Tensor) -> torch.Tensor:
    assert p.grad is not None
    return p.grad


def _comm(rec: Recorder) -> list[dict[str, Any]]:
    return [e for e in rec.event_dicts() if e.get("cat") == "Comm"]


def _dump(out: str, rank: int, **data: Any) -> None:
    Path(out, f"rank{rank}.json").write_text(json.dumps(data))


def _load(out: Path, world: int = 2) -> list[dict[str, Any]]:
    return [json.loads((out / f"rank{r}.json").read_text()) for r in range(world)]


# ---------------------------------------------------------------------------- c10d
def _c10d_ops(rank: int) -> dict[str, list[float]]:
    """The same collectives, returning their results (run with and without capture)."""
    other = 1 - rank
    res: dict[str, list[float]] = {}
    t = torch.arange(4, dtype=torch.float32) + 10 * rank
    dist.all_reduce(t)
    res["all_reduce"] = t.tolist()
    t = torch.full((4,), float(rank + 1))
    dist.all_reduce(t, async_op=True).wait()
    res["all_reduce_async"] = t.tolist()
    out = torch.empty(6, dtype=torch.float64)
    dist.all_gather_into_tensor(out, torch.full((3,), float(rank), dtype=torch.float64))
    res["all_gather"] = out.tolist()
    out = torch.empty(6, dtype=torch.float64)
    dist.all_gather_into_tensor(
        out, torch.full((3,), 5.0 + rank, dtype=torch.float64), async_op=True
    ).wait()
    res["all_gather_async"] = out.tolist()
    o = torch.empty(2)
    dist.reduce_scatter_tensor(o, torch.arange(4, dtype=torch.float32) * (rank + 1))
    res["reduce_scatter"] = o.tolist()
    o = torch.empty(2)
    dist.reduce_scatter_tensor(o, torch.ones(4), async_op=True).wait()
    res["reduce_scatter_async"] = o.tolist()
    b = torch.full((5,), float(rank), dtype=torch.int32)
    dist.broadcast(b, src=1)
    res["broadcast"] = b.float().tolist()
    b = torch.full((5,), float(rank), dtype=torch.int32)
    dist.broadcast(b, src=0, async_op=True).wait()
    res["broadcast_async"] = b.float().tolist()
    r = torch.full((3,), float(rank + 1))
    dist.reduce(r, dst=0)
    res["reduce"] = r.tolist()
    g = [torch.zeros(2, dtype=torch.float64) for _ in range(2)] if rank == 0 else None
    dist.gather(torch.full((2,), float(rank), dtype=torch.float64), gather_list=g, dst=0)
    res["gather"] = torch.cat(g).tolist() if g else []
    sc = torch.zeros(3)
    dist.scatter(sc, [torch.full((3,), 4.0), torch.full((3,), 5.0)] if rank == 0 else None, src=0)
    res["scatter"] = sc.tolist()
    a2a = torch.empty(4)
    dist.all_to_all_single(a2a, torch.arange(4, dtype=torch.float32) + 4 * rank)
    res["all_to_all_single"] = a2a.tolist()
    lst = [torch.empty(3), torch.empty(3)]
    dist.all_gather(lst, torch.full((3,), float(rank)), async_op=True).wait()
    res["all_gather_list"] = torch.cat(lst).tolist()
    p = torch.full((3,), float(rank + 7))
    if rank == 0:
        dist.send(p, dst=1)
        dist.recv(p, src=1)
    else:
        dist.recv(p, src=0)
        dist.send(p * 2, dst=0)
    res["sendrecv"] = p.tolist()
    q = torch.full((2,), float(rank))
    w = dist.isend(q.clone(), dst=other) if rank == 0 else dist.irecv(q, src=other)
    assert w is not None
    w.wait()
    res["isend_irecv"] = q.tolist()
    s, r = torch.full((2,), 100.0 + rank), torch.zeros(2)
    works = dist.batch_isend_irecv(
        [dist.P2POp(dist.isend, s, other), dist.P2POp(dist.irecv, r, other)]
    )
    for w in works:
        w.wait()
    res["batch"] = r.tolist()
    dist.barrier()
    return res


def _batch(ops: list[dist.P2POp]) -> None:
    for w in dist.batch_isend_irecv(ops):
        w.wait()


def _w_c10d(rank: int, world: int, out: str) -> None:
    other = 1 - rank
    reference = _c10d_ops(rank)  # uncaptured
    pre_r, mid_r = torch.zeros(2), torch.zeros(2)
    pre = [
        dist.P2POp(dist.isend, torch.full((2,), 200.0 + rank), other),
        dist.P2POp(dist.irecv, pre_r, other),
    ]  # built with the original isend / irecv
    rec = _recorder(rank)
    tracer = CommTracer(rec)
    tracer.install()
    tracer.install()  # idempotent
    captured = _c10d_ops(rank)
    _batch(pre)
    mid = [
        dist.P2POp(dist.isend, torch.full((2,), 300.0 + rank), other),
        dist.P2POp(dist.irecv, mid_r, other),
    ]  # built with the wrappers
    tracer.remove()
    _batch(mid)  # after remove
    assert rec.enabled, rec.disabled_reason
    _dump(
        out,
        rank,
        events=_comm(rec),
        reference=reference,
        captured=captured,
        pre=pre_r.tolist(),
        mid=mid_r.tolist(),
    )


EXPECTED_C10D = [  # (collective, bytes, dtype, async, peer-of-rank-0)
    ("all_reduce", 4 * F32, "float32", False, None),
    ("all_reduce", 4 * F32, "float32", True, None),
    ("all_gather", 6 * 8, "float64", False, None),
    ("all_gather", 6 * 8, "float64", True, None),
    ("reduce_scatter", 4 * F32, "float32", False, None),
    ("reduce_scatter", 4 * F32, "float32", True, None),
    ("broadcast", 5 * 4, "int32", False, None),
    ("broadcast", 5 * 4, "int32", True, None),
    ("reduce", 3 * F32, "float32", False, None),
    ("gather", 2 * 2 * 8, "float64", False, None),
    ("scatter", 2 * 3 * F32, "float32", False, None),
    ("all_to_all", 4 * F32, "float32", False, None),
    ("all_gather", 2 * 3 * F32, "float32", True, None),
]


@pytest.mark.slow
def test_c10d_collectives_and_p2p(tmp_path: Path) -> None:
    spawn(_w_c10d, 2, str(tmp_path), timeout=60)
    ranks = _load(tmp_path)
    for r, data in enumerate(ranks):
        assert data["captured"] == data["reference"]
        assert data["pre"] == [200.0 + 1 - r] * 2 and data["mid"] == [300.0 + 1 - r] * 2
        evs = sorted(data["events"], key=lambda e: e["ts"])
        colls = [e for e in evs if e["args"]["collective"] not in ("send", "recv")]
        got = [
            (
                e["args"]["collective"],
                e["args"]["bytes"],
                e["args"]["dtype"],
                e["args"]["async"],
                None,
            )
            for e in colls
        ]
        assert got == EXPECTED_C10D + [("barrier", 0, None, False, None)]
        assert [e["args"]["seq"] for e in colls] == list(range(len(EXPECTED_C10D) + 1))
        for e in evs:
            assert e["name"] == "Comm." + e["args"]["collective"]
            assert e["args"]["group_ranks"] == [0, 1]
            assert e["args"]["path"] == "c10d"
            assert e["dur"] >= 0 and e["tid"] >= 100
        p2p = [
            (
                e["args"]["collective"],
                e["args"]["peer"],
                e["args"]["seq"],
                e["args"]["bytes"],
                e["args"]["async"],
            )
            for e in evs
            if e["args"]["collective"] in ("send", "recv")
        ]
        if r == 0:
            assert p2p == [
                ("send", 1, 0, 12, False),
                ("recv", 1, 0, 12, False),
                ("send", 1, 1, 8, True),
                ("send", 1, 2, 8, True),
                ("recv", 1, 1, 8, True),
                ("send", 1, 3, 8, True),
                ("recv", 1, 2, 8, True),
            ]
        else:
            assert p2p == [
                ("recv", 0, 0, 12, False),
                ("send", 0, 0, 12, False),
                ("recv", 0, 1, 8, True),
                ("send", 0, 1, 8, True),
                ("recv", 0, 2, 8, True),
                ("send", 0, 2, 8, True),
                ("recv", 0, 3, 8, True),
            ]
    ref = ranks[0]["reference"]
    assert ref["all_reduce"] == [10.0, 12.0, 14.0, 16.0]
    assert ref["all_gather"] == [0.0, 0.0, 0.0, 1.0, 1.0, 1.0]
    assert ref["reduce_scatter"] == [0.0, 3.0]
    assert ranks[1]["reference"]["reduce_scatter"] == [6.0, 9.0]
    assert ranks[1]["reference"]["broadcast"] == [1.0] * 5
    assert ref["reduce"] == [3.0] * 3 and ref["gather"] == [0.0, 0.0, 1.0, 1.0]
    assert ranks[1]["reference"]["scatter"] == [5.0] * 3
    assert ranks[1]["reference"]["all_to_all_single"] == [2.0, 3.0, 6.0, 7.0]
    assert ref["all_gather_list"] == [0.0] * 3 + [1.0] * 3
    assert ref["sendrecv"] == [14.0] * 3 and ranks[1]["reference"]["batch"] == [100.0] * 2


def _w_broken(rank: int, world: int, out: str) -> None:
    rec = _recorder(rank)
    tracer = CommTracer(rec)
    tracer.install()

    def boom(name: str, args: dict[str, Any]) -> Any:
        raise RuntimeError("recorder is broken")

    rec.comm_begin = boom  # type: ignore[method-assign]
    t = torch.full((3,), float(rank + 1))
    work = dist.all_reduce(t, async_op=True)
    work.wait()
    first = t.tolist()
    u = torch.ones(2)
    dist.all_reduce(u)  # capture is off now: plain passthrough
    tracer.remove()

    # a recorder that fails at completion, inside DDP's comm hook (future callback)
    from torch.nn.parallel import DistributedDataParallel as DDP

    ref = DDP(_mlp())
    _ddp_step(ref, rank)
    rec2 = _recorder(rank)
    tracer2 = CommTracer(rec2)
    tracer2.install()
    ddp = DDP(_mlp())

    def boom_end(token: Any, end_us: float | None = None) -> None:
        raise RuntimeError("comm_end is broken")

    rec2.comm_end = boom_end  # type: ignore[method-assign]
    _ddp_step(ddp, rank)
    tracer2.remove()
    same = all(
        torch.equal(_grad(a), _grad(b))
        for a, b in zip(ref.parameters(), ddp.parameters(), strict=True)
    )
    _dump(
        out,
        rank,
        first=first,
        second=u.tolist(),
        enabled=rec.enabled,
        reason=rec.disabled_reason,
        events=_comm(rec),
        ddp_same=same,
        enabled2=rec2.enabled,
        reason2=rec2.disabled_reason,
    )


@pytest.mark.slow
def test_broken_recorder_never_breaks_the_collective(tmp_path: Path) -> None:
    spawn(_w_broken, 2, str(tmp_path), timeout=60)
    for data in _load(tmp_path):
        assert data["first"] == [3.0, 3.0, 3.0] and data["second"] == [2.0, 2.0]
        assert data["enabled"] is False
        assert "recorder is broken" in data["reason"] and "all_reduce" in data["reason"]
        assert data["events"] == []
        assert data["ddp_same"] and data["enabled2"] is False
        assert "comm_end is broken" in data["reason2"]


def test_install_remove_restores_everything() -> None:
    import torch.distributed._functional_collectives as funcol
    import torch.distributed.tensor._collective_utils as cu
    from torch.nn.parallel import DistributedDataParallel as DDP

    sites: list[tuple[Any, str]] = [
        (m, n)
        for m in (dist, c10d)
        for n in (
            "all_reduce",
            "all_gather",
            "all_gather_single",
            "all_gather_into_tensor",
            "reduce_scatter",
            "reduce_scatter_single",
            "reduce_scatter_tensor",
            "broadcast",
            "reduce",
            "all_to_all",
            "all_to_all_single",
            "gather",
            "scatter",
            "barrier",
            "send",
            "recv",
            "isend",
            "irecv",
            "batch_isend_irecv",
        )
    ]
    sites += [
        (funcol, n)
        for n in (
            "all_reduce",
            "all_gather_single",
            "reduce_scatter_single",
            "all_to_all_single",
            "broadcast",
            "wait_tensor",
        )
    ]
    sites += [(cu, "shard_dim_alltoall"), (c10d.Work, "wait"), (DDP, "__init__")]
    before = [getattr(m, n) for m, n in sites]
    tracer = CommTracer(Recorder())
    tracer.install()
    patched = [getattr(m, n) for m, n in sites]
    assert all(p is not b for p, b in zip(patched, before, strict=True))
    assert dist.all_reduce is c10d.all_reduce  # one wrapper on both modules
    tracer.install()
    assert [getattr(m, n) for m, n in sites] == patched
    tracer.remove()
    assert all(getattr(m, n) is b for (m, n), b in zip(sites, before, strict=True))
    tracer.remove()
    assert all(getattr(m, n) is b for (m, n), b in zip(sites, before, strict=True))
    assert tracer.meta() == {"buckets": []}


# ---------------------------------------------------------------------------- DDP
def _mlp() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(
        torch.nn.Linear(8, 64),
        torch.nn.ReLU(),
        torch.nn.Linear(64, 32),
        torch.nn.ReLU(),
        torch.nn.Linear(32, 4),
    )


def _ddp_step(ddp: torch.nn.Module, rank: int) -> None:
    torch.manual_seed(100 + rank)
    ddp.zero_grad()
    ddp(torch.randn(16, 8)).square().sum().backward()


def _w_ddp(rank: int, world: int, out: str) -> None:
    from torch.nn.parallel import DistributedDataParallel as DDP

    ref = DDP(_mlp(), bucket_cap_mb=0.004)  # ~4 KB buckets: several of them
    _ddp_step(ref, rank)
    ref_grads = [_grad(p).tolist() for p in ref.parameters()]

    rec = _recorder(rank)
    rec.recording = False
    tracer = CommTracer(rec)
    tracer.install()
    built = DDP(_mlp(), bucket_cap_mb=0.004)  # built while installed: hooked by __init__
    late = DDP(_mlp(), bucket_cap_mb=0.004)
    late.register_comm_hook(None, _user_hook)  # user hook after ours: delegated to
    _ddp_step(built, rank)  # not recording yet: passthrough
    rec.recording = True
    _ddp_step(built, rank)
    rec.new_step(1)
    _ddp_step(late, rank)  # late's first step: DDP's initial single bucket
    tracer.attach_ddp(built)  # idempotent
    meta = tracer.meta()
    tracer.remove()
    _ddp_step(built, rank)  # hook left in place is a passthrough after remove
    grads = [_grad(p).tolist() for p in built.parameters()]
    late_grads = [_grad(p).tolist() for p in late.parameters()]
    names = [n for n, _ in built.module.named_parameters()]
    nbytes = sum(p.numel() * p.element_size() for p in built.parameters())
    _dump(
        out,
        rank,
        events=_comm(rec),
        meta=meta,
        grads=grads,
        ref=ref_grads,
        names=names,
        nbytes=nbytes,
        late=late_grads,
        user_calls=_USER_CALLS[0],
        enabled=rec.enabled,
    )


_USER_CALLS = [0]


def _user_hook(state, bucket):  # type: ignore[no-untyped-def]  # DDP checks annotations
    _USER_CALLS[0] += 1
    fut: torch.futures.Future[torch.Tensor] = torch.futures.Future()
    fut.set_result(bucket.buffer() * 0 + 1)  # every gradient becomes 1
    return fut


@pytest.mark.slow
def test_ddp_buckets(tmp_path: Path) -> None:
    spawn(_w_ddp, 2, str(tmp_path), timeout=60)
    ranks = _load(tmp_path)
    for data in ranks:
        assert data["enabled"]
        assert data["grads"] == data["ref"]  # same gradients as DDP without a hook
        assert data["user_calls"] > 0
        assert all(v == 1.0 for g in data["late"] for v in torch.tensor(g).flatten().tolist())
        evs = sorted(data["events"], key=lambda e: e["ts"])
        assert evs and all(e["args"]["path"] == "ddp" for e in evs)
        first = [e for e in evs if e["args"]["step"] == 0]  # `built`, rebuilt 4 KB buckets
        late = [e for e in evs if e["args"]["step"] == 1]  # `late`, delegating to the user
        assert len(first) >= 2 and len(late) == 1 and len(evs) == len(first) + 1
        assert (
            sum(e["args"]["bytes"] for e in first)
            == data["nbytes"]
            == 4 * (8 * 64 + 64 + 64 * 32 + 32 + 32 * 4 + 4)
        )
        assert late[0]["args"]["bytes"] == data["nbytes"]
        assert sorted(p for e in first for p in e["args"]["params"]) == sorted(data["names"])
        for e in first:
            a = e["args"]
            assert e["name"] == f"Comm.bucket{a['bucket']}"
            assert a["collective"] == "all_reduce" and a["dtype"] == "float32"
            assert a["group_ranks"] == [0, 1] and a["async"] is True
        meta = data["meta"]["buckets"]
        assert [b["index"] for b in meta] == [*range(len(first)), 0]  # built's, then late's
        assert sum(b["bytes"] for b in meta) == 2 * data["nbytes"]
        assert meta[0]["params"] == first[0]["args"]["params"]
    seqs = [[e["args"]["seq"] for e in sorted(d["events"], key=lambda e: e["ts"])] for d in ranks]
    assert seqs[0] == seqs[1] == list(range(len(seqs[0])))


def _w_ddp_attach(rank: int, world: int, out: str) -> None:
    from torch.nn.parallel import DistributedDataParallel as DDP

    user = DDP(_mlp())
    user.register_comm_hook(None, _user_hook)
    plain = DDP(_mlp())  # built and trained before capture, attached later
    _ddp_step(plain, rank)
    rec = _recorder(rank)
    tracer = CommTracer(rec)
    tracer.install()
    tracer.attach_ddp(user)  # has the user's hook: skipped, one warning
    tracer.attach_ddp(plain)
    _ddp_step(user, rank)
    _ddp_step(plain, rank)
    tracer.remove()
    grads = torch.cat([_grad(p).flatten() for p in user.parameters()])
    _dump(
        out,
        rank,
        events=_comm(rec),
        ones=bool((grads == 1).all()),
        enabled=rec.enabled,
        nbytes=sum(p.numel() * p.element_size() for p in plain.parameters()),
    )


@pytest.mark.slow
def test_ddp_attach_after_training_and_user_hook_skipped(tmp_path: Path) -> None:
    spawn(_w_ddp_attach, 2, str(tmp_path), timeout=60)
    for data in _load(tmp_path):
        assert data["ones"] and data["enabled"]
        evs = data["events"]  # all from `plain`: its buckets cover every gradient once
        assert evs and all(e["args"]["path"] == "ddp" for e in evs)
        assert sum(e["args"]["bytes"] for e in evs) == data["nbytes"]


# ---------------------------------------------------------------------------- DTensor, FSDP2
def _w_tp(rank: int, world: int, out: str) -> None:
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor.parallel import (
        ColwiseParallel,
        RowwiseParallel,
        parallelize_module,
    )

    mesh = init_device_mesh("cpu", (2,))
    torch.manual_seed(0)
    dense = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 8))
    tp = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 8))
    tp.load_state_dict(dense.state_dict())
    parallelize_module(tp, mesh, {"0": ColwiseParallel(), "2": RowwiseParallel()})
    torch.manual_seed(1)
    x = torch.randn(4, 8)
    xr = x.clone().requires_grad_(True)
    xt = x.clone().requires_grad_(True)
    dense(xr).sum().backward()
    rec = _recorder(rank)
    tracer = CommTracer(rec)
    tracer.install()
    y = tp(xt)
    y.sum().backward()
    tracer.remove()
    same = bool(torch.allclose(y, dense(x), atol=1e-6)) and bool(
        torch.allclose(_grad(xt), _grad(xr), atol=1e-6)
    )
    _dump(out, rank, events=_comm(rec), same=same, enabled=rec.enabled)


@pytest.mark.slow
def test_dtensor_tensor_parallel(tmp_path: Path) -> None:
    spawn(_w_tp, 2, str(tmp_path), timeout=60)
    ranks = _load(tmp_path)
    for data in ranks:
        assert data["same"] and data["enabled"]
        evs = sorted(data["events"], key=lambda e: e["ts"])
        # forward: Rowwise output Partial -> Replicate; backward: Colwise input grad
        assert [
            (
                e["name"],
                e["args"]["bytes"],
                e["args"]["seq"],
                e["args"]["path"],
                e["args"]["dtype"],
                e["args"]["group_ranks"],
            )
            for e in evs
        ] == [
            ("Comm.all_reduce", 4 * 8 * F32, 0, "functional", "float32", [0, 1]),
            ("Comm.all_reduce", 4 * 8 * F32, 1, "functional", "float32", [0, 1]),
        ]
        assert all(e["args"]["async"] is True and e["dur"] >= 0 for e in evs)


def _w_fsdp(rank: int, world: int, out: str) -> None:
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    mesh = init_device_mesh("cpu", (2,))
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 8))
    for layer in (model[0], model[2]):
        fully_shard(layer, mesh=mesh)
    fully_shard(model, mesh=mesh)
    torch.manual_seed(1 + rank)
    x = torch.randn(4, 8)
    rec = _recorder(rank)
    tracer = CommTracer(rec)
    tracer.install()
    model(x).sum().backward()
    tracer.remove()
    _dump(out, rank, events=_comm(rec), enabled=rec.enabled)


@pytest.mark.slow
def test_fsdp2_fully_shard(tmp_path: Path) -> None:
    spawn(_w_fsdp, 2, str(tmp_path), timeout=60)
    ranks = _load(tmp_path)
    layer0, layer2 = (16 * 8 + 16) * F32, (8 * 16 + 8) * F32  # unsharded parameter bytes
    for data in ranks:
        assert data["enabled"]
        evs = sorted(data["events"], key=lambda e: e["ts"])
        got = [(e["args"]["collective"], e["args"]["bytes"]) for e in evs]
        # forward all-gathers layer 0 then 2; backward re-gathers 2 (resharded after
        # forward) and prefetches 0, then reduce-scatters the gradients of 2 and 0
        assert got == [
            ("all_gather", layer0),
            ("all_gather", layer2),
            ("all_gather", layer2),
            ("all_gather", layer0),
            ("reduce_scatter", layer2),
            ("reduce_scatter", layer0),
        ]
        assert all(e["args"]["path"] == "c10d" and e["args"]["group_ranks"] == [0, 1] for e in evs)
    assert [e["args"]["seq"] for e in sorted(ranks[0]["events"], key=lambda e: e["ts"])] == [
        e["args"]["seq"] for e in sorted(ranks[1]["events"], key=lambda e: e["ts"])
    ]


def test_window_close_waits_for_a_collective_still_closing() -> None:
    """A future callback may close the last step's collective after the job's wait()
    returned: the recorder waits (bounded) so it lands in the window."""
    import threading

    from echo_trace.recorder import Recorder

    rec = Recorder()
    rec.recording = True
    rec.new_step(3)
    tok = rec.comm_begin("Comm.all_reduce", {"collective": "all_reduce"})
    closer = threading.Timer(0.01, rec.comm_end, args=(tok,))
    closer.start()
    assert rec.wait_comm_idle(5.0)
    closer.join()
    assert [e["name"] for e in rec.event_dicts() if e["cat"] == "Comm"] == ["Comm.all_reduce"]
    # one that never closes: the wait gives up at its bound
    rec.comm_begin("Comm.broadcast", {"collective": "broadcast"})
    assert rec.wait_comm_idle(0.01) is False
