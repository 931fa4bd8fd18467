"""benchmarks/tp_host_cost.py: DTensor's host cost per sharded Linear inside real TP steps
against the microbenchmark ``profile-comm`` calibrates ``simulate --tp`` with."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks.tp_host_cost import main, table
from tests.harness import run_python

REPO = Path(__file__).resolve().parents[1]


def _result() -> dict:
    block = {"fw_a_us": 500.0, "fw_b_us_per_byte": 400.0 / (1 << 20), "bw_a_us": 450.0,
             "bw_b_us_per_byte": 300.0 / (1 << 20), "optim_us_per_param": 150.0,
             "optim_back_to_back_us_per_param": 110.0}
    return {"models": {"gpt": {"sharded_linears": 8, "act_bytes": float(1 << 19),
                               "rounds": [{"fw_us": 700.0, "bw_us": 600.0,
                                           "optim_us_per_param": 140.0,
                                           "local_over_whole": 0.6},
                                          {"fw_us": 640.0, "bw_us": 660.0,
                                           "optim_us_per_param": 160.0,
                                           "local_over_whole": 0.625}]}},
            "block": [block, block],
            "pair": [[{"act_bytes": 8192.0, "fw_us": 300.0, "bw_us": 320.0},
                      {"act_bytes": 524288.0, "fw_us": 450.0, "bw_us": 500.0}]] * 2}


def test_table_puts_the_block_at_the_models_activation_bytes() -> None:
    text = table(_result())
    row = next(line for line in text.splitlines() if line.startswith("| gpt"))
    # 512 KiB: block fw 500 + 400 * 0.5 = 700, bw 450 + 150 = 600; the pair's nearest size
    assert "| 8 | 512 KiB | 640–700 / 600–660 | 700 / 600 | 450 / 500 |" in row
    # in-model / block, forward + backward, per round: 1300 / 1300 both
    assert row.endswith("| 1.00 | 140–160 / 150 / 110 | 0.600–0.625 |")


def test_bad_arguments_are_one_line_errors(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as e:
        main(["--models", "gpt,mamba"])
    assert e.value.code == 2
    assert "--models mamba unknown" in capsys.readouterr().err


@pytest.mark.slow
@pytest.mark.serial  # a DDP/FSDP/TP step's host time less a plain one's: must be > 0
def test_the_benchmark_measures_a_real_tp_step(tmp_path: Path) -> None:
    out = tmp_path / "tp.json"
    done = run_python([str(REPO / "benchmarks" / "tp_host_cost.py"), "--models", "gpt",
                       "--samples", "3", "--rounds", "1", "--output", str(out)],
                      env={"OMP_NUM_THREADS": "1"}, timeout=400, cwd=REPO)
    assert done.returncode == 0, done.stderr[-2000:]
    res = json.loads(out.read_text())
    gpt = res["models"]["gpt"]
    # the example GPT's 2 blocks: qkv, proj, fc1, fc2 sharded in each
    assert gpt["sharded_linears"] == 8 and gpt["act_bytes"] == 8 * 64 * 128 * 4
    (r,) = gpt["rounds"]
    # DTensor costs host time per sharded Linear: hundreds of us on a CPU host, not zero
    assert r["fw_us"] + r["bw_us"] > 100
    # half the heads and half the MLP: between a quarter and the whole of the model's compute
    assert 0.25 < r["local_over_whole"] < 1.0
    assert r["optim_us_per_param"] > 0  # AdamW's loop pays DTensor's dispatch per parameter
    (b,) = res["block"]
    assert b["fw_a_us"] + b["bw_a_us"] > 100 and min(b.values()) >= 0
    assert b["optim_us_per_param"] > 0 and b["optim_back_to_back_us_per_param"] > 0
    assert [p["act_bytes"] for p in res["pair"][0]] == [8192.0, 524288.0]
    assert res["machine"]["nproc"] == 2 and "| gpt | 8 | 256 KiB |" in done.stdout
