"""TrioSim's whole command line (``-trace-dir D -case C -GPUnumber N ...``) run by echo.

The seed's README runs ``go run main.go -batch-size 128 --batch-size-sim 128 -trace-dir
../sample_trace/trace2-h100-bs128/vgg13 --GPUnumber 4 --case 1``; the same flags after
``python -m echo_sim`` run ``simulate`` on the trace directory (a small CNN in that layout
here, ``trace2-h100-bs8/vgg_mini``) and say the echo spelling they were read as.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from echo_sim.cli import main
from echo_sim.commands.triosim import translate_triosim_argv

VGG = str(Path(__file__).parent / "data" / "triosim" / "trace2-h100-bs8" / "vgg_mini")


def _json(capsys: pytest.CaptureFixture[str], argv: list[str]) -> tuple[dict, str]:
    assert main([*argv, "--json"]) == 0, capsys.readouterr().err
    out = capsys.readouterr()
    return json.loads(out.out), out.err


@pytest.mark.parametrize("case,layout", [("0", (1, 1, 1)), ("2", (4, 1, 1)), ("3", (1, 4, 1))])
def test_case_runs_the_same_prediction_as_echos_spelling(capsys, case: str,
                                                         layout: tuple[int, int, int]) -> None:
    seed, err = _json(capsys, ["-batch-size", "8", "--batch-size-sim", "16", "-trace-dir", VGG,
                               "--GPUnumber", "4", "--case", case, "-ptp-bandwidth", "64"])
    assert f"TrioSim -case {case}" in err and "read as: python -m echo_sim simulate" in err
    dp, tp, pp = layout
    echo, _ = _json(capsys, ["simulate", VGG, "--dp", str(dp), "--tp", str(tp),
                             "--traced-micro-batch", "8", "--micro-batch", "16",
                             "--ptp-bandwidth", "64"])
    assert (seed["layout"]["dp"], seed["layout"]["tp"], seed["layout"]["pp"]) == layout
    assert seed["iteration_time_us"] == echo["iteration_time_us"]
    assert seed["layout"]["micro_batch"] == 16


def test_standard_data_parallel_and_capacity() -> None:
    argv = translate_triosim_argv(["-trace-dir=D", "-case=1", "-GPUnumber", "2",
                                   "-capacity", "34", "-bandwidth", "696"])
    assert argv == ["simulate", "D", "--dp", "2", "--data-parallel", "ps",
                    "--memory-limit", str(2**34), "-bandwidth", "696"]
    pipe = translate_triosim_argv(["-trace-dir", "D", "-case", "4", "-GPUnumber", "2",
                                   "-batch-size-sim", "32", "-micro-batch-size", "8"])
    assert pipe == ["simulate", "D", "--pp", "2", "--micro-batch", "8", "--global-batch", "32"]
    assert translate_triosim_argv(["simulate", VGG, "-batch-size", "8"]) == [
        "simulate", VGG, "-batch-size", "8"]  # an echo command line is left alone


@pytest.mark.parametrize("argv,msg", [
    (["-trace-dir", VGG, "-case", "7"], "TrioSim's -case '7' is unknown; valid: 0 (training"),
    (["-trace-dir", VGG, "-capacity", "99"], "-capacity '99' is out of range"),
    (["-case", "3", "-trace-dir"], "TrioSim's -trace-dir needs a value"),
])
def test_bad_triosim_lines_are_one_line(capsys, argv: list[str], msg: str) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and msg in err, err
