"""TrioSim's -case 3 (tensor parallel) on a TrioSim CNN trace (issue 22, TrioSim row 3).

``trace2-h100-bs8/vgg_mini`` is a TrioSim ``trace.csv`` + ``tensor.csv`` of a small VGG-style
CNN at batch 8 (conv 3->16, relu, max-pool, conv 16->32, relu, avg-pool, linear 32->10, loss)
whose conv / linear rows carry ``tpflag=1``. Split by output channels over ``tp`` GPUs,
those layers (forward 100, 80, 6 us; backward 10, 160, 150 us) take ``1/tp`` of their time,
the rest (129 us) is replicated, and the update (30 us) shrinks with the parameters held.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from echo_sim.cli import main
from echo_sim.cost.collectives import CommModel
from echo_sim.cost.hardware import get_cluster
from echo_sim.load import load_trace
from echo_sim.load.triosim import TP_SPLIT
from echo_sim.workload.channel_parallel import CHANNEL_SPLIT, channel_hooks, channel_parallel
from echo_sim.workload.ops import extract_workload

VGG = Path(__file__).parent / "data" / "triosim" / "trace2-h100-bs8" / "vgg_mini"
SPLIT_US, REPLICATED_US, UPDATE_US = 100 + 80 + 6 + 10 + 160 + 150, 129.0, 30.0


def test_loader_marks_the_trace_and_layers_pair_up() -> None:
    t = load_trace(VGG)
    assert t.ranks[0].meta["tp_split"] == TP_SPLIT == CHANNEL_SPLIT
    w = channel_parallel(extract_workload(t))
    split = [(o.phase, o.kind, o.in_bytes, o.out_bytes, o.fw) for o in w.ops
             if o.role == "channel"]
    assert split == [
        ("F", "Conv2d", 8 * 3 * 32 * 32 * 4, 8 * 16 * 32 * 32 * 4, -1),
        ("F", "Conv2d", 8 * 16 * 16 * 16 * 4, 8 * 32 * 16 * 16 * 4, -1),
        ("F", "Linear", 8 * 32 * 4, 8 * 10 * 4, -1),
        # backward in reverse order, paired per kind: its input gradient is the forward's
        # input; the first conv's input is the data, whose gradient is not computed
        ("B", "Linear", 8 * 32 * 4, 1280, 6),
        ("B", "Conv2d", 8 * 16 * 16 * 16 * 4, 149632, 3),
        ("B", "Conv2d", 0, 1792, 0),
    ]
    hooks = channel_hooks(w.fw_ops, w.bw_ops, mb_scale=2.0)
    assert [(h.collective, h.nbytes, h.phase, h.issue, h.wait) for h in hooks] == [
        ("all_gather", 2 * 524288, "F", 0, -2), ("all_gather", 2 * 262144, "F", 3, -2),
        ("all_gather", 2 * 320, "F", 6, -2), ("all_reduce", 2 * 1024, "B", 10, -2),
        ("all_reduce", 2 * 131072, "B", 13, -2)]


@pytest.mark.parametrize("tp", [2, 4])
def test_tensor_parallel_of_a_triosim_cnn(capsys, tp: int) -> None:
    assert main(["simulate", str(VGG), "--tp", str(tp), "--cluster", "dgx-h100",
                 "--compute-factor", "1", "-batch-size", "8", "--json"]) == 0
    r = json.loads(capsys.readouterr().out)
    compute = SPLIT_US / tp + REPLICATED_US + UPDATE_US / tp  # conv/linear params: all of them
    assert r["ranks"][0]["compute_us"] == pytest.approx(compute)
    cm = CommModel(get_cluster("dgx-h100", nodes=1, gpus_per_node=tp))
    comm = sum(cm.time_us(op, n, list(range(tp))) for op, n in [
        ("all_gather", 524288), ("all_gather", 262144), ("all_gather", 320),
        ("all_reduce", 1024), ("all_reduce", 131072)])
    assert r["iteration_time_us"] == pytest.approx(compute + comm, rel=1e-9)
    line = next(m for m in r["models"] if m.startswith("tensor parallel by output channels"))
    assert "3 layer(s) split (Conv2d, Linear)" in line
    assert "replicated: aten::adaptive_avg_pool2d, aten::cross_entropy_loss, " \
           "aten::max_pool2d, aten::relu_" in line
    # parameters: each rank holds 1/tp of the conv / linear weights and biases
    assert r["ranks"][0]["memory"]["params"] == 21672 // tp


def test_trace_without_tpflag_rows_is_refused(tmp_path: Path, capsys) -> None:
    rows = (VGG / "trace.csv").read_text().splitlines()
    flat = [rows[0]] + [r[: r.rfind(",")] + ",0" for r in rows[1:]]
    (tmp_path / "trace.csv").write_text("\n".join(flat) + "\n")
    shutil.copy(VGG / "tensor.csv", tmp_path / "tensor.csv")
    assert "tp_split" not in load_trace(tmp_path).ranks[0].meta
    assert main(["simulate", str(tmp_path), "--tp", "2", "-batch-size", "8"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no column/row-parallel" in err
