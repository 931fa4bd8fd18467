"""TrioSim interchange: hand-written trace.csv fixtures -> Trace, echo -> TrioSim -> echo."""

from __future__ import annotations

import csv
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from echo_sim.cli import main as echo_main
from echo_sim.errors import ConfigError, TraceFormatError
from echo_sim.load import discover, load_trace
from echo_sim.load.triosim import TRACE_COLUMNS, kind_of, read_triosim
from echo_sim.trace.model import Cat, Trace
from echo_sim.workload.ops import extract_workload
from integrations.triosim import export_triosim, main, triosim_rows

DATA = Path(__file__).parent / "data"
MLP = DATA / "triosim" / "mlp"
TWO_GPU = DATA / "triosim" / "two_gpu"
BROKEN = DATA / "triosim" / "broken"
ECHO = DATA / "load" / "echo_2rank"
REPO = Path(__file__).resolve().parent.parent
_E = "autograd::engine::evaluate_function: "


def _ops(t: Trace, rank: int) -> list[tuple[str, float, float, int]]:
    ev = t.events
    rows = [int(r) for r in t.rank_rows(rank) if ev.cat[r] != Cat.STEP]
    return [(t.name_of(r), float(ev.ts_us[r]), float(ev.dur_us[r]), int(ev.cat[r])) for r in rows]


def test_mlp_fixture_golden_values() -> None:
    t = load_trace(MLP)
    ev = t.events
    assert t.source_format == "triosim" and sorted(t.ranks) == [0] and t.steps == [0]
    assert t.ranks[0].meta == {"format": "triosim", "tensor_csv": True,
                               "tp_split": "output_channels"}  # tpflag=1 rows
    assert [(n, ts, d) for n, ts, d, _ in _ops(t, 0)] == [
        ("FW.aten::linear", 0.0, 11.5), ("FW.aten::relu", 11.5, 3.0),
        ("FW.aten::linear", 14.5, 6.25), ("FW.aten::cross_entropy_loss", 20.75, 4.0),
        ("BW." + _E + "NllLossBackward0", 24.75, 2.0),
        ("BW." + _E + "AddmmBackward0", 26.75, 8.5),
        ("BW." + _E + "ReluBackward0", 35.25, 2.5),
        ("BW." + _E + "AddmmBackward0", 37.75, 9.75),
        ("UPDATE.aten::_foreach_add_", 47.5, 5.5),
    ]
    assert t.iteration_bounds(0, 0) == (0.0, 53.0)
    rows = [int(r) for r in t.rank_rows(0) if ev.cat[r] != Cat.STEP]
    got = {(t.name_of(r), int(ev.occ[r])): (int(ev.in_bytes[r]), int(ev.out_bytes[r]),
                                            int(ev.param_bytes[r]), float(ev.flops[r]),
                                            t.kinds[ev.kind[r]] if ev.kind[r] >= 0 else None)
           for r in rows}
    # fc1: x [8,16] f32 in, W [32,16] + b [32] params, y [8,32] out; flops 2*256*16
    assert got[("FW.aten::linear", 0)] == (512, 1024, 2176, 8192.0, "Linear")
    assert got[("FW.aten::linear", 1)] == (1024, 128, 528, 2048.0, "Linear")
    # int64 target (TensorEachByte 8) counts 8 bytes per element
    assert got[("FW.aten::cross_entropy_loss", 0)] == (192, 4, 0, 0.0, None)
    assert got[("BW." + _E + "AddmmBackward0", 0)] == (1152, 1552, 512, 0.0, "Linear")
    assert got[("UPDATE.aten::_foreach_add_", 0)][2] == 2704  # every parameter it updates
    counts = {c.name: int((ev.cat == c).sum()) for c in Cat}
    assert counts == {"FW": 4, "BW": 4, "COMM": 0, "UPDATE": 1, "STEP": 1, "OTHER": 0}


def test_two_gpus_without_tensor_csv() -> None:
    t = load_trace(TWO_GPU / "trace.csv")  # a single file works too
    assert sorted(t.ranks) == [0, 1] and t.world_size == 2
    assert t.ranks[1].meta["tensor_csv"] is False
    ev = t.events
    r1 = _ops(t, 1)
    assert [d for _, _, d, _ in r1] == [5.0, 8.0, 16.0, 3.0, 2.25]
    assert [ts for _, ts, _, _ in r1] == [0.0, 5.0, 13.0, 29.0, 32.0]
    row = int(t.rank_rows(0)[0])
    assert t.name_of(row) == "FW.aten::embedding"
    assert int(ev.in_bytes[row]) == (1000 + 64) * 4  # 4 bytes per element without tensor.csv
    kinds = [t.kinds[k] for k in ev.kind[t.rank_rows(0)] if k >= 0]
    assert kinds == ["Embedding", "Conv1d", "Conv2d", "Embedding"]


@pytest.mark.parametrize("name,kind", [
    ("aten::linear", "Linear"), ("aten::addmm", "Linear"), (_E + "AddmmBackward0", "Linear"),
    ("aten::conv3d", "Conv3d"), ("aten::conv_transpose1d", "ConvTranspose1d"),
    (_E + "ConvolutionBackward0", "Conv2d"), ("aten::embedding", "Embedding"),
    (_E + "EmbeddingBackward0", "Embedding"), ("aten::relu_", None), ("aten::matmul", None),
])
def test_kind_of(name: str, kind: str | None) -> None:
    assert kind_of(name) == kind


def test_operator_id_order_not_file_order(tmp_path: Path) -> None:
    lines = (MLP / "trace.csv").read_text().splitlines()
    (tmp_path / "trace.csv").write_text("\n".join([lines[0], *reversed(lines[1:])]) + "\n")
    shutil.copy(MLP / "tensor.csv", tmp_path / "tensor.csv")
    assert _ops(read_triosim(tmp_path), 0) == _ops(read_triosim(MLP), 0)


@pytest.mark.parametrize("fixture,message", [
    ("missing_column.csv", "missing_column.csv:1: missing column(s) Operator_cudatimenooverlap"),
    ("bad_time.csv", "bad_time.csv:3 (OperatorID '2'): Operator_cudatime 'fast' is not a number"),
    ("bad_stage.csv", "stage 'inference' unknown (valid: forward, backward, optimizer)"),
    ("empty.csv", "empty.csv: empty file"),
])
def test_bad_input_raises_one_line(fixture: str, message: str) -> None:
    with pytest.raises(TraceFormatError) as e:
        read_triosim(BROKEN / fixture)
    assert message in str(e.value) and "\n" not in str(e.value)


def test_bad_rows(tmp_path: Path) -> None:
    head = ",".join(TRACE_COLUMNS)
    cases = {
        "1,aten::relu,[1],[2],3,-1,[4],[4],0,forward,0": "must be finite and >= 0",
        "1,aten::relu,[1],[2],3,nan,[4],[4],0,forward,0": "must be finite and >= 0",
        "1,aten::relu,1,[2],3,3,[4],[4],0,forward,0": "Operator_input '1' is not a [a; b] list",
        "1,aten::relu,[1],[2],3,3,[x],[4],0,forward,0": "InputSize 'x' is not an integer",
        "1,aten::relu,[1],[2],3,3,[4],[4],gpu0,forward,0": "gpuid 'gpu0' is not an integer",
    }
    for row, message in cases.items():
        (tmp_path / "trace.csv").write_text(f"{head}\n{row}\n")
        with pytest.raises(TraceFormatError, match=r"trace\.csv:2 ") as e:
            read_triosim(tmp_path)
        assert message in str(e.value)
    (tmp_path / "trace.csv").write_text(head + "\n")
    with pytest.raises(TraceFormatError, match="no operator rows"):
        read_triosim(tmp_path)


def test_discover_dispatch(tmp_path: Path) -> None:
    assert discover(MLP)[0] == "triosim"
    assert discover(MLP / "trace.csv")[0] == "triosim"
    root = tmp_path / "runs"
    shutil.copytree(MLP, root / "a")
    shutil.copytree(TWO_GPU, root / "b")
    with pytest.raises(TraceFormatError, match="holds 2 TrioSim traces"):
        load_trace(root)
    other = tmp_path / "other.csv"
    other.write_text("a,b\n1,2\n")
    with pytest.raises(TraceFormatError, match="unknown trace format"):
        load_trace(other)


def test_round_trip_echo_to_triosim_to_echo(tmp_path: Path) -> None:
    echo = load_trace(ECHO)
    res = export_triosim(echo, tmp_path / "out", rank=1, step=2)
    assert (res.rank, res.step, res.num_ops) == (1, 2, 7)
    back = load_trace(tmp_path / "out")
    ev = echo.events
    want = [(echo.name_of(int(r)), float(ev.dur_us[r]), int(ev.cat[r]))
            for r in echo.step_rows(1, 2) if ev.cat[r] in (Cat.FW, Cat.BW, Cat.UPDATE)]
    got = [(n, d, c) for n, _, d, c in _ops(back, 0)]
    assert [w[0] for w in want] == [g[0] for g in got]
    assert [w[2] for w in want] == [g[2] for g in got]
    np.testing.assert_allclose([g[1] for g in got], [w[1] for w in want], atol=1e-3)
    # bytes survive (multiples of 4); kinds do not (module paths carry no op type)
    bev = back.events
    brow = {back.name_of(int(r)): int(r) for r in back.rank_rows(0)}
    for r in echo.step_rows(1, 2):
        name = echo.name_of(int(r))
        if ev.cat[r] in (Cat.FW, Cat.UPDATE):
            b = brow[name]
            assert (int(bev.in_bytes[b]), int(bev.out_bytes[b]), int(bev.param_bytes[b])) == (
                int(ev.in_bytes[r]), int(ev.out_bytes[r]), int(ev.param_bytes[r]))
    with open(res.trace_csv, newline="") as f:
        rows = list(csv.DictReader(f))
    assert [r["tpflag"] for r in rows] == ["1", "0", "1", "1", "0", "1", "0"]
    assert rows[0]["Operator_input"] == "[1; 9]" and rows[0]["Operator_output"] == "[2]"
    assert rows[1]["Operator_input"] == "[2]"  # chained ids


def test_triosim_to_echo_to_triosim_keeps_rows() -> None:
    t = read_triosim(MLP)
    ops, tensors = triosim_rows(t, rank=0, step=0)
    assert [o[1] for o in ops] == [n.split(".", 1)[1] for n, *_ in _ops(t, 0)]
    assert [o[5] for o in ops] == ["11.500", "3.000", "6.250", "4.000", "2.000", "8.500",
                                   "2.500", "9.750", "5.500"]
    assert [o[9] for o in ops] == ["forward"] * 4 + ["backward"] * 4 + ["optimizer"]
    assert [o[10] for o in ops] == ["1", "0", "1", "0", "0", "1", "0", "1", "0"]
    defined = {row[1] for row in tensors}
    used = {i for o in ops for col in (o[2], o[3]) for i in col.strip("[]").split("; ") if i}
    assert used <= defined  # TrioSim fails on an undefined tensor id


def test_export_errors(tmp_path: Path) -> None:
    t = read_triosim(MLP)
    with pytest.raises(ConfigError, match=r"--rank 3 not in the trace \(valid: \[0\]\)"):
        export_triosim(t, tmp_path, rank=3)
    with pytest.raises(ConfigError, match=r"--step 5 not captured on rank 0 \(valid: \[0\]\)"):
        export_triosim(t, tmp_path, step=5)
    with pytest.raises(ConfigError, match="dtype_bytes 0"):
        export_triosim(t, tmp_path, dtype_bytes=0)
    export_triosim(t, tmp_path)
    with pytest.raises(ConfigError, match="exists"):
        export_triosim(t, tmp_path)
    assert export_triosim(t, tmp_path, force=True).num_ops == 9


def test_export_cli(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["export", str(ECHO), "--output", str(tmp_path / "x"), "--step", "3"]) == 0
    assert "7 operators, rank 0, step 3" in capsys.readouterr().out
    assert main(["export", str(ECHO), "--output", str(tmp_path / "x")]) == 2
    assert "exists (pass --force" in capsys.readouterr().err
    out = tmp_path / "y"
    proc = subprocess.run([sys.executable, "-m", "integrations.triosim", "export", str(MLP),
                           "--output", str(out)], cwd=REPO, capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert len(read_triosim(out).events) == 10


def test_statistic_and_workload_on_triosim(capsys: pytest.CaptureFixture[str]) -> None:
    assert echo_main(["statistic", str(MLP)]) == 0
    out = capsys.readouterr().out
    assert "1 rank(s), steps [0], mean step time 53.000 us" in out
    assert "FW.aten::linear" in out and "UPDATE.aten::_foreach_add_" in out
    w = extract_workload(load_trace(MLP))
    assert [o.kind for o in w.ops if o.phase == "F"] == ["Linear", "", "Linear", ""]
    assert sum(o.dur_us for o in w.ops) == pytest.approx(53.0)
