"""Per-stage tensor parallelism (Aceso's per-stage ``num_gpus`` and
``model_parallel_size_of_each_op``): ``SimConfig(stage_tp=...)`` and ``simulate --stage-tp``.

Every stage keeps ``dp`` replicas, so stage ``s`` holds ``dp · tp_s`` GPUs; a list of one
degree is that uniform layout, bit for bit; a mixed list gives each stage the compute, TP
all-reduces, gradient all-reduce and memory of that stage in the uniform layout of its own
degree (same split), and the boundary between degrees sends one copy of the activation per
receiving tensor-parallel rank.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from echo_sim.errors import ConfigError
from echo_sim.load import load_trace
from echo_sim.sim.simulate import SimConfig, simulate
from echo_sim.sim.synth import GPTShape, SynthConfig, synth_trace
from echo_sim.workload.ops import extract_workload
from tests.cli_util import run

DATA = Path(__file__).parent / "data"
DB = DATA / "aceso" / "profiled-time-miniset"
REAL = DATA / "load" / "echo_real_ddp"


@pytest.fixture(scope="module")
def aceso():
    return extract_workload(load_trace(DB))


@pytest.fixture(scope="module")
def real():
    return extract_workload(load_trace(REAL))


@pytest.fixture(scope="module")
def gpt():
    return extract_workload(synth_trace(SynthConfig(
        model=GPTShape(layers=4, hidden=256, heads=4, seq=128, vocab=1000), gpu="h100",
        steps=2)))


def _same(a, b):
    assert a.iteration_time_us == b.iteration_time_us
    assert a.world_size == b.world_size
    assert [(r.rank, r.stage, r.compute_us, r.exposed_comm_us, r.bubble_us, r.idle_us,
             r.peak_memory_bytes, r.memory) for r in a.ranks] == \
        [(r.rank, r.stage, r.compute_us, r.exposed_comm_us, r.bubble_us, r.idle_us,
          r.peak_memory_bytes, r.memory) for r in b.ranks]


@pytest.mark.parametrize("mode", ["symmetric", "full"])
@pytest.mark.parametrize("cfg", [
    {"dp": 2, "tp": 2, "pp": 2, "global_batch": 16},
    {"dp": 1, "tp": 2, "pp": 4, "global_batch": 8, "recompute": "full"},
])
def test_one_degree_per_stage_is_the_uniform_layout(real, gpt, cfg, mode):
    for w in (real, gpt):
        uniform = simulate(w, SimConfig(**cfg, mode=mode))
        tp = cfg["tp"]
        per_stage = {**cfg, "tp": 1}
        _same(uniform, simulate(w, SimConfig(**per_stage, stage_tp=(tp,) * cfg["pp"],
                                             mode=mode)))
        _same(uniform, simulate(w, SimConfig(**cfg, stage_tp=(tp,) * cfg["pp"], mode=mode)))


def test_one_degree_per_stage_is_the_uniform_layout_on_an_aceso_database(aceso):
    cfg = {"dp": 2, "pp": 2, "global_batch": 8, "cluster": "dgx-a100"}
    for tp in (1, 2, 4):
        _same(simulate(aceso, SimConfig(**cfg, tp=tp)),
              simulate(aceso, SimConfig(**cfg, stage_tp=(tp, tp))))


def _tp_hooks(res, stage):
    """(name, bytes) of the TP all-reduces of ``stage``'s representative, micro-batch 0."""
    r = next(x.rank for x in res.ranks if x.stage == stage)
    out = []
    for tk in res.built.comm_tasks[r]:
        name, coll, nbytes, grp = res.built.comm_info[tk]
        if name.startswith("tp.") and res.built.graph.labels[tk][3] == 0:
            out.append((name, nbytes, len(grp)))
    return sorted(out)


def _dp_bytes(res, stage):
    r = next(x.rank for x in res.ranks if x.stage == stage)
    return sorted((nb, len(grp)) for tk in res.built.comm_tasks[r]
                  for name, _, nb, grp in [res.built.comm_info[tk]]
                  if name.startswith("ddp."))


def test_each_stage_runs_its_own_degree(gpt):
    # the same (even) split in all three, so each stage of the mixed layout is that stage
    # of the uniform layout of its degree
    cfg = {"dp": 2, "pp": 2, "global_batch": 16, "stage_split": "even"}
    tp1 = simulate(gpt, SimConfig(**cfg, tp=1))
    tp2 = simulate(gpt, SimConfig(**cfg, tp=2))
    mixed = simulate(gpt, SimConfig(**cfg, stage_tp=(1, 2)))
    assert mixed.world_size == 2 * 1 + 2 * 2
    assert [r.rank for r in mixed.ranks] == [0, 2]  # stage 1 starts after dp·tp_0 = 2 GPUs
    s0, s1 = mixed.ranks
    assert s0.compute_us == pytest.approx(tp1.ranks[0].compute_us, rel=1e-12)
    assert s1.compute_us == pytest.approx(tp2.ranks[1].compute_us, rel=1e-12)
    # the model shards qkv/proj/fc1/fc2/attention/head: 2-way TP about halves the stage
    assert 0.5 * tp1.ranks[1].compute_us < s1.compute_us < 0.75 * tp1.ranks[1].compute_us
    # TP all-reduces on the tp=2 stage only, as the uniform tp=2 layout has them there
    assert _tp_hooks(mixed, 0) == []
    assert _tp_hooks(mixed, 1) == _tp_hooks(tp2, 1) != []
    assert all(n == 2 for _, _, n in _tp_hooks(mixed, 1))
    # gradient all-reduce over each stage's own dp replicas, of its own TP shard
    assert _dp_bytes(mixed, 0) == _dp_bytes(tp1, 0)
    assert _dp_bytes(mixed, 1) == _dp_bytes(tp2, 1)
    assert s0.memory == tp1.ranks[0].memory and s1.memory == tp2.ranks[1].memory
    # the boundary: the tp=1 rank sends its activation to both tp=2 ranks, back to back
    sends = [(nb, grp) for tk, (name, _, nb, grp) in mixed.built.comm_info.items()
             if name == "pp.fw" and mixed.built.graph.labels[tk][3] == 0]
    p2p = mixed.built.plan.stages[0].p2p_bytes
    assert sends == [(2 * p2p, (0, 2, 3))]
    layout = mixed.to_dict()["layout"]
    assert layout["stage_tp"] == [1, 2] and layout["world_size"] == 6


def test_a_stage_of_more_tensor_parallelism_takes_more_layers(aceso):
    # Aceso's example config: num_gpus [1, 1, 2], tp [1, 1, 2], more ops on the tp=2 stage
    res = simulate(aceso, SimConfig(pp=3, stage_tp=(1, 1, 2), global_batch=8,
                                    cluster="dgx-a100"))
    ops = [len(sp.fw) for sp in res.built.plan.stages]
    assert sum(ops) == 1 + 13 * 24 + 2
    assert ops[2] > max(ops[0], ops[1])
    assert res.world_size == 4
    even = simulate(aceso, SimConfig(pp=3, global_batch=8, cluster="dgx-a100"))
    assert res.iteration_time_us < even.iteration_time_us


@pytest.mark.parametrize("stage_tp", [(1, 1, 2), (4, 2, 2), (1, 2, 4)])
def test_symmetric_and_full_agree_across_degrees(aceso, stage_tp):
    cfg = {"dp": 2, "pp": 3, "global_batch": 8, "cluster": "dgx-a100", "stage_tp": stage_tp}
    sym = simulate(aceso, SimConfig(**cfg))
    full = simulate(aceso, SimConfig(**cfg, mode="full"))
    assert sym.iteration_time_us == pytest.approx(full.iteration_time_us, rel=1e-9)
    assert len(full.ranks) == 2 * sum(stage_tp)
    peaks = {r.stage: r.peak_memory_bytes for r in sym.ranks}
    assert all(r.peak_memory_bytes == peaks[r.stage] for r in full.ranks)


def test_bad_per_stage_degrees_are_refused(aceso):
    with pytest.raises(ConfigError, match=r"stage_tp=\(2,\).*pp=2"):
        SimConfig(pp=2, stage_tp=(2,))
    with pytest.raises(ConfigError, match="stage_tp.*leave tp at 1"):
        SimConfig(pp=2, tp=4, stage_tp=(1, 2))
    with pytest.raises(ConfigError, match="virtual_stages=1"):
        SimConfig(pp=2, stage_tp=(1, 2), schedule="interleaved", virtual_stages=2)
    with pytest.raises(ConfigError, match="dp·sum"):
        SimConfig(pp=2, stage_tp=(1, 2), nodes=1, gpus_per_node=4)
    with pytest.raises(ConfigError, match=r"stage_tp=\(1, 3\): degree 3 does not divide"):
        simulate(aceso, SimConfig(pp=2, stage_tp=(1, 3), global_batch=2))


def test_cli_stage_flags_are_the_library(capsys, aceso):
    args = ["simulate", DB, "--pp", 3, "--global-batch", 8, "--cluster", "dgx-a100",
            "--json"]
    code, out, err = run(capsys, *args, "--stage-tp", "1,1,2", "--stage-recompute",
                         "full,none,none")
    assert code == 0, err
    got = json.loads(out)
    want = simulate(aceso, SimConfig(pp=3, global_batch=8, cluster="dgx-a100",
                                     stage_tp=(1, 1, 2),
                                     stage_recompute=("full", "none", "none")))
    assert got["iteration_time_us"] == want.iteration_time_us
    assert got["layout"]["stage_tp"] == [1, 1, 2]
    assert got["layout"]["stage_recompute"] == ["full", "none", "none"]
    code, out, err = run(capsys, *args[:-1], "--stage-tp", "1,1,2")
    assert code == 0 and "tp=1/1/2 pp=3 (4 GPUs" in out


@pytest.mark.parametrize(("flags", "msg"), [
    (["--stage-tp", "1,2"], "--stage-tp '1,2': give 3 comma-separated"),
    (["--stage-tp", "1,x,2"], "--stage-tp '1,x,2'"),
    (["--stage-tp", "1,1,3"], "--stage-tp (1, 1, 3): degree 3 does not divide heads=16"),
    (["--stage-tp", "1,1,2", "--tp", "4"], "--tp 4 with --stage-tp 1,1,2"),
    (["--stage-recompute", "full,none"], "--stage-recompute 'full,none': give 3"),
    (["--stage-recompute", "full,some,none"], "none|selective|full"),
])
def test_cli_stage_flag_errors_are_one_line(capsys, flags, msg):
    code, out, err = run(capsys, "simulate", DB, "--pp", 3, "--global-batch", 8, *flags)
    assert code == 2
    errors = [line for line in err.splitlines() if line.startswith("echo_sim: error:")]
    assert len(errors) == 1 and msg in errors[0]


# ----------------------------------------------------------------------------- search
def _het_space(**kw):
    from echo_sim.search import SearchSpace

    return SearchSpace(gpus=8, global_batch=16, cluster="dgx-a100", dims=("dp", "tp", "pp"),
                       memory_limit_bytes=6_000_000_000, **kw)


def test_enumerated_degrees_are_two_with_one_switch_and_use_every_gpu(aceso):
    from echo_sim.search.space import enumerate_layouts

    layouts, _ = enumerate_layouts(aceso, _het_space(heterogeneous=True))
    het = [lay for lay in layouts if lay.stage_tp]
    assert het and len(layouts) > len(het)
    for lay in het:
        st = lay.stage_tp
        assert len(st) == lay.pp >= 2 and len(set(st)) == 2 and lay.tp == max(st)
        assert sum(a != b for a, b in zip(st[:-1], st[1:], strict=True)) == 1  # one switch
        assert lay.world == lay.dp * sum(st) == 8 and all(16 % t == 0 for t in st)
    assert {lay.stage_tp for lay in het} >= {(4, 2, 2), (2, 2, 4), (1, 1, 2)}
    uniform, _ = enumerate_layouts(aceso, _het_space())
    assert not any(lay.stage_tp for lay in uniform)


def test_search_finds_a_per_stage_tp_layout_and_prices_it_as_simulate(aceso):
    from echo_sim.search import search

    het = search(aceso, _het_space(heterogeneous=True), workers=1, top=3)
    best = het.best
    assert best is not None and best.layout.stage_tp == (4, 2, 2)
    uniform = search(aceso, _het_space(), workers=1, top=3)
    assert uniform.best is not None and best.iteration_time_us < uniform.best.iteration_time_us
    sim = simulate(aceso, SimConfig(dp=1, pp=3, stage_tp=(4, 2, 2), global_batch=16,
                                    cluster="dgx-a100", memory_limit_bytes=6_000_000_000))
    assert best.iteration_time_us == sim.iteration_time_us
    assert best.peak_memory_bytes == sim.max_peak_memory_bytes
    # pruning keeps the exhaustive ranking (heterogeneous layouts are never bound-pruned)
    exhaustive = search(aceso, _het_space(heterogeneous=True), workers=1, prune=False)
    assert [(c.layout, c.iteration_time_us) for c in het.candidates[:3]] == \
        [(c.layout, c.iteration_time_us) for c in exhaustive.candidates[:3]]


def test_memory_floor_stays_below_simulate_on_per_stage_tp_layouts(aceso):
    from echo_sim.search.bounds import memory_floor_bytes
    from echo_sim.search.space import enumerate_layouts

    space = _het_space(heterogeneous=True)
    layouts, _ = enumerate_layouts(aceso, space)
    for lay in layouts:
        if lay.stage_tp:
            res = simulate(aceso, lay.sim_config(space), keep=False)
            assert memory_floor_bytes(aceso, lay, 16) <= res.max_peak_memory_bytes


def test_cli_search_row_is_simulate_with_the_printed_flags(tmp_path, capsys):
    out = tmp_path / "configs"
    code, text, err = run(capsys, "search", DB, "--gpus", 8, "--global-batch", 16,
                          "--cluster", "dgx-a100", "--memory-limit", "6GB", "--space",
                          "dp,tp,pp,recompute", "--heterogeneous", "--workers", 1, "--top", 5,
                          "--format", "aceso", "--output", out, "--json")
    assert code == 0, err
    res = json.loads(text)
    rows = [(i, r) for i, r in enumerate(res["ranked"], 1) if r["layout"]["stage_tp"]]
    assert rows and rows[0][0] == 1
    for i, row in rows:
        lay = row["layout"]
        flags = ["--dp", lay["dp"], "--pp", lay["pp"], "--stage-tp",
                 ",".join(map(str, lay["stage_tp"]))]
        modes = lay["stage_recompute"] or [lay["recompute"]] * lay["pp"]
        flags += ["--stage-recompute", ",".join(modes), "--micro-batch", lay["micro_batch"]]
        code, sim, err = run(capsys, "simulate", DB, *flags, "--global-batch", 16,
                             "--cluster", "dgx-a100", "--memory-limit", "6GB", "--json")
        assert code == 0, err
        assert json.loads(sim)["iteration_time_us"] == row["iteration_time_us"]
        cfg = json.loads((out / f"gpt_350M_top{i}.json").read_text())
        assert cfg["num_gpus"] == [lay["dp"] * t for t in lay["stage_tp"]]
        assert [set(x) for x in cfg["model_parallel_size_of_each_op"]] == \
            [{t} for t in lay["stage_tp"]]
        assert [set(x) for x in cfg["data_parallel_size_of_each_op"]] == \
            [{lay["dp"]}] * lay["pp"]
        assert [len(x) for x in cfg["model_parallel_size_of_each_op"]] == \
            cfg["num_ops_in_each_stage"]
        assert sum(cfg["num_ops_in_each_stage"]) == 1 + 13 * 24 + 2
