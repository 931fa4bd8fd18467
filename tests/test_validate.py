"""Validation rules one by one, and the ``validate`` command."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import networkx as nx
import pytest

from echo_sim.commands.validate import COMMAND
from echo_sim.errors import TraceFormatError, TraceMismatchError
from echo_sim.load import load_trace
from echo_sim.trace.model import Cat, RankInfo, Trace, TraceBuilder
from echo_sim.trace.validate import (
    check_collective_matching,
    check_comm_fields,
    check_dags,
    check_overlaps,
    check_ranks,
    check_steps,
    check_times,
    common_steps,
    raise_fatal,
    validate,
)
from tests.harness import REPO, base_env

ECHO = Path(__file__).parent / "data" / "load" / "echo_2rank"


def _trace(rows: list[dict], world: int = 2, steps: list[int] | None = None) -> Trace:
    b = TraceBuilder()
    for r in range(world):
        b.ranks[r] = RankInfo(rank=r, world_size=world)
    for row in rows:
        b.add(**{"step": 0, "cat": Cat.FW, **row})
    return b.build(steps=steps)


def test_clean_fixture_has_no_violation() -> None:
    assert validate(load_trace(ECHO)) == []


def test_times() -> None:
    t = _trace([dict(rank=0, name="FW.a", ts_us=0.0, dur_us=-2.0),
                dict(rank=1, name="FW.a", ts_us=float("nan"), dur_us=1.0)])
    v = check_times(t)
    assert [x.severity for x in v] == ["error", "error"]
    assert "non-finite time" in v[0].message and "negative duration -2.000 us" in v[1].message
    with pytest.raises(TraceFormatError, match="^src: rank 1 FW.a"):
        raise_fatal(v, "src")


def test_overlaps_partial_only() -> None:
    rows = [dict(rank=0, name="FW.outer", ts_us=0.0, dur_us=10.0),
            dict(rank=0, name="FW.inner", ts_us=1.0, dur_us=3.0),   # nested: fine
            dict(rank=0, name="FW.cross", ts_us=5.0, dur_us=10.0),  # starts in outer, ends after
            dict(rank=0, name="FW.next", ts_us=15.0, dur_us=1.0),   # touches: fine
            dict(rank=1, name="FW.other", ts_us=2.0, dur_us=30.0),  # another rank: fine
            dict(rank=0, name="Comm.x", cat=Cat.COMM, tid=100, ts_us=3.0, dur_us=30.0)]
    v = check_overlaps(_trace(rows))
    assert len(v) == 1 and v[0].severity == "warning"
    assert "rank 0 FW.cross" in v[0].message and v[0].rank == 0


def test_steps_and_common_steps() -> None:
    t = _trace([dict(rank=0, name="FW.a", ts_us=0.0, dur_us=1.0, step=1),
                dict(rank=0, name="FW.a", ts_us=5.0, dur_us=1.0, step=2),
                dict(rank=1, name="FW.a", ts_us=0.0, dur_us=1.0, step=1)], steps=[1])
    v = check_steps(t)
    assert len(v) == 1 and v[0].fatal
    assert "ranks 0 have steps 1-2; ranks 1 have steps 1" in v[0].message
    with pytest.raises(TraceMismatchError):
        raise_fatal(v, "x")
    assert common_steps({0: [3, 1, 2], 1: {1, 2, 3}}) == [1, 2, 3]
    assert common_steps({}) == []


def test_ranks_missing() -> None:
    b = TraceBuilder()
    b.ranks[0] = RankInfo(rank=0, world_size=4)
    b.ranks[2] = RankInfo(rank=2, world_size=4)
    v = check_ranks(b.build())
    assert [x.message for x in v] == ["world size 4 but ranks 1,3 are missing"]
    assert not v[0].fatal


def test_comm_fields() -> None:
    t = _trace([dict(rank=0, name="Comm.a", cat=Cat.COMM, ts_us=0.0, dur_us=1.0),
                dict(rank=0, name="Comm.b", cat=Cat.COMM, ts_us=2.0, dur_us=1.0,
                     collective="all_reduce", nbytes=8, group_ranks=[0, 1], seq=0),
                dict(rank=1, name="Comm.c", cat=Cat.COMM, ts_us=2.0, dur_us=1.0,
                     collective="barrier", group_ranks=[0, 1], seq=0)])
    msgs = [x.message for x in check_comm_fields(t)]
    assert msgs == ["1 Comm events lack 'collective' (Comm.a)",
                    "1 Comm events lack 'bytes' (Comm.a)",
                    "1 Comm events lack 'group' (Comm.a)"]


def test_collective_matching() -> None:
    c = dict(cat=Cat.COMM, dur_us=1.0, collective="all_reduce", nbytes=8, group_ranks=[0, 1])
    rows = [dict(rank=0, name="Comm.b0", ts_us=0.0, seq=0, **c),
            dict(rank=1, name="Comm.b0", ts_us=0.0, seq=0, **c),
            dict(rank=0, name="Comm.b1", ts_us=5.0, seq=1, **c),  # rank 1 never joins
            dict(rank=0, name="Comm.p", cat=Cat.COMM, ts_us=9.0, dur_us=1.0,
                 collective="send", nbytes=4, group_ranks=[0, 1], seq=0, peer=1)]
    msgs = [x.message for x in check_collective_matching(_trace(rows))]
    assert msgs == ["Comm.b1 (group [0, 1], seq 1) is missing on ranks 1",
                    "send/recv 0->1 seq 0 has no matching recv"]
    rows.append(dict(rank=1, name="Comm.p", cat=Cat.COMM, ts_us=9.0, dur_us=1.0,
                     collective="recv", nbytes=4, group_ranks=[0, 1], seq=0, peer=0))
    rows.append(dict(rank=1, name="Comm.b1", ts_us=6.0, seq=1, **c))
    assert check_collective_matching(_trace(rows)) == []


def test_dag_cycle() -> None:
    t = _trace([dict(rank=0, name="FW.a", ts_us=0.0, dur_us=1.0)])
    t.dags[0] = nx.DiGraph([("a", "b"), ("b", "a")])
    v = check_dags(t)
    assert len(v) == 1 and v[0].fatal and v[0].message == "rank 0: dag has a cycle"


def test_caps_examples() -> None:
    rows = [dict(rank=0, name="FW.a", ts_us=float(i), dur_us=-1.0) for i in range(9)]
    v = check_times(_trace(rows))
    assert len(v) == 6 and v[-1].message == "... and 4 more"


# ---------------------------------------------------------------- the command
def _run(path: Path, json_out: bool = False):
    return COMMAND.run(SimpleNamespace(paths=[str(path)], json=json_out))


def test_command_ok_and_warnings(tmp_path: Path) -> None:
    res = _run(ECHO)
    assert res.data == {"ok": True, "violations": []}
    assert res.text.startswith(f"{ECHO}: ok (2 rank(s), steps [2, 3], 36 events, echo format)")
    shutil.copytree(ECHO / "0_0", tmp_path / "0_0")  # rank 1 missing
    res = _run(tmp_path)
    assert res.data["ok"] is True
    rules = [v["rule"] for v in res.data["violations"]]
    assert rules == ["ranks"]  # absent members are not asked to match collectives
    assert "  warning: [ranks] world size 2 but ranks 1 are missing" in res.text


def test_command_fatal(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    shutil.copytree(ECHO, tmp_path / "run")
    (tmp_path / "run" / "0_1" / "trace.json").write_text('{"traceEvents": [')
    with pytest.raises(TraceFormatError, match="truncated JSON"):
        _run(tmp_path / "run")
    with pytest.raises(TraceFormatError):
        _run(tmp_path / "run", json_out=True)
    data = json.loads(capsys.readouterr().out)
    assert data["ok"] is False and data["violations"][0]["rule"] == "load"


def test_cli_end_to_end(tmp_path: Path) -> None:
    """``python -m echo_sim validate`` prints JSON; exits 2 with one stderr line when fatal."""
    cmd = [sys.executable, "-m", "echo_sim", "validate"]
    ok = subprocess.run([*cmd, str(ECHO), "--json"], capture_output=True, text=True,
                        env=base_env(), cwd=REPO, timeout=60)
    assert ok.returncode == 0, ok.stderr
    assert json.loads(ok.stdout) == {"ok": True, "violations": []}
    bad = subprocess.run([*cmd, str(tmp_path / "missing")], capture_output=True, text=True,
                         env=base_env(), cwd=REPO, timeout=60)
    assert bad.returncode == 2
    assert bad.stderr.strip().splitlines() == [
        f"echo_sim: error: {tmp_path / 'missing'}: no such file or directory"]
