"""``python -m echo_trace.profile``: runtime and graph mode, end to end, read back by echo_sim."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.forker import HF_PRELOAD
from tests.harness import run_forked, run_python

transformers = pytest.importorskip("transformers", reason="transformers is not installed "
                                   "(pip install 'echo-sim[huggingface]')")

HF_ARGS = ["--framework", "huggingface", "--model", "gpt2", "--tiny", "--batch-size", "2",
           "--seq-len", "64", "--num-repeats", "3"]


def make_gpt(batch_size: int, seq_len: int) -> tuple[Any, Any, Any]:
    """A ``--model-source local`` callable: examples.models.GPT, token batches, its loss."""
    import torch

    from examples.models import GPT, GPTConfig, token_batch

    cfg = GPTConfig(vocab_size=128, seq_len=seq_len, hidden=32, layers=2, heads=2)
    model = GPT(cfg)
    step = iter(range(1_000_000))
    target: list[torch.Tensor] = []

    def make_batch() -> torch.Tensor:
        x, y = token_batch(cfg, batch_size, seed=0, step=next(step))
        target[:] = [y]
        return x

    def loss_fn(out: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.cross_entropy(out.flatten(0, 1), target[0].flatten())

    return model, make_batch, loss_fn


def _profile(*args: str, timeout: float = 240) -> Any:
    """``python -m echo_trace.profile ARGS``, forked with torch and transformers imported."""
    return run_forked(["-m", "echo_trace.profile", *args], timeout=timeout, preload=HF_PRELOAD)


def _load_valid(path: Path) -> Any:
    from echo_sim.load import load_trace
    from echo_sim.trace.validate import validate

    trace = load_trace(path)
    errors = [v for v in validate(trace) if v.fatal]
    assert errors == [], errors
    return trace


def test_huggingface_runtime_writes_valid_trace(tmp_path: Path) -> None:
    res = _profile(*HF_ARGS, "--path", str(tmp_path))
    assert res.returncode == 0, res.stderr[-2000:]
    assert f"trace -> {tmp_path / '0_0'}" in res.stdout
    assert "step time" in res.stdout and "median of 3 captured steps" in res.stdout
    trace = _load_valid(tmp_path)
    assert trace.steps == [2, 3, 4]
    names = set(trace.names)
    assert "FW.transformer.h.1.mlp.c_fc" in names and "UPDATE.AdamW" in names
    meta = json.loads((tmp_path / "0_0" / "meta.json").read_text())
    assert meta["training"] == {"framework": "huggingface", "micro_batch_size": 2,
                                "gradient_accumulation_steps": 1, "data_parallel_size": 1,
                                "global_batch_size": 2}
    assert meta["micro_batch_size"] == 2 and meta["global_batch_size"] == 2
    assert meta["model"]["layers"] == 2 and meta["model"]["hidden"] == 64
    check = run_python(["-m", "echo_sim", "validate", str(tmp_path)])
    assert check.returncode == 0 and ": ok" in check.stdout, check.stdout + check.stderr


def _gpt2_forward_flops(b: int, s: int, h: int, layers: int, vocab: int) -> float:
    # per block: qkv 6bsh², proj 2bsh², fc1/fc2 8bsh² each, attention 4bs²h; head 2bshV
    return layers * (24.0 * b * s * h * h + 4.0 * b * s * s * h) + 2.0 * b * s * h * vocab


def test_huggingface_graph_mode(tmp_path: Path) -> None:
    res = _profile(*HF_ARGS, "--mode", "graph", "--path", str(tmp_path))
    assert res.returncode == 0, res.stderr[-2000:]
    assert "torch.export" in res.stdout
    trace = _load_valid(tmp_path)
    assert trace.steps == [0, 1, 2]
    ev = trace.events
    from echo_sim.trace.model import Cat

    fw = (ev.cat == int(Cat.FW)) & (ev.step == 0)
    assert float(ev.flops[fw].sum()) == _gpt2_forward_flops(2, 64, 64, 2, 1024)
    assert (ev.dur_us[fw] >= 0).all() and float(ev.dur_us[fw].sum()) > 0
    # dag.gml is in the contract and matches the events of its step
    from echo_sim.load.echo import read_dag

    dag = read_dag(tmp_path / "0_0" / "dag.gml")
    assert "FW.lm_head" in dag and "UPDATE.AdamW" in dag and "NEXT_STEP" in dag
    assert dag.has_edge("UPDATE.AdamW", "NEXT_STEP")
    # simulate reads it like a captured trace
    sim = run_python(["-m", "echo_sim", "simulate", str(tmp_path), "--dp", "2"])
    assert sim.returncode == 0, sim.stderr[-2000:]
    assert "dgx-a100" in sim.stdout  # predicted on the hardware the graph was timed for
    assert (tmp_path / "chakra" / "et.0.et").stat().st_size > 0


def test_pytorch_local_model_runtime_and_graph(tmp_path: Path) -> None:
    local = ["--framework", "pytorch", "--model-source", "local", "--model",
             "tests.test_profile:make_gpt", "--batch-size", "2", "--seq-len", "16",
             "--num-repeats", "2", "--warmup", "1", "--steps", "4"]
    res = _profile(*local, "--path", str(tmp_path / "rt"))
    assert res.returncode == 0, res.stderr[-2000:]
    trace = _load_valid(tmp_path / "rt")
    assert trace.steps == [1, 2]
    meta = json.loads((tmp_path / "rt" / "0_0" / "meta.json").read_text())
    assert meta["micro_batch_size"] == 2  # measured by capture from the token batch
    assert meta["training"]["framework"] == "pytorch"
    res = _profile(*local, "--mode", "graph", "--path", str(tmp_path / "graph"))
    assert res.returncode == 0, res.stderr[-2000:]
    g = _load_valid(tmp_path / "graph")
    # the same leaf modules as the run, plus the loss outside the model
    run_fw = {n for n in trace.names if n.startswith("FW.")}
    graph_fw = {n for n in g.names if n.startswith("FW.")}
    assert run_fw <= graph_fw, run_fw - graph_fw
    assert "FW.loss" in graph_fw


@pytest.mark.parametrize("args, flag", [
    (["--framework", "huggingface", "--model", "no-such-family"], "--model"),
    (["--model-source", "local", "--model", "no_colon"], "--model"),
    (["--model", "gpt2", "--model-source", "huggingface", "--config-overrides", "n_layer"],
     "--config-overrides"),
    (["--model", "gpt2", "--model-source", "huggingface", "--batch-size", "0"], "--batch-size"),
])
def test_bad_input_is_one_line_exit_2(tmp_path: Path, args: list[str], flag: str) -> None:
    res = _profile(*args, "--path", str(tmp_path), timeout=120)
    assert res.returncode == 2, res.stdout + res.stderr
    lines = [ln for ln in res.stderr.splitlines() if ln.startswith("echo-trace profile:")]
    assert len(lines) == 1 and flag in lines[0], res.stderr


def test_echo_trace_profile_subcommand_in_process(capsys: pytest.CaptureFixture[str]) -> None:
    """``echo-trace profile ...`` (the console script) takes the same flags."""
    from echo_trace.profile import main

    assert main(["profile", "--model", "gpt2", "--model-source", "huggingface",
                 "--num-repeats", "0"]) == 2
    assert "--num-repeats 0" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exc:
        main(["profile", "--help"])
    assert exc.value.code == 0
    assert "--framework" in capsys.readouterr().out


@pytest.mark.slow
def test_nproc_two_ranks_ddp(tmp_path: Path) -> None:
    res = _profile(*HF_ARGS, "--nproc", "2", "--path", str(tmp_path), timeout=300)
    assert res.returncode == 0, res.stderr[-3000:]
    trace = _load_valid(tmp_path)
    assert sorted(trace.ranks) == [0, 1]
    meta = json.loads((tmp_path / "0_1" / "meta.json").read_text())
    assert meta["training"]["data_parallel_size"] == 2
    assert meta["training"]["global_batch_size"] == 4
    assert any(n.startswith("Comm.") for n in trace.names)  # DDP's gradient all-reduce


def test_graph_mode_full_size_llama_on_meta_device(tmp_path: Path) -> None:
    """A 4096-wide Llama needs no weights in graph mode; FLOPs follow the architecture."""
    res = _profile("--framework", "huggingface", "--model", "llama", "--config-overrides",
                   "num_hidden_layers=2", "--batch-size", "1", "--seq-len", "128", "--mode",
                   "graph", "--num-repeats", "1", "--path", str(tmp_path))
    assert res.returncode == 0, res.stderr[-2000:]
    trace = _load_valid(tmp_path)
    from echo_sim.trace.model import Cat

    cfg = transformers.LlamaConfig()
    b, s, h, i, v = 1, 128, cfg.hidden_size, cfg.intermediate_size, cfg.vocab_size
    kv = cfg.num_key_value_heads * (h // cfg.num_attention_heads)
    # q, o: 2bsh² each; k, v: 2bsh·kv each; SwiGLU gate/up/down: 3 · 2bshi; attention 4bs²h
    per_layer = 2 * b * s * h * (2 * h + 2 * kv) + 3 * 2 * b * s * h * i + 4 * b * s * s * h
    ev = trace.events
    fw = ev.cat == int(Cat.FW)
    assert float(ev.flops[fw].sum()) == 2 * per_layer + 2 * b * s * h * v
    meta = json.loads((tmp_path / "0_0" / "meta.json").read_text())
    assert meta["param_bytes"] > 2 * 4 * h * h * 2  # the real parameter table, not allocated


def test_the_echo_tracers_own_spellings_are_accepted() -> None:
    """Echo's tracing_run.sh spellings (its README's flag table) parse to echo's options."""
    from echo_trace.profile.cli import build_parser

    a = build_parser().parse_args(
        ["--framework", "PyTorch", "--model", "gpt2", "--model_source", "huggingface",
         "--batchsize", "32", "--num_repeats", "5", "--mode", "graph_profiling",
         "--path", "output/pytorch/workload_graph"])
    assert (a.framework, a.model_source, a.batch_size, a.num_repeats, a.mode, a.path) == (
        "pytorch", "huggingface", 32, 5, "graph", "output/pytorch/workload_graph")
    b = build_parser().parse_args(["--framework", "Megatron-LM", "--model", "gpt2",
                                   "--mode", "runtime_profiling"])
    assert (b.framework, b.mode) == ("megatron", "runtime")
    assert build_parser().parse_args(["--framework", "DeepSpeed", "--model", "m"]).framework \
        == "deepspeed"
    with pytest.raises(SystemExit):
        build_parser().parse_args(["--framework", "jax", "--model", "m"])
