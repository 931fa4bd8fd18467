"""Critical path segments on hand-built traces with known schedules."""

from __future__ import annotations

import json

import pytest

from echo_sim.analysis.critical import CATEGORIES, critical_path
from echo_sim.errors import ConfigError
from tests.test_replay import ddp_trace, pipeline_trace


def test_straggler_path_runs_through_the_slow_rank_and_the_collective():
    cp = critical_path(ddp_trace(straggle_us=4.0), step=1)
    got = [(s.cat, s.name, s.ranks, s.dur_us) for s in cp.segments]
    assert got == [
        ("FW", "FW.l1", (1,), 10.0),
        ("host delay", "before FW.l2", (1,), 1.0),
        ("FW", "FW.l2", (1,), 10.0),
        ("host delay", "before BW.l2", (1,), 2.0),
        ("BW", "BW.l2", (1,), 14.0),  # the straggler
        ("host delay", "before BW.l1", (1,), 1.0),
        ("BW", "BW.l1", (1,), 10.0),
        ("Comm", "Comm.b1", (0, 1), 8.0),  # issued last by rank 1
        ("host delay", "before UPDATE.SGD", (0,), 1.0),
        ("UPDATE", "UPDATE.SGD", (0,), 5.0),
    ]
    assert [s.start_us for s in cp.segments][:3] == [0.0, 10.0, 11.0]
    assert cp.total_us == pytest.approx(62.0)
    assert cp.shares_us == pytest.approx(
        {"FW": 20.0, "BW": 24.0, "Comm": 8.0, "UPDATE": 5.0, "host delay": 5.0})
    pct = cp.shares_pct()
    assert sum(pct.values()) == pytest.approx(100.0)
    assert pct["BW"] == pytest.approx(100 * 24 / 62)


def test_path_is_contiguous_and_default_step_is_last():
    cp = critical_path(ddp_trace(steps=3))
    assert cp.step == 3
    t = 0.0
    for s in cp.segments:
        assert s.start_us == pytest.approx(t)
        t += s.dur_us
    assert t == pytest.approx(cp.total_us)


def test_scaled_comm_shrinks_its_share():
    base = critical_path(ddp_trace(straggle_us=4.0), step=1)
    fast = critical_path(ddp_trace(straggle_us=4.0), step=1, scale=["Comm.*=0.5"])
    assert fast.shares_us["Comm"] == pytest.approx(4.0)
    assert fast.total_us == pytest.approx(base.total_us - 4.0)


def test_pipeline_path_crosses_ranks_through_send_recv():
    cp = critical_path(pipeline_trace())
    assert [(s.cat, s.ranks) for s in cp.segments] == [
        ("FW", (0,)), ("Comm", (0, 1)), ("host delay", (1,)), ("FW", (1,))]
    assert cp.total_us == pytest.approx(26.0)


def test_to_dict_lists_categories_and_segments():
    d = critical_path(ddp_trace(straggle_us=4.0), step=1).to_dict()
    assert list(d["shares"]) == list(CATEGORIES)
    assert d["ranks_on_path"] == [0, 1] and len(d["segments"]) == 10
    assert d["total_us"] == 62.0
    json.dumps(d)


def test_unknown_step_is_a_config_error():
    with pytest.raises(ConfigError, match="step 5"):
        critical_path(ddp_trace(), step=5)


def test_cli_critical_writes_highlighted_trace(tmp_path, capsys):
    from echo_sim.cli import main
    from echo_sim.trace.export import write_echo_dirs

    write_echo_dirs(ddp_trace(straggle_us=4.0), tmp_path / "t")
    out = tmp_path / "crit.json"
    assert main(["critical", str(tmp_path / "t"), "--step", "1", "--json", "-o", str(out)]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["total_us"] == pytest.approx(62.0)
    doc = json.loads(out.read_text())
    marked = sorted((e["pid"], e["name"]) for e in doc["traceEvents"]
                    if e.get("ph") == "X" and e.get("args", {}).get("critical"))
    assert marked == sorted([(1, "FW.l1"), (1, "FW.l2"), (1, "BW.l2"), (1, "BW.l1"),
                             (0, "Comm.b1"), (1, "Comm.b1"), (0, "UPDATE.SGD")])
