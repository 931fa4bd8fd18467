"""``export PATH --to byteprofile``: a real echo trace written as ByteProfile rank directories
and read back by echo's ByteProfile loader — names, parameters, timings and the inline
``args.arg0..N`` dependencies survive the trip."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from echo_sim.load import load_trace
from echo_sim.trace.graph import rank_dag
from echo_sim.trace.model import Cat
from echo_trace.contract import NEXT_STEP
from tests.cli_util import run

DATA = Path(__file__).parent / "data" / "load"
REAL_DDP = DATA / "echo_real_ddp"  # two gloo DDP ranks traced by echo_trace


def _per_op(trace, rank):
    """name -> (count, total dur) of one rank's FW/BW/UPDATE/Comm events."""
    ev = trace.events
    rows = trace.rank_rows(rank)
    rows = rows[ev.cat[rows] != Cat.STEP]
    out: dict[str, list[float]] = {}
    for r in rows.tolist():
        c = out.setdefault(trace.name_of(r), [0, 0.0])
        c[0] += 1
        c[1] += float(ev.dur_us[r])
    return out


@pytest.fixture
def exported(tmp_path, capsys):
    out = tmp_path / "bps"
    code, text, err = run(capsys, "export", REAL_DDP, "--to", "byteprofile", "--output", out)
    assert code == 0, err
    assert "wrote 2 byteprofile rank directories" in text
    return out


def test_files_of_the_byteprofile_layout(exported):
    orig = load_trace(REAL_DDP)
    for rank, d in ((0, "0_0"), (1, "0_1")):
        names = sorted(p.name for p in (exported / d).iterdir())
        assert names == ["arg_namesINpara_names.txt", f"bps_trace_local_rank{rank}_3step.json",
                         "dag.gml", "gradient_name_list.txt"]
        params = (exported / d / "arg_namesINpara_names.txt").read_text().splitlines()
        assert params == [p["name"] for p in orig.ranks[rank].meta["params"]]
        assert len(params) == 53 and params[0] == "tok_emb.weight"
        grads = (exported / d / "gradient_name_list.txt").read_text().splitlines()
        assert grads == ["bucket0", "bucket1"]
        doc = json.loads((exported / d / f"bps_trace_local_rank{rank}_3step.json").read_text())
        ev = doc["traceEvents"]
        assert {e["ph"] for e in ev} == {"X"} and {e["pid"] for e in ev} == {rank}
        assert {e["cat"] for e in ev if e["name"].startswith("Comm.")} == {"Comm"}
        assert {e["tid"] for e in ev if e["name"].startswith("Comm.")} == {"total"}
        assert {e["cat"] for e in ev if not e["name"].startswith("Comm.")} == {"operator"}
        assert all(e["args"]["name"] == e["name"] for e in ev)


def test_read_back_names_and_times(exported):
    orig, back = load_trace(REAL_DDP), load_trace(exported)
    assert back.source_format == "byteprofile" and len(back.steps) == len(orig.steps) == 3
    for rank in (0, 1):
        a, b = _per_op(orig, rank), _per_op(back, rank)
        assert set(a) == set(b) and len(a) == 67  # 32 FW + 32 BW + UPDATE + 2 buckets
        for name, (count, total) in a.items():
            assert b[name][0] == count
            assert b[name][1] == pytest.approx(total, abs=1e-3 * count)
    # the loader's iteration (dPRO's step rule) spans the same operators
    ev = back.events
    assert int((ev.cat == Cat.COMM).sum()) == 12  # 2 buckets x 3 steps x 2 ranks


def test_dependencies_inline_round_trip(exported):
    orig, back = load_trace(REAL_DDP), load_trace(exported)
    last = orig.steps[-1]
    for rank, d in ((0, "0_0"), (1, "0_1")):
        doc = json.loads((exported / d / f"bps_trace_local_rank{rank}_3step.json").read_text())
        # args.argK of the last step's events are the predecessors in echo's step graph
        want = rank_dag(orig, rank, last)
        want.remove_node(NEXT_STEP)
        n = want.number_of_nodes()
        got = {e["name"]: sorted(v for k, v in e["args"].items() if k.startswith("arg"))
               for e in doc["traceEvents"][-n:]}
        assert set(got) == set(want.nodes)
        for node, deps in got.items():
            assert deps == sorted(want.predecessors(node)), node
        assert any(len(v) >= 2 for v in got.values())  # the update waits on both buckets
        # dag.gml holds the same graph, and the ByteProfile loader reads it
        assert set(back.dags[rank].edges) == set(want.edges)


def test_byteprofile_sample_round_trips(tmp_path, capsys):
    src = DATA / "byteprofile_2rank"
    code, _, err = run(capsys, "export", src, "--to", "byteprofile", "-o", tmp_path / "again")
    assert code == 0, err
    a, b = load_trace(src), load_trace(tmp_path / "again")
    for rank in (0, 1):
        assert _per_op(a, rank).keys() == _per_op(b, rank).keys()
    assert np.isclose(a.events.dur_us.sum(), b.events.dur_us.sum())
    doc = json.loads(next((tmp_path / "again" / "0_0").glob("bps_trace_*.json")).read_text())
    args = {e["name"]: e["args"] for e in doc["traceEvents"]}
    assert args["FW.conv"] == {"name": "FW.conv", "arg0": "I/O.data"}  # from its dag.gml
    assert {"Comm.grad_fc", "Comm.grad_conv"} <= set(args["UPDATE_SGD"].values())


def test_refuses_to_overwrite(exported, capsys):
    code, out, err = run(capsys, "export", REAL_DDP, "--to", "byteprofile", "-o", exported)
    assert code == 2 and err.count("\n") == 1 and "--force" in err
    code, _, _ = run(capsys, "export", REAL_DDP, "--to", "byteprofile", "-o", exported,
                     "--force", "--step", "3-4")
    assert code == 0
    assert (exported / "0_0" / "bps_trace_local_rank0_2step.json").is_file()
