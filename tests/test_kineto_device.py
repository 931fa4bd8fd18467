"""A profiler trace says which GPU it ran on (``deviceProperties``): the loader records it, so
``simulate`` predicts on that GPU's preset at the traced speed instead of calling it a CPU
trace and re-timing it (issue 16: a 103 ms H100 step predicted at 15.1 ms with --gpu h100)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from echo_sim.load import load_trace
from tests.cli_util import run

H100 = Path(__file__).parent / "data" / "gpu" / "kineto_gpt12_single_step4.json.gz"


def test_device_properties_name_the_gpu() -> None:
    info = load_trace(H100).ranks[0]
    assert info.device == "cuda"
    assert info.meta["device_name"] == "NVIDIA H100 80GB HBM3"


def test_simulate_predicts_on_the_traced_gpu(capsys: Any) -> None:
    code, out, _ = run(capsys, "simulate", H100, "--json")
    assert code == 0
    d = json.loads(out)
    assert d["hardware"]["cluster"] == "dgx-h100" and not d["hardware"]["retimed"]
    code, out, _ = run(capsys, "collect", H100, "--json")
    measured = json.loads(out)["iteration_time_us"]
    assert d["iteration_time_us"] == pytest.approx(measured, rel=0.10)
    code, out, _ = run(capsys, "simulate", H100, "--gpu", "h100", "--json")
    same = json.loads(out)  # asking for the GPU it ran on changes nothing
    assert same["iteration_time_us"] == pytest.approx(d["iteration_time_us"], rel=0.02)


def test_no_device_properties_is_a_cpu_trace(tmp_path: Path) -> None:
    doc = {"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1,
                            "tid": 1, "ts": 0.0, "dur": 5.0, "args": {}}]}
    (tmp_path / "k.json").write_text(json.dumps(doc))
    info = load_trace(tmp_path / "k.json").ranks[0]
    assert info.device == "cpu" and "device_name" not in info.meta
