"""echo_sim.search: the enumerated space, the exactness of pruning, the CLI and the config.

Exactness is held against the exhaustive reference: ``search(..., prune=False)`` simulates
every valid layout; the pruned search must return the same best layout (and the same top
ranking), and every bound it prunes with must be below what simulate predicts.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
from pathlib import Path

import pytest

from echo_sim.errors import ConfigError
from echo_sim.search import (
    ParallelLayout,
    SearchSpace,
    enumerate_layouts,
    search,
    train_config,
    write_train_config,
)
from echo_sim.search.bounds import memory_floor_bytes, probe_ops
from echo_sim.search.space import divisors
from echo_sim.sim.simulate import simulate
from echo_sim.sim.synth import GPTShape, SynthConfig, synth_trace
from echo_sim.workload.ops import Workload, extract_workload
from tests.harness import run_echo_sim


@pytest.fixture(scope="module")
def gpt() -> Workload:
    """An 8-block GPT (16 heads) traced on one H100 by synth."""
    shape = GPTShape(layers=8, hidden=1024, heads=16, seq=512, vocab=8000, micro_batch=1)
    return extract_workload(synth_trace(SynthConfig(model=shape, gpu="h100", steps=2)))


@pytest.fixture(scope="module")
def exhaustive(gpt: Workload) -> dict[str, object]:
    """Every layout of 16 GPUs, global batch 32, 3 GB limit, simulated."""
    space = SearchSpace(gpus=16, global_batch=32, memory_limit_bytes=3 * 10**9)
    return {"space": space, "result": search(gpt, space, prune=False, workers=1, top=5)}


# ----------------------------------------------------------------------------- the space
def _brute_force(space: SearchSpace, blocks: int, heads: int) -> set[ParallelLayout]:
    """The validity rules of the issue, written out plainly over every tuple."""
    n, gb = space.gpus, space.global_batch
    out = set()
    for dp, tp, pp, v, mb in itertools.product(range(1, n + 1), range(1, n + 1),
                                               range(1, n + 1), range(1, blocks + 1),
                                               range(1, gb + 1)):
        if dp * tp * pp != n or space.gpus_per_node % tp or heads % tp or blocks % pp:
            continue
        if gb % (dp * mb):
            continue
        m = gb // (dp * mb)
        for sched, fsdp, rc, sp in itertools.product(("1f1b", "gpipe", "interleaved"),
                                                     (False, True),
                                                     ("none", "selective", "full"),
                                                     (False, True)):
            if pp == 1 and (sched != "1f1b" or v != 1):
                continue
            if sched == "interleaved" and (v < 2 or blocks % (pp * v) or m % pp):
                continue
            if sched != "interleaved" and v != 1:
                continue
            if fsdp and dp < 2 or sp and tp < 2:
                continue
            out.add(ParallelLayout(dp=dp, tp=tp, pp=pp, vpp=v, micro_batch=mb, fsdp=fsdp,
                                   recompute=rc, schedule=sched, sp=sp))
    return out


def test_enumeration_matches_the_rules_written_out(gpt: Workload) -> None:
    space = SearchSpace(gpus=8, global_batch=16, gpus_per_node=4)
    got, _ = enumerate_layouts(gpt, space)
    assert len(got) == len(set(got))
    assert set(got) == _brute_force(space, blocks=8, heads=16)
    assert max(x.tp for x in got) == 4  # tp stays inside a 4-GPU node


def test_space_dims_hold_the_rest_at_defaults(gpt: Workload) -> None:
    got, _ = enumerate_layouts(gpt, SearchSpace(gpus=8, global_batch=16, dims=("dp", "tp")))
    assert {(x.dp, x.tp) for x in got} == {(8, 1), (4, 2), (2, 4), (1, 8)}
    assert {(x.pp, x.vpp, x.micro_batch, x.fsdp, x.recompute, x.schedule, x.sp)
            for x in got} == {(1, 1, 1, False, "none", "1f1b", False)}


def test_selective_only_where_the_trace_has_an_attention_core(gpt: Workload) -> None:
    space = SearchSpace(gpus=2, global_batch=4, dims=("dp", "recompute"))
    with_core, _ = enumerate_layouts(gpt, space)
    assert {x.recompute for x in with_core} == {"none", "selective", "full"}
    # the same trace with attention as an inline part of its module
    inline = gpt.with_ops([dataclasses.replace(o, kind="Module") if o.kind == "Attention"
                           else o for o in gpt.ops])
    without, _ = enumerate_layouts(inline, space)
    assert {x.recompute for x in without} == {"none", "full"}
    res = simulate(inline, ParallelLayout(dp=2, tp=1, pp=1, recompute="selective")
                   .sim_config(space))
    assert any("nothing is recomputed" in w for w in res.warnings)
    assert not any("nothing is recomputed" in w for w in simulate(
        gpt, ParallelLayout(dp=2, tp=1, pp=1, recompute="selective").sim_config(space)).warnings)


@pytest.mark.parametrize("kwargs, msg", [
    ({"gpus": 0, "global_batch": 8}, "gpus=0"),
    ({"gpus": 8, "global_batch": 8, "dims": ("dp", "zero")}, "unknown search dimension"),
    ({"gpus": 8, "global_batch": 8, "recompute": ("some",)}, "valid: none, selective, full"),
    ({"gpus": 8, "global_batch": 8, "sequence_parallel": ()}, "sequence_parallel=()"),
    ({"gpus": 8, "global_batch": 8, "schedules": ("zb",)}, "valid: 1f1b, gpipe, interleaved"),
    ({"gpus": 8, "global_batch": 8, "cluster": "tpu"}, "unknown cluster"),
])
def test_space_rejects(kwargs: dict[str, object], msg: str) -> None:
    with pytest.raises(ConfigError, match=msg):
        SearchSpace(**kwargs)  # type: ignore[arg-type]


def test_no_factorisation_is_a_config_error(gpt: Workload) -> None:
    with pytest.raises(ConfigError, match="no layout of 7 GPUs"):
        search(gpt, SearchSpace(gpus=7, global_batch=32), workers=1)


def test_nothing_fits_is_a_config_error(gpt: Workload) -> None:
    with pytest.raises(ConfigError, match="no layout fits the memory limit"):
        search(gpt, SearchSpace(gpus=16, global_batch=32, memory_limit_bytes=10**6), workers=1)


# ----------------------------------------------------------------------------- exactness
def test_bounds_never_exceed_simulate(gpt: Workload, exhaustive: dict[str, object]) -> None:
    """Every bound the search prunes with is <= simulate's own figure, on every layout."""
    space = exhaustive["space"]
    res = exhaustive["result"]
    assert isinstance(space, SearchSpace)
    by_layout = {c.layout: c for c in res.candidates}  # type: ignore[attr-defined]
    layouts, _ = enumerate_layouts(gpt, space)
    assert set(by_layout) == set(layouts)
    probes: dict[tuple[int, int, str, bool], object] = {}
    ratios = []
    for lay in layouts:
        c = by_layout[lay]
        assert memory_floor_bytes(gpt, lay, 32) <= c.peak_memory_bytes * (1 + 1e-9)
        key = (lay.tp, lay.micro_batch, lay.recompute, lay.sp)
        p = probes.get(key) or probes.setdefault(key, probe_ops(gpt, lay, space))
        floor = p.time_floor_us(lay, 32)  # type: ignore[attr-defined]
        bound = p.time_bound_us(lay, 32)  # type: ignore[attr-defined]
        assert floor <= c.iteration_time_us * (1 + 1e-9)
        assert bound <= c.iteration_time_us * (1 + 1e-9)
        assert bound >= floor * (1 - 1e-9)  # the busiest rank is at least the mean
        ratios.append(bound / c.iteration_time_us)
        # the memory the search prunes with is simulate's, on every layout
        assert p.memory_bytes(lay, 32) == pytest.approx(  # type: ignore[attr-defined]
            c.peak_memory_bytes, abs=2)
    assert sorted(ratios)[len(ratios) // 2] > 0.5  # tight enough to prune


def test_pruned_search_finds_the_exhaustive_optimum(gpt: Workload,
                                                    exhaustive: dict[str, object]) -> None:
    space = exhaustive["space"]
    full = exhaustive["result"]
    assert isinstance(space, SearchSpace)
    got = search(gpt, space, workers=1, top=5)
    assert got.best is not None and full.best is not None  # type: ignore[attr-defined]
    assert got.best.layout == full.best.layout  # type: ignore[attr-defined]
    assert got.best.iteration_time_us == pytest.approx(
        full.best.iteration_time_us)  # type: ignore[attr-defined]
    fit = [c.layout for c in full.candidates if c.fits][:5]  # type: ignore[attr-defined]
    assert [c.layout for c in got.candidates[:5]] == fit
    assert got.simulated < len(full.candidates) / 2  # type: ignore[attr-defined]
    assert got.pruned_bound > 0
    assert got.enumerated == got.simulated + got.pruned_bound + got.pruned_memory + \
        len(got.invalid)


def test_progress_counts_layouts_the_bound_rules_out_when_it_does(
        gpt: Workload, exhaustive: dict[str, object]) -> None:
    """The bar counts a layout done as soon as the top-k's threshold falls below its bound
    (it can never run), not in one jump after the last simulation: its pace, and so the time
    it says is left, is that of the layouts still to simulate."""
    space = exhaustive["space"]
    assert isinstance(space, SearchSpace)
    calls: list[tuple[int, int]] = []
    got = search(gpt, space, workers=1, top=5, progress=lambda d, t: calls.append((d, t)))
    total = calls[0][1]
    done = [d for d, _ in calls]
    assert done == sorted(done) and done[-1] == total  # monotone, and all of them at the end
    assert got.pruned_bound > 0
    # the last call adds nothing: every layout the bound ruled out was counted earlier
    assert done[-1] == done[-2]
    steps = [b - a for a, b in zip(done, done[1:], strict=False)]
    assert max(steps) > 1  # a threshold drop counted several at once


@pytest.mark.parametrize("limit, objective", [(6 * 10**8, "time"), (None, "cost")])
def test_exact_under_tight_memory_and_cost(gpt: Workload, limit: int | None,
                                           objective: str) -> None:
    space = SearchSpace(gpus=8, global_batch=16, memory_limit_bytes=limit,
                        vary_gpus=objective == "cost", schedules=("1f1b", "interleaved"))
    full = search(gpt, space, prune=False, workers=1, objective=objective)
    got = search(gpt, space, workers=2, objective=objective, top=1)
    assert got.best is not None and full.best is not None
    assert got.best.layout == full.best.layout
    assert got.best.score == pytest.approx(full.best.score)
    if limit is not None:
        assert got.pruned_memory > 0 and any(not c.fits for c in full.candidates)
    else:
        assert {c.layout.world for c in full.candidates} == set(divisors(8))


def test_candidate_breakdown_matches_simulate(gpt: Workload) -> None:
    space = SearchSpace(gpus=4, global_batch=8, dims=("tp", "pp"))
    res = search(gpt, space, workers=1)
    c = res.candidates[0]
    sim = simulate(gpt, c.layout.sim_config(space), keep=False)
    assert c.iteration_time_us == pytest.approx(sim.iteration_time_us)
    assert c.compute_us + c.exposed_comm_us + c.bubble_us + c.idle_us == \
        pytest.approx(c.iteration_time_us, rel=1e-6)
    assert c.peak_memory_bytes == sim.max_peak_memory_bytes


def test_echo_sim_search_is_the_library_call(gpt: Workload) -> None:
    import echo_sim

    space = echo_sim.SearchSpace(gpus=4, global_batch=8,  # type: ignore[operator]
                                 dims=("tp", "pp"))
    a = echo_sim.search(gpt, space, workers=1)  # type: ignore[operator]
    b = search(gpt, space, workers=1)
    assert [c.layout for c in a.candidates] == [c.layout for c in b.candidates]


# ----------------------------------------------------------------------------- config
def test_train_config_of_one_and_two_dimensional_layouts(gpt: Workload, tmp_path: Path) -> None:
    space = SearchSpace(gpus=2, global_batch=8, dims=("pp", "schedule", "micro-batch"))
    res = search(gpt, space, workers=1, top=20)
    pp = next(c for c in res.candidates if c.layout.pp == 2 and c.layout.schedule == "gpipe")
    cfg = train_config(pp, global_batch=8, model=gpt.model)
    assert cfg["train"] == {"layout": "pp", "micro_batch": pp.layout.micro_batch,
                            "global_batch": 8, "recompute": "none", "schedule": "gpipe",
                            "nproc": 2, "layers": 8, "hidden": 1024, "heads": 16, "seq": 512,
                            "vocab": 8000}
    two_d = res.candidates[0].__class__(**{**res.candidates[0].__dict__,
                                           "layout": ParallelLayout(dp=2, tp=2, pp=1)})
    (tmp_path / "x").mkdir()
    path = write_train_config(tmp_path / "x" / "best.json", two_d, global_batch=8)
    data = json.loads(path.read_text())
    assert data["train"] is None and "combines dp and tp" in data["train_note"]
    assert data["deepspeed"] is None


def test_a_zero_row_writes_its_deepspeed_config(gpt: Workload) -> None:
    space = SearchSpace(gpus=4, global_batch=16, dims=("dp", "micro-batch"), zero_stages=(2,))
    res = search(gpt, space, workers=1, top=50)
    cand = next(c for c in res.candidates if c.layout.zero == 2 and c.layout.micro_batch == 2)
    cfg = train_config(cand, global_batch=16, model=gpt.model)
    assert cfg["train"] is None and "DeepSpeed" in cfg["train_note"]
    ds = cfg["deepspeed"]
    assert ds == {"train_batch_size": 16, "train_micro_batch_size_per_gpu": 2,
                  "gradient_accumulation_steps": 2, "zero_optimization": {"stage": 2}}
    assert ds["train_batch_size"] == (ds["train_micro_batch_size_per_gpu"]
                                      * ds["gradient_accumulation_steps"] * cand.layout.dp)
    assert cfg["layout"]["zero_stage"] == 2


# ----------------------------------------------------------------------------- CLI
@pytest.fixture(scope="module")
def synth_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("synth") / "gpt"
    proc = run_echo_sim(["synth", "--layers", "4", "--hidden", "512",
                         "--heads", "8", "--seq", "256", "--vocab", "4000", "--gpu", "h100",
                         "-o", str(out)], timeout=120)
    assert proc.returncode == 0, proc.stderr
    return out


def test_cli_json_ranked_and_output(synth_dir: Path, tmp_path: Path) -> None:
    best = tmp_path / "best.json"
    proc = run_echo_sim(["search", str(synth_dir), "--gpus", "8",
                         "--global-batch", "16", "--memory-limit", "80GB", "--top", "3",
                         "--workers", "1", "--json", "--output", str(best)], timeout=300)
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    ranked = data["ranked"]
    assert len(ranked) == 3 and data["best"] == ranked[0]
    times = [r["iteration_time_us"] for r in ranked]
    assert times == sorted(times) and all(r["fits"] for r in ranked)
    assert data["counts"]["enumerated"] >= data["counts"]["simulated"] > 0
    cfg = json.loads(best.read_text())
    assert cfg["format"] == "echo-search-config/1"
    assert cfg["layout"]["world_size"] == 8 and cfg["prediction"]["fits"]


def test_cli_table(synth_dir: Path) -> None:
    proc = run_echo_sim(["search", str(synth_dir), "--gpus", "4",
                         "--global-batch", "8", "--space", "tp,pp", "--workers", "2"],
                        timeout=300)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].startswith("hardware: dgx-h100, 8 per node (the traced hardware")
    assert lines[1].startswith("searched 6 layouts of 4 GPUs")
    assert "reproduce a row with simulate:" in proc.stdout
    assert "exp comm ms" in proc.stdout and "  1 dp" in proc.stdout


@pytest.mark.parametrize("flags, msg", [
    (["--gpus", "7", "--global-batch", "16"], "no layout of 7 GPUs"),
    (["--gpus", "8", "--global-batch", "16", "--memory-limit", "1MB"],
     "no layout fits the memory limit"),
    (["--gpus", "8", "--global-batch", "16", "--space", "dp,zero"], "--space 'dp,zero'"),
    (["--gpus", "8", "--global-batch", "16", "--workers", "many"], "--workers 'many'"),
    (["--global-batch", "16"], "needs --gpus"),
])
def test_cli_bad_input_exits_2(synth_dir: Path, flags: list[str], msg: str) -> None:
    proc = run_echo_sim(["search", str(synth_dir), *flags], timeout=120)
    assert proc.returncode == 2
    err = proc.stderr.strip().splitlines()
    assert len(err) == 1 and msg in err[0], proc.stderr


# ----------------------------------------------------------------------------- ZeRO-1/2
@pytest.fixture(scope="module")
def zero_exhaustive(gpt: Workload) -> dict[str, object]:
    """Every layout of 8 GPUs with DeepSpeed ZeRO-1/2 rows, 1.5 GB limit, simulated."""
    space = SearchSpace(gpus=8, global_batch=16, memory_limit_bytes=15 * 10**8,
                        zero_stages=(2, 1, 2), dims=("dp", "tp", "pp", "micro-batch", "fsdp"))
    return {"space": space, "result": search(gpt, space, prune=False, workers=1, top=5)}


def test_zero_rows_follow_the_rules(gpt: Workload) -> None:
    base = SearchSpace(gpus=8, global_batch=16, dims=("dp", "tp", "pp", "micro-batch", "fsdp"))
    plain, _ = enumerate_layouts(gpt, base)
    got, _ = enumerate_layouts(gpt, dataclasses.replace(base, zero_stages=(1, 2)))
    want = set(plain) | {dataclasses.replace(x, zero=z) for x in plain
                         for z in (1, 2) if not x.fsdp and x.dp >= 2 and (z == 1 or x.pp == 1)}
    assert len(got) == len(set(got)) and set(got) == want
    assert {x.sharding for x in got} == {"ddp", "zero1", "zero2", "fsdp"}
    lay = next(x for x in got if x.zero == 2)
    assert lay.label.split()[-1] == "zero2" and lay.to_dict()["zero_stage"] == 2
    assert lay.sim_config(base).zero_stage == 2 and not lay.sim_config(base).fsdp


def test_zero_bounds_never_exceed_simulate(gpt: Workload,
                                           zero_exhaustive: dict[str, object]) -> None:
    space = zero_exhaustive["space"]
    res = zero_exhaustive["result"]
    assert isinstance(space, SearchSpace) and space.zero_stages == (1, 2)
    by_layout = {c.layout: c for c in res.candidates}  # type: ignore[attr-defined]
    zero = [lay for lay in by_layout if lay.zero]
    assert zero
    for lay in zero:
        c = by_layout[lay]
        assert memory_floor_bytes(gpt, lay, 16) <= c.peak_memory_bytes * (1 + 1e-9)
        p = probe_ops(gpt, lay, space)
        assert p.time_floor_us(lay, 16) <= c.iteration_time_us * (1 + 1e-9)
        assert p.time_bound_us(lay, 16) <= c.iteration_time_us * (1 + 1e-9)
        assert p.memory_bytes(lay, 16) == pytest.approx(c.peak_memory_bytes, abs=2)


def test_zero_pruned_search_finds_the_exhaustive_optimum(
        gpt: Workload, zero_exhaustive: dict[str, object]) -> None:
    space = zero_exhaustive["space"]
    full = zero_exhaustive["result"]
    assert isinstance(space, SearchSpace)
    got = search(gpt, space, workers=1, top=5)
    fit = [c.layout for c in full.candidates if c.fits][:5]  # type: ignore[attr-defined]
    assert [c.layout for c in got.candidates[:5]] == fit
    # the limit is one some ZeRO rows meet and their DDP twins do not, or the reverse
    fits = {c.layout: c.fits for c in full.candidates}  # type: ignore[attr-defined]
    assert any(fits[lay] != fits[dataclasses.replace(lay, zero=0)] for lay in fits if lay.zero)


def test_zero_stages_are_checked() -> None:
    with pytest.raises(ConfigError, match="zero_stages"):
        SearchSpace(gpus=8, global_batch=8, zero_stages=(3,))


def test_search_says_a_cpu_traces_memory_is_not_carried_to_gpus(capsys) -> None:  # type: ignore[no-untyped-def]
    """A CPU trace searched on GPUs: "peak mem" is the model's, without the CPU process's
    own memory, and the hardware line says so; on the traced CPU it is carried."""
    from tests.cli_util import run

    trace = Path(__file__).parent / "data" / "load" / "echo_2rank"
    flags = ["search", trace, "--gpus", "2", "--global-batch", "16", "--workers", "1", "--json"]
    code, out, err = run(capsys, *flags, "--cluster", "dgx-h100")
    assert code == 0, err
    note = json.loads(out)["hardware"].splitlines()[1]
    assert note.startswith("memory: the traced CPU process's peak (95.37 MiB")
    assert note.endswith("is not carried to GPUs: a peak there is this model's states, "
                         "activations and buffers, without the traced run's baseline")
    code, out, err = run(capsys, *flags, "--cluster", "cpu-gloo")
    assert code == 0, err
    assert "not carried" not in json.loads(out)["hardware"]
