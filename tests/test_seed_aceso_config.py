"""Aceso's config JSON as search output: ``search --format aceso --top N --output DIR`` writes
the N best layouts as the files Aceso's search writes to ``--config-save-path`` (and its
runtime reads with ``--flexpipe-config``); echo's own config stays the default."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from echo_sim.load import load_trace
from echo_sim.search import SearchSpace
from echo_sim.search.aceso_config import FIELDS, aceso_config, has_aceso_form
from echo_sim.search.space import ParallelLayout
from echo_sim.sim.simulate import simulate
from echo_sim.workload.ops import extract_workload
from tests.cli_util import run

DB = Path(__file__).parent / "data" / "aceso" / "profiled-time-miniset"
OPS = 1 + 13 * 24 + 2  # GPT-350M in Aceso's op list: embedding, 24 layers of 13, final ln, head
SEARCH = ["search", DB, "--gpus", 4, "--global-batch", 8, "--cluster", "dgx-a100",
          "--memory-limit", "16GB", "--workers", 1]


def _search(capsys, *extra):
    code, out, err = run(capsys, *SEARCH, *extra, "--json")
    assert code == 0, err
    return json.loads(out)


def test_top_n_configs_in_acesos_format_follow_the_ranking(tmp_path, capsys):
    out_dir = tmp_path / "top_configs"
    res = _search(capsys, "--top", 3, "--format", "aceso", "--output", out_dir)
    files = [out_dir / f"gpt_350M_top{i}.json" for i in (1, 2, 3)]
    assert res["output"] == [str(f) for f in files]
    assert sorted(p.name for p in out_dir.iterdir()) == [f.name for f in files]
    for f, ranked in zip(files, res["ranked"], strict=True):
        cfg = json.loads(f.read_text())
        assert tuple(cfg) == FIELDS  # Aceso's fields, in its example's order, nothing else
        lay = ranked["layout"]
        assert not lay["fsdp"] and not lay["sequence_parallel"] and lay["vpp"] == 1
        assert (cfg["model_name"], cfg["model_size"], cfg["num_layers"], cfg["hidden_size"],
                cfg["num_attention_heads"], cfg["seq_length"]) == ("gpt", "350M", 24, 1024,
                                                                   16, 2048)
        assert cfg["global_batch_size"] == 8
        assert cfg["micro_batch_size"] == lay["micro_batch"] * lay["dp"]
        assert cfg["num_stages"] == lay["pp"]
        assert cfg["num_gpus"] == [lay["dp"] * lay["tp"]] * lay["pp"]
        assert sum(cfg["num_ops_in_each_stage"]) == OPS
        assert [len(x) for x in cfg["model_parallel_size_of_each_op"]] == \
            cfg["num_ops_in_each_stage"]
        assert {v for x in cfg["model_parallel_size_of_each_op"] for v in x} == {lay["tp"]}
        assert {v for x in cfg["data_parallel_size_of_each_op"] for v in x} == {lay["dp"]}
        assert cfg["checkpoint_activations"] == [lay["recompute"] != "none"] * lay["pp"]
        flags = [v for x in cfg["recompute_ops"] for v in x]
        want = {"none": 0, "full": OPS, "selective": 4 * 24}[lay["recompute"]]
        assert sum(flags) == want  # selective: the attention core, 4 ops per layer
        assert cfg["algo_of_each_op"] == [[0] * n for n in cfg["num_ops_in_each_stage"]]


def test_a_pipelined_config_splits_the_ops_where_simulate_does():
    w = extract_workload(load_trace(DB))
    space = SearchSpace(gpus=4, global_batch=8, cluster="dgx-a100")
    lay = ParallelLayout(dp=1, tp=2, pp=2, micro_batch=1, recompute="full")
    sim = simulate(w, lay.sim_config(space))
    from echo_sim.search.result import candidate_from_sim

    cfg = aceso_config(candidate_from_sim(lay, sim, "time", 8), workload=w, space=space)
    assert cfg["num_stages"] == 2 and cfg["num_gpus"] == [2, 2]
    assert cfg["num_ops_in_each_stage"] == [len(sp.fw) for sp in sim.built.plan.stages]
    assert sum(cfg["num_ops_in_each_stage"]) == OPS
    assert all(0 < n < OPS for n in cfg["num_ops_in_each_stage"])
    assert cfg["recompute_ops"] == [[1] * n for n in cfg["num_ops_in_each_stage"]]
    assert cfg["checkpoint_activations"] == [True, True]
    assert not has_aceso_form(ParallelLayout(dp=2, tp=1, pp=2, vpp=2, schedule="interleaved"))
    assert not has_aceso_form(ParallelLayout(dp=2, tp=1, pp=1, fsdp=True))


def test_a_json_path_gets_the_best_config_alone(tmp_path, capsys):
    best = tmp_path / "best.json"
    res = _search(capsys, "--top", 3, "--format", "aceso", "--output", best)
    assert res["output"] == [str(best)]
    cfg = json.loads(best.read_text())
    top = res["ranked"][0]["layout"]
    assert cfg["num_gpus"] == [top["dp"] * top["tp"]] * top["pp"]


def test_echo_config_stays_the_default(tmp_path, capsys):
    best = tmp_path / "best.json"
    res = _search(capsys, "--top", 2, "--output", best)
    cfg = json.loads(best.read_text())
    assert cfg["format"] == "echo-search-config/1"
    assert cfg["layout"]["dp"] == res["ranked"][0]["layout"]["dp"]


def test_existing_configs_are_not_replaced_without_force(tmp_path, capsys):
    out_dir = tmp_path / "top_configs"
    out_dir.mkdir()
    (out_dir / "gpt_350M_top2.json").write_text("{}\n")
    code, _out, err = run(capsys, *SEARCH, "--top", 2, "--format", "aceso", "--output", out_dir)
    assert code == 2
    assert "--output" in err and "gpt_350M_top2.json exists; pass --force" in err
    assert sorted(p.name for p in out_dir.iterdir()) == ["gpt_350M_top2.json"]  # none written
    assert (out_dir / "gpt_350M_top2.json").read_text() == "{}\n"
    code, _out, err = run(capsys, *SEARCH, "--top", 2, "--format", "aceso", "--output", out_dir,
                          "--force")
    assert code == 0, err
    assert json.loads((out_dir / "gpt_350M_top2.json").read_text())["model_name"] == "gpt"


@pytest.mark.parametrize("fmt", ["dpro", "ACESO"])
def test_an_unknown_format_is_refused(capsys, fmt):
    code, _out, err = run(capsys, *SEARCH, "--format", fmt)
    assert code == 2 and "--format" in err
