"""One predictor (issues 16 and 20): search ranks with exactly what simulate says, on the
hardware simulate would pick, and prints the simulate command of every row; that command,
run, gives the row's time. Every searched layout (selective recompute, sequence
parallelism, per-stage degrees) has simulate flags."""

from __future__ import annotations

import dataclasses
import json
import shlex
import shutil
from pathlib import Path
from typing import Any

import pytest

from echo_sim.commands import simulate as sim_cmd
from echo_sim.commands.report import _FlagParser
from echo_sim.search.space import ParallelLayout, SearchSpace
from tests.cli_util import run

DDP = Path(__file__).parent / "data" / "load" / "echo_real_ddp"
# a profile of this 2-core host with every host microbenchmark (DDP, FSDP2, DTensor)
PROFILE = Path(__file__).parent / "data" / "comm" / "gloo2_host.json"


def _deepspeed_copy(tmp_path: Path) -> Path:
    """The DDP trace as if DeepSpeed ZeRO-2 had run it (meta.json training)."""
    dst = tmp_path / "ds"
    shutil.copytree(DDP, dst)
    for meta_path in dst.glob("*/meta.json"):
        meta = json.loads(meta_path.read_text())
        meta["training"] = {"framework": "deepspeed", "zero_stage": 2, "micro_batch_size": 8,
                            "gradient_accumulation_steps": 1, "data_parallel_size": 2,
                            "global_batch_size": 16}
        meta_path.write_text(json.dumps(meta))
    return dst


@pytest.mark.parametrize("deepspeed", [False, True], ids=["ddp-trace", "zero2-trace"])
def test_search_rows_are_simulate_commands(capsys: Any, tmp_path: Path, deepspeed: bool) -> None:
    path = _deepspeed_copy(tmp_path) if deepspeed else DDP
    code, out, err = run(capsys, "search", path, "--gpus", "2", "--global-batch", "16",
                         "--top", "6", "--json")
    assert code == 0, err
    d = json.loads(out)
    # a CPU trace is searched on the CPU host it ran on (it used to be DGX-H100)
    assert d["space"]["cluster"] == "cpu-gloo" and d["space"]["gpus_per_node"] == 2
    assert "cpu-gloo" in d["hardware"]
    # a ZeRO-2 trace: rows are what their labels say, none refused for pipelining
    assert d["counts"]["invalid"] == 0
    assert ("DeepSpeed ZeRO-2" in d["hardware"]) == deepspeed
    labels = [r["label"] for r in d["ranked"]]
    assert any(" sp " in f" {lab} " for lab in labels)  # sequence parallelism is searched
    for row in d["ranked"]:
        argv = shlex.split(row["simulate"])
        assert argv[:4] == ["python", "-m", "echo_sim", "simulate"]
        code, out, err = run(capsys, *argv[3:], "--json")
        assert code == 0, (row["simulate"], err)
        sim = json.loads(out)
        assert sim["iteration_time_us"] == pytest.approx(row["iteration_time_us"], rel=1e-12)
        assert sim["peak_memory_bytes"] == row["peak_memory_bytes"]


@pytest.mark.parametrize("layout", [
    ParallelLayout(dp=1, tp=2, pp=1, vpp=1, micro_batch=4, fsdp=False, recompute="selective",
                   sp=True, schedule="1f1b"),
    ParallelLayout(dp=2, tp=1, pp=2, vpp=2, micro_batch=2, fsdp=True, recompute="full",
                   sp=False, schedule="interleaved"),
    ParallelLayout(dp=1, tp=2, pp=3, vpp=1, micro_batch=1, fsdp=False, recompute="none",
                   sp=False, schedule="1f1b", stage_tp=(1, 1, 2),
                   stage_recompute=("full", "none", "none")),
    ParallelLayout(dp=4, tp=2, pp=1, micro_batch=2, zero=2),
    ParallelLayout(dp=2, tp=1, pp=2, micro_batch=1, zero=1, schedule="gpipe"),
], ids=["sp-selective", "interleaved-fsdp-full", "per-stage", "zero2", "zero1-pipeline"])
def test_every_layout_has_simulate_flags(layout: ParallelLayout) -> None:
    space = SearchSpace(gpus=layout.world, global_batch=8, gpus_per_node=8, cluster="dgx-h100")
    want = layout.sim_config(space)
    parser = _FlagParser(prog="simulate", add_help=False)
    sim_cmd.COMMAND.add_arguments(parser)
    opts = parser.parse_args(["trace", *sim_cmd.simulate_argv(want)])
    got = sim_cmd.sim_config(opts)
    def norm(name: str, v: Any) -> Any:  # recompute: False and "none" mean the same
        return {False: "none", True: "full"}.get(v, v) if name == "recompute" else v

    diff = {f.name: (getattr(got, f.name), getattr(want, f.name))
            for f in dataclasses.fields(want) if f.name != "memory_limit_bytes"
            and norm(f.name, getattr(got, f.name)) != norm(f.name, getattr(want, f.name))}
    assert not diff, diff


def test_zero_rows_are_simulate_commands_and_shard_memory(capsys: Any) -> None:
    """``--zero-stages 1,2``: DeepSpeed ZeRO-1/2 rows beside DDP and FSDP, each the
    ``simulate --zero-stage`` command it prints, holding less than DDP in the order ZeRO's
    §5 gives (optimizer states, then gradients, then parameters sharded)."""
    code, out, err = run(capsys, "search", DDP, "--gpus", "2", "--global-batch", "16",
                         "--space", "dp,fsdp", "--zero-stages", "1,2", "--top", "10",
                         "--json")
    assert code == 0, err
    rows = {r["label"].split()[-1]: r for r in json.loads(out)["ranked"]}
    assert set(rows) == {"ddp", "zero1", "zero2", "fsdp"}
    for name, stage in (("zero1", 1), ("zero2", 2)):
        row = rows[name]
        assert row["layout"]["zero_stage"] == stage
        argv = shlex.split(row["simulate"])
        assert argv[argv.index("--zero-stage") + 1] == str(stage)
        code, out, err = run(capsys, *argv[3:], "--json")
        assert code == 0, err
        sim = json.loads(out)
        assert sim["iteration_time_us"] == pytest.approx(row["iteration_time_us"], rel=1e-12)
        assert sim["peak_memory_bytes"] == row["peak_memory_bytes"]
    mem = {k: r["peak_memory_bytes"] for k, r in rows.items()}
    assert mem["ddp"] > mem["zero1"] > mem["zero2"]
    assert rows["ddp"]["layout"]["zero_stage"] == 0 and rows["fsdp"]["layout"]["zero_stage"] == 3


@pytest.mark.parametrize("value", ["3", "0", "1,x", "", "1 --format aceso"])
def test_bad_zero_stages_is_one_line(capsys: Any, value: str) -> None:
    value, *more = value.split(" ")
    code, out, err = run(capsys, "search", DDP, "--gpus", "2", "--global-batch", "16",
                         "--zero-stages", value, *more)
    assert code == 2 and "--zero-stages" in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1


def test_search_plot_draws_every_timed_layout(capsys: Any, tmp_path: Path) -> None:
    """``--plot``: time against memory of every timed row, by sharding, into a real image."""
    from echo_sim.load import load_trace
    from echo_sim.render.plots import search_points
    from echo_sim.search import SearchSpace, search
    from echo_sim.workload.traced import traced_workload

    png = tmp_path / "space.png"
    code, out, err = run(capsys, "search", DDP, "--gpus", "4", "--global-batch", "16",
                         "--zero-stages", "1,2", "--memory-limit", "0.4GB", "--json",
                         "--plot", png)
    assert code == 0, err
    d = json.loads(out)
    assert d["plot"] == str(png)
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 10_000
    # what it draws: every timed layout once, under its sharding, with its fit verdict
    space = SearchSpace(gpus=4, global_batch=16, gpus_per_node=4, cluster="cpu-gloo",
                        memory_limit_bytes=int(0.4 * 2**30), zero_stages=(1, 2))
    res = search(traced_workload(load_trace(str(DDP))), space, workers=1, top=5)
    pts = search_points(res.candidates)
    assert sum(len(v) for v in pts.values()) == len(res.candidates)
    assert set(pts) <= {"ddp", "zero1", "zero2", "fsdp"} and "zero2" in pts
    for c in res.candidates:
        assert (c.peak_memory_bytes / 2**30, c.iteration_time_us / 1000.0, c.fits) in \
            pts[c.layout.sharding]
    # a second run does not overwrite it; an unknown type is one line, before any work
    code, out, err = run(capsys, "search", DDP, "--gpus", "4", "--global-batch", "16",
                         "--plot", png)
    assert code != 0 and "exists" in err and len(err.strip().splitlines()) == 1
    code, out, err = run(capsys, "search", DDP, "--gpus", "4", "--global-batch", "16",
                         "--plot", tmp_path / "space.gif")
    assert code == 2 and "--plot" in err and len(err.strip().splitlines()) == 1


def test_pruning_is_exact_with_a_cpu_host_profile() -> None:
    """On a CPU target with a host-calibrated profile the operators carry each sharding's
    own host costs (DDP's reducer, FSDP2's unit hooks; ZeRO none): the pruned search, with
    ZeRO rows, equals the exhaustive one, and every row's bounds stay under simulate (the
    probe runs the layout's own micro-batch count: a one-micro-batch probe spread the
    optimizer step's rank skew over fewer TP all-reduces and overshot by up to 3 %)."""
    from echo_sim.load import load_trace
    from echo_sim.search import search
    from echo_sim.search.bounds import probe_ops
    from echo_sim.workload.traced import traced_workload

    wl = traced_workload(load_trace(str(DDP)))
    space = SearchSpace(gpus=4, global_batch=16, gpus_per_node=4, cluster="cpu-gloo",
                        zero_stages=(1, 2), comm_profile=str(PROFILE))
    full = search(wl, space, prune=False, workers=1, top=5)
    got = search(wl, space, workers=1, top=5)
    assert [c.layout for c in got.candidates[:5]] == \
        [c.layout for c in full.candidates if c.fits][:5]
    assert any("DDP host cost" in m for m in simulate_models(wl, space))
    rows = list(full.candidates)
    assert {c.layout.sharding for c in rows} == {"ddp", "zero1", "zero2", "fsdp"}
    # the probe's operator times are simulate's own for the row's sharding (a DDP probe
    # would put DDP's reducer cost on a ZeRO or FSDP row's operators)
    import numpy as np

    from echo_sim.sim.simulate import simulate

    for c in rows:
        if c.layout.dp == 4 and c.layout.micro_batch == 4:
            plan = simulate(wl, c.layout.sim_config(space), keep=True).built.plan  # type: ignore[union-attr]
            assert np.allclose(probe_ops(wl, c.layout, space).time_us, plan.time_us), \
                c.layout.label
    for c in rows:
        p = probe_ops(wl, c.layout, space)
        assert p.time_floor_us(c.layout, 16) <= c.iteration_time_us * (1 + 1e-9), c.layout.label
        assert p.time_bound_us(c.layout, 16) <= c.iteration_time_us * (1 + 1e-9), c.layout.label


def simulate_models(wl: Any, space: SearchSpace) -> list[str]:
    from echo_sim.sim.simulate import simulate

    return list(simulate(wl, ParallelLayout(dp=4, tp=1, pp=1, micro_batch=4)
                         .sim_config(space)).models)
