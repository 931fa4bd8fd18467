"""What autograd saves for backward: echo_trace.hooks.saved's graph walk against torch's own
saved-tensor hooks, its attribution to traced calls, meta.json, and simulate's use of it."""

from __future__ import annotations

import dataclasses
import json
import logging
import weakref
from pathlib import Path
from typing import Any

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import echo_trace
from echo_sim.cost.memory_model import activation_bytes
from echo_sim.errors import TraceFormatError
from echo_sim.load import load_trace
from echo_sim.workload.ops import extract_workload
from echo_trace.hooks.modules import ModuleTracer
from echo_trace.hooks.saved import attribute, storage_key, walk_saved
from echo_trace.recorder import Recorder
from echo_trace.timing.clock import CpuTimer
from examples.models import GPT, GPTConfig


def _hooked_saved(model: nn.Module, run: Any) -> dict[int, int]:
    """Ground truth by another route: every storage autograd packs while ``run()`` runs
    (``torch.autograd.graph.saved_tensors_hooks``), parameters and buffers left out."""
    skip = {storage_key(t)[0] for t in (*model.parameters(), *model.buffers())}  # type: ignore[index]
    got: dict[int, int] = {}

    def pack(t: torch.Tensor) -> torch.Tensor:
        key = storage_key(t)
        if key is not None and key[1] > 0 and key[0] not in skip and t.dim() > 0:
            got[key[0]] = key[1]
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        run()
    return got


class Parent(nn.Module):
    """Code between two traced children makes tensors autograd saves (exp, softmax)."""

    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Linear(16, 32)
        self.b = nn.Linear(32, 16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.a(x)
        s = torch.softmax(torch.exp(h), dim=-1)  # parent code: saved results, b's range
        return self.b(s)


def _tracer() -> tuple[Recorder, ModuleTracer]:
    rec = Recorder()
    rec.recording = True
    rec.new_step(0)
    return rec, ModuleTracer(rec, CpuTimer(rec))


def test_walk_finds_what_the_saved_tensor_hooks_see() -> None:
    torch.manual_seed(0)
    model = GPT(GPTConfig(vocab_size=64, seq_len=16, hidden=32, layers=2, heads=4))
    x = torch.randint(0, 64, (4, 16))
    # the hooks see one forward (their packing marks every slot as hooked, which the walk
    # skips); the walk another, of the same shapes
    truth = _hooked_saved(model, lambda: model(x))
    skip = {storage_key(t)[0] for t in (*model.parameters(), *model.buffers())}  # type: ignore[index]
    found = walk_saved([model(x).grad_fn], skip)
    assert found.nodes > 20
    assert sorted(found.nbytes.values()) == sorted(truth.values())  # the same storages


def test_attribution_to_the_call_that_made_each_storage() -> None:
    rec, tr = _tracer()
    model = Parent()
    tr.install()
    try:
        out = model(torch.randn(8, 16))
    finally:
        tr.remove()
    assert tr.saved_per_call is not None
    per = dict((p, b) for p, b in tr.saved_per_call)
    assert set(per) == {"a", "b"}
    # a: its input (a leaf, saved by its addmm) and its output h (saved by exp? no: exp
    # saves its result) -> the input only; b: exp's and softmax's results, made by the
    # parent's code before b (softmax's result is b's saved input too)
    assert per["a"] == 8 * 16 * 4
    assert per["b"] == 2 * 8 * 32 * 4
    assert tr.saved_total_bytes == per["a"] + per["b"]
    # measured once per window: a second forward changes nothing
    tr.install()
    try:
        model(torch.randn(8, 16))
    finally:
        tr.remove()
    assert dict((p, b) for p, b in tr.saved_per_call) == per
    out.sum().backward()


def test_attribute_gives_later_nodes_to_the_last_call() -> None:
    from echo_trace.hooks.saved import SavedWalk

    w = SavedWalk()
    w.first_seq = {1: 5, 2: 10, 3: 11, 4: 99}
    w.nbytes = {1: 100, 2: 20, 3: 3, 4: 7}
    assert attribute(w, [5, 11]) == [100, 30]  # seq 99: after every call -> the last
    assert attribute(w, []) == []


def test_a_failing_walk_leaves_training_and_the_trace_alone(
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    import echo_trace.hooks.modules as mods

    def boom(*_: Any, **__: Any) -> Any:
        raise RuntimeError("walk failed")

    monkeypatch.setattr(mods, "walk_saved", boom)
    rec, tr = _tracer()
    model = Parent()
    tr.install()
    with caplog.at_level(logging.WARNING, logger="echo_trace"):
        try:
            model(torch.randn(4, 16)).sum().backward()
        finally:
            tr.remove()
    assert tr.saved_per_call is None and rec.enabled  # capture goes on
    assert any("saved for backward" in r.getMessage() for r in caplog.records)
    assert [e["name"] for e in rec.event_dicts() if e["cat"] == "FW"] == ["FW.a", "FW.b"]


def _capture_gpt(tmp_path: Path, cfg: GPTConfig, batch: int) -> tuple[Path, GPT]:
    torch.manual_seed(0)
    model = GPT(cfg)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    x = torch.randint(0, cfg.vocab_size, (batch, cfg.seq_len))
    with echo_trace.capture(tmp_path / "t", start_step=1, end_step=3,
                            memory_interval_ms=0) as cap:
        for _ in range(3):
            out = model(x)
            F.cross_entropy(out.reshape(-1, cfg.vocab_size), x.reshape(-1)).backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            cap.step()
    return next((tmp_path / "t").glob("*_0")), model


def test_capture_writes_saved_activations_and_simulate_uses_them(tmp_path: Path) -> None:
    cfg = GPTConfig(vocab_size=128, seq_len=32, hidden=32, layers=2, heads=4)
    rank_dir, model = _capture_gpt(tmp_path, cfg, batch=4)
    meta = json.loads((rank_dir / "meta.json").read_text())
    saved = meta["saved_activations"]
    x = torch.randint(0, cfg.vocab_size, (4, cfg.seq_len))
    truth = _hooked_saved(model, lambda: model(x))
    assert sum(b for _, b in saved["per_call"]) == saved["saved_bytes"] == sum(truth.values())
    per = {p: b for p, b in saved["per_call"]}
    tokens = 4 * cfg.seq_len
    # the attention core (parent code between qkv and proj) counts with proj: far more
    # than proj's own input; the fused qkv output itself is never saved
    assert per["blocks.0.attn.proj"] > 3 * tokens * cfg.hidden * 4
    assert per["blocks.0.attn.qkv"] == 0
    assert per["blocks.0.mlp.fc1"] == tokens * 4 * cfg.hidden * 4  # its output, GELU's input
    trace = load_trace(rank_dir)
    wl = extract_workload(trace)
    fw = wl.fw_ops
    assert all(o.saved_bytes >= 0 for o in fw)
    from echo_sim.sim.simulate import SimConfig, simulate

    note = next(m for m in simulate(trace, SimConfig()).models if m.startswith("memory:"))
    assert "autograd saved" in note  # the prediction says where its activations came from
    assert fw[-1].saved_bytes >= fw[-1].out_bytes  # the logits stay live at the loss
    measured = activation_bytes(fw)
    assert measured == pytest.approx(saved["saved_bytes"] - per[fw[-1].module]
                                     + fw[-1].saved_bytes)
    leaf_only = activation_bytes([dataclasses.replace(o, saved_bytes=-1) for o in fw])
    assert measured > leaf_only  # the attention core the leaf outputs never showed
    # tensor parallelism shards the column side and the row op's range (the core)
    tp2 = activation_bytes(fw, tp=2)
    replicated = sum(o.saved_bytes for o in fw if o.role not in ("column", "inner", "row")
                     and not (o.role == "vocab" and o.kind != "Embedding"))
    assert tp2 == pytest.approx(replicated + (measured - replicated) / 2)


def test_meta_with_bad_saved_activations_is_one_clear_error(tmp_path: Path) -> None:
    cfg = GPTConfig(vocab_size=64, seq_len=8, hidden=16, layers=1, heads=2)
    rank_dir, _ = _capture_gpt(tmp_path, cfg, batch=2)
    meta_file = rank_dir / "meta.json"
    meta = json.loads(meta_file.read_text())
    meta["saved_activations"]["per_call"] = [["blocks.0.ln1", -5]]
    meta_file.write_text(json.dumps(meta))
    with pytest.raises(TraceFormatError, match="saved_activations.per_call"):
        load_trace(rank_dir)
    # a forward that no longer matches the step's ops: out_bytes, as before
    meta["saved_activations"]["per_call"] = [["nonexistent", 5]]
    meta_file.write_text(json.dumps(meta))
    assert all(o.saved_bytes == -1 for o in extract_workload(load_trace(rank_dir)).fw_ops)


def test_checkpointed_regions_are_never_unpacked() -> None:
    """Non-reentrant activation checkpointing packs its region's saved tensors with hooks
    whose unpack recomputes the region: the walk must not run them (nor count them)."""
    from torch.utils.checkpoint import checkpoint

    lin = nn.Linear(16, 16)
    calls = [0]

    def region(x: torch.Tensor) -> torch.Tensor:
        calls[0] += 1
        return torch.exp(lin(x))

    x = torch.randn(8, 16, requires_grad=True)
    y = torch.tanh(checkpoint(region, x, use_reentrant=False))
    skip = {storage_key(p)[0] for p in lin.parameters()}  # type: ignore[index]
    found = walk_saved([y.grad_fn], skip)
    assert calls == [1]  # not recomputed by the walk
    # only tanh's saved result (outside the region) is counted
    assert sum(found.nbytes.values()) == 8 * 16 * 4
    y.sum().backward()
    assert calls == [2]  # the backward's own recomputation


def test_an_accumulating_step_folds_into_the_measured_forward(
        tmp_path: Path) -> None:
    cfg = GPTConfig(vocab_size=64, seq_len=8, hidden=16, layers=1, heads=2)
    torch.manual_seed(0)
    model = GPT(cfg)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    x = torch.randint(0, cfg.vocab_size, (2, cfg.seq_len))
    with echo_trace.capture(tmp_path / "t", start_step=1, end_step=3,
                            memory_interval_ms=0) as cap:
        for _ in range(3):
            for _micro in range(2):  # gradient accumulation: two forwards per step
                out = model(x)
                F.cross_entropy(out.reshape(-1, cfg.vocab_size), x.reshape(-1)).backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            cap.step()
    rank_dir = next((tmp_path / "t").glob("*_0"))
    per_call = json.loads((rank_dir / "meta.json").read_text())["saved_activations"]["per_call"]
    work = extract_workload(load_trace(rank_dir))
    # two forwards in the step fold into one micro-batch's ops (gradient accumulation), each
    # with the saved bytes of the measured forward
    assert work.traced_micro_batches == 2
    fw = work.fw_ops
    assert len(fw) == len(per_call)
    saved = [b for _, b in per_call]
    assert [o.saved_bytes for o in fw[:-1]] == saved[:-1]
    assert fw[-1].saved_bytes >= saved[-1]  # the model's output is live at the loss


class Tied(nn.Module):
    """A language model whose head shares the token embedding's weight (GPT-2's tying)."""

    def __init__(self, vocab: int = 64, d: int = 16) -> None:
        super().__init__()
        self.emb = nn.Embedding(vocab, d)
        self.mix = nn.Linear(d, d)
        self.head = nn.Linear(d, vocab, bias=False)
        self.head.weight = self.emb.weight

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(torch.tanh(self.mix(self.emb(x))))


def test_a_tied_weight_is_held_once(tmp_path: Path) -> None:
    from echo_sim.sim.stage_memory import chunk_memory

    torch.manual_seed(0)
    model = Tied()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    x = torch.randint(0, 64, (4, 8))
    with echo_trace.capture(tmp_path / "t", start_step=1, end_step=3,
                            memory_interval_ms=0) as cap:
        for _ in range(3):
            F.cross_entropy(model(x).reshape(-1, 64), x.reshape(-1)).backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            cap.step()
    rank_dir = next((tmp_path / "t").glob("*_0"))
    wl = extract_workload(load_trace(rank_dir))
    held = {o.module: o.held_param_bytes for o in wl.fw_ops}
    assert held == {"emb": -1, "mix": -1, "head": 0}  # the head's weight is the embedding's
    unique = sum(p.numel() * p.element_size() for p in model.parameters())  # counted once
    assert wl.total_param_bytes == unique
    mem = chunk_memory(wl.fw_ops, tp=1, mb_scale=1.0, recompute=False,
                       sequence_parallel=False, has_blocks=wl.has_blocks)
    assert mem.param_bytes == unique  # not 64 x 16 x 4 bytes twice
    assert sum(o.param_bytes for o in wl.fw_ops) > unique  # what the ops' own args claim


class _RawSlot:
    unpack_hook = None


class _NodeWrapper:
    """A Python wrapper of an autograd node as torch makes them: the node keeps only a weak
    reference to its wrapper, so each access after the last wrapper died makes a new one
    (and CPython soon gives a new object the id of a dead one)."""

    _live: weakref.WeakValueDictionary[int, _NodeWrapper] = weakref.WeakValueDictionary()

    def __init__(self, graph: dict[int, tuple[list[int], torch.Tensor]], key: int) -> None:
        self.graph, self.key = graph, key

    @classmethod
    def of(cls, graph: dict[int, tuple[list[int], torch.Tensor]], key: int) -> _NodeWrapper:
        w = cls._live.get(key)
        if w is None:
            w = cls._live[key] = cls(graph, key)
        return w

    def _sequence_nr(self) -> int:
        return self.key

    @property
    def next_functions(self) -> tuple[tuple[_NodeWrapper, int], ...]:
        return tuple((self.of(self.graph, k), 0) for k in self.graph[self.key][0])

    @property
    def _raw_saved_self(self) -> _RawSlot:
        return _RawSlot()

    @property
    def _saved_self(self) -> torch.Tensor:
        return self.graph[self.key][1]


def test_the_walk_visits_every_node_although_wrappers_are_transient() -> None:
    # a residual chain (every node reachable on two paths), each node saving its own
    # storage: a walk that remembered only the ids of wrappers it let die skipped nodes
    # whose new wrapper reused such an id (on CUDA: everything below the last two calls)
    n = 300
    graph = {k: ([j for j in (k - 1, k - 2) if j >= 0], torch.ones(k + 1)) for k in range(n)}
    walk = walk_saved([_NodeWrapper.of(graph, n - 1)], set())
    assert walk.nodes == n
    assert len(walk.nbytes) == n
    assert sum(walk.nbytes.values()) == sum(4 * (k + 1) for k in range(n))
