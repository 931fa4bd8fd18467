"""The capture session end to end in one process (plus a 2-rank clock test)."""

from __future__ import annotations

import gzip
import json
import logging
import os
import signal
import tempfile
import textwrap
import time
from pathlib import Path

import networkx as nx
import pytest
import torch
from torch import nn
from torch.nn.modules import module as nn_module
from torch.optim import optimizer as optim_mod

import echo_trace
from tests.harness import REPO, run_python, spawn

LEAVES = ["emb", "fc1", "act", "drop", "fc2", "CrossEntropyLoss"]


class Tiny(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(30, 16)
        self.fc1 = nn.Linear(16, 32)
        self.act = nn.ReLU(inplace=True)  # in place on a 3-D (view) activation
        self.drop = nn.Dropout(0.0)
        self.fc2 = nn.Linear(32, 30)

    def forward(self, idx):
        return self.fc2(self.drop(self.act(self.fc1(self.emb(idx)))))


def _train(steps, cap=None, *, user_steps=False, seed=0):
    """Train Tiny for ``steps`` steps; returns (losses, final parameters)."""
    torch.manual_seed(seed)
    model = Tiny()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    lossf = nn.CrossEntropyLoss()
    g = torch.Generator().manual_seed(1)
    losses = []
    for _ in range(steps):
        idx = torch.randint(0, 30, (4, 6), generator=g)
        y = torch.randint(0, 30, (24,), generator=g)
        loss = lossf(model(idx).reshape(-1, 30), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
        if user_steps and cap is not None:
            cap.step()
    return losses, [p.detach().clone() for p in model.parameters()]


def _load(rank_dir):
    d = Path(rank_dir)
    name = "trace.json.gz" if (d / "trace.json.gz").exists() else "trace.json"
    raw = (d / name).read_bytes()
    doc = json.loads(gzip.decompress(raw) if name.endswith(".gz") else raw)
    return doc, json.loads((d / "meta.json").read_text()), nx.read_gml(d / "dag.gml")


def _hook_counts():
    return (len(nn_module._global_forward_pre_hooks), len(nn_module._global_forward_hooks),
            len(optim_mod._global_optimizer_pre_hooks),
            len(optim_mod._global_optimizer_post_hooks))


def test_capture_writes_steps_2_to_4_with_every_leaf(tmp_path):
    before = _hook_counts()
    with echo_trace.capture(tmp_path, start_step=2, end_step=5) as cap:
        _train(7, cap)
        assert cap.join_writer()  # the write began when step 5 began, in the background
        assert cap.written is not None  # and finished before the loop ended
        assert _hook_counts()[:2] == before[:2]  # module hooks gone after the window
    assert _hook_counts() == before
    doc, meta, dag = _load(tmp_path / "0_0")
    assert meta["steps"] == [2, 3, 4] and meta["partial_steps"] == []
    assert meta["step_source"] == "optimizer" and meta["timer"] == "perf_counter"
    assert (meta["rank"], meta["world_size"], meta["rank_source"]) == (0, 1, "single")
    assert meta["clock_sync"] == "none" and meta["clock_offset_us"] == 0.0
    assert meta["micro_batch_size"] == 4 and meta["disabled_reason"] is None
    assert meta["param_bytes"] == (30 * 16 + 16 * 32 + 32 + 32 * 30 + 30) * 4
    assert meta["params"][0]["name"] == "emb.weight"
    ev = [e for e in doc["traceEvents"] if e["ph"] == "X"]
    for step in (2, 3, 4):
        names = {e["name"] for e in ev if e["args"]["step"] == step}
        for leaf in LEAVES:
            assert f"FW.{leaf}" in names and f"BW.{leaf}" in names, (step, leaf)
        assert "UPDATE.SGD" in names and "STEP" in names
    assert sorted(e["args"]["step"] for e in ev if e["name"] == "STEP") == [2, 3, 4]
    assert all(e["pid"] == 0 for e in doc["traceEvents"])
    mem = [e for e in doc["traceEvents"] if e["ph"] == "C"]
    assert mem and all(e["args"]["rss_bytes"] > 0 for e in mem)
    step_ev = next(e for e in ev if e["name"] == "STEP")
    assert step_ev["args"]["peak_rss_bytes"] > 0
    assert nx.is_directed_acyclic_graph(dag) and dag.graph["step"] == 4
    assert list(dag.successors("UPDATE.SGD")) == ["NEXT_STEP"]
    assert next(nx.topological_sort(dag)) == "FW.emb"
    # ts: µs since the capture's start floored to the second (no process group)
    base = doc["baseTimeNanoseconds"]
    assert base == meta["base_time_ns"] and base % 1_000_000_000 == 0
    assert abs(base / 1e9 - time.time()) < 3600
    assert all(0 <= e["ts"] < 3600e6 for e in doc["traceEvents"] if "ts" in e)
    # compute slices are sequential or nested, and a BW closed by the next slice touches
    # it exactly (sub-µs values: no float64 ulps of Unix-epoch µs)
    comp = sorted((e for e in ev if e["tid"] == 0), key=lambda e: (e["ts"], -e["dur"]))
    gaps = [b["ts"] - (a["ts"] + a["dur"]) for a, b in zip(comp, comp[1:], strict=False)
            if b["ts"] + b["dur"] > a["ts"] + a["dur"]]
    assert min(gaps) > -1e-6 and sum(abs(g) < 1e-6 for g in gaps) >= 3


def test_same_losses_and_params_with_and_without_capture(tmp_path):
    base_losses, base_params = _train(6)
    with echo_trace.capture(tmp_path, start_step=1, end_step=4):
        losses, params = _train(6)
    assert losses == base_losses
    assert all(torch.equal(a, b) for a, b in zip(params, base_params, strict=True))


def test_user_steps_replace_optimizer_steps(tmp_path):
    with echo_trace.capture(tmp_path, start_step=1, end_step=3) as cap:
        _train(4, cap, user_steps=True)
        assert cap.step_count == 4
    _, meta, _ = _load(tmp_path / "0_0")
    assert meta["steps"] == [1, 2] and meta["step_source"] == "user"


def test_internal_error_disables_capture_not_training(tmp_path, caplog):
    base_losses, base_params = _train(6)
    before = _hook_counts()
    caplog.set_level(logging.WARNING, logger="echo_trace")
    with echo_trace.capture(tmp_path, start_step=1, end_step=4) as cap:
        def boom(*a, **k):
            raise RuntimeError("injected")
        cap.rec.record = boom  # the first FW event inside a hook raises
        losses, params = _train(6)
    assert losses == base_losses
    assert all(torch.equal(a, b) for a, b in zip(params, base_params, strict=True))
    assert "injected" in cap.rec.disabled_reason
    assert sum("capture disabled" in r.message for r in caplog.records) == 1
    _, meta, _ = _load(tmp_path / "0_0")  # what was captured is still written
    assert "injected" in meta["disabled_reason"]
    assert meta["steps"] == []  # recording stopped inside step 1: no complete step
    assert _hook_counts() == before


def test_exception_in_loop_writes_and_propagates(tmp_path):
    with pytest.raises(KeyError):
        with echo_trace.capture(tmp_path, start_step=1, end_step=10):
            _train(3)
            raise KeyError("user bug")
    _, meta, _ = _load(tmp_path / "0_0")
    assert meta["steps"] == [1, 2]


def test_existing_rank_dir_is_not_overwritten(tmp_path, caplog):
    d = tmp_path / "0_0"
    d.mkdir()
    (d / "keep.txt").write_text("old")
    caplog.set_level(logging.WARNING, logger="echo_trace")
    with echo_trace.capture(tmp_path, start_step=1, end_step=3) as cap:
        losses, _ = _train(4)
        assert not cap.enabled
    assert os.listdir(d) == ["keep.txt"]
    assert any("not empty" in r.message for r in caplog.records)
    assert losses == _train(4)[0]
    with echo_trace.capture(tmp_path, start_step=1, end_step=3, overwrite=True):
        _train(4)
    # the directory is replaced whole: nothing of the old run survives next to the new one
    assert sorted(os.listdir(d)) == ["dag.gml", "meta.json", "trace.json"]


def test_gzip(tmp_path):
    with echo_trace.capture(tmp_path, start_step=0, end_step=1, gzip=True):
        _train(2)
    assert sorted(os.listdir(tmp_path / "0_0")) == ["dag.gml", "meta.json", "trace.json.gz"]
    doc, meta, _ = _load(tmp_path / "0_0")
    assert meta["trace_file"] == "trace.json.gz" and meta["steps"] == [0]
    assert any(e["name"] == "FW.fc1" for e in doc["traceEvents"])


def test_bounded_buffer_warns_once(tmp_path, caplog):
    caplog.set_level(logging.WARNING, logger="echo_trace")
    with echo_trace.capture(tmp_path, start_step=0, end_step=2, max_events=10):
        _train(3)
    _, meta, _ = _load(tmp_path / "0_0")
    assert meta["num_events"] == 10 and meta["dropped_events"] > 0
    assert sum("buffer full" in r.message for r in caplog.records) == 1


def test_disabled_capture_is_a_no_op(tmp_path):
    before = _hook_counts()
    with echo_trace.capture(tmp_path, start_step=0, end_step=2, enabled=False) as cap:
        assert _hook_counts() == before
        cap.step()
        _train(3)
    assert not tmp_path.joinpath("0_0").exists()
    cap.stop()
    cap.start()


def test_start_stop_idempotent_and_window_never_opened(tmp_path, caplog):
    caplog.set_level(logging.WARNING, logger="echo_trace")
    cap = echo_trace.capture(tmp_path, start_step=50, end_step=51)
    assert cap.start() is cap.start()
    _train(2)
    cap.stop()
    cap.stop()
    assert not tmp_path.joinpath("0_0").exists()
    assert any("before start_step=50 (TRACE_START_STEP); no trace written" in r.message
               for r in caplog.records)
    assert _hook_counts()[2:] == (0, 0)


def test_ddp_wrapper_prefix_is_stripped(tmp_path):
    import torch.distributed as dist

    store = dist.FileStore(str(tmp_path / "store"), 1)
    dist.init_process_group("gloo", store=store, rank=0, world_size=1)
    try:
        model = nn.parallel.DistributedDataParallel(nn.Sequential(nn.Linear(4, 4), nn.ReLU()))
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        with echo_trace.capture(tmp_path / "t", start_step=0, end_step=1):
            model(torch.randn(2, 4)).sum().backward()
            opt.step()
    finally:
        dist.destroy_process_group()
    doc, meta, _ = _load(tmp_path / "t" / "0_0")
    names = {e["name"] for e in doc["traceEvents"] if e["ph"] == "X"}
    assert {"FW.0", "FW.1", "BW.0", "BW.1"} <= names
    assert meta["params"][0]["name"] == "0.weight" and meta["backend"] == "gloo"


SIGTERM_SCRIPT = textwrap.dedent("""
    import os, signal, sys
    import torch
    from torch import nn
    import echo_trace
    chained = []
    if sys.argv[2] == "chain":
        signal.signal(signal.SIGTERM, lambda s, f: (chained.append(s), print("user handler")))
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with echo_trace.capture(sys.argv[1], start_step=1, end_step=100):
        for i in range(50):
            model(torch.randn(2, 4)).sum().backward()
            opt.step()
            if i == 3:
                os.kill(os.getpid(), signal.SIGTERM)
    print("finished", chained)
""")


@pytest.mark.parametrize("mode", ["default", "chain"])
def test_sigterm_leaves_a_valid_trace(tmp_path, mode):
    script = tmp_path / "job.py"
    script.write_text(SIGTERM_SCRIPT)
    out = run_python([str(script), str(tmp_path / "t"), mode], timeout=120)
    doc, meta, dag = _load(tmp_path / "t" / "0_0")
    assert meta["steps"][:2] == [1, 2]
    assert any(e["name"] == "BW.2" for e in doc["traceEvents"])
    assert nx.is_directed_acyclic_graph(dag)
    assert not list((tmp_path / "t" / "0_0").glob("*.tmp"))
    if mode == "default":
        assert out.returncode == -signal.SIGTERM, out.stderr
    else:
        assert out.returncode == 0, out.stderr
        assert "user handler" in out.stdout and "finished [15]" in out.stdout


RUN_SCRIPT = textwrap.dedent("""
    import sys
    import torch
    from torch import nn
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1))
    opt = torch.optim.Adam(model.parameters())
    for i in range(int(sys.argv[1])):
        model(torch.randn(2, 4)).sum().backward()
        opt.step()
    print("argv", sys.argv[1:], __name__)
""")


def test_run_module_traces_an_unmodified_script(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(RUN_SCRIPT)
    out = run_python(["-m", "echo_trace.run", "--trace-dir", str(tmp_path / "t"),
                      "--start-step", "1", "--end-step=3", str(script), "6", "x"],
                     timeout=120, cwd=REPO)
    assert out.returncode == 0, out.stderr
    assert "argv ['6', 'x'] __main__" in out.stdout
    doc, meta, _ = _load(tmp_path / "t" / "0_0")
    assert meta["steps"] == [1, 2]
    assert {"FW.0", "BW.2", "UPDATE.Adam"} <= {e["name"] for e in doc["traceEvents"]}


def test_run_module_usage_errors():
    out = run_python(["-m", "echo_trace.run", "--bogus", "x.py"], timeout=60)
    assert out.returncode == 2 and "unrecognized arguments: --bogus" in out.stderr
    out = run_python(["-m", "echo_trace.run"], timeout=60)
    assert out.returncode == 2 and "usage" in out.stderr


def test_trace_on_autostart_in_a_fresh_interpreter(tmp_path):
    """What echo_trace.pth does: maybe_start() before torch is imported."""
    script = tmp_path / "train.py"
    script.write_text(RUN_SCRIPT)
    code = ("import echo_trace._autostart as a; a.maybe_start(); import sys, runpy; "
            f"sys.argv = [{str(script)!r}, '5']; runpy.run_path(sys.argv[0], run_name='__main__')")
    out = run_python(["-c", code], env={"TRACE_ON": "1", "TRACE_DIR": str(tmp_path / "t"),
                                        "TRACE_START_STEP": "2", "TRACE_END_STEP": "4"},
                     timeout=120)
    assert out.returncode == 0, out.stderr
    _, meta, _ = _load(tmp_path / "t" / "0_0")
    assert meta["steps"] == [2, 3]


# ------------------------------------------------------------------ two ranks
def _clock_rank(rank, world_size, out_dir, block_rank, two_hosts=False):
    if two_hosts and rank == 1:  # pretend rank 1 runs elsewhere: its offset is measured
        from echo_trace.timing import clock as et_clock

        et_clock.socket.gethostname = lambda: "another-host"
    if rank == block_rank:  # this rank's directory is taken: its capture stays off
        d = Path(out_dir) / f"0_{rank}"
        d.mkdir(parents=True, exist_ok=True)
        (d / "keep.txt").write_text("x")
    torch.manual_seed(0)
    model = nn.Linear(4, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with echo_trace.capture(out_dir, start_step=1, end_step=3):
        for _ in range(4):
            model(torch.randn(2, 4)).sum().backward()
            opt.step()
            torch.distributed.barrier()


@pytest.mark.slow
@pytest.mark.parametrize("block_rank", [-1, 1])
def test_two_ranks_clock_alignment(block_rank):
    with tempfile.TemporaryDirectory() as d:
        spawn(_clock_rank, 2, d, block_rank, timeout=120)
        metas = {}
        for r in (0, 1):
            p = Path(d) / f"0_{r}" / "meta.json"
            if p.exists():
                metas[r] = json.loads(p.read_text())
    assert metas[0]["clock_sync"] == "all_gather" and metas[0]["clock_offset_us"] == 0.0
    assert metas[0]["rank_source"] == "torchrun" and metas[0]["world_size"] == 2
    if block_rank == 1:
        assert 1 not in metas
    else:
        assert metas[1]["clock_sync"] == "all_gather" and metas[1]["rank"] == 1
        assert metas[1]["clock_offset_us"] == 0.0  # same host as rank 0: one kernel clock
        # one time base for the job: rank 0's clock at sync, floored to the second
        assert metas[1]["base_time_ns"] == metas[0]["base_time_ns"]
    assert metas[0]["base_time_ns"] % 1_000_000_000 == 0
    assert abs(metas[0]["base_time_ns"] / 1e9 - time.time()) < 3600


@pytest.mark.slow
def test_two_ranks_clock_offset_measured_across_hosts():
    with tempfile.TemporaryDirectory() as d:
        spawn(_clock_rank, 2, d, -1, True, timeout=120)
        m1 = json.loads((Path(d) / "0_1" / "meta.json").read_text())
        doc1 = json.loads((Path(d) / "0_1" / "trace.json").read_text())
        doc0 = json.loads((Path(d) / "0_0" / "trace.json").read_text())
    assert m1["clock_sync"] == "all_gather" and m1["clock_offset_us"] != 0.0
    assert abs(m1["clock_offset_us"]) < 100_000  # really one host: only barrier skew
    # the steps of the two ranks (synchronised by a barrier) line up on the shared clock
    s0 = [e["ts"] for e in doc0["traceEvents"] if e["name"] == "STEP"]
    s1 = [e["ts"] for e in doc1["traceEvents"] if e["name"] == "STEP"]
    assert len(s0) == len(s1) == 2 and abs(s0[1] - s1[1]) < 200_000
    assert doc0["baseTimeNanoseconds"] == doc1["baseTimeNanoseconds"] == m1["base_time_ns"]
