"""combine: one Perfetto trace of all ranks, the --filter patterns, output rules."""

from __future__ import annotations

import gzip
import json

import pytest

from echo_sim.analysis.combine import combine, default_output, parse_filter, select_rows
from echo_sim.errors import EchoError
from echo_sim.trace.model import Cat, TraceBuilder
from tests.test_export import partial_overlaps
from tests.test_statistic import two_rank_trace


def _trace_with_two_comms():
    b = TraceBuilder()
    for r in (0, 1):
        b.add(rank=r, name="FW.x", cat=Cat.FW, ts_us=0, dur_us=10, step=0)
        b.add(rank=r, name="Comm.bucket0", cat=Cat.COMM, ts_us=10, dur_us=5, step=0, tid=100,
              collective="all_reduce", group_ranks=(0, 1), seq=0)
        b.add(rank=r, name="Comm.params", cat=Cat.COMM, ts_us=15, dur_us=5, step=0, tid=100,
              collective="all_gather", group_ranks=(0, 1), seq=1)
    return b.build()


def test_combined_file_has_one_process_per_rank(tmp_path):
    res = combine(two_rank_trace(), tmp_path / "c.json")
    doc = json.loads(res.path.read_text())
    evs = doc["traceEvents"]
    procs = {e["pid"]: e["args"]["name"] for e in evs if e["name"] == "process_name"}
    assert procs == {0: "rank 0 (node0)", 1: "rank 1 (node0)"}
    assert sum(e["ph"] == "X" for e in evs) == 28 == res.num_events
    assert doc["otherData"]["format"] == "echo-combined/1"
    assert doc["otherData"]["ranks"] == [0, 1]
    assert partial_overlaps(evs) == []
    assert (res.num_ranks, res.num_comm_kept, res.num_comm_dropped) == (2, 4, 0)


@pytest.mark.parametrize("patterns,kept", [
    (["Comm.bucket0"], {"Comm.bucket0"}),
    (["params"], {"Comm.params"}),  # without the Comm. prefix
    (["all_gather"], {"Comm.params"}),  # collective type
    (["Comm.b*", "all_gather"], {"Comm.bucket0", "Comm.params"}),
])
def test_filter_patterns(patterns, kept):
    t = _trace_with_two_comms()
    rows = select_rows(t, patterns)
    names = {t.name_of(int(r)) for r in rows}
    assert names == kept | {"FW.x"}


def test_filter_written_and_no_match_is_an_error(tmp_path):
    t = _trace_with_two_comms()
    res = combine(t, tmp_path / "c.json.gz", filter=["all_reduce"])
    with gzip.open(res.path) as f:
        x = [e["name"] for e in json.load(f)["traceEvents"] if e["ph"] == "X"]
    assert sorted(x) == ["Comm.bucket0"] * 2 + ["FW.x"] * 2
    assert (res.num_comm_kept, res.num_comm_dropped) == (2, 2)
    with pytest.raises(EchoError, match="matches no communication op; the trace has: "
                                        "Comm.bucket0, Comm.params"):
        combine(t, tmp_path / "d.json", filter=["nothing*"])


def test_never_overwrites_without_force(tmp_path):
    t = two_rank_trace()
    out = tmp_path / "c.json"
    combine(t, out)
    with pytest.raises(EchoError, match="overwrite=True"):
        combine(t, out)
    combine(t, out, overwrite=True)


def test_parse_filter_and_default_output(tmp_path):
    assert parse_filter(" a, Comm.b* ,,") == ["a", "Comm.b*"]
    assert parse_filter(None) == [] and parse_filter("") == []
    assert default_output(tmp_path) == tmp_path / "combined.json"
    f = tmp_path / "trace.json"
    f.write_text("{}")
    assert default_output(f) == tmp_path / "combined.json"
