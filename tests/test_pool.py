"""Several traces of the same job pooled per op (``simulate A B C``, ``search A B C``):
the median op times, the checks that the traces are runs of one job, and that search's
rows are still exactly the simulate commands they print. Two real one-process runs pooled
through the command line: ``tests/test_accuracy_smoke.py`` (``--traces 2``)."""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from echo_sim.errors import ConfigError
from echo_sim.load import load_trace
from echo_sim.workload.pool import pool_workloads
from echo_sim.workload.traced import traced_workload
from tests.cli_util import run

SHAPE = ["--layers", "2", "--hidden", "256", "--heads", "4", "--seq", "128", "--vocab",
         "1024", "--micro-batch", "2", "--gpu", "a100"]


def _synth(capsys: Any, out: Path, *extra: str) -> Path:
    code, _, err = run(capsys, "synth", *SHAPE, *extra, "--output", out)
    assert code == 0, err
    return out


@pytest.fixture
def runs(tmp_path: Path, capsys: Any) -> list[Path]:
    """Three 'runs' of one job whose ops ran at different paces (roofline efficiency)."""
    return [_synth(capsys, tmp_path / f"run{e}", "--efficiency", e)
            for e in ("0.3", "0.6", "0.45")]


def _sim(capsys: Any, *args: Any) -> dict[str, Any]:
    code, out, err = run(capsys, "simulate", *args, "--dp", "4", "--json")
    assert code == 0, err
    return json.loads(out)


def test_pooled_ops_are_the_per_op_median(runs: list[Path]) -> None:
    ws = [traced_workload(load_trace(str(p))) for p in runs]
    pooled = pool_workloads(ws, [str(p) for p in runs])
    for k in range(len(ws[0].ops)):
        assert pooled.ops[k].dur_us == pytest.approx(np.median([w.ops[k].dur_us for w in ws]))
        assert pooled.ops[k].gap_us == pytest.approx(np.median([w.ops[k].gap_us for w in ws]))
    # the slowest run's compute ops are the slowest of the three, the middle one wins
    assert sum(o.dur_us for o in ws[0].ops) > sum(o.dur_us for o in pooled.ops) > \
        sum(o.dur_us for o in ws[1].ops)
    assert pooled.steps_used == sum(w.steps_used for w in ws)
    assert pooled.step_time_us == pytest.approx(np.median([w.step_time_us for w in ws]))
    assert "per-op median over 3 traces" in pooled.pool_note
    assert pool_workloads(ws[:1]) is ws[0]  # one trace: as it is
    with pytest.raises(ConfigError, match="at least one"):
        pool_workloads([])


def test_simulate_of_three_runs_is_the_middle_runs(capsys: Any, runs: list[Path]) -> None:
    """Each op's median over three runs whose paces are ordered is the middle run's op, so
    the pooled prediction equals the middle run's own, memory included (same model)."""
    pooled = _sim(capsys, *runs)
    middle = _sim(capsys, runs[2])
    # (timestamps are written to the ns: gaps agree to that rounding)
    assert pooled["iteration_time_us"] == pytest.approx(middle["iteration_time_us"], rel=1e-6)
    assert pooled["peak_memory_bytes"] == middle["peak_memory_bytes"]
    assert pooled["sources"] == [str(p) for p in runs] and pooled["source"] == str(runs[0])
    assert any("per-op median over 3 traces" in m for m in pooled["models"])
    fast, slow = _sim(capsys, runs[1]), _sim(capsys, runs[0])
    two = _sim(capsys, runs[0], runs[1])  # two runs: the mean, between the two
    assert fast["iteration_time_us"] < two["iteration_time_us"] < slow["iteration_time_us"]
    assert "sources" not in middle


@pytest.mark.parametrize("case", ["micro-batch", "model", "twice"])
def test_traces_of_different_jobs_are_refused(capsys: Any, tmp_path: Path,
                                               runs: list[Path], case: str) -> None:
    if case == "micro-batch":
        other = _synth(capsys, tmp_path / "mb4", "--micro-batch", "4")
        needle = f"trace 2 ({other}) ran micro-batch 4, the first 2"
    elif case == "model":
        shape = list(SHAPE)
        shape[shape.index("--layers") + 1] = "3"
        code, _, err = run(capsys, "synth", *shape, "--output", tmp_path / "l3")
        assert code == 0, err
        other = tmp_path / "l3"
        needle = f"trace 2 ({other}) runs a different op sequence than the first"
    else:
        other, needle = runs[0], "is given twice"
    code, out, err = run(capsys, "simulate", runs[0], other, "--dp", "2")
    assert code == 2 and out == ""
    assert needle in err and len(err.strip().splitlines()) == 1, err


def test_search_over_pooled_runs_prints_commands_that_reproduce_it(
        capsys: Any, runs: list[Path]) -> None:
    code, out, err = run(capsys, "search", *runs, "--gpus", "4", "--global-batch", "8",
                         "--top", "3", "--json")
    assert code == 0, err
    d = json.loads(out)
    assert d["sources"] == [str(p) for p in runs]
    for row in d["ranked"]:
        argv = shlex.split(row["simulate"])
        assert argv[4:7] == [str(p) for p in runs]
        code, out, err = run(capsys, *argv[3:], "--json")
        assert code == 0, err
        assert json.loads(out)["iteration_time_us"] == pytest.approx(
            row["iteration_time_us"], rel=1e-12)
