"""Issue 18's "numbers that add up" rows, rerun: category shares sum to 100 % on a real
2-rank DDP trace, a profiler trace whose kernels fill the step is not called idle, and long
kernel names are shortened in text tables only."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import pytest

from echo_sim.analysis.statistic import statistic
from echo_sim.analysis.tables import LABEL_WIDTH, format_table, shorten
from echo_sim.load import load_trace
from tests.cli_util import run

DATA = Path(__file__).parent / "data" / "load"
LONG = ("void cutlass::Kernel2<cutlass_80_tensorop_s1688gemm_256x128_16x3_nt_align4"
        + "_" * 400 + ">(cutlass_80_tensorop_s1688gemm_256x128_16x3_nt_align4::Params)")


def _kineto(path: Path) -> Path:
    """One profiler step [0, 1000] µs whose two kernels cover [5, 991]: 98.6 % of it."""
    ev: list[dict[str, Any]] = [
        {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1, "tid": 1,
         "ts": 0.0, "dur": 1000.0, "args": {}},
        {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 1.0,
         "dur": 3.0, "args": {"External id": 1}},
        {"ph": "X", "cat": "kernel", "name": LONG, "pid": 0, "tid": 7, "ts": 5.0, "dur": 600.0,
         "args": {"stream": 7, "correlation": 1}},
        {"ph": "X", "cat": "kernel", "name": "ampere_sgemm_128x64_nn", "pid": 0, "tid": 7,
         "ts": 605.0, "dur": 386.0, "args": {"stream": 7, "correlation": 2}},
    ]
    path.write_text(json.dumps({"traceEvents": ev, "displayTimeUnit": "ms"}))
    return path


def test_real_ddp_trace_shares_add_up(capsys: Any) -> None:
    code, out, _ = run(capsys, "statistic", DATA / "echo_real_ddp", "--json")
    assert code == 0
    d = json.loads(out)
    cats = d["categories"]
    assert sum(c["share"] for c in cats.values()) == pytest.approx(1.0, abs=1e-9)
    assert sum(c["total_us"] for c in cats.values()) == pytest.approx(d["step_time_us"])
    # DDP hides communication behind backward: both parts are there, neither counted twice
    assert cats["Comm_overlapped"]["total_us"] > 0 and cats["Comm_exposed"]["total_us"] > 0
    for r in d["ranks"]:
        parts = (r["fw_us"] + r["bw_us"] + r["update_us"] + r["other_us"]
                 + r["comm_overlapped_us"] + r["comm_exposed_us"] + r["idle_us"])
        assert parts == pytest.approx(r["step_us"])
        assert r["comm_us"] == pytest.approx(r["comm_overlapped_us"] + r["comm_exposed_us"])


def test_kernels_filling_the_step_are_not_idle(tmp_path: Path) -> None:
    s = statistic(load_trace(_kineto(tmp_path / "k.json")))
    cats = {c.category: c for c in s.categories}
    # the host's aten::mm [1, 4] is FW (no module ranges: top-level ops before backward)
    assert cats["FW"].share == pytest.approx(0.003)
    assert cats["other"].share == pytest.approx(0.986)  # device work under no module range
    assert cats["idle"].share == pytest.approx(0.011)  # [0, 1], [4, 5] and [991, 1000]
    assert sum(c.share for c in s.categories) == pytest.approx(1.0)


def test_long_kernel_names_are_shortened_in_tables_only(tmp_path: Path, capsys: Any) -> None:
    trace = _kineto(tmp_path / "k.json")
    code, out, _ = run(capsys, "statistic", trace, "--csv", tmp_path / "ops.csv")
    assert code == 0
    assert max(len(line) for line in out.splitlines()) < 200
    assert "cutlass::Kernel2<cutlass_80_tensorop" in out and "…" in out
    with open(tmp_path / "ops.csv", newline="") as f:
        names = [row["name"] for row in csv.DictReader(f)]
    assert LONG in names  # whole in the CSV
    code, out, _ = run(capsys, "statistic", trace, "--json")
    assert LONG in {o["name"] for o in json.loads(out)["ops"]}


def test_shorten_rules() -> None:
    assert shorten("FW.blocks.0.attn") == "FW.blocks.0.attn"
    short = shorten(LONG)
    assert len(short) <= LABEL_WIDTH and short.startswith("cutlass::Kernel2<")
    assert short.endswith("(…)") or short.endswith("Params)")
    s = shorten("x" * 50 + "TAIL", 20)
    assert len(s) == 20 and s.endswith("TAIL") and "…" in s
    table = format_table(["name", "n"], [[LONG, 1]])
    assert LONG not in table and max(map(len, table.splitlines())) <= LABEL_WIDTH + 10
    assert LONG in format_table(["name", "n"], [[LONG, 1]], label_width=None)
