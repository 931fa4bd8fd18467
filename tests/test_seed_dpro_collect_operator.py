"""dPRO's ``--option collect --sub_option operator`` ("update operator traces based on the
source files"): per-rank operator statistics (dPRO's ``name2sta``) re-derived from the raw
rank files of a real two-rank gloo DDP trace, and updated when a source file changes."""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from tests.cli_util import run

REAL_DDP = Path(__file__).parent / "data" / "load" / "echo_real_ddp"


def _raw_durations(rank_dir: Path, steps: list[int]) -> dict[str, list[float]]:
    """Durations per operator straight from the rank's trace.json.gz (captured steps)."""
    doc = json.loads(gzip.decompress((rank_dir / "trace.json.gz").read_bytes()))
    out: dict[str, list[float]] = {}
    for e in doc["traceEvents"]:
        if e.get("ph") == "X" and e["name"] != "STEP" and e.get("args", {}).get("step") in steps:
            out.setdefault(e["name"], []).append(float(e["dur"]))
    return out


@pytest.fixture
def job(tmp_path):
    d = tmp_path / "job"
    shutil.copytree(REAL_DDP, d)
    return d


def test_name2sta_from_the_source_files(job, capsys):
    code, out, err = run(capsys, "--option", "collect", "--sub_option", "operator",
                         "--path", job)
    assert code == 0, err
    assert "op_stats" in out
    for rank, d in ((0, "0_0"), (1, "0_1")):
        doc = json.loads((job / "op_stats" / d / "name2sta.json").read_text())
        assert doc["rank"] == rank and doc["steps"] == [2, 3, 4]
        raw = _raw_durations(job / d, doc["steps"])
        sta = doc["name2sta"]
        assert set(sta) == set(raw) and len(sta) == 67
        for name, durs in raw.items():
            x = np.asarray(durs)
            s = sta[name]
            assert s["cnt"] == x.size and s["time"] == pytest.approx(x.sum())
            assert s["avg"] == pytest.approx(x.mean()) and s["var"] == pytest.approx(x.var())
            assert (s["min"], s["max"]) == pytest.approx((x.min(), x.max()))
        assert sta["Comm.bucket0"]["cat"] == "Comm" and sta["UPDATE.AdamW"]["cnt"] == 3
    whole = json.loads((job / "op_stats" / "name2sta.json").read_text())
    assert whole["ranks"] == [0, 1] and whole["name2sta"]["FW.head"]["cnt"] == 6


def test_update_after_the_source_changes(job, capsys):
    argv = ("--option", "collect", "--sub_option", "operator", "--path", job)
    assert run(capsys, *argv)[0] == 0
    before = json.loads((job / "op_stats" / "0_0" / "name2sta.json").read_text())["name2sta"]
    # the rank's source file changes: FW.head takes half the time it did
    f = job / "0_0" / "trace.json.gz"
    doc = json.loads(gzip.decompress(f.read_bytes()))
    for e in doc["traceEvents"]:
        if e.get("name") == "FW.head":
            e["dur"] = e["dur"] / 2
    f.write_bytes(gzip.compress(json.dumps(doc).encode()))
    code, _, err = run(capsys, *argv)
    assert code == 2 and err.count("\n") == 1 and "--force" in err  # never silently replaced
    assert run(capsys, *argv, "--force")[0] == 0
    after = json.loads((job / "op_stats" / "0_0" / "name2sta.json").read_text())["name2sta"]
    assert after["FW.head"]["avg"] == pytest.approx(before["FW.head"]["avg"] / 2)
    assert after["BW.head"] == before["BW.head"]
