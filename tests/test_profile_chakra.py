"""Graph mode's Chakra export decoded with the real protobuf runtime against et_def.proto's
field numbers, and the workload graph built from a small model (no subprocess)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch

from echo_trace.graph_mode import GraphSpec, write_graph_trace
from echo_trace.graph_mode.chakra import encode_varint
from echo_trace.graph_mode.ops import operator_graph
from echo_trace.graph_mode.workload import group_ops
from echo_trace.profile.models import ModelBundle


def _mlp_bundle() -> ModelBundle:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 8))
    return ModelBundle(model=model, make_batch=lambda: torch.randn(4, 16),
                       info={"micro_batch_size": 4})


def test_varint_matches_protobuf_examples() -> None:
    # the protobuf encoding guide's examples: 1 -> 01, 150 -> 96 01, int64 -1 -> ten bytes
    assert encode_varint(1) == b"\x01"
    assert encode_varint(150) == b"\x96\x01"
    assert encode_varint(-1) == b"\xff" * 9 + b"\x01"


def test_operator_graph_flops_and_bytes() -> None:
    b = _mlp_bundle()
    g = operator_graph(b.model, b.make_batch())
    groups = {grp.name: grp for grp in group_ops(g)}
    assert groups["0"].flops == 2.0 * 4 * 16 * 32 and groups["0"].type == "Linear"
    assert groups["2"].flops == 2.0 * 4 * 32 * 8
    assert groups["0"].param_bytes == (16 * 32 + 32) * 4
    assert groups["0"].in_bytes == 4 * 16 * 4 and groups["0"].out_bytes == 4 * 32 * 4
    assert groups["1"].type == "ReLU" and groups["1"].flops == 0.0
    assert "loss" in groups  # the mean taken as the loss, outside the model


def _chakra_classes() -> tuple[Any, Any]:
    """GlobalMetadata and Node message classes built from et_def.proto's field numbers."""
    pb = pytest.importorskip("google.protobuf", reason="protobuf is not installed")
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

    del pb
    F = descriptor_pb2.FieldDescriptorProto
    fd = descriptor_pb2.FileDescriptorProto(name="et_def_test.proto", package="ChakraProtoMsg",
                                            syntax="proto3")

    def msg(name: str, fields: list[tuple[str, int, int, int, str]]) -> None:
        m = fd.message_type.add(name=name)
        for fname, num, ftype, label, tname in fields:
            f = m.field.add(name=fname, number=num, type=ftype, label=label)
            if tname:
                f.type_name = tname
        if name == "AttributeProto":
            m.oneof_decl.add(name="value")
            for f in m.field:
                if f.number > 2:
                    f.oneof_index = 0

    opt, rep = F.LABEL_OPTIONAL, F.LABEL_REPEATED
    msg("AttributeProto", [("name", 1, F.TYPE_STRING, opt, ""),
                           ("int64_val", 9, F.TYPE_INT64, opt, ""),
                           ("uint64_val", 13, F.TYPE_UINT64, opt, ""),
                           ("bool_val", 27, F.TYPE_BOOL, opt, ""),
                           ("string_val", 29, F.TYPE_STRING, opt, "")])
    msg("GlobalMetadata", [("version", 1, F.TYPE_STRING, opt, ""),
                           ("attr", 2, F.TYPE_MESSAGE, rep, ".ChakraProtoMsg.AttributeProto")])
    msg("Node", [("id", 1, F.TYPE_UINT64, opt, ""), ("name", 2, F.TYPE_STRING, opt, ""),
                 ("type", 3, F.TYPE_INT32, opt, ""),
                 ("ctrl_deps", 4, F.TYPE_UINT64, rep, ""),
                 ("data_deps", 5, F.TYPE_UINT64, rep, ""),
                 ("start_time_micros", 6, F.TYPE_UINT64, opt, ""),
                 ("duration_micros", 7, F.TYPE_UINT64, opt, ""),
                 ("attr", 10, F.TYPE_MESSAGE, rep, ".ChakraProtoMsg.AttributeProto")])
    pool = descriptor_pool.DescriptorPool()
    pool.Add(fd)
    get = message_factory.GetMessageClass
    return (get(pool.FindMessageTypeByName("ChakraProtoMsg.GlobalMetadata")),
            get(pool.FindMessageTypeByName("ChakraProtoMsg.Node")))


def _read_messages(data: bytes) -> list[bytes]:
    out, i = [], 0
    while i < len(data):
        n = shift = 0
        while True:
            byte = data[i]
            i += 1
            n |= (byte & 0x7F) << shift
            shift += 7
            if not byte & 0x80:
                break
        out.append(data[i:i + n])
        i += n
    return out


def test_chakra_et_decodes_with_protobuf(tmp_path: Path) -> None:
    Meta, Node = _chakra_classes()
    res = write_graph_trace(_mlp_bundle(), GraphSpec(path=str(tmp_path), data_parallel=2))
    for rank in (0, 1):
        raw = (tmp_path / "chakra" / f"et.{rank}.et").read_bytes()
        msgs = _read_messages(raw)
        meta = Meta.FromString(msgs[0])
        assert meta.version == "0.0.4"
        nodes = [Node.FromString(m) for m in msgs[1:]]
        ids = [n.id for n in nodes]
        assert ids == list(range(len(nodes)))
        for n in nodes:  # written in dependency order
            assert all(d < n.id for d in n.data_deps), n
        attrs = [{a.name: a for a in n.attr} for n in nodes]
        comp = [a for n, a in zip(nodes, attrs, strict=True) if n.type == 4]
        total = sum(a["num_ops"].int64_val for a in comp)
        assert total == 3 * (2 * 4 * 16 * 32 + 2 * 4 * 32 * 8)  # forward + 2x backward
        comm = [(n, a) for n, a in zip(nodes, attrs, strict=True) if n.type == 7]
        assert len(comm) == 1
        assert comm[0][1]["comm_type"].int64_val == 0  # ALL_REDUCE
        assert comm[0][1]["comm_size"].int64_val == ((16 * 32 + 32) + (32 * 8 + 8)) * 4
        assert nodes[-1].name == "UPDATE.AdamW" and list(nodes[-1].data_deps) == [comm[0][0].id]
        doc = json.loads((tmp_path / "chakra" / f"et.{rank}.json").read_text())
        assert len(doc["nodes"]) == len(nodes)
    assert res.rank_dir == tmp_path / "0_0"


def test_graph_refuses_nonempty_dir(tmp_path: Path) -> None:
    from echo_trace.profile.models import ProfileError

    write_graph_trace(_mlp_bundle(), GraphSpec(path=str(tmp_path)))
    with pytest.raises(ProfileError, match="--overwrite"):
        write_graph_trace(_mlp_bundle(), GraphSpec(path=str(tmp_path)))
    write_graph_trace(_mlp_bundle(), GraphSpec(path=str(tmp_path), overwrite=True))


def test_fx_fallback_agrees_with_export_on_a_cnn() -> None:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.ReLU(),
                                torch.nn.Conv2d(8, 4, 3, groups=2), torch.nn.Flatten(),
                                torch.nn.Linear(4 * 6 * 6, 10))
    x = torch.randn(2, 3, 8, 8)
    ex = operator_graph(model, x, method="export")
    fx = operator_graph(model, x, method="fx")
    assert (ex.method, fx.method) == ("torch.export", "torch.fx")
    ex_groups = {g.name: g for g in group_ops(ex)}
    fx_groups = {g.name: g for g in group_ops(fx)}
    for name in ("0", "2", "4"):  # registry formulas (export) == module formulas (FX)
        assert ex_groups[name].flops == fx_groups[name].flops > 0
        assert ex_groups[name].param_bytes == fx_groups[name].param_bytes
    assert fx_groups["0"].flops == 2.0 * (2 * 8 * 8 * 8) * 3 * 9
    assert "loss" in ex_groups and "loss" not in fx_groups


def test_operator_graph_rejects_unknown_method() -> None:
    b = _mlp_bundle()
    with pytest.raises(ValueError, match="method='jit'"):
        operator_graph(b.model, b.make_batch(), method="jit")


def test_hf_config_from_local_dir_and_overrides(tmp_path: Path) -> None:
    transformers = pytest.importorskip("transformers", reason="transformers is not installed")
    from echo_trace.profile.models import ProfileError, hf_config, parse_overrides

    transformers.GPT2Config(n_layer=3, n_embd=48, n_head=3).save_pretrained(tmp_path)
    cfg = hf_config(str(tmp_path), overrides=parse_overrides("n_head=4,n_embd=64"), seq_len=4096)
    assert (cfg.n_layer, cfg.n_head, cfg.n_embd, cfg.n_positions) == (3, 4, 64, 4096)
    assert parse_overrides("a=1, b=0.5,c=true,d=none,e=x") == {
        "a": 1, "b": 0.5, "c": True, "d": None, "e": "x"}
    with pytest.raises(ProfileError, match="no attribute 'n_nope'"):
        hf_config("gpt2", overrides={"n_nope": 1})


def test_annotate_meta_fills_training_and_survives_missing_files(tmp_path: Path) -> None:
    from echo_trace.profile.meta import annotate_meta, comm_summary, training_meta

    t = training_meta(framework="x", micro_batch_size=4, gradient_accumulation_steps=2,
                      data_parallel_size=3)
    assert t["global_batch_size"] == 24
    (tmp_path / "meta.json").write_text(json.dumps({"micro_batch_size": None, "rank": 0}))
    assert annotate_meta(tmp_path, t)
    meta = json.loads((tmp_path / "meta.json").read_text())
    assert (meta["micro_batch_size"], meta["global_batch_size"], meta["training"]) == (4, 24, t)
    assert not annotate_meta(tmp_path / "missing", t)
    assert comm_summary(tmp_path / "missing") == {}


@pytest.mark.parametrize("stage", [0, 2, 3])
def test_chakra_zero_stage_collectives(tmp_path: Path, stage: int) -> None:
    Meta, Node = _chakra_classes()
    write_graph_trace(_mlp_bundle(), GraphSpec(path=str(tmp_path), data_parallel=4,
                                               zero_stage=stage))
    nodes = [Node.FromString(m) for m in
             _read_messages((tmp_path / "chakra" / "et.3.et").read_bytes())[1:]]
    comm: dict[int, list[int]] = {}
    for n in nodes:
        assert all(d < n.id for d in n.data_deps)
        if n.type == 7:
            a = {x.name: x.int64_val for x in n.attr}
            comm.setdefault(a["comm_type"], []).append(a["comm_size"])
    params = ((16 * 32 + 32) + (32 * 8 + 8)) * 4
    all_reduce, all_gather, reduce_scatter = 0, 2, 7  # CollectiveCommType
    if stage == 0:
        assert comm == {all_reduce: [params]}
    elif stage == 2:  # gradients reduce-scattered, updated parameters all-gathered
        assert comm == {reduce_scatter: [params], all_gather: [params]}
    else:  # gathered for forward and for backward, gradients reduce-scattered per operator
        assert sorted(comm) == [all_gather, reduce_scatter]
        assert sum(comm[all_gather]) == 2 * params and sum(comm[reduce_scatter]) == params
        assert len(comm[all_gather]) == 2 * len(comm[reduce_scatter]) == 4


def test_chakra_durations_add_up_to_the_echo_trace(tmp_path: Path) -> None:
    """Issue 16: the ET of a graph-mode GPT-2 summed to 86,982 µs where its echo trace said
    57,753 µs (nodes timed per operator, events per module). Both now time operators."""
    from tests.harness import run_python

    pytest.importorskip("transformers")
    out = tmp_path / "g"
    res = run_python(["-m", "echo_trace.profile", "--framework", "huggingface", "--model",
                      "gpt2", "--batch-size", "8", "--seq-len", "1024", "--mode", "graph",
                      "--path", str(out)], timeout=300)
    assert res.returncode == 0, res.stderr
    doc = json.loads((out / "chakra" / "et.0.json").read_text())
    et_us = sum(n["durationMicros"] for n in doc["nodes"] if n["type"] == "COMP_NODE")
    events = json.loads((out / "0_0" / "trace.json").read_text())["traceEvents"]
    step0 = [e for e in events if e.get("ph") == "X" and e["args"].get("step") == 0]
    compute = sum(e["dur"] for e in step0 if e["cat"] in ("FW", "BW", "UPDATE"))
    step = next(e["dur"] for e in step0 if e["cat"] == "step")
    assert et_us == pytest.approx(compute, abs=1.0)  # whole µs, running sum kept exact
    assert compute == pytest.approx(step)  # graph mode: compute back to back
    assert f"estimated step time {step / 1e3:.3f} ms" in res.stdout + res.stderr
