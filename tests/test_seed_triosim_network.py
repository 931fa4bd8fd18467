"""TrioSim's -ptp-bandwidth / -bandwidth (issue 22, TrioSim row 1) on a TrioSim-format trace.

The trace is a small CNN in TrioSim's sample layout (``trace2-h100-bs8/vgg_mini``: conv,
relu, pool, conv, relu, avg-pool, linear, loss; their backward; Adam's foreach update).
With ``--tp`` its three tpflag layers are split by output channels, and each adds a
blocking collective (all-gathers of 524288, 262144 and 320 bytes forward; all-reduces of
1024 and 131072 bytes backward), so the iteration time is compute + the priced
collectives: a link rate moves it by exactly what the alpha-beta model says.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from echo_sim.cli import main
from echo_sim.cost.collectives import CommModel
from echo_sim.cost.hardware import get_cluster
from echo_sim.cost.network import NetworkSpec, apply_network, parse_bandwidth_gbps
from echo_sim.errors import ConfigError

VGG = str(Path(__file__).parent / "data" / "triosim" / "trace2-h100-bs8" / "vgg_mini")
# (collective, whole-buffer bytes) the channel split adds per step (see the docstring)
TP_COLLECTIVES = [("all_gather", 524288), ("all_gather", 262144), ("all_gather", 320),
                  ("all_reduce", 1024), ("all_reduce", 131072)]
BASE = ["--cluster", "dgx-h100", "--compute-factor", "1", "-batch-size", "8"]


def _run(capsys: pytest.CaptureFixture[str], *args: str) -> dict:
    assert main(["simulate", VGG, *args, "--json"]) == 0, capsys.readouterr().err
    return json.loads(capsys.readouterr().out)


def _comm_us(spec: NetworkSpec | None, *, nodes: int, gpn: int) -> float:
    cm = CommModel(apply_network(get_cluster("dgx-h100", nodes=nodes, gpus_per_node=gpn), spec))
    return sum(cm.time_us(op, n, list(range(nodes * gpn))) for op, n in TP_COLLECTIVES)


@pytest.mark.parametrize("text,gbps", [("300", 300.0), ("300GB/s", 300.0), ("300 GBps", 300.0),
                                       ("1.2TB/s", 1200.0), ("400Gb/s", 50.0), ("2e2", 200.0)])
def test_rates_in_trio_sim_units(text: str, gbps: float) -> None:
    assert parse_bandwidth_gbps(text) == pytest.approx(gbps)


@pytest.mark.parametrize("text", ["fast", "0", "-5", "300GiB/s", "1e9TB/s"])
def test_bad_rates_name_the_parameter(text: str) -> None:
    with pytest.raises(ConfigError, match=r"^bandwidth="):
        parse_bandwidth_gbps(text)


def test_ptp_bandwidth_seed_spelling_prices_gpu_to_gpu_links(capsys) -> None:
    runs = [_run(capsys, *BASE, "--tp", "2", flag, rate)
            for flag, rate in (("-ptp-bandwidth", "100"), ("--ptp-bandwidth", "100GB/s"),
                               ("-ptp-bandwidth", "800Gb/s"))]
    assert len({r["iteration_time_us"] for r in runs}) == 1  # the same rate, three spellings
    r = runs[0]
    # one tensor-parallel rank computes 397 us (test_seed_triosim_tp); the rest is the
    # blocking collectives, priced on NVLink at 100 GB/s x the preset's 0.69 efficiency
    comm = _comm_us(NetworkSpec(ptp_bw_gbps=100.0), nodes=1, gpn=2)
    assert r["iteration_time_us"] == pytest.approx(397.0 + comm, rel=1e-9)
    # 2-rank ring all-gather: (n-1)·alpha + (n-1)/n · S/B, alpha = 1 us, B = 69 GB/s
    cm = CommModel(apply_network(get_cluster("dgx-h100", nodes=1, gpus_per_node=2),
                                 NetworkSpec(ptp_bw_gbps=100.0)))
    assert cm.time_us("all_gather", 524288, [0, 1]) == pytest.approx(1 + 0.5 * 524288 / 69e3)
    slower = _run(capsys, *BASE, "--tp", "2", "-ptp-bandwidth", "25")
    assert slower["iteration_time_us"] - r["iteration_time_us"] == pytest.approx(
        _comm_us(NetworkSpec(ptp_bw_gbps=25.0), nodes=1, gpn=2) - comm, rel=1e-9)
    assert any(m.startswith("network: GPU-to-GPU 100 GB/s") for m in r["models"])


def test_bandwidth_seed_spelling_prices_the_path_off_the_node(capsys) -> None:
    # two nodes of one GPU: the tensor-parallel group crosses the network (NICs)
    args = [*BASE, "--tp", "2", "--gpus-per-node", "1"]
    fast = _run(capsys, *args, "-bandwidth", "50")
    slow = _run(capsys, *args, "--bandwidth", "10GB/s")
    spec_fast, spec_slow = NetworkSpec(remote_bw_gbps=50.0), NetworkSpec(remote_bw_gbps=10.0)
    assert fast["iteration_time_us"] == pytest.approx(
        397.0 + _comm_us(spec_fast, nodes=2, gpn=1), rel=1e-9)
    assert slow["iteration_time_us"] - fast["iteration_time_us"] == pytest.approx(
        _comm_us(spec_slow, nodes=2, gpn=1) - _comm_us(spec_fast, nodes=2, gpn=1), rel=1e-9)
    # across nodes: alpha = 5 us per hop, B = min(NVLink, 10 GB/s x 0.9 NIC efficiency)
    cm = CommModel(apply_network(get_cluster("dgx-h100", nodes=2, gpus_per_node=1), spec_slow))
    assert cm.time_us("all_gather", 524288, [0, 1]) == pytest.approx(5 + 0.5 * 524288 / 9e3)


def test_a_preset_is_named_defaults(capsys) -> None:
    plain = _run(capsys, *BASE, "--tp", "2", "--gpus-per-node", "1")
    stated = _run(capsys, *BASE, "--tp", "2", "--gpus-per-node", "1",
                  "-ptp-bandwidth", "450", "-bandwidth", "50")  # dgx-h100's own figures
    assert stated["iteration_time_us"] == plain["iteration_time_us"]


def test_bad_rate_flag_is_one_line(capsys) -> None:
    assert main(["simulate", VGG, "--tp", "2", "-ptp-bandwidth", "fast"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--ptp-bandwidth 'fast' is not a rate" in err


def test_help_lists_the_network_flags(capsys) -> None:
    with pytest.raises(SystemExit):
        main(["simulate", "--help"])
    out = capsys.readouterr().out
    for flag in ("--ptp-bandwidth", "-ptp-bandwidth", "--bandwidth", "-bandwidth",
                 "--topology", "--num-rows", "-numRows", "--num-cols", "-numCols",
                 "--interconnects", "-interconnects", "-batch-size", "-batch-size-sim"):
        assert f"{flag} " in out or f"{flag}," in out, flag
