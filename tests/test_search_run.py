"""search on Ray, and search -> config -> a real run: trace examples/train.py, search its
layouts on 2 gloo processes, write best.json and run it with torchrun."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pytest

from echo_sim.search import SearchSpace, search
from echo_sim.sim.synth import GPTShape, SynthConfig, synth_trace
from echo_sim.workload.ops import extract_workload
from examples.train import parse_flags
from tests.harness import REPO, run_echo_sim, run_forked, run_torchrun

TRAIN = str(REPO / "examples" / "train.py")
MODEL = ["--layers", "2", "--hidden", "64", "--heads", "4", "--seq", "32", "--vocab", "256"]
LOSS = re.compile(r"^rank (\d+) step (\d+) loss (\S+)$", re.M)


def test_ray_search_equals_local() -> None:
    ray = pytest.importorskip("ray")
    wl = extract_workload(synth_trace(SynthConfig(
        model=GPTShape(layers=4, hidden=512, heads=8, seq=256, vocab=4000), gpu="h100",
        steps=2)))
    space = SearchSpace(gpus=8, global_batch=16)
    local = search(wl, space, workers=1, top=3)
    ray.init(num_cpus=1, include_dashboard=False, log_to_driver=False)
    try:
        remote = search(wl, space, workers="ray", top=3)
    finally:
        ray.shutdown()
    assert remote.workers == "ray"
    assert [c.layout for c in remote.candidates[:3]] == [c.layout for c in local.candidates[:3]]
    assert remote.best is not None and local.best is not None
    assert remote.best.iteration_time_us == pytest.approx(local.best.iteration_time_us)


def _best_json(tmp_path: Path, nproc_env: dict[str, str] | None = None) -> Path:
    """Config written by `echo_sim search` for a real traced run of train.py."""
    from echo_sim.search import ParallelLayout, write_train_config
    from echo_sim.search.result import Candidate

    cand = Candidate(layout=ParallelLayout(dp=2, tp=1, pp=1, fsdp=True, micro_batch=4),
                     iteration_time_us=1.0, samples_per_s=1.0, tokens_per_s=None,
                     peak_memory_bytes=1, memory_limit_bytes=2, compute_us=1.0,
                     exposed_comm_us=0.0, bubble_us=0.0, idle_us=0.0, micro_batches=2,
                     score=1.0)
    return write_train_config(tmp_path / "best.json", cand, global_batch=16,
                              model={"layers": 2, "hidden": 64})


def test_train_reads_config_under_flags(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = _best_json(tmp_path)
    monkeypatch.setenv("WORLD_SIZE", "2")
    cfg = parse_flags(["--config", str(path), "--steps", "2", "--hidden", "32"])
    assert (cfg.layout, cfg.micro_batch, cfg.global_batch, cfg.layers, cfg.hidden,
            cfg.steps) == ("fsdp", 4, 16, 2, 32, 2)  # the flag beats the file
    monkeypatch.setenv("WORLD_SIZE", "4")
    with pytest.raises(ValueError, match="on 2 processes; this run has WORLD_SIZE=4"):
        parse_flags(["--config", str(path)])
    data = json.loads(path.read_text())
    data["train"], data["train_note"] = None, "dp2 tp2 combines dp and tp"
    path.write_text(json.dumps(data))
    with pytest.raises(ValueError, match="no train.py form: dp2 tp2 combines"):
        parse_flags(["--config", str(path)])
    (tmp_path / "x.json").write_text("{}")
    with pytest.raises(ValueError, match="not an echo search config"):
        parse_flags(["--config", str(tmp_path / "x.json")])


@pytest.mark.slow
def test_search_output_runs_with_torchrun(tmp_path: Path) -> None:
    traces = tmp_path / "traces"
    proc = run_forked([TRAIN, *MODEL, "--steps", "4", "--micro-batch", "4", "--capture",
                       "--trace-dir", str(traces), "--trace-start", "1", "--trace-end", "3"],
                      timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    best = tmp_path / "best.json"
    proc = run_echo_sim(["search", str(traces), "--gpus", "2", "--gpus-per-node", "2",
                         "--cluster", "cpu-gloo", "--global-batch", "16", "--workers", "1",
                         "--output", str(best), "--json"], timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    ranked = json.loads(proc.stdout)["ranked"]
    assert ranked and {r["world_size"] for r in ranked} == {2}
    cfg = json.loads(best.read_text())
    assert cfg["layout"] == {**ranked[0]["layout"], "world_size": 2, "global_batch": 16,
                             "micro_batches": ranked[0]["micro_batches"]}
    assert cfg["train"] is not None and cfg["train"]["nproc"] == 2, cfg["train_note"]
    run = run_torchrun([TRAIN, "--config", str(best), *MODEL, "--steps", "2",
                        "--print-losses"], nproc=2, timeout=120)
    assert run.returncode == 0, run.stderr[-3000:]
    losses = [float(x) for _, _, x in LOSS.findall(run.stdout)]
    assert losses and all(math.isfinite(x) for x in losses)
