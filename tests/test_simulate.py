"""simulate(): configuration errors, the one-rank golden, result contents, timeline trace,
and the ``simulate`` CLI command."""

from __future__ import annotations

import json

import numpy as np
import pytest

from echo_sim.cli import main
from echo_sim.errors import ConfigError
from echo_sim.load import load_trace
from echo_sim.sim.simulate import SimConfig, simulate
from echo_sim.trace.export import write_echo_dirs
from echo_sim.trace.model import COLLECTIVES, Cat
from tests.test_workload import LinearComm, chain_trace, gpt_trace


@pytest.fixture(scope="module")
def gpt_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("h8") / "gpt"
    write_echo_dirs(gpt_trace(4, gap_us=1.0), d)
    return str(d)


@pytest.fixture(scope="module")
def chain_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("h8") / "chain"
    write_echo_dirs(chain_trace(3), d)
    return str(d)


def test_one_rank_predicts_the_measured_step():
    tr = gpt_trace(2, gap_us=2.0, pre_us=30.0, post_us=4.0, steps=[0, 1, 2],
                   step_scale=[1.0, 1.1, 0.9])
    res = simulate(tr, SimConfig(cluster="cpu-gloo"))
    # the median step (scale 1.0): pre 30, 18 FW x 10, 18 BW x 20, 36 gaps x 2, update 5, post 4
    step = 30 + 18 * 10 + 18 * 20 + 36 * 2 + 5 + 4
    assert res.iteration_time_us == pytest.approx(step)
    assert res.samples_per_s == pytest.approx(2 / (step * 1e-6))
    assert res.tokens_per_s == pytest.approx(res.samples_per_s * 4)
    r = res.ranks[0]
    assert r.compute_us == pytest.approx(step) and r.exposed_comm_us == 0.0


@pytest.mark.parametrize("kw, msg", [
    (dict(dp=3, tp=1, pp=1, nodes=1, gpus_per_node=2), "dp·tp·pp = 3·1·1 = 3"),
    (dict(global_batch=10, micro_batch=4, dp=1), "not divisible"),
    (dict(cluster="dgx-z9"), "unknown cluster"),
    (dict(schedule="zigzag"), "unknown schedule"),
    (dict(virtual_stages=2, schedule="1f1b"), "interleaved"),
    (dict(dp=0), "dp=0"),
])
def test_config_errors(kw, msg):
    with pytest.raises(ConfigError, match=msg):
        SimConfig(**kw)


def test_workload_dependent_errors():
    tr = gpt_trace(2)  # heads 2, hidden 8
    with pytest.raises(ConfigError, match="tp=4 does not divide heads=2"):
        simulate(tr, SimConfig(tp=4, cluster="dgx-h100"))
    with pytest.raises(ConfigError, match="3 pipeline stages but the model has only 2"):
        simulate(tr, SimConfig(pp=3, cluster="dgx-h100"))
    with pytest.raises(ConfigError, match="no column/row-parallel"):
        simulate(chain_trace(4), SimConfig(tp=2, cluster="dgx-h100"))
    with pytest.raises(ConfigError, match="divisible by pp"):
        simulate(chain_trace(4), SimConfig(pp=2, global_batch=6, micro_batch=2,
                                           schedule="interleaved", virtual_stages=2))


@pytest.mark.parametrize("args, msg", [
    (["--dp", "8", "--tp", "4", "--pp", "2", "--nodes", "2", "--gpus-per-node", "8"],
     "--dp·--tp·--pp = 8·4·2 = 64 but --nodes·--gpus-per-node = 2·8 = 16"),
    (["--tp", "4"], "--tp 4 does not divide heads=2"),
    (["--pp", "5"], "5 pipeline stages but the model has only 4 blocks"),
    (["--dp", "2", "--micro-batch", "2", "--global-batch", "6"], "global batch 6"),
    (["--cluster", "dgx-z9"], "unknown cluster 'dgx-z9'"),
    (["--memory-limit", "lots"], "bad memory size 'lots'"),
])
def test_cli_bad_config_one_line(gpt_dir, capsys, args, msg):
    assert main(["simulate", gpt_dir, *args]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and msg in err and err.startswith("echo_sim: error:")


def test_cli_tp_on_model_without_blocks(chain_dir, capsys):
    assert main(["simulate", chain_dir, "--tp", "2"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no column/row-parallel" in err


def test_cli_text_json_and_output(gpt_dir, tmp_path, capsys):
    args = ["simulate", gpt_dir, "--dp", "2", "--tp", "2", "--pp", "2", "--micro-batch", "2",
            "--global-batch", "8", "--cluster", "dgx-h100", "--memory-limit", "80GB"]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "iteration time" in out and "peak memory" in out and "fits" in out
    assert "exposed comm" in out and "bubble" in out
    assert main([*args, "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["iteration_time_us"] > 0 and data["peak_memory_bytes"] > 0
    assert set(data["peak_memory_bytes_per_rank"]) == {"0", "4"}
    assert data["memory_limit_bytes"] == 80 * 10**9 and data["oom"] is False
    assert [r["stage"] for r in data["ranks"]] == [0, 1]
    out_dir = tmp_path / "sim"
    assert main([*args, "--output", str(out_dir)]) == 0
    assert "representative rank per pipeline stage" in capsys.readouterr().out
    loaded = load_trace(str(out_dir))
    assert sorted(loaded.ranks) == [0, 4]
    assert main(["statistic", str(out_dir)]) == 0
    assert main([*args, "--output", str(out_dir)]) == 2  # no overwrite without --force
    capsys.readouterr()


def test_to_trace_follows_the_contract():
    tr = gpt_trace(2)
    res = simulate(tr, SimConfig(dp=2, tp=2, pp=2, global_batch=8, micro_batch=2,
                                 cluster="dgx-h100"), comm=LinearComm())
    t = res.to_trace()
    ev = t.events
    assert sorted(t.ranks) == [0, 4] and t.world_size == 8
    cats = {int(c) for c in np.unique(ev.cat)}
    assert cats == {int(Cat.FW), int(Cat.BW), int(Cat.COMM), int(Cat.UPDATE), int(Cat.STEP)}
    for r in (0, 4):
        rows = t.rank_rows(r)
        comp = rows[(ev.tid[rows] == 0)]
        ends = ev.ts_us[comp] + ev.dur_us[comp]
        assert np.all(ev.ts_us[comp][1:] >= ends[:-1] - 1e-6)  # sequential compute track
        step = rows[ev.cat[rows] == Cat.STEP]
        assert ev.dur_us[step][0] == pytest.approx(res.iteration_time_us)
    comm = np.flatnonzero(ev.cat == Cat.COMM)
    tp_ar = [i for i in comm if t.name_of(i).startswith("Comm.tp.")
             and COLLECTIVES[ev.coll[i]] == "all_reduce"]
    assert {t.groups[ev.group[i]] for i in tp_ar if ev.rank[i] == 0} == {(0, 1)}
    seqs = sorted(int(ev.seq[i]) for i in tp_ar if ev.rank[i] == 0)
    assert seqs == list(range(len(seqs)))
    sends = [i for i in comm if COLLECTIVES[ev.coll[i]] in ("send", "recv")]
    assert {int(ev.peer[i]) for i in sends if ev.rank[i] == 0} == {4}
    # stage 0 holds the embeddings and block 0: 1 + 2 + 2 all-reduces per micro-batch,
    # 8 / (2 x 2) = 2 micro-batches
    n0 = sum(1 for i in tp_ar if ev.rank[i] == 0)
    assert res.micro_batches == 2 and n0 == 2 * (1 + 2 + 2)


def test_full_mode_matches_symmetric_and_reports_every_rank():
    tr = gpt_trace(2)
    cfg = dict(dp=2, tp=2, pp=2, global_batch=8, micro_batch=2, cluster="dgx-h100")
    sym = simulate(tr, SimConfig(**cfg))
    full = simulate(tr, SimConfig(**cfg, mode="full"))
    assert full.iteration_time_us == pytest.approx(sym.iteration_time_us, rel=1e-12)
    assert len(full.ranks) == 8 and len(sym.ranks) == 2
    assert full.peak_memory_bytes[5] == sym.peak_memory_bytes[4]


def _profile(path, compute_rows):
    ops = [{"op": op, "group_size": 2, "sizes_bytes": [1024, 1 << 20],
            "times_us": [100.0, 1100.0]} for op in ("all_reduce", "broadcast")]
    ops += [{"op": op, "group_size": 2, "sizes_bytes": [50], "times_us": [t]}
            for op, t in compute_rows]
    path.write_text(json.dumps({"format": "echo-comm-profile/1", "backend": "gloo",
                                "device": "cpu", "host": "h", "world_size": 2, "ops": ops}))
    return str(path)


def test_busy_profile_slows_compute_of_ranks_sharing_a_cpu_host(tmp_path):
    """compute / compute_alone rows (profile_comm busy mode) scale every op on cpu-gloo."""
    tr = gpt_trace(2, gap_us=1.0)
    kw = dict(dp=2, cluster="cpu-gloo", nodes=1, gpus_per_node=2)
    idle = simulate(tr, SimConfig(comm_profile=_profile(tmp_path / "a.json", []), **kw))
    busy = simulate(tr, SimConfig(comm_profile=_profile(
        tmp_path / "b.json", [("compute_alone", 4000.0), ("compute", 6000.0)]), **kw))
    assert busy.ranks[0].compute_us == pytest.approx(1.5 * idle.ranks[0].compute_us)
    assert any("x1.5 for 2 ranks sharing a CPU host" in m for m in busy.models)
    # a measured user factor overrides it
    user = simulate(tr, SimConfig(comm_profile=str(tmp_path / "b.json"), compute_factor=1.0,
                                  **kw))
    assert user.ranks[0].compute_us == pytest.approx(idle.ranks[0].compute_us)


def test_overlap_of_two_interval_sets_counts_the_shared_time() -> None:
    """``_overlap_us`` (the breakdown's exposed communication) against a count of the unit
    cells both sets cover, on random sets with integer ends: touching, nested, empty,
    identical."""
    from echo_sim.sim.simulate import _merge, _overlap_us

    rng = np.random.default_rng(7)
    for _ in range(400):
        sets = []
        for _ in range(2):
            iv = np.sort(rng.integers(0, 40, size=(int(rng.integers(0, 9)), 2)), axis=1)
            sets.append(_merge(iv.astype(float)))
        a, b = sets
        cells = np.zeros((2, 40), dtype=bool)
        for k, iv in enumerate(sets):
            for s, e in iv.astype(int):
                cells[k, s:e] = True
        assert _overlap_us(a, b) == float((cells[0] & cells[1]).sum())
        assert _overlap_us(a, a) == float(cells[0].sum())
    assert _overlap_us(np.array([[0.0, 1.0]]), np.array([[1.0, 2.0]])) == 0.0  # touching
