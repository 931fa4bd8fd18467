"""benchmarks/fsdp_host_cost.py: FSDP2's host cost inside real steps against the
microbenchmarks ``profile-comm`` calibrates ``simulate --fsdp`` with (units of MLP blocks now,
of Linears before)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks.fsdp_host_cost import table
from tests.harness import run_python

REPO = Path(__file__).resolve().parents[1]


def _result() -> dict:
    mib = 1 << 20
    return {"models": {"gpt": {"units": [[10, 1 * mib], [4, 2 * mib]],
                               "rounds": [{"fw_us": 1000.0, "bw_us": 2000.0},
                                          {"fw_us": 1200.0, "bw_us": 2400.0}]}},
            # per unit a + b * params + c * bytes, summed over both units:
            # fw 2 * 100 + 10 * 14 + 300 / MiB * 3 MiB = 1240; bw 2 * 200 + 0 + 600 * 3 = 2200
            "blocks": [{"fw": [100.0, 10.0, 300.0 / mib], "bw": [200.0, 0.0, 600.0 / mib]}] * 2,
            # fw 2 * 500 = 1000; bw 2 * 1000 = 2000
            "linear_units": [{"fw": [500.0, 0.0, 0.0], "bw": [1000.0, 0.0, 0.0]}] * 2}


def test_table_sums_each_microbenchmark_over_the_models_units() -> None:
    row = next(line for line in table(_result()).splitlines() if line.startswith("| gpt"))
    # in-model 3000 and 3600 against blocks 1240 + 2200 = 3440, Linear units 3000
    assert row == ("| gpt | 2 | 4–10 | 1.00–2.00 | 1000–1200 / 2000–2400 | 1240 / 2200 | "
                   "1000 / 2000 | 0.87–1.05 | 1.00–1.20 |")


@pytest.mark.slow
@pytest.mark.serial  # a DDP/FSDP/TP step's host time less a plain one's: must be > 0
@pytest.mark.timeout(300)
def test_real_two_process_run_on_the_gpt(tmp_path: Path) -> None:
    """Two gloo processes: the GPT's FSDP2 cost inside its steps (two block units and the
    root), and both microbenchmarks' prices summed over those units (positive: FSDP2 adds
    host work in both passes)."""
    out = tmp_path / "fsdp.json"
    proc = run_python([str(REPO / "benchmarks" / "fsdp_host_cost.py"), "--models", "gpt",
                       "--samples", "3", "--rounds", "1", "--output", str(out)], timeout=280)
    assert proc.returncode == 0, proc.stderr[-2000:]
    res = json.loads(out.read_text())
    gpt = res["models"]["gpt"]
    assert len(gpt["units"]) == 3 and sum(n for n, _ in gpt["units"]) == 29
    (r,) = gpt["rounds"]
    assert r["fw_us"] > 0 and r["bw_us"] > 0 and r["plain_bw_us"] > 0
    for key in ("blocks", "linear_units"):
        (plane,) = res[key]
        for phase in ("fw", "bw"):
            a, b, c = plane[phase]
            assert sum(a + b * n + c * nb for n, nb in gpt["units"]) > 0, (key, phase)
    assert "| gpt | 3 |" in proc.stdout and res["machine"]["rounds"] == 1
