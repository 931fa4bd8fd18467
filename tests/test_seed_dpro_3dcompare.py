"""dPRO's ``--option 3dcompare --path A,B``: two runs lined up by parallel role, not rank.

Run A is a real two-rank gloo DDP trace (``tests/data/load/echo_real_ddp``) with each rank's
data-parallel coordinate in its meta.json; run B holds the same ranks' files with their rank
numbers swapped (B's rank 0 is A's rank 1), as a relaunch that numbers workers differently
would. By role, every operator of B matches A exactly; by rank number, they differ."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from echo_sim.analysis.roles import rank_roles
from echo_sim.load import load_trace
from echo_sim.trace.export import write_echo_dirs
from echo_sim.trace.model import Trace
from tests.cli_util import run

REAL_DDP = Path(__file__).parent / "data" / "load" / "echo_real_ddp"


def _with_coords(trace: Trace, coords: dict[int, dict[str, int]]) -> Trace:
    ranks = {r: replace(i, meta={**i.meta, "parallel": coords[r]}) for r, i in trace.ranks.items()}
    return replace(trace, ranks=ranks)


def _swapped(trace: Trace) -> Trace:
    """Ranks 0 and 1 renumbered 1 and 0 (rows re-sorted by (rank, ts))."""
    ev = trace.events
    order = np.concatenate([trace.rank_rows(1), trace.rank_rows(0)])
    events = ev.take(order)
    events.rank = (1 - events.rank).astype(ev.rank.dtype)
    new_row = np.empty(len(ev), dtype=np.int64)
    new_row[order] = np.arange(len(ev))
    ranks = {1 - r: replace(i, rank=1 - r, local_rank=1 - i.local_rank,
                            meta={**i.meta, "rank": 1 - r, "local_rank": 1 - i.local_rank})
             for r, i in trace.ranks.items()}
    return replace(trace, events=events, ranks=dict(sorted(ranks.items())),
                   comm_args={int(new_row[k]): v for k, v in trace.comm_args.items()},
                   dags={1 - r: trace.dags[r] for r in (0, 1)})


@pytest.fixture
def runs(tmp_path):
    orig = load_trace(REAL_DDP)
    a = _with_coords(orig, {0: {"dp": 0, "tp": 0, "pp": 0}, 1: {"dp": 1, "tp": 0, "pp": 0}})
    b = _swapped(a)  # A's rank 1 (dp1) is B's rank 0
    write_echo_dirs(a, tmp_path / "A")
    write_echo_dirs(b, tmp_path / "B")
    return tmp_path / "A", tmp_path / "B"


def test_roles_come_from_meta_json(runs):
    a, b = (load_trace(p) for p in runs)
    assert json.loads((runs[1] / "0_0" / "meta.json").read_text())["parallel"]["dp"] == 1
    assert {r: x.label for r, x in rank_roles(a).items()} == {0: "dp0.tp0.pp0", 1: "dp1.tp0.pp0"}
    assert {r: x.label for r, x in rank_roles(b).items()} == {0: "dp1.tp0.pp0", 1: "dp0.tp0.pp0"}
    # without coordinates the roles are read from the trace: rank r is index r of its group
    plain = load_trace(REAL_DDP)
    roles = rank_roles(plain)
    assert {r: x.label for r, x in roles.items()} == {0: "dp0", 1: "dp1"}
    assert {x.source for x in roles.values()} == {"trace"}


def test_3dcompare_aligns_by_role(runs, capsys):
    pa, pb = runs
    code, out, err = run(capsys, "--option", "3dcompare", "--path", f"{pa},{pb}", "--json")
    assert code == 0, err
    d = json.loads(out)
    assert d["by"] == "role" and d["role_source"] == "meta"
    by_role = {r["role"]: r for r in d["roles"]}
    assert by_role["dp0.tp0.pp0"]["ranks_a"] == [0] and by_role["dp0.tp0.pp0"]["ranks_b"] == [1]
    assert by_role["dp1.tp0.pp0"]["ranks_a"] == [1] and by_role["dp1.tp0.pp0"]["ranks_b"] == [0]
    for role in by_role.values():
        # the same rank's data on both sides: nothing differs
        assert role["iteration_ratio"] == pytest.approx(1.0)
        assert role["num_ops"] == 67
        assert all(o["diff_us"] == pytest.approx(0.0, abs=1e-6) for o in role["ops"])
    # by rank number the same runs differ: rank 0 of A is not rank 0 of B
    code, out, _ = run(capsys, "compare", pa, pb, "--ranks-a", "0", "--ranks-b", "0", "--json")
    ops = json.loads(out)["ops"]
    assert code == 0 and max(abs(o["diff_us"]) for o in ops) > 100.0


def test_3dcompare_text_and_flags(runs, capsys):
    pa, pb = runs
    code, out, _ = run(capsys, "compare", pa, pb, "--by-role", "--head", "2")
    assert code == 0
    assert "ranks lined up by parallel role (meta.json coordinates)" in out
    assert "role dp0.tp0.pp0: A ranks [0], B ranks [1]" in out
    code, out, err = run(capsys, "compare", pa, pb, "--by-role", "--ranks-a", "0")
    assert code == 2 and out == "" and "--by-role and --ranks-a exclude each other" in err
