"""Micro-batch in meta.json and the warnings for what capture cannot see: a
torch.compile'd model, steps GradScaler skips, eval / no_grad forwards in the window."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest
import torch
from torch import nn

import echo_trace
from echo_trace.config import CaptureConfig
from echo_trace.hooks.modules import ModuleTracer
from echo_trace.recorder import Recorder
from echo_trace.timing.clock import CpuTimer


class TokenNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.emb = nn.Embedding(50, 8)
        self.head = nn.Linear(8, 50)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        return self.head(self.emb(idx))


def _train(steps: int, model: nn.Module, *, batch: int = 4, seq: int = 6) -> None:
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    g = torch.Generator().manual_seed(0)
    for _ in range(steps):
        idx = torch.randint(0, 50, (batch, seq), generator=g)
        model(idx).square().mean().backward()
        opt.step()
        opt.zero_grad()


def _meta(out: Path) -> dict:  # type: ignore[type-arg]
    return json.loads(next(out.iterdir()).joinpath("meta.json").read_text())


def _trace(out: Path) -> list[dict]:  # type: ignore[type-arg]
    return json.loads(next(out.iterdir()).joinpath("trace.json").read_text())["traceEvents"]


def test_micro_batch_and_tokens_detected(tmp_path: Path) -> None:
    with echo_trace.capture(tmp_path, start_step=1, end_step=3):
        _train(4, TokenNet(), batch=4, seq=6)
    m = _meta(tmp_path)
    assert (m["micro_batch"], m["micro_batch_source"], m["tokens"]) == (4, "detected", 24)
    assert m["micro_batch_size"] == 4


def test_micro_batch_given_by_the_user(tmp_path: Path) -> None:
    with echo_trace.capture(tmp_path, start_step=1, end_step=3, micro_batch=8):
        _train(4, TokenNet(), batch=4, seq=6)
    m = _meta(tmp_path)
    assert (m["micro_batch"], m["micro_batch_source"], m["tokens"]) == (8, "user", 48)
    cfg = CaptureConfig.from_env({"TRACE_MICRO_BATCH": "16"})
    assert cfg.micro_batch == 16
    with pytest.raises(ValueError, match="micro_batch=0"):
        CaptureConfig(micro_batch=0)


def test_micro_batch_assumed_without_a_module_input(tmp_path: Path) -> None:
    w = nn.Parameter(torch.ones(3))
    opt = torch.optim.SGD([w], lr=0.1)
    with echo_trace.capture(tmp_path, start_step=1, end_step=2):
        for _ in range(3):
            (w * 2).sum().backward()
            opt.step()
    m = _meta(tmp_path)
    assert (m["micro_batch"], m["micro_batch_source"], m["tokens"]) == (1, "assumed", None)


def test_grad_scaler_skip_counts_marks_and_warns(tmp_path: Path,
                                                 caplog: pytest.LogCaptureFixture) -> None:
    torch.manual_seed(0)
    model = nn.Linear(4, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    scaler = torch.amp.GradScaler("cpu", init_scale=2.0**4)
    caplog.set_level(logging.WARNING, logger="echo_trace")
    with echo_trace.capture(tmp_path, start_step=1, end_step=4) as cap:
        for i in range(5):
            scaler.scale(model(torch.randn(3, 4)).sum()).backward()
            if i == 2:
                model.weight.grad[0, 0] = float("inf")
            scaler.step(opt)
            scaler.update()
            opt.zero_grad()
            assert cap.step_count == min(i + 1, 4)  # the skipped step counts too
    assert scaler.get_scale() < 2.0**4  # the scaler did skip
    steps = {e["args"]["step"]: e["args"] for e in _trace(tmp_path) if e["name"] == "STEP"}
    assert sorted(steps) == [1, 2, 3]
    assert steps[2].get("grad_scaler_skipped") is True
    assert "grad_scaler_skipped" not in steps[1] and "grad_scaler_skipped" not in steps[3]
    msgs = [r.getMessage() for r in caplog.records if "GradScaler skipped" in r.getMessage()]
    assert len(msgs) == 1
    from torch.amp.grad_scaler import GradScaler

    assert GradScaler._maybe_opt_step.__qualname__ == "GradScaler._maybe_opt_step"  # restored


def test_no_grad_and_eval_forward_in_window_warn_once(tmp_path: Path,
                                                      caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="echo_trace")
    model = TokenNet()
    idx = torch.randint(0, 50, (2, 3))
    with echo_trace.capture(tmp_path, start_step=1, end_step=3):
        _train(2, model)
        with torch.no_grad():
            model(idx)
        model.eval()
        model(idx)
        model.train()
        _train(2, model)
    msgs = [r.getMessage() for r in caplog.records if "inside the capture window" in
            r.getMessage()]
    assert len(msgs) == 1 and "torch.no_grad()" in msgs[0]


def test_compiled_model_warns_without_compiling(caplog: pytest.LogCaptureFixture) -> None:
    """torch.compile returns an OptimizedModule at once; compiling happens at the first
    call, which this test never makes (slow on CPU)."""
    caplog.set_level(logging.WARNING, logger="echo_trace")
    rec = Recorder()
    compiled = torch.compile(TokenNet())
    ModuleTracer(rec, CpuTimer(rec), root=compiled)
    ModuleTracer(rec, CpuTimer(rec), root=TokenNet())
    msgs = [r.getMessage() for r in caplog.records if "torch.compile'd" in r.getMessage()]
    assert len(msgs) == 1 and "FW.TokenNet" in msgs[0]
