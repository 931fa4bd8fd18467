"""TRACE_DEPTH counts modules that run (issue 16): depth 1 on a GPT gives its blocks, and a
depth that leaves most of the step in no module event warns."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest
import torch
from torch import nn

import echo_trace
from echo_trace.hooks.coverage import module_coverage
from examples.models import GPT, GPTConfig, token_batch


def _train(model: nn.Module, out: Path, depth: int, make: Any) -> list[dict[str, Any]]:
    # five traced steps: the coverage is their median, so a step slowed by a busy host
    # (its time outside the modules grows) does not decide the test
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    with echo_trace.capture(out, start_step=1, end_step=6, depth=depth, model=model):
        for step in range(7):
            loss = make(model, step)
            loss.backward()
            opt.step()
            opt.zero_grad()
    return json.loads((out / "0_0" / "trace.json").read_text())["traceEvents"]


def _gpt_loss(model: nn.Module, step: int) -> torch.Tensor:
    x, y = token_batch(model.cfg, 8, seed=0, step=step)  # type: ignore[arg-type]
    return nn.functional.cross_entropy(model(x).flatten(0, 1), y.flatten())


def test_depth_one_on_a_gpt_traces_its_blocks(tmp_path: Path, caplog: Any) -> None:
    torch.manual_seed(0)
    # wide enough that the blocks' matmuls, not the step's Python around them, fill the step:
    # hidden 32 covered 0.70 on a quiet host and 0.46 in CI's loaded parallel pass, hidden
    # 128 covers 0.82-0.84 quiet
    cfg = GPTConfig(layers=2, hidden=128, heads=2, seq_len=64, vocab_size=256)
    with caplog.at_level(logging.WARNING, logger="echo_trace"):
        events = _train(GPT(cfg), tmp_path, 1, _gpt_loss)
    fw = {e["name"] for e in events if e.get("cat") == "FW"}
    assert fw == {"FW.tok_emb", "FW.pos_emb", "FW.blocks.0", "FW.blocks.1", "FW.ln_f",
                  "FW.head"}
    assert "BW.blocks.1" in {e["name"] for e in events if e.get("cat") == "BW"}
    cov = module_coverage(events)
    assert cov is not None and cov > 0.5
    assert "cover only" not in caplog.text


class _HeavyRoot(nn.Module):
    """Most of the work is the root's own matmuls; one tiny child."""

    def __init__(self) -> None:
        super().__init__()
        self.w = nn.Parameter(torch.randn(256, 256) / 16)
        self.tiny = nn.Linear(256, 256)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for _ in range(40):
            x = torch.tanh(x @ self.w)
        return self.tiny(x[:, :1].expand(-1, 256).contiguous()[:1])


def test_a_depth_hiding_most_of_the_step_warns(tmp_path: Path, caplog: Any) -> None:
    torch.manual_seed(0)
    with caplog.at_level(logging.WARNING, logger="echo_trace"):
        events = _train(_HeavyRoot(), tmp_path, 1,
                        lambda m, s: m(torch.randn(256, 256)).sum())
    assert {e["name"] for e in events if e.get("cat") == "FW"} == {"FW.tiny"}
    cov = module_coverage(events)
    assert cov is not None and cov < 0.5
    assert "TRACE_DEPTH=1: the traced modules cover only" in caplog.text


def test_module_coverage_by_hand() -> None:
    def x(name: str, cat: str, ts: float, dur: float, step: int) -> dict[str, Any]:
        return {"ph": "X", "name": name, "cat": cat, "ts": ts, "dur": dur,
                "args": {"step": step}}

    events = [x("STEP", "step", 0, 100, 1), x("FW.a", "FW", 0, 30, 1),
              x("FW.a.b", "FW", 10, 10, 1),  # nested: counted once
              x("BW.a", "BW", 50, 20, 1), x("UPDATE.SGD", "UPDATE", 90, 20, 1),  # clipped
              x("STEP", "step", 100, 100, 2), x("FW.a", "FW", 100, 10, 2)]
    # step 1: 30 + 20 + 10 = 60 of 100; step 2: 10 of 100; median of two = mean
    assert module_coverage(events) == pytest.approx(0.35)
    assert module_coverage([x("FW.a", "FW", 0, 1, 1)]) is None
