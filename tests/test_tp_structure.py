"""Tensor-parallel roles from structure (echo_sim.workload.tp_structure) and from plans
(echo_sim.workload.tp_plan): the rule on the layouts of GPT-2, Llama, BERT and T5, plan
matching and styles, and the example GPT's roles unchanged from the name rule."""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from pathlib import Path

import pytest

from echo_sim.errors import ConfigError
from echo_sim.workload.ops import _mark_inner, block_index, extract_workload, tp_role
from echo_sim.workload.tp_plan import TpPlan, load_tp_plan, plan_roles, style_role, tp_placement
from echo_sim.workload.tp_structure import placement_summary, structural_roles

H = 2 * 32 * 64 * 4  # bytes of a (batch 2, seq 32, hidden 64) float32 activation


@dataclass(frozen=True)
class _Op:
    module: str
    kind: str
    in_bytes: int = H
    out_bytes: int = H
    phase: str = "F"

    @property
    def block(self) -> int:
        return block_index(self.module)

    @property
    def unit(self) -> str:
        return self.module.rsplit(".", 3)[0] if self.block >= 0 else self.module


def _roles(ops: list[_Op], **kw: object) -> dict[str, str]:
    return structural_roles(ops, **kw).roles  # type: ignore[arg-type]


def test_gpt2_conv1d_fused_qkv_and_mlp() -> None:
    p = "transformer.h.0."
    ops = [_Op("transformer.wte", "Embedding", 512), _Op("transformer.wpe", "Embedding", 256),
           _Op(p + "ln_1", "LayerNorm"), _Op(p + "attn.c_attn", "Conv1D", H, 3 * H),
           _Op(p + "attn.c_proj", "Conv1D"), _Op(p + "attn.resid_dropout", "Dropout"),
           _Op(p + "ln_2", "LayerNorm"), _Op(p + "mlp.c_fc", "Conv1D", H, 4 * H),
           _Op(p + "mlp.act", "NewGELUActivation", 4 * H, 4 * H),
           _Op(p + "mlp.c_proj", "Conv1D", 4 * H, H), _Op("transformer.ln_f", "LayerNorm"),
           _Op("lm_head", "Linear", H, 16 * H)]
    assert _roles(ops) == {"transformer.wte": "vocab", p + "attn.c_attn": "column",
                           p + "attn.c_proj": "row", p + "mlp.c_fc": "column",
                           p + "mlp.c_proj": "row", "lm_head": "vocab"}


def test_llama_separate_gqa_projections_and_gated_mlp() -> None:
    p = "model.layers.0."
    ops = [_Op(p + "input_layernorm", "LlamaRMSNorm"),
           _Op(p + "self_attn.q_proj", "Linear", H, H),
           _Op(p + "self_attn.k_proj", "Linear", H, H // 4),  # GQA: k/v narrower than q
           _Op(p + "self_attn.v_proj", "Linear", H, H // 4),
           _Op(p + "self_attn.o_proj", "Linear", H, H),
           _Op(p + "post_attention_layernorm", "LlamaRMSNorm"),
           _Op(p + "mlp.gate_proj", "Linear", H, 3 * H), _Op(p + "mlp.act_fn", "SiLU"),
           _Op(p + "mlp.up_proj", "Linear", H, 3 * H),
           _Op(p + "mlp.down_proj", "Linear", 3 * H, H)]
    roles = _roles(ops)
    assert [roles.get(o.module, "-") for o in ops] == [
        "-", "column", "column", "column", "row", "-", "column", "-", "column", "row"]


def test_bert_post_norm_with_square_projections_and_dense_names() -> None:
    """query/key/value and attention.output.dense are all h -> h: the last one back at the
    hidden width closes the group; intermediate.dense (named like a row) is a column."""
    p = "bert.encoder.layer.0."
    ops = [_Op("bert.embeddings.word_embeddings", "Embedding", 512),
           _Op("bert.embeddings.LayerNorm", "LayerNorm"),
           _Op(p + "attention.self.query", "Linear"), _Op(p + "attention.self.key", "Linear"),
           _Op(p + "attention.self.value", "Linear"),
           _Op(p + "attention.output.dense", "Linear"),
           _Op(p + "attention.output.LayerNorm", "LayerNorm"),
           _Op(p + "intermediate.dense", "Linear", H, 4 * H),
           _Op(p + "output.dense", "Linear", 4 * H, H), _Op(p + "output.LayerNorm", "LayerNorm"),
           _Op("cls.predictions.transform.dense", "Linear"),
           _Op("cls.predictions.decoder", "Linear", H, 16 * H)]
    shapes = {"bert.embeddings.word_embeddings.weight": [1024, 64]}  # decoder tied: no entry
    placement = structural_roles(ops, shapes=shapes)  # type: ignore[arg-type]
    assert placement.roles == {
        "bert.embeddings.word_embeddings": "vocab", p + "attention.self.query": "column",
        p + "attention.self.key": "column", p + "attention.self.value": "column",
        p + "attention.output.dense": "row", p + "intermediate.dense": "column",
        p + "output.dense": "row", "cls.predictions.decoder": "vocab"}
    assert placement.unplaced == ("cls.predictions.transform.dense",)
    line = placement_summary(placement)
    assert "\n" not in line and "not placed (replicated): cls.predictions.transform.dense" in line


def test_encoder_and_decoder_blocks_of_one_index_pair_apart() -> None:
    ops = []
    for side in ("encoder", "decoder"):
        p = f"{side}.block.0.layer.0."
        ops += [_Op(p + "layer_norm", "T5LayerNorm"), _Op(p + "SelfAttention.q", "Linear"),
                _Op(p + "SelfAttention.k", "Linear"), _Op(p + "SelfAttention.v", "Linear"),
                _Op(p + "SelfAttention.o", "Linear")]
    roles = _roles(ops)
    assert [roles[o.module] for o in ops if o.kind == "Linear"] == ["column"] * 3 + ["row"] \
        + ["column"] * 3 + ["row"]


def test_a_lone_projection_is_not_placed_and_named() -> None:
    ops = [_Op("blocks.0.norm", "LayerNorm"), _Op("blocks.0.proj", "Linear", H, 2 * H)]
    placement = structural_roles(ops)  # type: ignore[arg-type]
    assert placement.roles == {} and placement.unplaced == ("blocks.0.proj",)
    assert "nothing placed; not placed (replicated): blocks.*.proj" in placement_summary(placement)


def test_a_2d_weight_of_any_class_is_a_projection() -> None:
    ops = [_Op("blocks.0.ln", "LayerNorm"), _Op("blocks.0.wi", "MyMatmul", H, 2 * H),
           _Op("blocks.0.wo", "MyMatmul", 2 * H, H)]
    shapes = {"blocks.0.wi.weight": [128, 64], "blocks.0.wo.weight": [64, 128]}
    assert _roles(ops, shapes=shapes) == {"blocks.0.wi": "column", "blocks.0.wo": "row"}


# ------------------------------------------------------------------------------ plans
def test_plan_patterns_match_suffixes_fnmatch_and_regex_first_rule_wins() -> None:
    plan = TpPlan.from_mapping({"tp_plan": {
        "layers.*.self_attn.q_proj": "colwise", "re:.*\\.o_proj": "rowwise",
        "embed_tokens": "embedding_rowwise", "lm_head": "colwise_gather_output",
        "layers.*": "replicate"}}, source="t")
    ops = [_Op("model.embed_tokens", "Embedding"), _Op("model.layers.0.self_attn.q_proj", "Linear"),
           _Op("model.layers.0.self_attn.k_proj", "Linear"),
           _Op("model.layers.0.self_attn.o_proj", "Linear"), _Op("lm_head", "Linear")]
    placement = plan_roles(ops, plan)  # type: ignore[arg-type]
    assert placement.roles == {"model.embed_tokens": "vocab",
                               "model.layers.0.self_attn.q_proj": "column",
                               "model.layers.0.self_attn.o_proj": "row",
                               "lm_head": "channel"}
    assert plan.style_of("model.layers.0.self_attn.k_proj") == "replicate"  # "*" crosses dots
    assert plan.style_of("model.norm") is None and placement.unplaced == ()


@pytest.mark.parametrize("style, kind, role", [
    ("colwise", "Linear", "column"), ("local_colwise", "Linear", "column"),
    ("colwise_rep", "Linear", "channel"), ("colwise", "Embedding", "channel"),
    ("rowwise", "Linear", "row"), ("rowwise", "Embedding", "vocab"),
    ("embedding_rowwise", "Embedding", "vocab"), ("sequence_parallel", "LayerNorm", "replicated"),
    ("replicate", "Linear", "replicated")])
def test_styles(style: str, kind: str, role: str) -> None:
    assert style_role(style, kind) == role


def test_bad_plans_name_the_file_and_the_value(tmp_path: Path) -> None:
    bad = tmp_path / "plan.json"
    bad.write_text(json.dumps({"layers.*.q": "diagonal"}))
    with pytest.raises(ConfigError, match=r"tp_plan .*plan.json: 'layers.\*.q': style "
                                          r"'diagonal' unknown; valid: colwise"):
        load_tp_plan(bad)
    bad.write_text("{")
    with pytest.raises(ConfigError, match="not JSON"):
        load_tp_plan(bad)
    bad.write_text(json.dumps({"re:(": "colwise"}))
    with pytest.raises(ConfigError, match="not a regular expression"):
        load_tp_plan(bad)
    with pytest.raises(ConfigError, match="cannot read"):
        load_tp_plan(tmp_path / "missing.json")
    with pytest.raises(ConfigError, match="the plan is empty"):
        TpPlan.from_mapping({}, source="x")


def test_recorded_transformers_plan_wins_over_structure() -> None:
    ops = [_Op("model.layers.0.ln", "LayerNorm"), _Op("model.layers.0.a", "Linear"),
           _Op("model.layers.0.b", "Linear")]
    meta = {"model": {"tp_plan": {"layers.*.a": "rowwise", "layers.*.b": "colwise"},
                      "tp_plan_source": "transformers XConfig.base_model_tp_plan"}}
    placement = tp_placement(ops, meta)  # type: ignore[arg-type]
    assert placement.roles == {"model.layers.0.a": "row", "model.layers.0.b": "column"}
    assert placement.source == "transformers XConfig.base_model_tp_plan (in meta.json)"
    assert tp_placement(ops, {}).roles == {"model.layers.0.a": "column",  # type: ignore[arg-type]
                                           "model.layers.0.b": "row"}


# ---------------------------------------------------------- the example GPT unchanged
def test_example_gpt_roles_equal_the_name_rule() -> None:
    from echo_sim.sim.synth import GPTShape, SynthConfig, synth_trace

    w = extract_workload(synth_trace(SynthConfig(model=GPTShape(
        layers=2, hidden=256, heads=4, seq=128, vocab=1000))))
    by_name = _mark_inner([replace(o, role=tp_role(o.module, o.kind) if o.phase != "U"
                                   else "replicated") for o in w.ops])
    assert [o.role for o in w.ops] == [o.role for o in by_name]
    assert {o.role for o in w.ops} >= {"column", "row", "vocab", "inner"}
    assert w.tp_note.endswith("4 column, 4 row, 2 vocab")
