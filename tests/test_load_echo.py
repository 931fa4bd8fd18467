"""echo_trace directories -> Trace: golden values on a 2-rank fixture, layouts, bad input."""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from echo_sim.errors import (
    EchoError,
    TraceFormatError,
    TraceMismatchError,
    TraceNotFoundError,
)
from echo_sim.load import discover, load_trace
from echo_sim.load.echo import occurrences, read_dag
from echo_sim.trace.model import COLLECTIVES, Cat

DATA = Path(__file__).parent / "data" / "load"
ECHO = DATA / "echo_2rank"


@pytest.fixture
def echo_copy(tmp_path: Path) -> Path:
    dst = tmp_path / "run"
    shutil.copytree(ECHO, dst)
    return dst


def test_two_rank_golden_values() -> None:
    t = load_trace(ECHO)
    ev = t.events
    assert t.source_format == "echo"
    assert sorted(t.ranks) == [0, 1]
    assert t.steps == [2, 3]
    assert len(ev) == 36  # (3 FW + 3 BW + Comm + UPDATE + STEP) x 2 steps x 2 ranks
    assert t.world_size == 2
    assert t.ranks[1].host == "testhost" and t.ranks[1].backend == "gloo"
    assert t.ranks[0].meta["param_bytes"] == 232
    # rows sorted by (rank, ts)
    assert np.all(np.diff(ev.rank) >= 0)
    for r in (0, 1):
        assert np.all(np.diff(ev.ts_us[t.rank_rows(r)]) >= 0)
    counts = {c.name: int((ev.cat == c).sum()) for c in Cat}
    assert counts == {"FW": 12, "BW": 12, "COMM": 4, "UPDATE": 4, "STEP": 4, "OTHER": 0}
    comm = t.comm_rows()
    assert [t.collective_of(int(i)) for i in comm] == ["all_reduce"] * 4
    assert ev.nbytes[comm].tolist() == [232] * 4
    assert t.groups == [(0, 1)] and ev.group[comm].tolist() == [0] * 4
    assert ev.seq[comm].tolist() == [0, 1, 0, 1]
    assert t.comm_args[int(comm[0])]["params"] == ["fc2.bias", "fc2.weight", "fc1.bias",
                                                   "fc1.weight"]
    fc1 = t.name_id("FW.fc1")
    row = int(np.flatnonzero(ev.name == fc1)[0])
    assert t.kinds[int(ev.kind[row])] == "Linear"
    assert (ev.param_bytes[row], ev.in_bytes[row], ev.out_bytes[row]) == (160, 64, 128)
    assert ev.flops[row] == 256.0  # 2 * in 4 * out 8 * rows 4
    assert ev.dur_us[row] == 50.0 and ev.ts_us[row] == 1700000000000000.0
    # the STEP marker bounds the step
    assert t.iteration_bounds(0, 2) == (1700000000000000.0, 1700000000000000.0 + 749.0)
    # counters: 3 memory samples x 2 steps x 2 ranks, and each STEP's peak (its own series,
    # at the step's end: the samples miss a peak between them)
    assert sorted(t.counter_names) == ["peak_rss_bytes", "rss_bytes"] and len(t.counters) == 16
    rss = t.counters.series == t.counter_names.index("rss_bytes")
    assert (rss.sum(), (~rss).sum()) == (12, 4)
    assert t.counters.value[(t.counters.rank == 1) & rss].min() == 90_000_001
    # dag.gml: 8 ops of step 3 + NEXT_STEP
    g = t.dags[0]
    assert g.number_of_nodes() == 9 and g.has_edge("Comm.bucket0", "UPDATE.SGD")
    assert g.nodes["FW.fc1"] == {"cat": "FW", "dur_us": 50.0, "step": 3}


def test_one_rank_directory_and_single_file() -> None:
    t = load_trace(ECHO / "0_1")
    assert list(t.ranks) == [1] and t.steps == [2, 3] and len(t.events) == 18
    f = load_trace(ECHO / "0_1" / "trace.json")
    assert list(f.ranks) == [1] and len(f.events) == 18 and f.ranks[1].host == "testhost"


def test_gzip_and_nested_root(tmp_path: Path) -> None:
    for r in ("0_0", "0_1"):
        d = tmp_path / "jobs" / "run7" / r  # depth 3 below the root
        d.mkdir(parents=True)
        for name in ("meta.json", "dag.gml"):
            shutil.copy(ECHO / r / name, d / name)
        (d / "trace.json.gz").write_bytes(gzip.compress((ECHO / r / "trace.json").read_bytes()))
    fmt, sources = discover(tmp_path)
    assert fmt == "echo" and [s.directory.name for s in sources] == ["0_0", "0_1"]
    t = load_trace(tmp_path)
    assert len(t.events) == 36 and t.steps == [2, 3]


def test_occurrence_filled_when_missing(echo_copy: Path) -> None:
    p = echo_copy / "0_0" / "trace.json"
    doc = json.loads(p.read_text())
    for e in doc["traceEvents"]:
        e.get("args", {}).pop("occ", None)
        if e.get("name") == "FW.act":
            extra = dict(e, ts=e["ts"] + 1.0, dur=1.0)
    doc["traceEvents"].append(extra)  # a second FW.act call in step 3
    p.write_text(json.dumps(doc))
    t = load_trace(echo_copy)
    ev = t.events
    rows = np.flatnonzero((ev.name == t.name_id("FW.act")) & (ev.rank == 0) & (ev.step == 3))
    assert ev.occ[rows].tolist() == [0, 1]


def test_occurrences_function() -> None:
    step = np.array([1, 1, 1, 2, 2])
    name = np.array([5, 6, 5, 5, 5])
    assert occurrences(step, name).tolist() == [0, 0, 1, 0, 1]


def test_missing_path_empty_and_unrelated(tmp_path: Path) -> None:
    with pytest.raises(TraceNotFoundError, match="no such file"):
        load_trace(tmp_path / "nope")
    with pytest.raises(TraceNotFoundError, match="empty directory"):
        load_trace(tmp_path)
    (tmp_path / "notes.txt").write_text("hello")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "data.csv").write_text("a,b\n1,2\n")
    with pytest.raises(TraceNotFoundError, match="no trace found"):
        load_trace(tmp_path)


def test_unknown_format_single_file(tmp_path: Path) -> None:
    f = tmp_path / "x.json"
    f.write_text(json.dumps({"hello": [1, 2, 3]}))
    with pytest.raises(TraceFormatError, match="unknown trace format"):
        load_trace(f)


@pytest.mark.parametrize("content,match", [
    (b'{"traceEvents": [{"ph": "X", "name": "FW.a"', "truncated JSON"),
    (b"this is not json at all", "not valid JSON"),
    (b"", "empty file"),
])
def test_bad_trace_json(echo_copy: Path, content: bytes, match: str) -> None:
    p = echo_copy / "0_1" / "trace.json"
    p.write_bytes(content)
    with pytest.raises(TraceFormatError, match=match) as e:
        load_trace(echo_copy)
    msg = str(e.value)
    assert str(p) in msg and "\n" not in msg


def test_truncated_gzip(echo_copy: Path) -> None:
    p = echo_copy / "0_0" / "trace.json"
    gz = gzip.compress(p.read_bytes())
    p.unlink()
    (echo_copy / "0_0" / "trace.json.gz").write_bytes(gz[: len(gz) // 2])
    with pytest.raises(TraceFormatError, match="truncated or corrupt gzip"):
        load_trace(echo_copy)


def test_malformed_event_names_the_event(echo_copy: Path) -> None:
    p = echo_copy / "0_0" / "trace.json"
    doc = json.loads(p.read_text())
    doc["traceEvents"][5]["ts"] = {"oops": 1}
    p.write_text(json.dumps(doc))
    with pytest.raises(TraceFormatError, match=r"traceEvents\[5\]: 'ts'"):
        load_trace(echo_copy)


def test_negative_duration_is_fatal(echo_copy: Path) -> None:
    p = echo_copy / "0_0" / "trace.json"
    doc = json.loads(p.read_text())
    doc["traceEvents"][5]["dur"] = -3.0
    p.write_text(json.dumps(doc))
    with pytest.raises(TraceFormatError, match="negative duration -3.000 us"):
        load_trace(echo_copy)


def test_different_step_sets(echo_copy: Path) -> None:
    p = echo_copy / "0_1" / "trace.json"
    doc = json.loads(p.read_text())
    doc["traceEvents"] = [e for e in doc["traceEvents"] if e.get("args", {}).get("step") != 3]
    p.write_text(json.dumps(doc))
    with pytest.raises(TraceMismatchError,
                       match=r"ranks 0 have steps 2-3; ranks 1 have steps 2"):
        load_trace(echo_copy)


def test_cyclic_and_unreadable_dag(echo_copy: Path) -> None:
    g = echo_copy / "0_0" / "dag.gml"
    text = g.read_text()
    cyclic = text.rstrip().rstrip("]") + "  edge [\n    source 8\n    target 0\n  ]\n]\n"
    g.write_text(cyclic)
    with pytest.raises(TraceFormatError, match="dag.gml has a cycle"):
        load_trace(echo_copy)
    g.write_text("graph [ node [ id 0 label ")
    with pytest.raises(TraceFormatError, match="unreadable dag.gml"):
        load_trace(echo_copy)
    g.write_bytes(b"\xff\xfe\x00garbage")
    with pytest.raises(TraceFormatError, match="unreadable dag.gml"):
        load_trace(echo_copy)


def test_read_dag_fallback_matches_fast_path(tmp_path: Path) -> None:
    # a hand-written, non-networkx layout goes through networkx.parse_gml
    p = tmp_path / "dag.gml"
    p.write_text('graph [ directed 1 node [ id 0 label "FW.a" ] node [ id 1 label "BW.a" ]'
                 " edge [ source 0 target 1 ] ]")
    g = read_dag(p)
    assert list(g.edges) == [("FW.a", "BW.a")]


def test_duplicate_rank(echo_copy: Path) -> None:
    shutil.copytree(echo_copy / "0_0", echo_copy / "0_2")
    with pytest.raises(TraceFormatError, match="rank 0 appears twice"):
        load_trace(echo_copy)


def test_bad_meta(echo_copy: Path) -> None:
    m = echo_copy / "0_0" / "meta.json"
    m.write_text(json.dumps({"rank": "zero"}))
    with pytest.raises(TraceFormatError, match="'rank' is 'zero'"):
        load_trace(echo_copy)
    m.write_text("[1, 2")
    with pytest.raises(EchoError, match="meta.json"):
        load_trace(echo_copy)


def test_collective_index_is_contract_order() -> None:
    t = load_trace(ECHO)
    assert int(t.events.coll[t.comm_rows()[0]]) == COLLECTIVES.index("all_reduce")


# ------------------------------------------------ a real trace written by echo_trace
REAL = DATA / "echo_real_ddp"  # examples/train.py --layout ddp --steps 5 --capture, 2 gloo ranks


def test_real_echo_trace_ddp() -> None:
    from echo_sim.trace.validate import validate

    t = load_trace(REAL)
    ev = t.events
    assert sorted(t.ranks) == [0, 1] and t.steps == [2, 3, 4]
    assert {c.name: int((ev.cat == c).sum()) for c in Cat} == {
        "FW": 192, "BW": 192, "COMM": 12, "UPDATE": 6, "STEP": 6, "OTHER": 0}
    # two DDP buckets per step and rank, sized as meta.json's buckets say
    buckets = [b["bytes"] for b in t.ranks[0].meta["buckets"]]
    comm = t.comm_rows()
    for r in (0, 1):
        for step in t.steps:
            rows = comm[(ev.rank[comm] == r) & (ev.step[comm] == step)]
            assert sorted(int(b) for b in ev.nbytes[rows]) == sorted(buckets)
            assert {t.collective_of(int(i)) for i in rows} == {"all_reduce"}
    assert sum(buckets) == t.ranks[0].meta["param_bytes"]
    # every FW module has its BW, per rank and step
    for r in (0, 1):
        for step in t.steps:
            rows = t.step_rows(r, step)
            fw = sorted(t.name_of(int(i))[3:] for i in rows if ev.cat[i] == Cat.FW)
            bw = sorted(t.name_of(int(i))[3:] for i in rows if ev.cat[i] == Cat.BW)
            assert fw == bw and len(fw) == 32
    assert set(t.dags) == {0, 1} and "rss_bytes" in t.counter_names
    assert validate(t) == []  # collectives matched across ranks, no overlaps, all fields


def test_progress_bar_and_workers(capsys: pytest.CaptureFixture[str]) -> None:
    t = load_trace(ECHO, progress=True)
    assert "loading echo" in capsys.readouterr().err
    load_trace(ECHO, progress=False)
    assert capsys.readouterr().err == ""
    # two parser processes give the same trace as one
    p = load_trace(ECHO, progress=False, workers=2)
    assert p.names == t.names and np.array_equal(p.events.ts_us, t.events.ts_us)
    assert p.comm_args.keys() == t.comm_args.keys() and p.groups == t.groups


# ------------------------------------------------ baseTimeNanoseconds (relative ts)
B0_NS = 1_699_999_999_000_000_000  # a whole second, 1 s before the fixture's first event


def _rebase_file(rank_dir: Path, base_ns: int, *, in_meta: bool = False) -> None:
    """Rewrite a fixture rank so its ts are µs since ``base_ns`` (same instants)."""
    p = rank_dir / "trace.json"
    doc = json.loads(p.read_text())
    for e in doc["traceEvents"]:
        if "ts" in e:
            e["ts"] = e["ts"] - base_ns // 1000  # fixture ts are whole µs: exact
    if in_meta:
        m = json.loads((rank_dir / "meta.json").read_text())
        m["base_time_ns"] = base_ns
        (rank_dir / "meta.json").write_text(json.dumps(m))
    else:
        doc["baseTimeNanoseconds"] = base_ns
    p.write_text(json.dumps(doc))


def test_ranks_with_different_bases_keep_their_alignment(echo_copy: Path) -> None:
    absolute = load_trace(ECHO)
    _rebase_file(echo_copy / "0_0", B0_NS)
    _rebase_file(echo_copy / "0_1", B0_NS + 3_000_000_000, in_meta=True)  # base 3 s later
    t = load_trace(echo_copy)
    # both ranks on the earliest base: the same instants as the absolute fixture, exactly
    assert np.array_equal(t.events.ts_us, absolute.events.ts_us - B0_NS // 1000)
    assert np.array_equal(t.counters.ts_us, absolute.counters.ts_us - B0_NS // 1000)
    row = int(np.flatnonzero(t.events.name == t.name_id("FW.fc1"))[0])
    assert t.events.ts_us[row] == 1_000_000.0  # rank 0's FW.fc1, 1 s after its base
    assert t.iteration_bounds(1, 2)[0] == absolute.iteration_bounds(1, 2)[0] - B0_NS // 1000


def test_sub_microsecond_times_survive_relative_ts(echo_copy: Path) -> None:
    _rebase_file(echo_copy / "0_1", B0_NS)  # same base on both ranks: no shift
    p = echo_copy / "0_0" / "trace.json"
    doc = json.loads(p.read_text())
    doc["baseTimeNanoseconds"] = B0_NS
    fw = [e for e in doc["traceEvents"] if e.get("ph") == "X"]
    for i, e in enumerate(sorted(fw, key=lambda e: e["ts"])):
        e["ts"] = 12.345 + i * 1.001  # ns-resolution times, touching exactly
        e["dur"] = 1.001
    p.write_text(json.dumps(doc))
    t = load_trace(echo_copy)
    rows = t.rank_rows(0)
    ts, dur = t.events.ts_us[rows], t.events.dur_us[rows]
    assert ts[0] == 12.345 and ts[1] == pytest.approx(13.346, abs=1e-9)
    assert np.all(np.abs(ts[1:] - (ts[:-1] + dur[:-1])) < 1e-9)


@pytest.mark.parametrize("value", [-1, 1.5, "0", True])
def test_bad_base_time_is_named(echo_copy: Path, value: object) -> None:
    p = echo_copy / "0_1" / "trace.json"
    doc = json.loads(p.read_text())
    doc["baseTimeNanoseconds"] = value
    p.write_text(json.dumps(doc))
    with pytest.raises(TraceFormatError, match="0_1.*baseTimeNanoseconds"):
        load_trace(echo_copy)
