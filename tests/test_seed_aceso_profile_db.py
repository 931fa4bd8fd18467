"""Aceso's op-level profiling database as input: ``simulate`` / ``search`` take the directory
Aceso's profiler writes (``--prof-path``; Aceso's search reads it as ``--profiled-time-path``).

The sample ``tests/data/aceso/profiled-time-miniset/`` follows Aceso's layout exactly:
``gpt_350M_mbs{1,2}_tp{1,2,4}_algo{0,1}.csv`` op databases (the tp1 mbs1 rows are a real GPT-350M
profile's), ``prim_gpt_350M_{coll}_{2,4}gpus.csv`` collective times, ``p2p_*_node.csv``.
"""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

import pytest

from echo_sim.errors import TraceFormatError
from echo_sim.load import discover, load_trace
from echo_sim.load.aceso import MB
from echo_sim.workload.ops import extract_workload
from tests.cli_util import run

DB = Path(__file__).parent / "data" / "aceso" / "profiled-time-miniset"
LAYERS = 24  # GPT-350M


def _csv_step_us(name: str) -> float:
    """Forward + backward µs of one step of GPT-350M, from one op-database file: the layer's
    ``enc-*`` ops count once per layer."""
    total = 0.0
    with (DB / name).open() as f:
        for row in csv.DictReader(f):
            n = LAYERS if row["op_name"].startswith("enc-") else 1
            total += n * (float(row["forward-compute"]) + float(row["backward-compute"]))
    return total


def test_the_directory_is_discovered_as_aceso_and_loads_one_rank():
    fmt, sources = discover(DB)
    assert fmt == "aceso" and len(sources) == 1
    assert sources[0].trace_file.name == "gpt_350M_mbs1_tp1_algo0.csv"
    trace = load_trace(DB)
    assert trace.source_format == "aceso"
    w = extract_workload(trace)
    assert w.num_blocks == LAYERS
    assert {k: w.model[k] for k in ("layers", "hidden", "heads", "seq")} == {
        "layers": 24, "hidden": 1024, "heads": 16, "seq": 2048}
    assert w.micro_batch == 1 and w.dtype == "float16"
    fw = w.fw_ops
    assert len(fw) == 1 + 13 * LAYERS + 2
    roles = {o.module: o.role for o in fw}
    assert roles["layers.0.attention.query_key_value"] == "column"
    assert roles["layers.0.attention.dense"] == "row"
    assert roles["layers.0.attention.softmax"] == "inner"
    assert roles["embedding"] == "vocab" and roles["output"] == "vocab"
    qkv = next(o for o in fw if o.module == "layers.3.mlp.dense_h_to_4h")
    assert qkv.param_bytes == 8 * MB and qkv.out_bytes == round(20.008 * MB)
    assert sorted(w.tp_time_us) == [2, 4]  # the other profiled tp sizes, per op
    assert sum(w.tp_time_us[2]) == pytest.approx(_csv_step_us("gpt_350M_mbs1_tp2_algo0.csv"))


@pytest.mark.parametrize("tp", [1, 2, 4])
def test_simulate_prices_each_tp_with_the_times_aceso_measured_at_it(capsys, tp):
    code, out, err = run(capsys, "simulate", DB, "--tp", tp, "--global-batch", 1,
                         "--cluster", "dgx-a100", "--json")
    assert code == 0, err
    res = json.loads(out)
    # one GPU group, one micro-batch: the compute stream runs exactly the profiled ops
    expected = _csv_step_us(f"gpt_350M_mbs1_tp{tp}_algo0.csv")
    assert res["ranks"][0]["compute_us"] == pytest.approx(expected, rel=1e-9)
    if tp == 1:
        assert res["iteration_time_us"] == pytest.approx(expected, rel=1e-9)
    else:  # plus Megatron's blocking all-reduces, and nothing else
        assert res["iteration_time_us"] == pytest.approx(
            expected + res["ranks"][0]["exposed_comm_us"], rel=1e-9)


def test_one_csv_of_the_database_is_a_path_too(capsys):
    code, out, err = run(capsys, "simulate", DB / "gpt_350M_mbs1_tp1_algo0.csv", "--pp", 2,
                         "--global-batch", 4, "--json")
    assert code == 0, err
    res = json.loads(out)
    assert res["layout"]["pp"] == 2 and res["layout"]["micro_batches"] == 4
    assert len(res["ranks"]) == 2 and res["iteration_time_us"] > 0


def test_search_ranks_layouts_of_the_aceso_database(capsys):
    code, out, err = run(capsys, "search", DB, "--gpus", 4, "--global-batch", 8,
                         "--cluster", "dgx-a100", "--memory-limit", "16GB", "--top", 3,
                         "--space", "tp,pp,dp", "--workers", 1, "--json")
    assert code == 0, err
    res = json.loads(out)
    ranked = res["ranked"]
    assert len(ranked) == 3
    assert [c["iteration_time_us"] for c in ranked] == sorted(c["iteration_time_us"]
                                                             for c in ranked)
    best = ranked[0]["layout"]
    # search's ranking is what simulate says for that layout
    code, out, err = run(capsys, "simulate", DB, "--dp", best["dp"], "--tp", best["tp"],
                         "--pp", best["pp"], "--global-batch", 8, "--cluster", "dgx-a100",
                         "--micro-batch", best["micro_batch"], "--json")
    assert code == 0, err
    assert json.loads(out)["iteration_time_us"] == pytest.approx(
        ranked[0]["iteration_time_us"], rel=1e-9)


def test_a_database_of_several_models_asks_for_one_file(tmp_path, capsys):
    db = tmp_path / "profiled-time-miniset"
    shutil.copytree(DB, db)
    shutil.copy(db / "gpt_350M_mbs1_tp1_algo0.csv", db / "gpt_1_3B_mbs1_tp1_algo0.csv")
    code, _out, err = run(capsys, "simulate", db)
    assert code == 2
    assert "several models (gpt_1_3B, gpt_350M)" in err and len(err.strip().splitlines()) == 1
    # naming one file of it picks that model
    with pytest.raises(TraceFormatError):
        load_trace(db)
    pick = load_trace(db / "gpt_350M_mbs1_tp1_algo0.csv")
    assert extract_workload(pick).model["size"] == "350M"


def test_a_bad_cell_is_one_line_naming_the_file_and_line(tmp_path, capsys):
    db = tmp_path / "db"
    db.mkdir()
    text = (DB / "gpt_350M_mbs1_tp1_algo0.csv").read_text().replace("41.646", "fast", 1)
    (db / "gpt_350M_mbs1_tp1_algo0.csv").write_text(text)
    code, _out, err = run(capsys, "simulate", db)
    assert code == 2
    assert "gpt_350M_mbs1_tp1_algo0.csv:3 (enc-1st-layernorm): forward-compute 'fast' is " \
           "not a number" in err
