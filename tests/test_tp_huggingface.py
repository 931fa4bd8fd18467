"""Tensor parallelism of Hugging Face models traced on one CPU process: GPT-2 (Conv1D, fused
c_attn), Llama (separate q/k/v, gated MLP, its config's tp_plan), BERT (post-norm, ``dense``
both column and row), T5 (encoder-decoder) and ViT (images: ``pixel_values``, its patches
as tokens) from their transformers configs at ``--tiny``,
then ``simulate --tp 2`` and ``--dp 2 --tp 2``: TP compute below the single rank's, the
all-reduces Megatron places with the bytes the trace recorded, and ``search`` offering tp 2."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.forker import HF_PRELOAD
from tests.harness import run_forked, run_python

pytest.importorskip("transformers", reason="transformers is not installed "
                    "(pip install 'echo-sim[huggingface]')")

FAMILIES = ("gpt2", "llama", "bert", "t5", "vit")


@pytest.fixture(scope="module")
def traced(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """One tiny runtime trace per family (one process, CPU)."""
    out: dict[str, Path] = {}
    for name in FAMILIES:
        path = tmp_path_factory.mktemp(name) / "trace"
        proc = run_forked(["-m", "echo_trace.profile", "--framework", "huggingface",
                           "--model", name, "--tiny", "--batch-size", "2", "--seq-len", "32",
                           "--warmup", "1", "--num-repeats", "2", "--path", str(path)],
                          timeout=300, preload=HF_PRELOAD)
        assert proc.returncode == 0, proc.stderr[-2000:]
        out[name] = path
    return out


def _sim(path: Path, **kw: Any) -> Any:
    from echo_sim.load import load_trace
    from echo_sim.sim.simulate import SimConfig, simulate

    return simulate(load_trace(path), SimConfig(**kw), keep=True)


def _tp_collectives(res: Any) -> dict[str, tuple[str, int, int]]:
    """Tensor-parallel collectives of the simulated step: name -> (kind, bytes, group size)."""
    return {name: (coll, nbytes, len(grp))
            for name, coll, nbytes, grp in res.built.comm_info.values()
            if name.startswith("tp.")}


def _expected(workload: Any) -> dict[str, int]:
    """Megatron's all-reduces (tensor_parallel module docstring) from the trace's bytes:
    forward after each row op (its output) and the vocab embedding; backward after each
    column op (its input: each ColumnParallelLinear / ColwiseParallel all-reduces its own
    input gradient) and the vocab head (its input)."""
    out: dict[str, int] = {}
    for o in workload.fw_ops:
        if o.role == "row" or (o.role == "vocab" and o.kind == "Embedding"):
            out[f"tp.fw.{o.module}"] = o.out_bytes
        if o.role == "column" or (o.role == "vocab" and o.kind != "Embedding"):
            out[f"tp.bw.{o.module}"] = o.in_bytes
    return out


@pytest.mark.parametrize("family", FAMILIES)
def test_tp2_shards_compute_and_places_the_megatron_all_reduces(
        traced: dict[str, Path], family: str) -> None:
    one = _sim(traced[family])
    tp2 = _sim(traced[family], tp=2)
    both = _sim(traced[family], dp=2, tp=2)
    w = tp2.workload
    roles = {o.role for o in w.fw_ops}
    assert {"column", "row"} <= roles
    assert tp2.ranks[0].compute_us < 0.95 * one.ranks[0].compute_us
    assert both.ranks[0].compute_us < 0.95 * one.ranks[0].compute_us
    got = _tp_collectives(tp2)
    if family == "llama":  # its config's plan: lm_head colwise_gather_output -> all-gather
        assert any("LlamaForCausalLM.tp_plan (in meta.json)" in m for m in tp2.models)
        gathers = {k: v for k, v in got.items() if k.startswith("tp.fw.gather.")}
        head = next(o for o in w.fw_ops if o.module == "lm_head")
        assert list(gathers.values()) == [("all_gather", head.out_bytes, 2)]
        got = {k: v for k, v in got.items() if not k.startswith(("tp.fw.gather.",
                                                                  "tp.bw.reduce."))}
    else:
        assert any(m.startswith("tensor-parallel placement from the module structure")
                   for m in tp2.models)
    assert {k: (c, n) for k, (c, n, _) in got.items()} == {
        k: ("all_reduce", n) for k, n in _expected(w).items()}
    assert all(size == 2 for _, _, size in got.values())
    blocks = {o.unit for o in w.fw_ops if o.block >= 0}
    assert sum(1 for k in got if k.startswith("tp.fw.") and k.split(".", 2)[2] in
               {o.module for o in w.fw_ops if o.role == "row"}) == len(
        [o for o in w.fw_ops if o.role == "row"]) >= 2 * len(blocks)
    # with dp 2 the same TP collectives, plus gradient all-reduces over 2 replicas
    dp_names = {n for n, _, _, g in both.built.comm_info.values() if not n.startswith("tp.")}
    assert _tp_collectives(both).keys() == _tp_collectives(tp2).keys() and dp_names


def test_gpt2_activation_bytes_are_the_traced_hidden_state(traced: dict[str, Path]) -> None:
    """(batch 2, seq 32, hidden 64) float32 = 16384 bytes per row output / column input."""
    res = _sim(traced["gpt2"], tp=2)
    got = _tp_collectives(res)
    assert got["tp.fw.transformer.h.0.attn.c_proj"] == ("all_reduce", 2 * 32 * 64 * 4, 2)
    assert got["tp.fw.transformer.h.1.mlp.c_proj"] == ("all_reduce", 2 * 32 * 64 * 4, 2)
    assert got["tp.bw.transformer.h.0.attn.c_attn"] == ("all_reduce", 2 * 32 * 64 * 4, 2)
    assert len(got) == 10  # 2 blocks x (2 fw + 2 bw) + embedding fw + head bw


def test_tp_plan_flag_and_search(traced: dict[str, Path], tmp_path: Path) -> None:
    from echo_sim.cli import main

    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"h.*.attn.c_attn": "colwise", "h.*.attn.c_proj": "rowwise",
                                r"re:.*\.mlp\.c_fc": "colwise", "*.mlp.c_proj": "rowwise"}))
    proc = run_python(["-m", "echo_sim", "simulate", str(traced["gpt2"]), "--tp", "2",
                       "--tp-plan", str(plan), "--json"])
    assert proc.returncode == 0, proc.stderr
    models = json.loads(proc.stdout)["models"]
    assert f"tensor-parallel placement from {plan}: 4 column, 4 row; not placed " \
        "(replicated): lm_head" in models  # the plan leaves the head and embeddings whole
    # search: tp 2 layouts offered, each reproduced by a simulate line with --tp-plan
    proc = run_python(["-m", "echo_sim", "search", str(traced["bert"]), "--gpus", "2",
                       "--global-batch", "4", "--space", "tp", "--json", "--tp-plan",
                       str(plan)])
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert "not placed (replicated)" in data["tp_placement"]  # a GPT-2 plan on BERT
    proc = run_python(["-m", "echo_sim", "search", str(traced["bert"]), "--gpus", "2",
                       "--global-batch", "4", "--space", "tp", "--json"])
    assert proc.returncode == 0, proc.stderr
    rows = json.loads(proc.stdout)["ranked"]
    assert any(r["layout"]["tp"] == 2 for r in rows)
    assert main(["simulate", str(traced["gpt2"]), "--tp", "2", "--tp-plan",
                 str(tmp_path / "none.json")]) == 2


def test_a_plan_that_places_nothing_is_refused_in_one_line(traced: dict[str, Path],
                                                          tmp_path: Path) -> None:
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"nothing.here": "colwise"}))
    proc = run_python(["-m", "echo_sim", "simulate", str(traced["gpt2"]), "--tp", "2",
                       "--tp-plan", str(plan)])
    assert proc.returncode == 2
    err = proc.stderr.strip()
    assert "\n" not in err and "no column/row-parallel" in err
    assert "not placed (replicated): transformer.h.*.attn.c_attn" in err
