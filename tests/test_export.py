"""export: Chrome events, Perfetto track rules, atomic writes, echo directories round trip."""

from __future__ import annotations

import gzip
import json
from collections import defaultdict

import networkx as nx
import numpy as np
import pytest

from echo_sim.errors import EchoError
from echo_sim.trace.export import chrome_events, write_chrome, write_echo_dirs
from echo_sim.trace.model import Cat, RankInfo, TraceBuilder
from tests.test_statistic import two_rank_trace


def partial_overlaps(events: list[dict]) -> list[tuple[dict, dict]]:
    """Pairs of X slices on one (pid, tid) that overlap without nesting (Perfetto rejects)."""
    tracks: dict[tuple[int, int], list[dict]] = defaultdict(list)
    for e in events:
        if e["ph"] == "X":
            tracks[(e["pid"], e["tid"])].append(e)
    bad = []
    for evs in tracks.values():
        evs.sort(key=lambda e: (e["ts"], -e["dur"]))
        stack: list[dict] = []
        for e in evs:
            while stack and stack[-1]["ts"] + stack[-1]["dur"] <= e["ts"]:
                stack.pop()
            if stack and e["ts"] + e["dur"] > stack[-1]["ts"] + stack[-1]["dur"]:
                bad.append((stack[-1], e))
            stack.append(e)
    return bad


def test_events_follow_the_contract():
    t = two_rank_trace()
    evs = chrome_events(t)
    meta = [e for e in evs if e["ph"] == "M"]
    names = {(e["pid"], e["tid"], e["name"]): e["args"] for e in meta}
    assert names[(0, 0, "process_name")] == {"name": "rank 0 (node0)"}
    assert names[(1, 100, "thread_name")] == {"name": "comm 0"}
    assert names[(0, 1, "thread_name")] == {"name": "steps"}
    x = [e for e in evs if e["ph"] == "X"]
    assert len(x) == 28 and evs.index(meta[-1]) < evs.index(x[0])
    comm = next(e for e in x if e["name"] == "Comm.bucket0" and e["pid"] == 1
                and e["args"]["step"] == 2)
    assert comm["tid"] == 100 and comm["cat"] == "Comm"
    assert (comm["ts"], comm["dur"]) == (175.0, 30.0)
    assert comm["args"] == {"step": 2, "occ": 0, "collective": "all_reduce", "bytes": 400,
                            "group_ranks": [0, 1], "seq": 1, "dtype": "float32",
                            "path": "ddp"}
    fw = next(e for e in x if e["name"] == "FW.a" and e["pid"] == 0)
    assert fw["args"] == {"step": 1, "occ": 0, "module": "a", "type": "Linear",
                          "param_bytes": 400, "in_bytes": 64, "out_bytes": 32, "flops": 1000.0}
    step = next(e for e in x if e["name"] == "STEP")
    assert (step["cat"], step["tid"]) == ("step", 1)
    counters = [e for e in evs if e["ph"] == "C"]
    assert counters == [{"name": "memory", "cat": "memory", "ph": "C", "ts": 5.0, "pid": 0,
                         "tid": 0, "args": {"rss_bytes": 1e6}}]
    assert partial_overlaps(evs) == []


def test_highlight_and_row_subset():
    t = two_rank_trace()
    comm_rows = t.comm_rows()
    evs = chrome_events(t, rows=comm_rows[::-1], highlight={int(comm_rows[0])})
    x = [e for e in evs if e["ph"] == "X"]
    assert [(e["pid"], e["ts"]) for e in x] == [(0, 55.0), (0, 160.0), (1, 70.0), (1, 175.0)]
    assert x[0]["cname"] == "terrible" and x[0]["args"]["critical"] is True
    assert all("cname" not in e and "critical" not in e["args"] for e in x[1:])
    assert not [e for e in evs if e["ph"] == "C"]


def test_comm_lanes_and_compute_spill_never_partially_overlap():
    b = TraceBuilder()
    # three async ops: [0,10] and [5,20] overlap -> lanes 0 and 1; [12,30] reuses lane 0
    for i, (s, e) in enumerate([(0, 10), (5, 20), (12, 30)]):
        b.add(rank=0, name=f"Comm.c{i}", cat=Cat.COMM, ts_us=s, dur_us=e - s, step=0, tid=100)
    # compute: [0,10] contains [2,4]; [8,15] partially overlaps [0,10] -> spill track
    for i, (s, e) in enumerate([(0, 10), (2, 4), (8, 15)]):
        b.add(rank=0, name=f"FW.m{i}", cat=Cat.FW, ts_us=s, dur_us=e - s, step=0)
    evs = chrome_events(b.build())
    tid = {e["name"]: e["tid"] for e in evs if e["ph"] == "X"}
    assert (tid["Comm.c0"], tid["Comm.c1"], tid["Comm.c2"]) == (100, 101, 100)
    assert (tid["FW.m0"], tid["FW.m1"], tid["FW.m2"]) == (0, 0, 10)
    assert partial_overlaps(evs) == []


def test_rounding_keeps_nested_slices_nested():
    b = TraceBuilder()
    b.add(rank=0, name="FW.p", cat=Cat.FW, ts_us=0.0004, dur_us=10.0, step=0)
    b.add(rank=0, name="FW.c", cat=Cat.FW, ts_us=5.0006, dur_us=4.9998, step=0)
    evs = chrome_events(b.build())
    assert partial_overlaps(evs) == []
    assert {e["tid"] for e in evs if e["ph"] == "X"} == {0}


def test_write_chrome_atomic_gz_and_no_overwrite(tmp_path):
    evs = chrome_events(two_rank_trace())
    with pytest.raises(EchoError, match="sub does not exist"):  # parents are never made
        write_chrome(tmp_path / "sub" / "t.json.gz", evs)
    (tmp_path / "sub").mkdir()
    p = write_chrome(tmp_path / "sub" / "t.json.gz", evs, other_data={"k": 1})
    with gzip.open(p) as f:
        doc = json.load(f)
    assert doc["displayTimeUnit"] == "ms" and doc["otherData"] == {"k": 1}
    assert doc["traceEvents"] == evs
    with pytest.raises(EchoError, match="exists"):
        write_chrome(p, [])
    write_chrome(p, [], overwrite=True)
    with gzip.open(p) as f:
        assert json.load(f)["traceEvents"] == []
    assert sorted(x.name for x in p.parent.iterdir()) == ["t.json.gz"]  # no tmp left


def test_write_echo_dirs_layout_meta_and_dag(tmp_path):
    t = two_rank_trace()
    dirs = write_echo_dirs(t, tmp_path)
    assert [d.name for d in dirs] == ["0_0", "0_1"]
    assert sorted(x.name for x in dirs[1].iterdir()) == ["dag.gml", "meta.json", "trace.json"]
    meta = json.loads((dirs[1] / "meta.json").read_text())
    assert (meta["format"], meta["rank"], meta["local_rank"], meta["world_size"],
            meta["steps"], meta["host"], meta["num_events"]) == (
        "echo-trace/1", 1, 1, 2, [1, 2], "node0", 14)
    doc = json.loads((dirs[1] / "trace.json").read_text())
    assert doc["otherData"]["format"] == "echo-trace/1" and doc["otherData"]["rank"] == 1
    assert {e["pid"] for e in doc["traceEvents"]} == {1}
    g = nx.read_gml(dirs[0] / "dag.gml")
    assert sorted(g.edges()) == [
        ("BW.a", "Comm.bucket0"), ("BW.a", "UPDATE.SGD"), ("BW.b", "BW.a"),
        ("Comm.bucket0", "UPDATE.SGD"), ("FW.a", "FW.b"), ("FW.b", "BW.b"),
        ("UPDATE.SGD", "NEXT_STEP")]
    assert g.nodes["FW.a"] == {"cat": "FW", "dur_us": 25.0, "step": 2}  # last step
    with pytest.raises(EchoError, match="exists"):
        write_echo_dirs(t, tmp_path)
    assert write_echo_dirs(t, tmp_path, overwrite=True, gzip=True) == dirs
    assert (dirs[0] / "trace.json.gz").exists()


def test_colliding_rank_dirs_fall_back_to_rank_numbers(tmp_path):
    b = TraceBuilder()
    for r in range(3):
        b.ranks[r] = RankInfo(rank=r, world_size=3)  # all node 0, local 0
        b.add(rank=r, name="FW.x", cat=Cat.FW, ts_us=0, dur_us=1, step=0)
    assert [d.name for d in write_echo_dirs(b.build(), tmp_path)] == ["0_0", "0_1", "0_2"]
    meta = json.loads((tmp_path / "0_2" / "meta.json").read_text())
    assert (meta["rank"], meta["local_rank"]) == (2, 2)


def test_round_trip_through_the_echo_loader(tmp_path):
    load = pytest.importorskip("echo_sim.load").load_trace
    t = two_rank_trace()
    write_echo_dirs(t, tmp_path)
    back = load(tmp_path)
    for col in ("rank", "step", "cat", "tid", "ts_us", "dur_us", "occ", "coll", "nbytes",
                "seq", "param_bytes", "in_bytes", "out_bytes", "flops"):
        assert np.array_equal(getattr(back.events, col), getattr(t.events, col)), col
    assert [back.names[i] for i in back.events.name] == [t.names[i] for i in t.events.name]
    assert back.steps == [1, 2] and sorted(back.ranks) == [0, 1]
    assert [back.groups[g] for g in back.events.group[back.comm_rows()]] == [(0, 1)] * 4
    assert back.comm_args[int(back.comm_rows()[0])]["dtype"] == "float32"
    assert set(back.dags) == {0, 1}
