"""The shipped examples: models, synthetic data, flags and every training layout.

Multi-process layouts run for real as 2 gloo processes with torchrun's environment, forked
with torch imported (:func:`tests.harness.run_ranks`; the demo and the end-to-end trace
tests launch the same script with torchrun itself), and must train on exactly the data a
single process sees with gradient accumulation, so their losses are held to the
single-process losses (float reordering only); capture must not change them.
"""

from __future__ import annotations

import copy
import math
import re
from collections import Counter
from pathlib import Path

import pytest
import torch

from examples.models import (
    GPT,
    Block,
    CNNConfig,
    GPTConfig,
    SmallCNN,
    image_batch,
    stage_bounds,
    token_batch,
)
from examples.train import TrainConfig, parse_flags
from tests.harness import REPO, run_forked, run_python, run_ranks

TRAIN = str(REPO / "examples" / "train.py")
TINY = ["--steps", "3", "--print-losses", "--layers", "2", "--hidden", "64", "--seq", "32",
        "--micro-batch", "4", "--global-batch", "8"]
LOSS_LINE = re.compile(r"^rank (\d+) step (\d+) loss (\S+)$", re.M)


def losses_by_step(stdout: str) -> dict[int, list[float]]:
    """``{step: [loss of each reporting rank]}`` from ``--print-losses`` output."""
    out: dict[int, list[float]] = {}
    for _rank, step, loss in LOSS_LINE.findall(stdout):
        out.setdefault(int(step), []).append(float(loss))
    return out


def mean_losses(stdout: str) -> list[float]:
    """Per-step loss averaged over reporting ranks (data-parallel shards are equal-sized)."""
    per = losses_by_step(stdout)
    return [sum(v) / len(v) for _, v in sorted(per.items())]


# ----------------------------------------------------------------------------- models
def test_gpt_child_names_are_megatron_like() -> None:
    names = {n for n, _ in GPT(GPTConfig(layers=2, hidden=32, heads=2)).named_modules()}
    for i in (0, 1):
        for leaf in ("attn.qkv", "attn.proj", "mlp.fc1", "mlp.fc2", "ln1", "ln2", "mlp.act"):
            assert f"blocks.{i}.{leaf}" in names
    assert {"tok_emb", "pos_emb", "ln_f", "head"} <= names


def test_gpt_shapes_and_param_count() -> None:
    cfg = GPTConfig(vocab_size=50, seq_len=16, hidden=32, layers=2, heads=4)
    model = GPT(cfg)
    x, _ = token_batch(cfg, 3, seed=0, step=0)
    assert model(x).shape == (3, 16, 50)
    h, v, t = 32, 50, 16
    per_block = 2 * 2 * h + (h * 3 * h + 3 * h) + (h * h + h) + (h * 4 * h + 4 * h) + (4 * h * h + h)
    expected = v * h + t * h + 2 * per_block + 2 * h + h * v
    assert sum(p.numel() for p in model.parameters()) == expected


@pytest.mark.parametrize("mode", ["selective", "full"])
def test_recomputation_keeps_gradients_and_saves_less(mode: str) -> None:
    """Selective (attention core) and full (whole block) recomputation give the gradients of
    plain training while autograd saves fewer bytes for backward."""
    from examples.train import _build_model

    cfg = TrainConfig(layers=2, hidden=32, heads=4, seq=16, vocab=50, micro_batch=3)
    x, y = token_batch(cfg.gpt(), 3, seed=0, step=0)

    def run(recompute: str) -> tuple[list[torch.Tensor], int]:
        model = _build_model(TrainConfig(**{**cfg.__dict__, "recompute": recompute}))
        saved = [0]

        def pack(t: torch.Tensor) -> torch.Tensor:
            saved[0] += t.numel() * t.element_size()
            return t

        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            loss = torch.nn.functional.cross_entropy(model(x).flatten(0, 1), y.flatten())
        loss.backward()
        return [p.grad.clone() for p in model.parameters()], saved[0]  # type: ignore[union-attr]

    plain, plain_bytes = run("none")
    grads, saved_bytes = run(mode)
    for a, b in zip(plain, grads, strict=True):
        torch.testing.assert_close(a, b)
    assert saved_bytes < plain_bytes
    if mode == "selective":  # the (b, heads, t, t) scores/probabilities no longer saved
        assert plain_bytes - saved_bytes >= 2 * 3 * 4 * 16 * 16 * 4 * cfg.layers


def test_gpt_rejects_heads_not_dividing_hidden() -> None:
    with pytest.raises(ValueError, match="heads"):
        GPTConfig(hidden=30, heads=4)


def test_qkv_layout_shards_whole_heads() -> None:
    """Megatron layout: summing two column/row half-shards reproduces the full attention."""
    torch.manual_seed(0)
    cfg = GPTConfig(hidden=32, heads=4, layers=1, seq_len=8)
    block = GPT(cfg).blocks["0"]
    assert isinstance(block, Block)
    full = block.attn
    x = torch.randn(2, 8, 32)
    want = full(x)
    got = torch.zeros_like(want)
    for r in range(2):
        part = copy.deepcopy(full)
        rows = slice(r * 48, (r + 1) * 48)  # 3 * hidden / 2 output features of qkv
        cols = slice(r * 16, (r + 1) * 16)  # hidden / 2 input features of proj
        part.qkv.weight.data = full.qkv.weight.data[rows].clone()
        part.qkv.bias.data = full.qkv.bias.data[rows].clone()
        part.proj.weight.data = full.proj.weight.data[:, cols].clone()
        part.proj.bias.data = full.proj.bias.data / 2
        got += part(x)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)


def test_stage_bounds_cover_layers() -> None:
    assert [stage_bounds(5, s, 2) for s in range(2)] == [(0, 3), (3, 5)]
    assert [stage_bounds(4, s, 4) for s in range(4)] == [(0, 1), (1, 2), (2, 3), (3, 4)]


def test_pipeline_stages_compose_to_full_model() -> None:
    torch.manual_seed(0)
    cfg = GPTConfig(vocab_size=40, seq_len=8, hidden=32, layers=3, heads=2)
    full = GPT(cfg)
    x, _ = token_batch(cfg, 2, seed=1, step=0)
    s0 = copy.deepcopy(full).keep_stage(0, 2)
    s1 = copy.deepcopy(full).keep_stage(1, 2)
    assert sorted(s0.blocks.keys()) == ["0", "1"] and sorted(s1.blocks.keys()) == ["2"]
    assert s0.head is None and s1.tok_emb is None
    assert "blocks.2.attn.qkv" in dict(s1.named_modules())
    torch.testing.assert_close(s1(s0(x)), full(x))
    with pytest.raises(ValueError, match="stage"):
        copy.deepcopy(full).keep_stage(0, 4)


def test_small_cnn_forward_and_inplace_relu() -> None:
    cfg = CNNConfig(image_size=16, width=8)
    model = SmallCNN(cfg)
    x, y = image_batch(cfg, 5, seed=0, step=0)
    assert x.shape == (5, 3, 16, 16) and y.shape == (5,)
    assert model(x).shape == (5, 10)
    assert model.relu1.inplace and model.relu2.inplace


def test_synthetic_data_is_deterministic_and_learnable() -> None:
    cfg = GPTConfig(vocab_size=64, seq_len=32)
    x1, y1 = token_batch(cfg, 4, seed=3, step=5, index=1)
    x2, y2 = token_batch(cfg, 4, seed=3, step=5, index=1)
    x3, _ = token_batch(cfg, 4, seed=3, step=5, index=2)
    assert torch.equal(x1, x2) and torch.equal(y1, y2) and not torch.equal(x1, x3)
    assert torch.equal(x1[:, 1:], y1[:, :-1])  # targets are inputs shifted by one
    # 90% of transitions follow the seed's successor table: each token's most common
    # successor accounts for ~90% of its transitions (chance would be ~1/64 + noise).
    x, y = token_batch(cfg, 64, seed=3, step=0)
    counts: dict[int, Counter[int]] = {}
    for a, b in zip(x.flatten().tolist(), y.flatten().tolist(), strict=True):
        counts.setdefault(a, Counter())[b] += 1
    top = sum(c.most_common(1)[0][1] for c in counts.values())
    assert 0.85 < top / x.numel() < 0.95


# ----------------------------------------------------------------------------- flags
def test_parse_flags_golden() -> None:
    cfg = parse_flags(["--layout", "ddp", "--model=cnn", "--steps", "7", "--micro-batch", "4",
                       "--global-batch=16", "--capture", "--lr", "1e-3", "--trace-dir", "t"])
    assert cfg == TrainConfig(layout="ddp", model="cnn", steps=7, micro_batch=4,
                              global_batch=16, capture=True, lr=1e-3, trace_dir="t")
    assert parse_flags([]).batch == 8 and parse_flags(["--model", "cnn"]).batch == 32


@pytest.mark.parametrize("argv, msg", [
    (["--layout", "zero"], "choose one of single, ddp, fsdp, tp, pp"),
    (["--layout", "tp", "--model", "cnn"], "needs --model gpt"),
    (["--micro-batch", "3", "--global-batch", "8"], "multiple of --micro-batch 3"),
    (["--bogus", "1"], "unknown flag --bogus"),
    (["--steps"], "needs a value"),
    (["--trace-start", "4", "--trace-end", "4"], "need 0 <= start < end"),
])
def test_parse_flags_rejects(argv: list[str], msg: str) -> None:
    with pytest.raises(ValueError, match=re.escape(msg)):
        parse_flags(argv)


def test_help_lists_every_flag(capsys: pytest.CaptureFixture[str]) -> None:
    from examples.train import main

    assert main(["--help"]) == 0
    out = capsys.readouterr().out
    for flag in ("--layout", "--model", "--steps", "--micro-batch", "--global-batch", "--layers",
                 "--hidden", "--heads", "--seq", "--capture", "--trace-dir", "--seed",
                 "--print-losses", "--time-steps"):
        assert flag in out


def test_distributed_layout_without_launcher_exits_2() -> None:
    proc = run_python([TRAIN, "--layout", "ddp"], timeout=60)
    assert proc.returncode == 2
    assert "needs a launcher: torchrun" in proc.stderr


# ----------------------------------------------------------------------------- runs
@pytest.fixture(scope="module")
def single_losses() -> list[float]:
    """Reference: one process, 2 micro-batches of 4 accumulated per step."""
    proc = run_forked([TRAIN, "--layout", "single", *TINY], timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    losses = mean_losses(proc.stdout)
    assert len(losses) == 3
    return losses


def test_single_loss_falls(single_losses: list[float]) -> None:
    assert all(math.isfinite(x) for x in single_losses)
    assert single_losses[0] == pytest.approx(math.log(256), abs=0.05)  # uniform at init
    assert single_losses[-1] < single_losses[0] - 0.05


def test_single_cnn_loss_falls() -> None:
    proc = run_forked([TRAIN, "--model", "cnn", "--steps", "5", "--print-losses",
                       "--micro-batch", "16", "--width", "16"], timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    losses = mean_losses(proc.stdout)
    assert len(losses) == 5 and all(math.isfinite(x) for x in losses)
    assert losses[-1] < losses[0]


def test_time_steps_file(tmp_path: Path) -> None:
    out = tmp_path / "steps.json"
    proc = run_forked([TRAIN, "--steps", "2", "--layers", "1", "--hidden", "32", "--seq", "16",
                       "--time-steps", str(out)], timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    import json

    data = json.loads(out.read_text())
    assert data["layout"] == "single" and data["world_size"] == 1
    assert len(data["step_s"]) == 2 and all(t > 0 for t in data["step_s"])


@pytest.mark.slow
@pytest.mark.parametrize("layout", ["ddp", "fsdp", "tp", "pp"])
def test_layout_trains_like_single_process(layout: str, single_losses: list[float]) -> None:
    proc = run_ranks([TRAIN, "--layout", layout, *TINY], nproc=2, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    per = losses_by_step(proc.stdout)
    reporters = {"ddp": 2, "fsdp": 2, "tp": 1, "pp": 1}[layout]
    assert sorted(per) == [0, 1, 2] and all(len(v) == reporters for v in per.values())
    losses = mean_losses(proc.stdout)
    assert all(math.isfinite(x) for x in losses)
    assert losses[-1] < losses[0]
    # same data, same initial weights: only float summation order differs
    assert losses == pytest.approx(single_losses, rel=1e-5)


@pytest.mark.slow
@pytest.mark.parametrize("layout", ["ddp", "fsdp"])
def test_cnn_data_parallel_trains(layout: str) -> None:
    proc = run_ranks([TRAIN, "--layout", layout, "--model", "cnn", "--steps", "3",
                      "--print-losses", "--micro-batch", "8", "--global-batch", "32",
                      "--width", "16"],
                     nproc=2, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    losses = mean_losses(proc.stdout)
    assert len(losses) == 3 and all(math.isfinite(x) for x in losses)
    assert losses[-1] < losses[0]


def _capture_available() -> bool:
    try:
        import echo_trace
    except ImportError:
        return False
    return hasattr(echo_trace, "capture")


@pytest.mark.skipif(not _capture_available(), reason="echo_trace.capture not built yet")
@pytest.mark.parametrize("model", ["gpt", "cnn"])
def test_capture_does_not_change_losses(model: str, tmp_path: Path) -> None:
    flags = [TRAIN, "--model", model, "--steps", "5", "--print-losses",
             "--micro-batch", "4" if model == "gpt" else "8", "--layers", "2", "--hidden", "64",
             "--seq", "32", "--width", "8"]
    plain = run_forked(flags, timeout=120)
    traced = run_forked([*flags, "--capture", "--trace-dir", str(tmp_path / "traces"),
                         "--trace-start", "1", "--trace-end", "4"], timeout=120)
    assert plain.returncode == 0, plain.stderr[-3000:]
    assert traced.returncode == 0, traced.stderr[-3000:]
    assert LOSS_LINE.findall(plain.stdout) == LOSS_LINE.findall(traced.stdout)  # bit-identical
    assert len(LOSS_LINE.findall(plain.stdout)) == 5
    assert (tmp_path / "traces" / "0_0" / "meta.json").is_file()
