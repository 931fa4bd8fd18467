"""The Kineto timing backend's plumbing, exercised on CPU ops (no GPU needed), and the
CUDA path itself (marked ``gpu``).

On CPU the profiler records no kernels, so each profiled CPU op stands in for one GPU
activity launched by itself: the real thread ids, clock mapping, module ranges and
autograd sequence numbers then go through the same attribution as kernels do.
"""

from __future__ import annotations

import pytest
import torch
from torch import nn

from echo_trace.gpu.attribute import Activity, attribute
from echo_trace.gpu.backend import KinetoTimer, inputs_from_events, profiler_busy
from echo_trace.hooks.modules import ModuleTracer
from echo_trace.recorder import STEP_TID, Recorder


class Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1 = nn.Linear(16, 32)
        self.fc2 = nn.Linear(32, 16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.tanh(self.fc1(x))  # functional op in the parent
        return x + self.fc2(h) * 0.5


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.emb = nn.Linear(8, 16)
        self.block = Block()
        self.head = nn.Linear(16, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.block(self.emb(x)))


def _profile_step(model: nn.Module) -> tuple[KinetoTimer, Recorder, object]:
    rec = Recorder()
    rec.new_step(3)
    rec.recording = True
    timer = KinetoTimer(rec, cuda=False)
    tracer = ModuleTracer(rec, timer, root=model)
    tracer.install()
    try:
        t0 = rec.now_us()
        x = torch.randn(4, 8)
        loss = model(x).square().mean()  # the loss: outside every module
        loss.backward()
        rec.complete("STEP", "step", t0, rec.now_us() - t0, tid=STEP_TID)
    finally:
        tracer.remove()
        timer.running = False
        result = torch._C._autograd._disable_profiler()
    return timer, rec, result


def test_cpu_ops_stand_in_for_kernels() -> None:
    torch.manual_seed(0)
    timer, rec, result = _profile_step(Net())
    c10d, ops, launches, _ = inputs_from_events(result.events(), timer.unix_minus_perf_ns)
    assert c10d == [] and ops and launches
    marks = timer._marks()
    names = {m.name for m in marks}
    # leaves via emit, containers via open/close_range, the STEP from the recorder
    assert {"FW.emb", "FW.block", "FW.block.fc1", "FW.head", "FW.Net", "STEP"} <= names
    acts = [Activity("op", "kernel", 0, la.ts_us, 1.0, la.correlation) for la in launches]
    out = attribute(marks, ops, launches, acts, root="Net")
    got = {e.name for e in out.events}
    # forward ops in the module that ran them (tanh/add/mul in the parent block)
    assert {"FW.emb", "FW.block.fc1", "FW.block.fc2", "FW.block", "FW.head"} <= got
    # backward ops to their forward module through autograd sequence numbers
    assert {"BW.emb", "BW.block.fc1", "BW.block.fc2", "BW.block", "BW.head"} <= got
    assert "BW.Net" in got  # square/mean of the loss
    assert out.by_rule.get("backward", 0) > 0 and out.attributed_fraction == 1.0
    # the mark clock and the profiler clock agree: every op of a Linear's forward lies
    # inside that Linear's range on the same thread
    fc1 = next(m for m in marks if m.name == "FW.block.fc1")
    inside = [o for o in ops if o.tid == fc1.tid and fc1.ts_us <= o.ts_us <= fc1.end_us]
    assert inside and all(o.end_us <= fc1.end_us + 1.0 for o in inside)


def test_close_records_nothing_without_gpu_activity() -> None:
    rec = Recorder()
    rec.new_step(0)
    timer = KinetoTimer(rec, cuda=False)
    timer.close()
    assert not timer.running and timer.last is not None and timer.last.events == []
    assert rec.events == []
    timer.close()  # idempotent


def test_event_cap_stops_the_profiler_at_a_step_end(caplog) -> None:  # type: ignore[no-untyped-def]
    """Once the window can hold no more events, the profiler stops at the next step end
    (its buffers stay bounded) and resolves what it has, later marks are not kept, and
    the warning says so once."""
    import logging

    caplog.set_level(logging.WARNING, logger="echo_trace")
    torch.manual_seed(0)
    model = Net()
    rec = Recorder(max_events=12)
    rec.recording = True
    timer = KinetoTimer(rec, cuda=False)
    tracer = ModuleTracer(rec, timer, root=model)
    tracer.install()
    try:
        for step in range(4):
            rec.new_step(step)
            model(torch.randn(2, 8)).sum().backward()
            timer.flush()
            if step == 0:
                assert timer.running  # under the cap: nothing resolved yet
        assert timer.capped and not timer.running and not profiler_busy()
        kept = len(timer.marks)
        model(torch.randn(2, 8))
        assert len(timer.marks) == kept  # nothing more accumulates
    finally:
        tracer.remove()
    # the early stop resolved the profiler's window (on CPU there is no GPU activity to
    # record, so no events come of it); close afterwards is a no-op
    assert timer.last is not None and kept >= 12
    last = timer.last
    timer.close()
    assert timer.last is last and rec.events == []
    assert sum("event cap (12) reached" in r.getMessage() for r in caplog.records) == 1


def test_profiler_busy_sees_the_users_profiler() -> None:
    assert not profiler_busy()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]):
        assert profiler_busy()
    assert not profiler_busy()


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cuda_capture_attributes_kernels(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """A real CUDA run through echo_trace.capture: Kineto timer, >= 98 % attributed,
    every leaf has FW and BW events on the GPU clock."""
    import json

    import echo_trace

    torch.manual_seed(0)
    model = Net().cuda()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with echo_trace.capture(out_dir=tmp_path / "t", start_step=1, end_step=3, model=model,
                            kineto_raw=True) as cap:
        for _ in range(4):
            loss = model(torch.randn(64, 8, device="cuda")).square().mean()
            loss.backward()
            opt.step()
            opt.zero_grad()
    timer = cap._timer
    assert isinstance(timer, KinetoTimer) and timer.last is not None
    assert timer.last.attributed_fraction >= 0.98
    d = next((tmp_path / "t").iterdir())
    # the recording replays offline into the very events the live chain wrote
    from echo_trace.gpu.recording import write_replay

    again = write_replay(d, tmp_path / "replayed" / d.name, gzip_trace=False)
    live = json.loads((d / "trace.json").read_text())["traceEvents"]
    offline = json.loads((again / "trace.json").read_text())["traceEvents"]
    assert [(e["name"], e.get("ts"), e.get("dur")) for e in live] == \
        [(e["name"], e.get("ts"), e.get("dur")) for e in offline]
    meta = json.loads((d / "meta.json").read_text())
    assert meta["timer"] == "kineto"
    tr = json.loads((d / "trace.json").read_text())
    names = {e["name"] for e in tr["traceEvents"] if e.get("ph") == "X"}
    for leaf in ("emb", "block.fc1", "block.fc2", "head"):
        assert f"FW.{leaf}" in names and f"BW.{leaf}" in names
    assert "UPDATE.SGD" in names


def test_comm_events_take_their_c10d_op_range(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """A one-process gloo group: echo's Comm event is matched to the profiler's
    c10d::allreduce_ op and re-recorded (args kept) by the timer at close."""
    import torch.distributed as dist

    from echo_trace.comm import CommTracer

    dist.init_process_group("gloo", store=dist.FileStore(str(tmp_path / "store"), 1),
                            rank=0, world_size=1)
    try:
        rec = Recorder()
        rec.new_step(5)
        rec.recording = True
        timer = KinetoTimer(rec, cuda=False)
        comm = CommTracer(rec)
        comm.install()
        try:
            t0 = rec.now_us()
            dist.all_reduce(torch.ones(256))
            rec.complete("STEP", "step", t0, rec.now_us() - t0, tid=STEP_TID)
        finally:
            comm.remove()
            rec.recording = False
        before = [e for e in rec.events if e[2] == "Comm"]
        assert len(before) == 1
        timer.close()
        assert timer.comm_matched == 1  # echo's Comm event found its c10d::allreduce_ op
        after = [e for e in rec.events if e[2] == "Comm"]
        assert len(after) == 1 and after[0] is not before[0]
        _, name, _, tid, ts, dur, step, occ, args, _ = after[0]
        assert name == "Comm.all_reduce" and step == 5 and occ == 0 and tid == 100
        assert args["bytes"] == 1024 and args["collective"] == "all_reduce"
        assert args["kernels"] == 0 and dur == 0.0
        assert before[0][4] - 20.0 <= ts <= before[0][4] + before[0][5]
    finally:
        dist.destroy_process_group()


def test_record_tracks_and_comm_lanes() -> None:
    """Busiest stream on the compute track, others on their own; overlapping collectives
    on separate comm lanes; GPU args kept."""
    from echo_trace.gpu.attribute import GpuEvent
    from echo_trace.gpu.backend import _record

    rec = Recorder()
    ev = [GpuEvent("FW.a", "FW", 1, 7, 0.0, 50.0, 40.0, 3, {"module": "a"}),
          GpuEvent("FW.b", "FW", 1, 9, 10.0, 20.0, 10.0, 1, {"module": "b"}),
          GpuEvent("BW.a", "BW", 1, 7, 60.0, 70.0, 10.0, 1, {"module": "a", "flops": 9,
                                                              "param_bytes": 4}),
          GpuEvent("FW.c", "FW", 1, 7, 80.0, 90.0, 10.0, 1, {"container": True}),
          GpuEvent("Comm.x", "Comm", 1, 13, 5.0, 30.0, 25.0, 1, {"occ": 0, "bytes": 8}),
          GpuEvent("Comm.y", "Comm", 1, 13, 20.0, 40.0, 20.0, 1, {"occ": 0, "bytes": 8}),
          GpuEvent("Comm.z", "Comm", 1, 13, 35.0, 45.0, 10.0, 1, {"occ": 1, "bytes": 8})]
    _record(rec.events, ev, [])
    got = {e[1]: (e[3], e[7], e[8]) for e in rec.events}
    assert got["FW.a"][0] == 0 and got["FW.b"][0] == 10
    assert (got["Comm.x"][0], got["Comm.y"][0], got["Comm.z"][0]) == (100, 101, 100)
    assert got["Comm.z"][1] == 1 and got["FW.a"][2]["busy_us"] == 40.0
    assert got["FW.a"][2]["kernels"] == 3 and got["FW.b"][2]["stream"] == 9
    assert got["BW.a"][2] == {"module": "a", "param_bytes": 4, "busy_us": 10.0, "kernels": 1,
                              "stream": 7}
    assert got["FW.c"][2]["module"] == "c" and "container" not in got["FW.c"][2]


def test_users_profiler_started_inside_the_window_wins(caplog) -> None:  # type: ignore[no-untyped-def]
    """echo's profiler yields (one warning), the user's runs normally, and the window keeps
    its leaf FW ranges on the CPU clock."""
    import logging

    caplog.set_level(logging.WARNING, logger="echo_trace")
    torch.manual_seed(0)
    model = Net()
    rec = Recorder()
    rec.new_step(2)
    rec.recording = True
    timer = KinetoTimer(rec, cuda=False)
    tracer = ModuleTracer(rec, timer, root=model)
    tracer.install()
    try:
        model(torch.randn(2, 8))
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as p:
            model(torch.randn(2, 8))
        assert any(e.name == "aten::addmm" for e in p.events())
    finally:
        tracer.remove()
    assert timer.yielded and not timer.running and not profiler_busy()
    assert timer.timer_name == "perf_counter"  # what meta.json says of this window
    timer.close()
    names = [e[1] for e in rec.events]
    assert names.count("FW.emb") == 2 and "FW.Net" not in names  # leaves only
    assert all(e[6] == 2 for e in rec.events)
    assert sum("started inside the capture window" in r.getMessage()
               for r in caplog.records) == 1
    from torch.autograd import profiler as ap

    assert ap.profile._prepare_trace.__qualname__ == "profile._prepare_trace"  # restored


def _cuda_loop(model: nn.Module, steps: int) -> None:
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(steps):
        model(torch.randn(64, 8, device="cuda")).square().mean().backward()
        opt.step()
        opt.zero_grad()


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cuda_falls_back_to_cuda_events_under_the_users_profiler(tmp_path) -> None:  # type: ignore[no-untyped-def]
    import json

    import echo_trace
    from echo_trace.timing.clock import CudaTimer

    model = Net().cuda()
    acts = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
    with torch.profiler.profile(activities=acts):
        with echo_trace.capture(out_dir=tmp_path, start_step=1, end_step=3,
                                model=model) as cap:
            _cuda_loop(model, 4)
    assert isinstance(cap._timer, CudaTimer)
    meta = json.loads(next(tmp_path.iterdir()).joinpath("meta.json").read_text())
    assert meta["timer"] == "cuda_event" and meta["device"] == "cuda"


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cuda_ddp_nccl_buckets_after_their_backward(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """DDP over NCCL with one rank: bucket Comm events on the GPU clock pass validate's
    gradient_comm_order rule (the CUDA-event timer's CPU enqueue times did not)."""
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel

    import echo_trace
    from echo_sim.load import load_trace
    from echo_sim.trace.validate import check_gradient_comm_order

    dist.init_process_group("nccl", store=dist.FileStore(str(tmp_path / "store"), 1),
                            rank=0, world_size=1)
    try:
        torch.cuda.set_device(0)
        ddp = DistributedDataParallel(Net().cuda(), device_ids=[0], bucket_cap_mb=0.001)
        with echo_trace.capture(out_dir=tmp_path / "t", start_step=1, end_step=3, model=ddp):
            _cuda_loop(ddp, 4)
    finally:
        dist.destroy_process_group()
    trace = load_trace(tmp_path / "t")
    assert len(trace.comm_rows()) >= 2 * 2  # >= 2 buckets in each of 2 steps
    assert check_gradient_comm_order(trace) == []


def test_capture_with_kineto_resolves_on_the_writer_and_leaves_a_recording(
        tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """The capture's Kineto plumbing on CPU ops: the profiler stops on the training thread
    when the window closes, the writer thread attributes and writes kineto_raw.json.gz, and
    the replay of that recording gives back the same trace."""
    import importlib
    import json
    import threading

    import echo_trace
    from echo_trace.gpu.recording import RAW_FILE, write_replay

    threads: list[str] = []
    orig = KinetoTimer.resolve

    def resolve(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        threads.append(threading.current_thread().name)
        return orig(self, *args, **kwargs)

    monkeypatch.setattr(KinetoTimer, "resolve", resolve)
    cap_mod = importlib.import_module("echo_trace.capture")
    monkeypatch.setattr(cap_mod, "CpuTimer", lambda rec: KinetoTimer(rec, cuda=False, raw=True))
    torch.manual_seed(0)
    model = Net()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with echo_trace.capture(out_dir=tmp_path / "t", start_step=1, end_step=3, model=model,
                            memory_interval_ms=0):
        for _ in range(4):
            model(torch.randn(16, 8)).square().mean().backward()
            opt.step()
            opt.zero_grad()
    assert threads == ["echo_trace-writer"]
    d = next((tmp_path / "t").iterdir())
    assert (d / RAW_FILE).exists() and json.loads((d / "meta.json").read_text())["timer"] == \
        "kineto"
    again = write_replay(d, tmp_path / "r" / d.name, gzip_trace=False)
    live = json.loads((d / "trace.json").read_text())["traceEvents"]
    offline = json.loads((again / "trace.json").read_text())["traceEvents"]
    assert [(e["name"], e.get("ts"), e.get("dur")) for e in live] == \
        [(e["name"], e.get("ts"), e.get("dur")) for e in offline]
    assert {e["args"]["step"] for e in live if e["name"] == "STEP"} == {1, 2}


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cuda_saved_activations_under_autocast(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """On CUDA under bf16 autocast, the bytes autograd saves are measured per traced call
    (the H200 recordings of 60e968a had 0 for every call: the graph walk pruned branches)."""
    import json

    import torch.nn.functional as F

    import echo_trace
    from examples.models import GPT, GPTConfig

    torch.manual_seed(0)
    model = GPT(GPTConfig(vocab_size=512, seq_len=128, hidden=256, layers=4, heads=4)).cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    with echo_trace.capture(out_dir=tmp_path / "t", start_step=1, end_step=3, model=model):
        for _ in range(4):
            x = torch.randint(512, (8, 129), device="cuda")
            with torch.autocast("cuda", dtype=torch.bfloat16):
                out = model(x[:, :-1])
            loss = F.cross_entropy(out.float().reshape(-1, 512), x[:, 1:].reshape(-1))
            loss.backward()
            opt.step()
            opt.zero_grad()
    d = next((tmp_path / "t").iterdir())
    per = json.loads((d / "meta.json").read_text())["saved_activations"]["per_call"]
    assert sum(1 for _, b in per if b > 0) >= len(per) // 2, per
