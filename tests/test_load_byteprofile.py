"""ByteProfile / dPRO directories -> Trace: steps, clock alignment, Comm sub-ops, layouts."""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

import pytest

from echo_sim.errors import TraceFormatError, TraceMismatchError
from echo_sim.load import discover, load_trace
from echo_sim.load.byteprofile import CLOCK_RULE, comm_lanes, split_comm_name
from echo_sim.trace.model import Cat

BPS = Path(__file__).parent / "data" / "load" / "byteprofile_2rank"
T0 = 1571030470000000.0


def test_byteprofile_golden_values() -> None:
    t = load_trace(BPS)
    ev = t.events
    assert t.source_format == "byteprofile"
    assert sorted(t.ranks) == [0, 1] and t.steps == [0, 1]
    # per rank per step: I/O, 2 FW, 2 BW, 2 Comm, UPDATE, STEP
    assert len(ev) == 2 * 2 * 9
    assert {c.name: int((ev.cat == c).sum()) for c in Cat} == {
        "FW": 8, "BW": 8, "COMM": 8, "UPDATE": 4, "STEP": 4, "OTHER": 4}
    # dPRO clock rule: rank 1's first Sync is 5 s + 100 us later -> shifted back by that
    assert t.ranks[1].clock_offset_us == -5_000_100.0
    assert t.ranks[0].clock_offset_us == 0.0
    assert t.ranks[1].meta["clock_alignment"] == CLOCK_RULE
    assert (t.ranks[1].node_rank, t.ranks[1].local_rank) == (1, 0)
    for r in (0, 1):
        assert t.iteration_bounds(r, 0) == (T0, T0 + 10000.0)  # I/O of step 0 to step 1
        assert t.iteration_bounds(r, 1) == (T0 + 10000.0, T0 + 18800.0)
    comm = t.comm_rows()
    names = [t.name_of(int(i)) for i in comm[ev.rank[comm] == 0]]
    assert names == ["Comm.grad_fc", "Comm.grad_conv"] * 2
    fc = int(comm[0])
    assert ev.dur_us[fc] == 1350.0  # span of Sync (4250) .. end of NCCL_ALLREDUCE (5600)
    assert t.comm_args[fc]["sub_ops"] == {"Sync": 50.0, "NCCL_ALLREDUCE": 1200.0}
    conv = int(comm[1])
    assert ev.dur_us[conv] == 2100.0  # the tid "total" event
    assert t.collective_of(fc) == "all_reduce" and t.group_of(fc) == (0, 1)
    # seq numbers (step, tensor) identically on both ranks
    by_rank = [ev.seq[comm[ev.rank[comm] == r]].tolist() for r in (0, 1)]
    assert by_rank[0] == by_rank[1] == [1, 0, 3, 2]
    assert ev.step[comm].tolist() == [0, 0, 1, 1] * 2
    assert t.dags[0].has_edge("Sync", "Comm.grad_fc") and t.dags[1].number_of_nodes() == 10


def test_dpro_layout_gzip_and_deps_from_args(tmp_path: Path) -> None:
    for host, src in ((0, "0_0"), (1, "1_0")):
        d = tmp_path / "global_traces" / f"host{host}" / "0"
        d.mkdir(parents=True)
        raw = (BPS / src / "bps_trace_local_rank0_2step.json").read_bytes()
        (d / "trace.json.gz").write_bytes(gzip.compress(raw))
    fmt, sources = discover(tmp_path)
    assert fmt == "byteprofile" and [s.host for s in sources] == ["host0", "host1"]
    t = load_trace(tmp_path)
    assert t.steps == [0, 1] and t.ranks[1].clock_offset_us == -5_000_100.0
    # no dag.gml: the graph comes from args.arg0..argN
    g = t.dags[0]
    assert g.has_edge("FW.conv", "FW.fc") and g.has_edge("Comm.grad_conv", "UPDATE_SGD")
    assert g.has_edge("BW.fc", "Comm.grad_fc.Sync")


def test_single_file(tmp_path: Path) -> None:
    t = load_trace(BPS / "1_0" / "bps_trace_local_rank0_2step.json")
    assert list(t.ranks) == [0] and t.steps == [0, 1]
    assert t.ranks[0].clock_offset_us == 0.0  # one host: nothing to align


def test_step_sets_differ(tmp_path: Path) -> None:
    shutil.copytree(BPS, tmp_path / "run")
    p = tmp_path / "run" / "1_0" / "bps_trace_local_rank0_2step.json"
    doc = json.loads(p.read_text())
    doc["traceEvents"] = [e for e in doc["traceEvents"] if e["ts"] < 1571030475010000]
    p.write_text(json.dumps(doc))
    with pytest.raises(TraceMismatchError, match="ranks 0 have steps 0-1; ranks 1 have steps 0"):
        load_trace(tmp_path / "run")


def test_bad_event(tmp_path: Path) -> None:
    shutil.copytree(BPS, tmp_path / "run")
    p = tmp_path / "run" / "0_0" / "bps_trace_local_rank0_2step.json"
    doc = json.loads(p.read_text())
    doc["traceEvents"][3]["ts"] = "soon"
    p.write_text(json.dumps(doc))
    with pytest.raises(TraceFormatError, match=r"traceEvents\[3\]: 'ts' is 'soon'"):
        load_trace(tmp_path / "run")


def test_helpers() -> None:
    assert split_comm_name("Comm.grad_1.PUSH") == ("grad_1", "PUSH")
    assert split_comm_name("Comm.a+b+c") == ("a+b+c", "")
    assert split_comm_name("Comm.layer.1.weight") == ("layer.1.weight", "")
    assert comm_lanes([0, 1, 2, 5], [3, 4, 6, 7]) == [0, 1, 2, 0]
    assert comm_lanes([], []) == []
