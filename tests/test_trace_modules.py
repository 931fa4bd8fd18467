"""ModuleTracer on real models: FW/BW events, paths, args, in-place ops, hook removal."""

from __future__ import annotations

import pytest
import torch
from torch import nn
from torch.nn.modules import module as nn_module

from echo_trace.hooks.modules import ModuleTracer, _strip
from echo_trace.recorder import Recorder
from echo_trace.timing.clock import CpuTimer


def _tracer(**kw):
    rec = Recorder()
    rec.recording = True
    rec.new_step(0)
    return rec, ModuleTracer(rec, CpuTimer(rec), **kw)


def _names(rec, cat):
    return [e["name"] for e in rec.event_dicts() if e["cat"] == cat]


class Block(nn.Module):
    """x + mlp(ln(x)) with q/k/v-style fan-out of one input into three Linears."""

    def __init__(self, d=8):
        super().__init__()
        self.ln = nn.LayerNorm(d)
        self.q = nn.Linear(d, d)
        self.k = nn.Linear(d, d)
        self.v = nn.Linear(d, d)
        self.act = nn.ReLU(inplace=True)

    def forward(self, x):
        h = self.ln(x)
        y = self.q(h) * self.k(h) + self.v(h)
        return x + self.act(y)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(20, 8)
        self.blocks = nn.ModuleList([Block(), Block()])
        self.head = nn.Linear(8, 20)

    def forward(self, idx):
        x = self.emb(idx)
        for b in self.blocks:
            x = b(x)
        return self.head(x)


LEAVES = ["emb", "blocks.0.ln", "blocks.0.q", "blocks.0.k", "blocks.0.v", "blocks.0.act",
          "blocks.1.ln", "blocks.1.q", "blocks.1.k", "blocks.1.v", "blocks.1.act", "head"]


def _run(model, tracer=None, seed=0):
    torch.manual_seed(seed)
    idx = torch.randint(0, 20, (3, 5))
    if tracer is not None:
        tracer.install()
    try:
        loss = model(idx).square().mean()
        loss.backward()
    finally:
        if tracer is not None:
            tracer.remove()
    return loss.detach(), [p.grad.clone() for p in model.parameters()]


def test_fw_and_bw_for_every_leaf_module_in_order():
    torch.manual_seed(0)
    model = Net()
    rec, tr = _tracer()
    _run(model, tr)
    assert _names(rec, "FW") == [f"FW.{p}" for p in LEAVES]
    assert sorted(_names(rec, "BW")) == sorted(f"BW.{p}" for p in LEAVES)
    bw = _names(rec, "BW")
    assert bw[0] == "BW.head" and bw[-1] == "BW.emb"  # backward runs in reverse
    assert tr.micro_batch_size == 3


def test_compute_track_slices_never_partially_overlap():
    torch.manual_seed(0)
    rec, tr = _tracer()
    _run(Net(), tr)
    ev = sorted((e for e in rec.event_dicts() if e["cat"] in ("FW", "BW")),
                key=lambda e: e["ts"])
    for a, b in zip(ev, ev[1:], strict=False):
        # either sequential, or b nested in a (zero-length identity BW)
        assert b["ts"] >= a["ts"] + a["dur"] - 1e-6 or b["ts"] + b["dur"] <= a["ts"] + a["dur"]


def test_same_loss_and_grads_with_inplace_ops_and_views():
    torch.manual_seed(0)
    model = Net()
    loss0, grads0 = _run(model)
    for p in model.parameters():
        p.grad = None
    rec, tr = _tracer()
    loss1, grads1 = _run(model, tr)
    assert torch.equal(loss0, loss1)
    assert all(torch.equal(a, b) for a, b in zip(grads0, grads1, strict=True))
    assert "BW.blocks.0.act" in _names(rec, "BW")  # in-place ReLU on a 3-D (view) input


def test_fw_args_golden():
    torch.manual_seed(0)
    rec, tr = _tracer()
    _run(Net(), tr)
    fw = {e["name"]: e["args"] for e in rec.event_dicts() if e["cat"] == "FW"}
    q = fw["FW.blocks.0.q"]
    # Linear 8->8 on 3x5 rows: 2*8*8*15 FLOPs; params 8*8+8 floats; in/out 15*8 floats
    assert q == {"module": "blocks.0.q", "type": "Linear", "param_bytes": 72 * 4,
                 "in_bytes": 15 * 8 * 4, "out_bytes": 15 * 8 * 4, "flops": 2 * 8 * 8 * 15,
                 "step": 0, "occ": 0}
    emb = fw["FW.emb"]
    assert emb["flops"] == 0 and emb["in_bytes"] == 15 * 8 and emb["param_bytes"] == 160 * 4
    assert "flops" not in fw["FW.blocks.0.ln"]
    bw = {e["name"]: e["args"] for e in rec.event_dicts() if e["cat"] == "BW"}
    assert bw["BW.head"] == {"module": "head", "type": "Linear", "param_bytes": 180 * 4,
                             "step": 0, "occ": 0}


def test_conv_flops_golden():
    rec, tr = _tracer()
    conv = nn.Conv2d(3, 4, kernel_size=3, padding=1, groups=1)
    tr.install()
    try:
        conv(torch.randn(2, 3, 5, 5)).sum().backward()
    finally:
        tr.remove()
    (fw,) = [e for e in rec.event_dicts() if e["cat"] == "FW"]
    # 2 * out elements (2*4*5*5) * C_in/groups (3) * kernel (9)
    assert fw["args"]["flops"] == 2 * 200 * 3 * 9


def test_module_called_twice_gets_occurrences():
    lin = nn.Linear(4, 4)
    model = nn.Sequential(lin, nn.Tanh(), lin)
    rec, tr = _tracer()
    tr.install()
    try:
        model(torch.randn(2, 4)).sum().backward()
    finally:
        tr.remove()
    fw = [(e["name"], e["args"]["occ"]) for e in rec.event_dicts() if e["cat"] == "FW"]
    assert fw == [("FW.0", 0), ("FW.1", 0), ("FW.0", 1)]
    bw = rec.event_dicts()
    assert sorted((e["name"], e["args"]["occ"]) for e in bw if e["cat"] == "BW") == \
        [("BW.0", 0), ("BW.0", 1), ("BW.1", 0)]


def test_identity_gets_zero_length_bw():
    model = nn.Sequential(nn.Linear(4, 4), nn.Identity(), nn.Linear(4, 1))
    rec, tr = _tracer()
    tr.install()
    try:
        model(torch.randn(2, 4)).sum().backward()
    finally:
        tr.remove()
    bw = {e["name"]: e["dur"] for e in rec.event_dicts() if e["cat"] == "BW"}
    assert set(bw) == {"BW.0", "BW.1", "BW.2"} and bw["BW.1"] == 0.0


@pytest.mark.parametrize("depth, expected", [
    (0, ["FW.Net"]),
    # blocks (a ModuleList) is never called: no level of its own, its blocks are level 1
    # (it used to be traced at level 1 and so hid every block: issue 16)
    (1, ["FW.emb", "FW.blocks.0", "FW.blocks.1", "FW.head"]),
    (2, ["FW.emb", *[f"FW.blocks.{i}.{m}" for i in (0, 1) for m in ("ln", "q", "k", "v", "act")],
         "FW.head"]),
])
def test_depth_selects_a_level(depth, expected):
    torch.manual_seed(0)
    rec, tr = _tracer(depth=depth)
    _run(Net(), tr)
    assert _names(rec, "FW") == expected
    assert sorted(_names(rec, "BW")) == sorted(n.replace("FW.", "BW.") for n in expected)


def test_multihead_attention_is_traced_as_a_leaf():
    mha = nn.MultiheadAttention(8, 2, batch_first=True)
    model = nn.Sequential(nn.Linear(8, 8))
    rec, tr = _tracer()
    tr.install()
    try:
        h = model(torch.randn(2, 3, 8))
        mha(h, h, h, need_weights=False)[0].sum().backward()
    finally:
        tr.remove()
    assert "FW.MultiheadAttention" in _names(rec, "FW")
    assert "BW.MultiheadAttention" in _names(rec, "BW")


def test_hooks_removed_and_leaf_hooks_dropped():
    before_pre = len(nn_module._global_forward_pre_hooks)
    before_post = len(nn_module._global_forward_hooks)
    model = nn.Sequential(nn.Embedding(10, 4), nn.Linear(4, 2))
    rec, tr = _tracer()
    tr.install()
    tr.install()  # idempotent
    assert len(nn_module._global_forward_pre_hooks) == before_pre + 1
    model(torch.randint(0, 10, (3,))).sum().backward()
    assert model[0].weight._backward_hooks  # BW end of the embedding: a parameter hook
    tr.remove()
    tr.remove()
    assert len(nn_module._global_forward_pre_hooks) == before_pre
    assert len(nn_module._global_forward_hooks) == before_post
    assert not model[0].weight._backward_hooks
    assert "BW.0" in _names(rec, "BW")


def test_nothing_recorded_when_not_recording():
    rec, tr = _tracer()
    rec.recording = False
    tr.install()
    try:
        nn.Linear(2, 2)(torch.randn(1, 2)).sum().backward()
    finally:
        tr.remove()
    assert rec.events == []


def test_wrapper_prefixes_are_stripped():
    assert _strip("module.blocks.0.q", True) == "blocks.0.q"
    assert _strip("module", True) == ""
    assert _strip("layers.0._fsdp_wrapped_module.attn", False) == "layers.0.attn"
    assert _strip("_orig_mod.head", False) == "head"
    assert _strip("module.x", False) == "module.x"


def test_paths_from_explicit_root_and_param_table():
    model = Net()
    rec, tr = _tracer(root=model)
    table = tr.param_table()
    assert table[0] == {"name": "emb.weight", "shape": [20, 8], "dtype": "float32",
                        "bytes": 640}
    assert len(table) == len(list(model.parameters()))
    _run(model, tr)
    assert tr.micro_batch_size == 3
    assert _names(rec, "FW")[0] == "FW.emb"


def test_buffer_table_lists_every_buffer_the_root_holds():
    """BatchNorm's statistics and a non-persistent buffer alike (DDP broadcasts both), named
    without a wrapper's prefix."""
    model = nn.Sequential(nn.Linear(4, 4), nn.BatchNorm1d(4))
    model.register_buffer("mask", torch.ones(2, 3), persistent=False)
    _, tr = _tracer(root=model)
    table = {b["name"]: b for b in tr.buffer_table()}
    assert set(table) == {"1.running_mean", "1.running_var", "1.num_batches_tracked", "mask"}
    assert table["1.num_batches_tracked"] == {"name": "1.num_batches_tracked", "shape": [],
                                              "dtype": "int64", "bytes": 8}
    assert table["mask"]["bytes"] == 24 and table["1.running_var"]["bytes"] == 16
    assert _tracer(root=Net())[1].buffer_table() == []


class _KeywordLM(nn.Module):
    """Called as Hugging Face models are: ``model(input_ids=x, labels=x)``."""

    def __init__(self) -> None:
        super().__init__()
        self.emb = nn.Embedding(50, 8)
        self.head = nn.Linear(8, 50)

    def forward(self, input_ids: torch.Tensor | None = None,
                attention_mask: torch.Tensor | None = None,
                labels: torch.Tensor | None = None) -> torch.Tensor:
        return self.head(self.emb(input_ids)).logsumexp(-1).mean()


@pytest.mark.parametrize("given_root", [True, False])
def test_micro_batch_and_tokens_of_a_model_called_with_keywords(given_root: bool) -> None:
    model = _KeywordLM()
    rec = Recorder()
    rec.new_step(0)
    rec.recording = True
    tr = ModuleTracer(rec, CpuTimer(rec), root=model if given_root else None)
    tr.install()
    try:
        ids = torch.randint(50, (3, 7))
        mask = torch.ones(5, 5)  # a tensor first in the dict that is not the input
        for _ in range(2):  # found during its first call, the root is read from its next
            model(attention_mask=mask, input_ids=ids, labels=ids).backward()
        assert tr.micro_batch_size == 3 and tr.tokens == 21
        assert not model._forward_pre_hooks  # the keyword hook removed itself
    finally:
        tr.remove()
