"""TrioSim's optical mesh, -interconnects 1 -numRows R -numCols C (issue 22, TrioSim row 2).

A TrioSim-format CNN trace (``trace2-h100-bs8/vgg_mini``) split over 4 GPUs by output
channels adds five blocking collectives per step (all-gathers of 524288, 262144 and 320
bytes, all-reduces of 1024 and 131072 bytes). On TrioSim's optical mesh every GPU is a mesh
position; a logical ring over a 1 x 4 line needs a 3-hop closing edge, a 2 x 2 grid has a
1-hop cycle, so the line pays 2 more link latencies per ring step.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from echo_sim.cli import main
from echo_sim.cost.collectives import CommModel
from echo_sim.cost.hardware import get_cluster
from echo_sim.cost.network import NetworkSpec, apply_network
from echo_sim.errors import ConfigError

VGG = str(Path(__file__).parent / "data" / "triosim" / "trace2-h100-bs8" / "vgg_mini")
TP_COLLECTIVES = [("all_gather", 524288), ("all_gather", 262144), ("all_gather", 320),
                  ("all_reduce", 1024), ("all_reduce", 131072)]
BASE = ["--tp", "4", "--cluster", "dgx-h100", "--compute-factor", "1", "-batch-size", "8",
        "-ptp-bandwidth", "64"]


def _run(capsys: pytest.CaptureFixture[str], *args: str) -> dict:
    assert main(["simulate", VGG, *args, "--json"]) == 0, capsys.readouterr().err
    return json.loads(capsys.readouterr().out)


def _mesh(rows: int) -> CommModel:
    spec = NetworkSpec(ptp_bw_gbps=64.0, gpu_mesh=True, mesh_rows=rows)
    return CommModel(apply_network(get_cluster("dgx-h100", nodes=4, gpus_per_node=1), spec))


def test_mesh_shape_changes_collective_time_by_the_model(capsys) -> None:
    grid = _run(capsys, *BASE, "-interconnects", "1", "-numRows", "2", "-numCols", "2")
    line = _run(capsys, *BASE, "-interconnects", "1")  # TrioSim's defaults: 1 row of 4
    assert grid["layout"]["nodes"] == 4 and grid["layout"]["gpus_per_node"] == 1
    assert any("mesh2d 2x2" in m for m in grid["models"])
    assert any("mesh2d 1x4" in m for m in line["models"])
    # ring all-gather over 4: 3·alpha·hops + 3/4 · S/B; alpha = 1 us (GPU-to-GPU link),
    # B = 64 GB/s x 0.69; hops per ring step: 1 on the 2x2 cycle, 3 on the 1x4 line
    s, b = 524288, 64 * 0.69 * 1e3
    assert _mesh(2).time_us("all_gather", s, [0, 1, 2, 3]) == pytest.approx(3 * 1 + 0.75 * s / b)
    assert _mesh(1).time_us("all_gather", s, [0, 1, 2, 3]) == pytest.approx(3 * 3 + 0.75 * s / b)
    # end to end: the line is slower by exactly the model's difference over the five
    want = sum(_mesh(1).time_us(op, n, [0, 1, 2, 3]) - _mesh(2).time_us(op, n, [0, 1, 2, 3])
               for op, n in TP_COLLECTIVES)
    assert want > 0
    assert line["iteration_time_us"] - grid["iteration_time_us"] == pytest.approx(want,
                                                                                 rel=1e-9)
    # and every rank computes the same 263 us (test_seed_triosim_tp): only comm differs
    assert grid["ranks"][0]["compute_us"] == line["ranks"][0]["compute_us"] == pytest.approx(263)


def test_echo_spellings_and_electrical_default(capsys) -> None:
    seed = _run(capsys, *BASE, "-interconnects", "1", "-numRows", "2", "-numCols", "2")
    echo = _run(capsys, *BASE, "--interconnects", "optical", "--num-rows", "2")
    assert echo["iteration_time_us"] == seed["iteration_time_us"]
    electrical = _run(capsys, *BASE, "-interconnects", "0")
    assert electrical["layout"]["nodes"] == 1 and electrical["layout"]["gpus_per_node"] == 4


def test_node_mesh_without_optical() -> None:
    c = apply_network(get_cluster("dgx-h100", nodes=6, gpus_per_node=8),
                      NetworkSpec(mesh_cols=3))
    assert (c.topology, c.grid, c.gpus_per_node) == ("mesh2d", (2, 3), 8)
    with pytest.raises(ConfigError, match="mesh_dims=4x\\? does not hold the layout's 6 nodes"):
        apply_network(get_cluster("dgx-h100", nodes=6), NetworkSpec(mesh_rows=4))
    with pytest.raises(ConfigError, match="gpus_per_node=8; valid: 1"):
        apply_network(get_cluster("dgx-h100", nodes=2), NetworkSpec(gpu_mesh=True))
    with pytest.raises(ConfigError, match="need mesh2d or torus2d"):
        NetworkSpec(topology="ring", mesh_rows=2)


@pytest.mark.parametrize("args,msg", [
    (["-interconnects", "1", "-numRows", "3"],
     "--num-rows x --num-cols 3x? does not hold the layout's 4 GPUs"),
    (["-interconnects", "1", "--gpus-per-node", "2"], "--interconnects optical puts one GPU"),
])
def test_mesh_errors_are_one_line(capsys, args: list[str], msg: str) -> None:
    assert main(["simulate", VGG, *BASE, *args]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and msg in err, err
