"""The analysis commands through ``echo_sim.cli.main``: tables, --json, files, exit codes."""

from __future__ import annotations

import csv
import gzip
import importlib
import json

import pytest

from echo_sim import cli
from tests.cli_util import run, write_two_rank_trace

MINE = ("statistic", "collect", "combine", "compare", "stragglers")


@pytest.fixture(autouse=True)
def _commands(monkeypatch):
    """The full command list; while sibling command modules are still being written, only
    this file's commands (the parser is the real one either way)."""
    try:
        cli.load_commands()
    except ModuleNotFoundError:
        mine = [importlib.import_module(f"echo_sim.commands.{m}").COMMAND for m in MINE]
        monkeypatch.setattr(cli, "load_commands", lambda: mine)


@pytest.fixture
def trace_dir(tmp_path):
    return write_two_rank_trace(tmp_path)


def test_help_explains_each_command(capsys):
    for name, words in [("statistic", "share of step time"), ("collect", "exposed"),
                        ("combine", "Perfetto"), ("compare", "B / A"),
                        ("stragglers", "sequence")]:
        with pytest.raises(SystemExit) as e:
            cli.main([name, "--help"])
        assert e.value.code == 0
        out = capsys.readouterr().out
        assert words in out and "--json" in out and "microseconds" in out


def test_statistic_table_json_csv_plot(capsys, trace_dir, tmp_path):
    code, out, _ = run(capsys, "statistic", trace_dir, "--csv", tmp_path / "ops.csv",
                       "--plot", tmp_path / "steps.png", "--head", "2")
    assert code == 0
    assert "Operators" in out and "Comm.bucket0" in out and "Per rank" in out
    assert "(2 of 6 operators shown" in out
    rows = list(csv.DictReader(open(tmp_path / "ops.csv")))
    assert len(rows) == 6 and rows[0]["name"] == "Comm.bucket0"
    assert float(rows[0]["total_us"]) == 135.0
    assert (tmp_path / "steps.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    code, out, _ = run(capsys, "statistic", trace_dir, "--json", "--sort", "mean")
    d = json.loads(out)
    assert d["step_time_us"] == 430.0 and d["categories"]["idle"]["total_us"] == 15.0
    assert d["categories"]["Comm_exposed"]["total_us"] == 85.0  # idle before the parts split
    assert d["ops"][0]["name"] == "Comm.bucket0" and len(d["ops"]) == 6


def test_dpro_spelling(capsys, trace_dir):
    code, out, _ = run(capsys, "--option", "statistic", "--path", trace_dir, "--json")
    assert code == 0 and json.loads(out)["steps"] == [1, 2]


def test_collect_json(capsys, trace_dir, tmp_path):
    code, out, _ = run(capsys, "collect", trace_dir, "--json")
    d = json.loads(out)
    assert code == 0
    assert d["iteration_time_us"] == 115.0
    assert (d["exposed_us"], d["overlapped_us"]) == (21.25, 12.5)
    code, out, _ = run(capsys, "collect", trace_dir, "--csv", tmp_path / "c.csv")
    assert "iteration time  115.000 us" in out
    rows = list(csv.DictReader(open(tmp_path / "c.csv")))
    assert [(r["rank"], r["step"], float(r["exposed_us"])) for r in rows] == [
        ("0", "1", 15.0), ("0", "2", 25.0), ("1", "1", 25.0), ("1", "2", 20.0)]


def test_combine_default_output_filter_and_force(capsys, trace_dir):
    code, out, _ = run(capsys, "combine", trace_dir)
    assert code == 0 and str(trace_dir / "combined.json") in out
    doc = json.loads((trace_dir / "combined.json").read_text())
    assert {e["pid"] for e in doc["traceEvents"]} == {0, 1}
    code, _, err = run(capsys, "combine", trace_dir)
    assert code == 2 and "exists" in err and "--force" in err
    code, out, _ = run(capsys, "combine", trace_dir, "--force", "--filter", "nope")
    assert code == 2
    out_gz = trace_dir / "f.json.gz"
    code, out, _ = run(capsys, "combine", trace_dir, "--filter", "all_reduce", "-o", out_gz,
                       "--json")
    assert code == 0 and json.loads(out)["num_comm_kept"] == 4
    with gzip.open(out_gz) as f:
        assert json.load(f)["otherData"]["filter"] == ["all_reduce"]


def test_combined_file_is_not_read_back_as_a_rank(capsys, trace_dir):
    run(capsys, "combine", trace_dir)
    code, out, _ = run(capsys, "collect", trace_dir, "--json")
    assert code == 0 and json.loads(out)["ranks"] == [0, 1]


def test_compare_rank_sets_csv_xlsx(capsys, trace_dir, tmp_path):
    code, out, _ = run(capsys, "compare", trace_dir, trace_dir, "--ranks-a", "0",
                       "--ranks-b", "1", "--xlsx", tmp_path / "c.xlsx", "--csv",
                       tmp_path / "c.csv", "--head", "3")
    assert code == 0 and "B/A 1.048x" in out and "(3 of 6 operators shown" in out
    wb = pytest.importorskip("openpyxl").load_workbook(tmp_path / "c.xlsx")
    assert wb["operators"].max_row == 7  # header + every operator, not just --head
    assert len(list(csv.DictReader(open(tmp_path / "c.csv")))) == 6
    code, out, _ = run(capsys, "compare", trace_dir, trace_dir, "--json", "--ranks-a", "0-1")
    d = json.loads(out)
    assert d["iteration_ratio"] == 1.0 and all(o["diff_us"] == 0.0 for o in d["ops"])
    code, _, err = run(capsys, "compare", trace_dir, trace_dir, "--ranks-a", "x")
    assert code == 2 and "bad rank list 'x'" in err


def test_stragglers_table_and_json(capsys, trace_dir):
    code, out, _ = run(capsys, "stragglers", trace_dir)
    assert code == 0 and "2 straggler (step, rank) cell(s)" in out
    code, out, _ = run(capsys, "stragglers", trace_dir, "--threshold-us", "4", "--json")
    d = json.loads(out)
    assert [(s["step"], s["rank"]) for s in d["stragglers"]] == [(1, 1), (2, 1), (2, 0)]


def test_missing_path_is_one_line_exit_2(capsys, tmp_path):
    code, out, err = run(capsys, "statistic", tmp_path / "nope")
    assert code == 2 and out == "" and err.startswith("echo_sim: error:")
    assert err.count("\n") == 1
