"""dPRO / ByteProfile spellings as their users type them: each runs, or prints the echo
equivalent as one line and exits 2."""

from __future__ import annotations

import json

import pytest

from echo_sim.commands.dpro import translate_dpro_argv
from tests.cli_util import run, write_two_rank_trace

openpyxl = pytest.importorskip("openpyxl")


@pytest.fixture
def trace_dir(tmp_path):
    return write_two_rank_trace(tmp_path)


def test_translation_table():
    assert translate_dpro_argv(["--option", "replay", "--path", "a", "--step_num", "2"]) == [
        "replay", "a", "--step-num", "2"]
    assert translate_dpro_argv(["--option", "replay", "--sub_option", "smlt_delay_comm",
                                "--delay_ratio", "1.5", "--path", "a"]) == [
        "replay", "a", "--scale", "Comm.*=1.5"]
    assert translate_dpro_argv(["--option", "collect", "--sub_option", "straggler",
                                "--path", "a"]) == ["stragglers", "a"]
    assert translate_dpro_argv(["statistic", "a", "--sort"]) == ["statistic", "a", "--sort"]


def test_combine_with_a_list_of_paths(capsys, trace_dir):
    code, out, err = run(capsys, "--option", "combine", "--path", f"{trace_dir},{trace_dir}",
                         "--logging_level", "DEBUG", "--pretty")
    assert code == 0 and "2 runs side by side" in out
    assert err == "echo_sim: ignoring dPRO's --logging_level, --pretty (nothing to set in echo)\n"
    doc = json.loads((trace_dir / "combined_2_runs.json").read_text())
    assert len({e["pid"] for e in doc["traceEvents"]}) == 4


def test_bare_xlsx_and_sort(capsys, trace_dir):
    code, out, _ = run(capsys, "--option", "statistic", "--path", trace_dir, "--sort", "--xlsx")
    assert code == 0 and "wrote" in out
    wb = openpyxl.load_workbook(trace_dir / "statistic.xlsx")
    rows = list(wb["operators"].values)
    assert rows[0][0] == "name" and rows[1][0] == "Comm.bucket0" and len(rows) == 7
    code, out, _ = run(capsys, "--option", "compare", "--path", f"{trace_dir},{trace_dir}",
                       "--sort", "--xlsx")
    assert code == 0 and (trace_dir / "compare.xlsx").stat().st_size > 0


def test_collect_sub_options(capsys, trace_dir):
    code, out, _ = run(capsys, "--option", "collect", "--sub_option", "iter_time",
                       "--path", trace_dir, "--json")
    assert code == 0 and json.loads(out)["iteration_time_us"] == 115.0
    code, _, err = run(capsys, "--option", "collect", "--sub_option", "query", "--path", trace_dir)
    assert code == 2 and err.count("\n") == 1 and "statistic PATH" in err


def test_replay_step_num_and_delay(capsys, trace_dir):
    code, out, _ = run(capsys, "--option", "replay", "--path", trace_dir, "--step_num", "1",
                       "--json")
    assert code == 0 and [s["step"] for s in json.loads(out)["steps"]] == [2]
    code, out, _ = run(capsys, "--option", "replay", "--sub_option", "smlt_delay_cmp",
                       "--delay_ratio", "2", "--path", trace_dir, "--json")
    d = json.loads(out)
    assert code == 0 and d["replayed_iteration_time_us"] > d["measured_iteration_time_us"]


def test_gml_path(capsys, trace_dir, tmp_path):
    gml = trace_dir / "0_0" / "dag.gml"
    code, out, err = run(capsys, "--option", "statistic", "--path", gml, "--json")
    assert code == 0 and "reading the trace in" in err and json.loads(out)["steps"] == [1, 2]
    code, out, _ = run(capsys, "graph", gml, "-o", tmp_path / "g.svg")
    assert code == 0 and "nodes" in out and (tmp_path / "g.svg").read_text().startswith("<?xml")


@pytest.mark.parametrize("argv, words", [
    (["--option", "mapping", "--path", "a"], "statistic KINETO.json"),
    (["statistic", "x", "--type", "bps"], "detects the trace format"),
    (["--option", "optimize", "--path", "a"], "search PATH"),
    (["--option", "collect", "--sub_option", "nonsense", "--path", "a"], "known:"),
])
def test_no_equivalent_is_one_line(capsys, argv, words):
    code, out, err = run(capsys, *argv)
    assert code == 2 and out == "" and err.count("\n") == 1 and words in err
