"""Writer (atomic files, Chrome events, meta) and the per-step DAG."""

from __future__ import annotations

import gzip
import json
import os

import networkx as nx

from echo_trace.dag import NEXT_STEP, build_step_dag, dag_gml, last_complete_step, node_id
from echo_trace.recorder import COMM_TID_BASE, STEP_TID, Recorder
from echo_trace.writer import dir_is_nonempty, trace_events, write_atomic, write_rank_dir


def _x(name, cat, ts, dur, step=0, occ=0, tid=0):
    return {"name": name, "cat": cat, "ph": "X", "tid": tid, "ts": ts, "dur": dur,
            "args": {"step": step, "occ": occ}}


# one step: FW a, FW b, BW b, BW a (with a comm issued during BW a), UPDATE, plus a late comm
STEP0 = [
    _x("STEP", "step", 0.0, 100.0, tid=STEP_TID),
    _x("FW.a", "FW", 1.0, 2.0),
    _x("FW.b", "FW", 4.0, 2.0),
    _x("BW.b", "BW", 10.0, 3.0),
    _x("Comm.bucket0", "Comm", 14.0, 20.0, tid=COMM_TID_BASE),
    _x("BW.a", "BW", 13.5, 3.0),
    _x("UPDATE.SGD", "UPDATE", 40.0, 5.0),
    _x("Comm.allgather", "Comm", 46.0, 2.0, tid=COMM_TID_BASE),
]


def test_dag_golden_edges():
    g = build_step_dag(STEP0, 0)
    assert set(g.edges) == {
        ("FW.a", "FW.b"), ("FW.b", "BW.b"), ("BW.b", "BW.a"), ("BW.a", "UPDATE.SGD"),  # rule 1
        ("BW.a", "Comm.bucket0"),  # rule 3: last compute started before the comm
        ("Comm.bucket0", "UPDATE.SGD"),  # rule 4
        ("UPDATE.SGD", "Comm.allgather"),  # rule 3 again (issued after the update)
        ("UPDATE.SGD", NEXT_STEP),  # rule 5
        ("Comm.allgather", NEXT_STEP),  # every dangling node ends in the sink
    }
    assert nx.is_directed_acyclic_graph(g)
    assert g.nodes["BW.b"] == {"cat": "BW", "dur_us": 3.0, "step": 0}


def test_dag_occurrences_and_gml_roundtrip(tmp_path):
    ev = [_x("FW.a", "FW", 1.0, 1.0), _x("FW.a", "FW", 3.0, 1.0, occ=1),
          _x("UPDATE.Adam", "UPDATE", 5.0, 1.0), _x("FW.z", "FW", 1.0, 1.0, step=1)]
    g = build_step_dag(ev, 0)
    assert list(nx.topological_sort(g)) == ["FW.a", "FW.a#1", "UPDATE.Adam", NEXT_STEP]
    p = tmp_path / "dag.gml"
    p.write_text(dag_gml(g))
    back = nx.read_gml(p)
    assert set(back.edges) == set(g.edges)
    assert back.nodes["FW.a#1"]["cat"] == "FW"
    assert node_id("x", 0) == "x" and node_id("x", 2) == "x#2"


def test_last_complete_step():
    ev = STEP0 + [_x("STEP", "step", 200.0, 10.0, step=1, tid=STEP_TID),
                  _x("FW.a", "FW", 300.0, 1.0, step=2)]
    assert last_complete_step(ev) == 1
    assert last_complete_step([_x("FW.a", "FW", 1.0, 1.0)]) is None


def test_write_atomic_leaves_no_tmp(tmp_path):
    p = tmp_path / "f.json"
    write_atomic(p, b"one")
    write_atomic(p, b"two")
    assert p.read_bytes() == b"two"
    assert os.listdir(tmp_path) == ["f.json"]


def test_dir_is_nonempty(tmp_path):
    assert not dir_is_nonempty(tmp_path / "missing")
    assert not dir_is_nonempty(tmp_path)
    (tmp_path / "x").write_text("1")
    assert dir_is_nonempty(tmp_path)


def test_trace_events_metadata_pid_and_clock_shift():
    rec = Recorder()
    rec.new_step(3)
    rec.complete("FW.a", "FW", 20.0, 1.23456, {"module": "a"})
    rec.counter("memory", 10.0, {"rss_bytes": 5})
    tok = rec.comm_begin("Comm.x", {"collective": "all_reduce"})
    rec.comm_end(tok, end_us=tok.ts_us + 1.0)
    out = trace_events(rec.event_dicts(), rank=2, host="h", offset_us=1000.0)
    meta = [e for e in out if e["ph"] == "M"]
    assert {"name": "process_name", "ph": "M", "pid": 2, "tid": 0,
            "args": {"name": "rank 2 (h)"}} in meta
    threads = {e["tid"]: e["args"]["name"] for e in meta if e["name"] == "thread_name"}
    assert threads == {0: "compute", 1: "steps", 100: "comm 0"}
    body = [e for e in out if e["ph"] != "M"]
    assert [e["ts"] for e in body] == sorted(e["ts"] for e in body)
    fw = next(e for e in body if e["name"] == "FW.a")
    assert fw["ts"] == 1020.0 and fw["dur"] == 1.235 and fw["pid"] == 2
    assert fw["args"] == {"module": "a", "step": 3, "occ": 0}
    assert next(e for e in body if e["ph"] == "C")["ts"] == 1010.0


def test_touching_slices_touch_after_rounding():
    # local perf-counter µs (hours of uptime) shifted to a trace base: awkward floats
    # (rounding start and duration separately made BW.a end 0.001 µs after BW.b starts)
    t0, d1, d2 = 9_876_543_210.0006, 0.0008, 1.0000004
    evs = [_x("BW.a", "BW", t0, d1), _x("BW.b", "BW", t0 + d1, d2),
           _x("FW.c", "FW", t0 + d1 + d2, 2.5)]
    out = [e for e in trace_events(evs, rank=0, host="h", offset_us=-9_876_000_000.0)
           if e["ph"] == "X"]
    for a, b in zip(out, out[1:], strict=False):
        assert abs(a["ts"] + a["dur"] - b["ts"]) < 1e-9
    assert (out[0]["ts"], out[0]["dur"], out[1]["ts"]) == (543_210.001, 0.0, 543_210.001)


def test_recorder_tuples_become_contract_dicts():
    rec = Recorder(max_events=5)
    rec.new_step(4)
    shared = {"module": "m", "type": "Linear", "param_bytes": 8}
    rec.record("FW.m", "FW", 1.0, 2.0, shared, {"in_bytes": 4, "out_bytes": 8})
    rec.record("BW.m", "BW", 5.0, -1.0, shared)  # negative duration: clamped when written
    rec.record("FW.m", "FW", 7.0, 1.0, shared, {"in_bytes": 4, "out_bytes": 8})
    rec.complete("STEP", "step", 0.0, 9.0, {"peak_rss_bytes": 3}, tid=STEP_TID, occ=0)
    rec.counter("memory", 2.0, {"rss_bytes": 1})
    rec.counter("memory", 3.0, {"rss_bytes": 2})  # the 6th event: dropped
    assert rec.dropped == 1 and len(rec.events) == 5 and rec.steps_recorded() == {4}
    fw0, bw, fw1, step, mem = rec.event_dicts()
    assert fw0 == {"name": "FW.m", "cat": "FW", "ph": "X", "tid": 0, "ts": 1.0, "dur": 2.0,
                   "args": {"module": "m", "type": "Linear", "param_bytes": 8, "in_bytes": 4,
                            "out_bytes": 8, "step": 4, "occ": 0}}
    assert fw1["args"]["occ"] == 1 and bw["args"]["occ"] == 0 and bw["dur"] == 0.0
    assert step["args"] == {"peak_rss_bytes": 3, "step": 4, "occ": 0}
    assert mem == {"name": "memory", "cat": "memory", "ph": "C", "ts": 2.0,
                   "args": {"rss_bytes": 1}}
    assert shared == {"module": "m", "type": "Linear", "param_bytes": 8}  # never mutated


def test_write_rank_dir_json_and_gzip(tmp_path):
    meta = {"rank": 1, "world_size": 2, "host": "h", "echo_version": "0.1.0"}
    paths = write_rank_dir(tmp_path / "0_1", events=STEP0, meta=meta,
                           dag_gml=dag_gml(build_step_dag(STEP0, 0)), offset_us=0.0,
                           base_time_ns=1_750_000_000_000_000_000)
    doc = json.loads(paths["trace"].read_text())
    assert doc["baseTimeNanoseconds"] == 1_750_000_000_000_000_000
    assert json.loads(paths["meta"].read_text())["base_time_ns"] == 1_750_000_000_000_000_000
    assert doc["otherData"] == {"format": "echo-trace/1", "rank": 1, "world_size": 2,
                                "echo_version": "0.1.0"}
    assert doc["displayTimeUnit"] == "ms"
    assert sum(e["ph"] == "X" for e in doc["traceEvents"]) == len(STEP0)
    m = json.loads(paths["meta"].read_text())
    assert (m["format"], m["trace_file"], m["num_events"]) == ("echo-trace/1", "trace.json", 8)
    assert nx.is_directed_acyclic_graph(nx.read_gml(paths["dag"]))
    # overwrite with gzip: the directory is replaced whole, the plain file goes away
    paths = write_rank_dir(tmp_path / "0_1", events=STEP0, meta=meta, dag_gml=None, gzip=True,
                           overwrite=True)
    with gzip.open(paths["trace"]) as f:
        assert len(json.load(f)["traceEvents"]) > len(STEP0)
    assert sorted(os.listdir(tmp_path / "0_1")) == ["meta.json", "trace.json.gz"]
    assert json.loads(paths["meta"].read_text())["trace_file"] == "trace.json.gz"


def test_zero_length_event_inside_another_makes_no_parent() -> None:
    # seen on a CNN: the backward of Flatten (a view) is recorded as an instant inside
    # BW.pool2's span; both stay leaves, on the writer's side and on echo_sim's
    from echo_trace.dag import leaf_compute

    evs = [{"name": "BW.fc", "ts": 0.0, "dur": 96.0}, {"name": "BW.pool2", "ts": 96.0, "dur": 280.0},
           {"name": "BW.flatten", "ts": 107.0, "dur": 0.0}, {"name": "BW.relu2", "ts": 376.0, "dur": 200.0},
           {"name": "BW.seq", "ts": 376.0, "dur": 300.0}, {"name": "BW.conv", "ts": 576.0, "dur": 90.0}]
    kept = [e["name"] for _, _, e in leaf_compute([(e["ts"], i, e) for i, e in enumerate(evs)])]
    assert kept == ["BW.fc", "BW.pool2", "BW.flatten", "BW.relu2", "BW.conv"]


def test_a_full_disk_never_installs_a_truncated_file(tmp_path, monkeypatch):
    """ENOSPC while writing dag.gml / meta.json (trace.json fitted): the partial files are
    removed, the complete trace is installed alone, one warning each (on a 50-60 KiB tmpfs
    the capture used to install a truncated meta.json, which validate then refused)."""
    import errno

    real = os.write

    def write(fd, data):  # the disk fills up in the middle of dag.gml and of meta.json
        name = os.readlink(f"/proc/self/fd/{fd}")
        if name.endswith(("dag.gml", "meta.json")):
            real(fd, bytes(data[:10]))
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(fd, data)

    monkeypatch.setattr(os, "write", write)
    ev = [{"name": "STEP", "cat": "step", "ph": "X", "tid": STEP_TID, "ts": 0.0, "dur": 10.0,
           "args": {"step": 0, "occ": 0}}]
    res = write_rank_dir(tmp_path / "0_0", events=ev, meta={"rank": 0}, dag_gml="graph [\n]\n")
    assert sorted(p.name for p in (tmp_path / "0_0").iterdir()) == ["trace.json"]
    assert set(res) == {"trace"} and set(res.errors) == {"dag", "meta"}
    assert json.loads((tmp_path / "0_0" / "trace.json").read_text())["traceEvents"]
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temp left
