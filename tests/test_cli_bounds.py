"""Unbounded flags, control characters and flag names through ``echo_sim.cli.main``."""

from __future__ import annotations

import json
import resource

import pytest

from echo_sim import cli
from echo_sim.textsafe import safe_text
from echo_sim.trace.export import write_echo_dirs
from tests.cli_util import run, write_two_rank_trace
from tests.test_statistic import two_rank_trace


@pytest.fixture
def trace_dir(tmp_path):
    return write_two_rank_trace(tmp_path)


@pytest.mark.parametrize("argv, flag, valid", [
    (["simulate", "T", "--dp", "1000000000"], "--dp", "1..1048576"),
    (["simulate", "T", "--global-batch", "100000000000"], "--global-batch", "65,536"),
    (["simulate", "T", "--memory-limit", "1e400GB"], "--memory-limit", "PiB"),
    (["simulate", "T", "--memory-limit", "nanGB"], "--memory-limit", "bad memory size"),
    (["simulate", "T", "--dp", "1024", "--tp", "1024", "--pp", "4"], "--pp", "1,048,576"),
    (["simulate", "T", "--compute-factor", "inf"], "--compute-factor", "(0, 1e+06]"),
    (["synth", "--layers", "10000000", "--hidden", "64", "--heads", "4", "--seq", "8",
      "--vocab", "10", "-o", "X"], "--layers", "1..4096"),
    (["graph", "T", "--step", "0-100000000000000000000"], "--step", "<="),
    (["replay", "T", "--step", "-5"], "--step", "step numbers"),
    (["statistic", "T", "--head", "-1"], "--head", "0..2147483648"),
    (["stragglers", "T", "--threshold-us", "nan"], "--threshold-us", "[0, 1e+15]"),
    (["profile-comm", "-o", "X", "--nproc", "100000"], "--nproc", "2..1024"),
])
def test_unbounded_flags_one_line(capsys, trace_dir, tmp_path, argv, flag, valid):
    argv = [str(trace_dir) if a == "T" else str(tmp_path / "o") if a == "X" else a
            for a in argv]
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    code, out, err = run(capsys, *argv)
    assert code == 2 and out == "" and err.count("\n") == 1, err
    assert flag in err and valid in err, err
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before < 200_000  # KiB
    assert not (tmp_path / "o").exists()


def test_huge_step_range_selects_captured_steps(capsys, trace_dir):
    code, out, _ = run(capsys, "graph", trace_dir, "--step", "0-100000000000", "--json")
    assert code == 0 and json.loads(out)["steps"] == [1, 2]
    code, _, err = run(capsys, "graph", trace_dir, "--step", "7")
    assert code == 2 and "step 7 is not captured; captured: 1, 2" in err


def test_library_parameters_become_flags(capsys, trace_dir):
    code, _, err = run(capsys, "simulate", trace_dir, "--dp", "2", "--nodes", "3")
    assert code == 2 and "--nodes 3" in err and "nodes=" not in err
    assert cli.flag_message("virtual_stages=2 needs schedule", {
        "virtual_stages": "--virtual-stages"}) == "--virtual-stages 2 needs schedule"
    assert cli.flag_message("the step is --step-num", {"step": "--step"}) == \
        "the step is --step-num"


def test_argparse_errors_are_one_line(capsys, trace_dir):
    code, out, err = run(capsys, "statistic", trace_dir, "--sort", "nope")
    assert code == 2 and err.count("\n") == 1 and "--sort" in err and "usage" not in err


def test_control_characters_never_reach_the_terminal(capsys, tmp_path):
    t = two_rank_trace()
    evil = "FW.\x1b[2J\x1b]0;pwned\x07\r\u202eevil\nname"
    t.names[t.names.index("FW.a")] = evil
    d = tmp_path / "evil"
    write_echo_dirs(t, d)
    for cmd in ("statistic", "compare", "critical", "collect", "stragglers", "replay"):
        argv = [cmd, d, d] if cmd == "compare" else [cmd, d]
        code, out, err = run(capsys, *argv, "--head", "0") if cmd in (
            "statistic", "compare", "stragglers") else run(capsys, *argv)
        assert code == 0, err
        for bad in ("\x1b", "\x07", "\r", "\u202e"):
            assert bad not in out and bad not in err, (cmd, bad)
    code, out, _ = run(capsys, "statistic", d, "--head", "0")
    assert "\\x1b[2J" in out
    code, out, _ = run(capsys, "statistic", d, "--json")
    # the loader escapes names once, so JSON output carries the same visible escapes
    assert safe_text(evil) in [o["name"] for o in json.loads(out)["ops"]]


def test_safe_text():
    assert safe_text("a\tb\nc\x1b[0m\x9b\ud8ff", keep_newlines=True) == "a\tb\nc\\x1b[0m\\x9b\\ud8ff"
    assert safe_text("a\nb", keep_newlines=False) == "a\\x0ab"
