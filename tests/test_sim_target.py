"""Honest defaults: simulate() predicts on the traced hardware unless asked, says which,
and says where the micro-batch came from (echo_sim.sim.target)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from echo_sim.cli import main
from echo_sim.sim.simulate import SimConfig, simulate
from echo_sim.sim.target import choose_batch, choose_hardware, traced_micro_batch
from echo_sim.trace.export import write_echo_dirs
from echo_sim.trace.model import RankInfo
from tests.test_workload import gpt_trace


def test_choose_hardware_defaults_to_the_traced_device() -> None:
    cpu = choose_hardware(cluster=None, gpu=None, device="cpu", device_name="x86_64",
                          backend="gloo")
    assert (cpu.cluster, cpu.target_gpu, cpu.one_host, cpu.retimed) == ("cpu-gloo", None,
                                                                        True, False)
    assert "the traced hardware: cpu x86_64, gloo -> cpu-gloo" in cpu.source
    h100 = choose_hardware(cluster=None, gpu=None, device="cuda",
                           device_name="NVIDIA H100 80GB HBM3", backend="nccl")
    assert (h100.cluster, h100.target_gpu, h100.retimed) == ("dgx-h100", None, False)
    odd = choose_hardware(cluster=None, gpu=None, device="cuda", device_name="NVIDIA L4")
    assert odd.target_gpu is None and odd.warnings and "no preset" in odd.warnings[0]
    asked = choose_hardware(cluster="dgx-a100", gpu=None, device="cpu", device_name="")
    assert (asked.cluster, asked.target_gpu, asked.retimed) == ("dgx-a100", "a100", True)
    assert asked.source.startswith("--cluster dgx-a100: re-timed from cpu to a100")
    same = choose_hardware(cluster=None, gpu="h100", device="cuda", device_name="H100")
    assert (same.cluster, same.retimed) == ("dgx-h100", False)


def test_choose_batch_says_where_it_came_from() -> None:
    assert traced_micro_batch({"micro_batch": 8, "micro_batch_source": "root input dim 0"}) \
        == (8, "meta.json micro_batch (root input dim 0)")
    assert traced_micro_batch({"micro_batch_size": 4}) == (4, "meta.json micro_batch_size")
    assert traced_micro_batch({"micro_batch": True}) == (None, "")
    b = choose_batch(None, 8, "meta.json micro_batch")
    assert (b.micro_batch, b.assumed, b.source) == (8, False, "traced: meta.json micro_batch")
    b = choose_batch(16, 8, "meta.json micro_batch")
    assert b.micro_batch == 16 and "--micro-batch 16 (traced 8" in b.source
    b = choose_batch(None, None, "")
    assert (b.micro_batch, b.assumed) == (1, True)
    b = choose_batch(8, None, "")
    assert b.assumed and "taken as micro-batch 1" in b.source


def test_cpu_trace_predicts_one_gloo_host_sized_by_the_layout() -> None:
    res = simulate(gpt_trace(2), SimConfig(dp=2, tp=2))
    assert res.cluster == "cpu-gloo" and (res.nodes, res.gpus_per_node) == (1, 4)
    assert res.hardware is not None and not res.hardware.retimed
    assert res.models[0].startswith("hardware: the traced hardware")
    assert res.to_dict()["hardware"]["retimed"] is False
    # asked for: re-timed, and the output says so
    gpu = simulate(gpt_trace(2), SimConfig(dp=2, cluster="dgx-h100"))
    assert gpu.hardware is not None and gpu.hardware.retimed
    assert gpu.iteration_time_us < res.iteration_time_us
    assert "re-timed from cpu to h100" in gpu.models[0]


def test_missing_micro_batch_is_assumed_and_warned() -> None:
    tr = gpt_trace(2)
    tr.ranks[0] = RankInfo(rank=0, world_size=1, device="cpu", meta={
        k: v for k, v in tr.ranks[0].meta.items() if k != "micro_batch_size"})
    res = simulate(tr, SimConfig(dp=2))
    assert res.micro_batch == 1 and res.batch is not None and res.batch.assumed
    assert res.warnings and "micro-batch: assumed 1" in res.warnings[0]
    doc = res.to_dict()
    assert doc["micro_batch_source"]["assumed"] and doc["warnings"] == res.warnings
    ok = simulate(gpt_trace(2), SimConfig(dp=2))
    assert ok.batch is not None and ok.batch.micro_batch == 2
    assert not any("micro-batch" in w for w in ok.warnings)


def test_a_multi_process_cpu_prediction_without_a_profile_says_what_it_leaves_out() -> None:
    """CPU target, 2 processes, no --comm-profile: the generic cpu-gloo figures price the
    collectives and no host cost is calibrated, which the warning says (with the command
    that measures one). Not with a profile, on one process, or on a GPU cluster."""
    from echo_sim.sim.simulate import NO_CPU_PROFILE

    profile = str(Path(__file__).parent / "data" / "comm" / "gloo2_calibrated.json")
    assert NO_CPU_PROFILE in simulate(gpt_trace(2), SimConfig(dp=2)).warnings
    assert "profile-comm --nproc N" in NO_CPU_PROFILE
    for cfg in (SimConfig(dp=2, comm_profile=profile), SimConfig(dp=1),
                SimConfig(dp=2, cluster="dgx-h100")):
        assert NO_CPU_PROFILE not in simulate(gpt_trace(2), cfg).warnings, cfg


def test_cli_prints_hardware_batch_and_warnings(tmp_path, capsys: pytest.CaptureFixture[str]
                                                ) -> None:
    tr = gpt_trace(2)
    tr.ranks[0] = RankInfo(rank=0, world_size=1, device="cpu", meta={
        k: v for k, v in tr.ranks[0].meta.items() if k != "micro_batch_size"})
    write_echo_dirs(tr, tmp_path / "t")
    assert main(["simulate", str(tmp_path / "t"), "--dp", "2"]) == 0
    out = capsys.readouterr().out
    assert "cpu-gloo" in out and "hardware: the traced hardware" in out
    assert "warning: micro-batch: assumed 1" in out
    assert main(["simulate", str(tmp_path / "t"), "--dp", "2", "--cluster", "dgx-h100",
                 "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["hardware"]["retimed"] is True and doc["layout"]["cluster"] == "dgx-h100"
