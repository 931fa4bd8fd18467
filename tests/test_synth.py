"""synth: GPT operator FLOPs, parameter counts, roofline times, files, bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from echo_sim.cli import build_parser
from echo_sim.commands.synth import COMMAND
from echo_sim.cost.hardware import get_gpu
from echo_sim.errors import ConfigError, EchoError
from echo_sim.sim.synth import (
    ADAM_BYTES_PER_PARAM,
    GPTShape,
    SynthConfig,
    gpt_layer_flops,
    gpt_ops,
    gpt_params,
    roofline_us,
    synth_trace,
)
from echo_sim.trace.model import Cat

GPT175 = GPTShape(layers=96, hidden=12288, heads=96, seq=2048, vocab=51200, micro_batch=1)
SMALL = GPTShape(layers=2, hidden=64, heads=4, seq=16, vocab=100, micro_batch=3)


def _count(shape: GPTShape) -> int:
    total = 0
    for _, shp in gpt_params(shape):
        n = 1
        for d in shp:
            n *= d
        total += n
    return total


def test_gpt175b_parameter_count() -> None:
    n = _count(GPT175)
    assert n == pytest.approx(175e9, rel=0.01)
    # closed form: 12Lh² + 13Lh + 2Vh (untied) + sh + 2h
    h, L, V, s = 12288, 96, 51200, 2048
    assert n == 12 * L * h * h + 13 * L * h + 2 * V * h + s * h + 2 * h


def test_layer_flops_closed_form() -> None:
    b, s, h = 3, 16, 64
    closed = 24 * b * s * h * h + 4 * b * s * s * h  # Narayanan et al. 2021
    assert gpt_layer_flops(SMALL) == closed
    for i in range(SMALL.layers):
        ops = [o for o in gpt_ops(SMALL) if o.module.startswith(f"blocks.{i}.")]
        assert sum(o.flops for o in ops) == closed
    ops = {o.module: o for o in gpt_ops(SMALL)}
    assert ops["head"].flops == 2 * b * s * h * 100
    assert ops["blocks.0.mlp.fc1"].flops == 2 * (b * s) * h * 4 * h  # 2·in·out·rows
    assert ops["tok_emb"].flops == ops["blocks.1.ln2"].flops == 0


def test_names_and_params_match_examples_gpt() -> None:
    torch = pytest.importorskip("torch")
    from examples.models import GPT, GPTConfig

    cfg = GPTConfig(vocab_size=100, seq_len=16, hidden=64, layers=2, heads=4)
    model = GPT(cfg)
    real = [(n, list(p.shape)) for n, p in model.named_parameters()]
    assert gpt_params(SMALL) == real
    leaves = [n for n, m in model.named_modules() if n and not list(m.children())]
    synth = [o.module for o in gpt_ops(SMALL) if not o.module.endswith("attn.core")]
    assert synth == leaves
    kinds = {n: type(m).__name__ for n, m in model.named_modules()}
    for o in gpt_ops(SMALL, "fp32"):
        if o.kind != "Attention":
            assert o.kind == kinds[o.module]
            mod = model.get_submodule(o.module)
            own = sum(p.numel() * 4 for p in mod.parameters(recurse=False))
            assert o.param_bytes == own, o.module
    # in/out bytes as echo_trace measures them: a real forward of one block's fc1
    x = torch.zeros(3, 16, 64)
    y = model.blocks["0"].mlp.fc1(x)
    fc1 = next(o for o in gpt_ops(SMALL, "fp32") if o.module == "blocks.0.mlp.fc1")
    assert (fc1.in_bytes, fc1.out_bytes) == (x.numel() * 4, y.numel() * 4)


def test_times_follow_roofline() -> None:
    cfg = SynthConfig(model=SMALL, gpu="h100", dtype="bf16", efficiency=0.4, steps=2)
    gpu = get_gpu("h100")
    tr = synth_trace(cfg)
    ev = tr.events
    ops = {o.module: o for o in gpt_ops(SMALL, "bf16")}
    seen = 0
    for row in tr.step_rows(0, 1):
        name = tr.name_of(int(row))
        cat = int(ev.cat[row])
        if cat in (Cat.FW, Cat.BW):
            o = ops[name.split(".", 1)[1]]
            fl, nb = (o.flops, o.fw_bytes) if cat == Cat.FW else (2 * o.flops, o.bw_bytes)
            expect = max(fl / (989.4e12 * 0.4) * 1e6, nb / (3350.0 * 1e3))
            assert ev.dur_us[row] == pytest.approx(expect)
            seen += 1
    assert seen == 2 * len(ops)
    # memory-bound layer norm: bytes / bandwidth; the update: 28 bytes per parameter
    ln = ops["blocks.0.ln1"]
    assert roofline_us(ln.flops, ln.fw_bytes, gpu, "bf16", 0.4) == ln.fw_bytes / 3.35e6
    upd = tr.step_rows(0, 0)[ev.cat[tr.step_rows(0, 0)] == Cat.UPDATE]
    assert tr.name_of(int(upd[0])) == "UPDATE.AdamW"
    assert ev.dur_us[upd[0]] == pytest.approx(_count(SMALL) * ADAM_BYTES_PER_PARAM / 3.35e6)
    assert ev.param_bytes[upd[0]] == _count(SMALL) * 2


def test_compute_bound_at_scale() -> None:
    # GPT-175B fc1 on an A100 at 50%: 8·b·s·h² / 156 TFLOP/s, far above its bytes / 2 TB/s
    fc1 = next(o for o in gpt_ops(GPT175) if o.module == "blocks.0.mlp.fc1")
    t = roofline_us(fc1.flops, fc1.fw_bytes, get_gpu("a100"), "bf16", 0.5)
    assert t == pytest.approx(8 * 2048 * 12288**2 / 156e12 * 1e6)


def test_trace_structure() -> None:
    tr = synth_trace(SynthConfig(model=SMALL, steps=3))
    n_ops = len(gpt_ops(SMALL))
    assert tr.steps == [0, 1, 2]
    assert len(tr.events) == 3 * (2 * n_ops + 2)
    rows = tr.step_rows(0, 2)
    names = [tr.name_of(int(r)) for r in rows]
    assert names[0] in ("STEP", "FW.tok_emb")
    fw = [n for n in names if n.startswith("FW.")]
    bw = [n for n in names if n.startswith("BW.")]
    assert [n[3:] for n in bw] == [n[3:] for n in reversed(fw)]
    lo, hi = tr.iteration_bounds(0, 1)
    assert hi - lo == pytest.approx(float(tr.events.dur_us[tr.step_rows(0, 1)][
        tr.events.cat[tr.step_rows(0, 1)] != Cat.STEP].sum()))
    meta = tr.ranks[0].meta
    assert meta["synthetic"] is True and meta["micro_batch_size"] == 3
    assert meta["model"]["params"] == _count(SMALL)
    assert meta["param_bytes"] == 2 * _count(SMALL)


def _opts(*argv: str):
    return build_parser([COMMAND]).parse_args(["synth", *argv])


def test_cli_writes_echo_trace(tmp_path: Path) -> None:
    out = tmp_path / "gpt"
    argv = ("--model", "gpt", "--layers", "2", "--hidden", "64", "--heads", "4", "--seq", "16",
            "--vocab", "100", "--micro-batch", "3", "--gpu", "a100", "--output", str(out))
    res = COMMAND.run(_opts(*argv))
    rank = out / "0_0"
    assert res.data["output"] == str(rank)
    assert {p.name for p in rank.iterdir()} == {"trace.json", "meta.json", "dag.gml"}
    meta = json.loads((rank / "meta.json").read_text())
    assert meta["synthetic"] is True and meta["world_size"] == 1
    assert meta["model"] == {"name": "gpt", "layers": 2, "hidden": 64, "heads": 4, "seq": 16,
                             "vocab": 100, "mlp_ratio": 4, "micro_batch_size": 3,
                             "params": _count(SMALL), "param_bytes": 2 * _count(SMALL)}
    events = json.loads((rank / "trace.json").read_text())["traceEvents"]
    qkv = next(e for e in events if e["name"] == "FW.blocks.1.attn.qkv")
    assert qkv["args"] == {"step": 0, "occ": 0, "module": "blocks.1.attn.qkv", "type": "Linear",
                           "param_bytes": (64 * 192 + 192) * 2, "in_bytes": 48 * 64 * 2,
                           "out_bytes": 48 * 192 * 2, "flops": 2 * 48 * 64 * 192}
    with pytest.raises(EchoError, match="exists"):
        COMMAND.run(_opts(*argv))
    COMMAND.run(_opts(*argv, "--force"))


@pytest.mark.parametrize("make, needle", [
    (lambda: GPTShape(layers=2, hidden=100, heads=3, seq=8, vocab=10), "must divide by --heads 3"),
    (lambda: GPTShape(layers=0, hidden=64, heads=4, seq=8, vocab=10), "--layers 0"),
    (lambda: SynthConfig(model=SMALL, gpu="tpu-v4"), "valid: v100, a100"),
    (lambda: SynthConfig(model=SMALL, dtype="int8"), "valid: fp32, tf32, bf16, fp16"),
    (lambda: SynthConfig(model=SMALL, efficiency=1.5), "(0, 1]"),
    (lambda: SynthConfig(model=SMALL, steps=0), "--steps 0"),
])
def test_bad_input(make, needle: str) -> None:
    with pytest.raises(ConfigError) as e:
        make()
    assert needle in str(e.value) and "\n" not in str(e.value)
