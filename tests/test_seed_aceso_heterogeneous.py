"""Heterogeneous configurations found by search, as far as simulate prices them: per-stage
recomputation (Aceso's ``checkpoint_activations`` / ``recompute_ops``) when pipelining,
searched with ``--heterogeneous`` and ranked by what simulate says for the config.

(Per-stage tensor-parallel degree and GPU count, Aceso's ``num_gpus`` /
``model_parallel_size_of_each_op`` varying by stage: tests/test_seed_aceso_stage_tp.py.)
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from echo_sim.errors import ConfigError
from echo_sim.load import load_trace
from echo_sim.search import SearchSpace, search
from echo_sim.search.aceso_config import aceso_config
from echo_sim.sim.simulate import SimConfig, simulate
from echo_sim.sim.synth import GPTShape, SynthConfig, synth_trace
from echo_sim.workload.ops import extract_workload
from tests.cli_util import run

DB = Path(__file__).parent / "data" / "aceso" / "profiled-time-miniset"
LAYOUT = {"dp": 1, "tp": 2, "pp": 2, "global_batch": 8, "cluster": "dgx-a100"}


@pytest.fixture(scope="module")
def aceso_workload():
    return extract_workload(load_trace(DB))


def _same(a, b):
    assert a.iteration_time_us == b.iteration_time_us
    assert [r.peak_memory_bytes for r in a.ranks] == [r.peak_memory_bytes for r in b.ranks]
    assert [(r.compute_us, r.exposed_comm_us, r.bubble_us) for r in a.ranks] == \
        [(r.compute_us, r.exposed_comm_us, r.bubble_us) for r in b.ranks]


@pytest.mark.parametrize("mode", ["none", "selective", "full"])
def test_per_stage_modes_equal_to_a_uniform_one_predict_the_same(aceso_workload, mode):
    uniform = simulate(aceso_workload, SimConfig(**LAYOUT, recompute=mode))
    per_stage = simulate(aceso_workload, SimConfig(**LAYOUT, stage_recompute=(mode, mode)))
    _same(uniform, per_stage)


def test_per_stage_equal_to_uniform_on_an_echo_trace_too():
    wl = extract_workload(synth_trace(SynthConfig(
        model=GPTShape(layers=4, hidden=256, heads=4, seq=128, vocab=1000), gpu="h100",
        steps=2)))
    cfg = {"dp": 2, "tp": 1, "pp": 4, "global_batch": 16}
    _same(simulate(wl, SimConfig(**cfg, recompute="full")),
          simulate(wl, SimConfig(**cfg, stage_recompute=("full",) * 4)))


def test_mixed_stages_recompute_only_where_asked(aceso_workload):
    none = simulate(aceso_workload, SimConfig(**LAYOUT, recompute="none"))
    full = simulate(aceso_workload, SimConfig(**LAYOUT, recompute="full"))
    mixed = simulate(aceso_workload, SimConfig(**LAYOUT, stage_recompute=("full", "none")))
    # stage 0 holds what full recomputation holds, stage 1 what none holds
    assert mixed.ranks[0].peak_memory_bytes == full.ranks[0].peak_memory_bytes
    assert mixed.ranks[1].peak_memory_bytes == none.ranks[1].peak_memory_bytes
    assert none.iteration_time_us < mixed.iteration_time_us < full.iteration_time_us
    # the recomputed forward is in stage 0's compute only
    assert mixed.ranks[1].compute_us == pytest.approx(none.ranks[1].compute_us)
    assert mixed.ranks[0].compute_us > none.ranks[0].compute_us
    assert mixed.to_dict()["layout"]["stage_recompute"] == ["full", "none"]


def test_bad_per_stage_modes_are_refused():
    with pytest.raises(ConfigError, match="stage_recompute"):
        SimConfig(pp=2, stage_recompute=("full",))
    with pytest.raises(ConfigError, match="stage_recompute"):
        SimConfig(pp=2, stage_recompute=("full", "some"))


def _space(**kw):
    return SearchSpace(gpus=4, global_batch=8, cluster="dgx-a100", tp=(2,), pp=(2,),
                       dims=("tp", "pp", "recompute"), recompute=("none", "full"),
                       memory_limit_bytes=5_500_000_000, **kw)


def test_heterogeneous_search_finds_the_mixed_config_and_ranks_it_as_simulate(aceso_workload):
    # 5.5 GB: no recomputation runs out of memory on stage 0, full recomputation fits but
    # pays the recomputed forward on both stages; recomputing stage 0 alone fits and is faster
    uniform = search(aceso_workload, _space(), workers=1, top=3)
    assert uniform.best is not None and uniform.best.layout.recompute == "full"
    het = search(aceso_workload, _space(heterogeneous=True), workers=1, top=3)
    best = het.best
    assert best is not None and best.layout.stage_recompute == ("full", "none")
    assert best.iteration_time_us < uniform.best.iteration_time_us
    sim = simulate(aceso_workload, best.layout.sim_config(het.space), keep=False)
    assert best.iteration_time_us == sim.iteration_time_us
    assert best.peak_memory_bytes == sim.max_peak_memory_bytes
    cfg = aceso_config(best, workload=aceso_workload, space=het.space)
    assert cfg["checkpoint_activations"] == [True, False]
    assert [set(x) for x in cfg["recompute_ops"]] == [{1}, {0}]


def test_cli_heterogeneous_writes_the_mixed_config(tmp_path, capsys):
    out = tmp_path / "best.json"
    code, text, err = run(capsys, "search", DB, "--gpus", 2, "--global-batch", 8,
                          "--cluster", "dgx-a100", "--memory-limit", "7GB", "--space",
                          "pp,recompute", "--heterogeneous", "--workers", 1, "--top", 20,
                          "--format", "aceso", "--output", out, "--json")
    assert code == 0, err
    res = json.loads(text)
    labels = [c["label"] for c in res["ranked"]]
    assert any("rc-full/none" in s for s in labels)
    cfg = json.loads(out.read_text())
    top = res["ranked"][0]["layout"]
    want = top["stage_recompute"] or [top["recompute"]] * top["pp"]
    assert cfg["checkpoint_activations"] == [m != "none" for m in want]
