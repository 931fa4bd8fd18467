"""``report``: one self-contained HTML file for every kind of trace echo reads.

Each test runs the CLI as a user would and reads the file back: the embedded JSON
(``#echo-data``) carries the numbers the charts draw, so the assertions check content, not
only that a file appeared. The browser test (tests/test_report_browser.py) checks it renders.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from tests.cli_util import run
from tests.harness import run_python

pytest.importorskip("plotly")

DATA = Path(__file__).parent / "data"
DDP = DATA / "load" / "echo_real_ddp"
H200 = DATA / "gpu" / "h200_hf_gpt2" / "echo" / "0_0"
KINETO = DATA / "gpu" / "kineto_gpt12_single_step4.json.gz"


def _report(capsys: Any, path: Path, out: Path, *extra: str) -> dict[str, Any]:
    code, stdout, err = run(capsys, "report", path, "--output", out, *extra, "--json")
    assert code == 0, err
    summary = json.loads(stdout)
    page = out.read_text(encoding="utf-8")
    assert page.startswith("<!DOCTYPE html>") and page.rstrip().endswith("</html>")
    # self-contained: plotly.js inline, nothing fetched from the network
    assert "Plotly.newPlot" in page and not re.search(r"<script[^>]+src=", page)
    blob = re.search(r'<script type="application/json" id="echo-data">(.*?)</script>', page,
                     re.S)
    assert blob
    data = json.loads(blob.group(1).replace("<\\/", "</"))
    charts = int(re.search(r'data-charts="(\d+)"', page).group(1))  # type: ignore[union-attr]
    assert charts == len(re.findall(r'id="echo-chart-\d+"', page)) >= 3
    shares = sum(c["share"] for c in data["categories"].values())
    assert shares == pytest.approx(1.0, abs=1e-9)  # the breakdown adds up to 100 %
    return {"summary": summary, "data": data, "page": page}


def test_echo_cpu_trace_with_prediction(capsys: Any, tmp_path: Path) -> None:
    got = _report(capsys, DDP, tmp_path / "r.html", "--simulate", "--dp 4")
    d = got["data"]
    assert d["ranks"] == [0, 1] and d["steps"] == [2, 3, 4]
    assert len(d["iteration_us"]) == 2 and all(v > 0 for row in d["iteration_us"] for v in row)
    # per-step breakdown: parts sum to the mean step time of that step
    for j in range(len(d["steps"])):
        mean_step = sum(row[j] for row in d["iteration_us"]) / 2
        assert sum(d["parts_per_step"][p][j] for p in d["parts_per_step"]) == pytest.approx(
            mean_step, rel=1e-6)
    comm = d["comm"]
    assert comm and comm[0]["collective"] == "all_reduce" and comm[0]["group_size"] == 2
    assert comm[0]["busbw_gbps"] == pytest.approx(comm[0]["algbw_gbps"])  # 2(n-1)/n = 1
    # the collectives' anatomy is the collectives command's, drawn as stacked bars
    code, out, _ = run(capsys, "collectives", DDP, "--json")
    anatomy = json.loads(out)
    assert d["anatomy"]["collectives"] == anatomy["collectives"]
    assert "Where the collectives' time goes, per step" in got["page"]
    assert "queued ms (not in own)" in got["page"]
    assert any(o["flops"] > 0 and o["tflops"] > 0 for o in d["ops"])  # FLOPs of FW modules
    assert d["mfu"] is not None and 0 < d["mfu"] < 1
    assert len(d["mfu_per_step"]) == 3 and all(0 < v < 1 for v in d["mfu_per_step"])
    # the job's MFU sits within its steps' range (steps differ in length, not FLOPs)
    assert min(d["mfu_per_step"]) * 0.999 <= d["mfu"] <= max(d["mfu_per_step"]) * 1.001
    assert "Model FLOPs utilisation per step" in got["page"]
    assert d["memory_peak_per_step"]["rss_bytes"][0] > 0
    assert d["critical"]["step"] == 4 and d["critical"]["segments"]
    # the prediction is exactly what simulate says with the same flags
    code, out, _ = run(capsys, "simulate", DDP, "--dp", "4", "--json")
    sim = json.loads(out)
    pred = got["summary"]["predicted"]
    assert pred["iteration_time_us"] == sim["iteration_time_us"]
    # and its caveats are simulate's: a CPU job at another layout with no profile
    assert pred["warnings"] == sim["warnings"] and any(
        "no --comm-profile" in w for w in pred["warnings"])
    assert "prediction warning" in got["page"]
    assert "predicted (--dp 4)" in got["page"]
    assert sum(c["share"] for c in d["predicted"]["categories"].values()) == pytest.approx(1.0)


def test_recorded_gpu_trace(capsys: Any, tmp_path: Path) -> None:
    replayed = tmp_path / "h200" / "0_0"
    res = run_python(["-m", "echo_trace.gpu.recording", str(H200), str(replayed)])
    assert res.returncode == 0, res.stderr
    d = _report(capsys, replayed.parent, tmp_path / "gpu.html")["data"]
    assert "H200" in d["device"] and d["peak_tflops"] == pytest.approx(67.0)  # fp32 preset
    assert d["mfu"] is not None and d["mfu"] > 0
    assert "cuda_allocated_bytes" in d["memory_peak_per_step"]
    # an op faster than the fp32 peak (TF32 matmuls, not recorded by that torch 2.11 run)
    # is reported, not hidden
    assert any("MFU above 100 %" in m for m in d["missing"])


def test_kineto_trace_says_what_it_cannot_compute(capsys: Any, tmp_path: Path) -> None:
    got = _report(capsys, KINETO, tmp_path / "k.html")
    d = got["data"]
    assert d["device"].startswith("cuda") and "H100" in d["device"]
    assert d["mfu"] is None
    missing = " ".join(d["missing"])
    assert "no FLOPs" in missing and "no memory counters" in missing
    assert "Not computed" in got["page"]
    # device kernels under no module range are a part of their own, not idle (which was
    # 38 % of this step when kernel time counted as nothing)
    cats = d["categories"]
    assert cats["other"]["share"] > 0.2 and cats["idle"]["share"] < 0.2


def test_simulated_trace(capsys: Any, tmp_path: Path) -> None:
    code, _, err = run(capsys, "simulate", DDP, "--dp", "2", "--output", tmp_path / "sim")
    assert code == 0, err
    d = _report(capsys, tmp_path / "sim", tmp_path / "sim.html")["data"]
    assert len(d["ranks"]) >= 1 and d["comm"]  # the predicted DDP all-reduces


@pytest.mark.parametrize("path", [DATA / "load" / "byteprofile_2rank",
                                  DATA / "triosim" / "two_gpu"], ids=["byteprofile", "triosim"])
def test_foreign_formats(capsys: Any, tmp_path: Path, path: Path) -> None:
    d = _report(capsys, path, tmp_path / "f.html")["data"]
    assert d["ranks"] and any("FLOPs" in m or "MFU" in m for m in d["missing"])


def test_bad_input_is_one_line(capsys: Any, tmp_path: Path) -> None:
    out = tmp_path / "r.html"
    out.write_text("mine")
    code, _, err = run(capsys, "report", DDP, "--output", out)
    assert code != 0 and "exists" in err and out.read_text() == "mine"  # nothing overwritten
    code, _, err = run(capsys, "report", DDP, "--output", tmp_path / "r.txt")
    assert code != 0 and ".html" in err and len(err.strip().splitlines()) == 1
    code, _, err = run(capsys, "report", DDP, "--output", tmp_path / "x.html",
                       "--simulate", "--dp banana")
    assert code != 0 and "--simulate" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "x.html").exists()
    # simulate takes several traces; the report's --simulate predicts the report's own
    code, _, err = run(capsys, "report", DDP, "--output", tmp_path / "x.html",
                       "--simulate", f"{DDP} --dp 4")
    assert code == 2 and "simulate's flags only" in err and len(err.strip().splitlines()) == 1
    code, _, err = run(capsys, "report", tmp_path / "nothing", "--output", tmp_path / "y.html")
    assert code != 0 and len(err.strip().splitlines()) == 1


def test_columnar_store(capsys: Any, tmp_path: Path) -> None:
    pytest.importorskip("pyarrow")
    code, _, err = run(capsys, "convert", DDP, "--to", tmp_path / "store")
    assert code == 0, err
    from_store = _report(capsys, tmp_path / "store", tmp_path / "s.html")["data"]
    from_json = _report(capsys, DDP, tmp_path / "j.html")["data"]
    assert from_store["iteration_us"] == from_json["iteration_us"]
    assert from_store["categories"] == from_json["categories"]
