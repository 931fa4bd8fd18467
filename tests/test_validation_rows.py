"""The published-row table of benchmarks/validation: every row cited and self-consistent."""

from __future__ import annotations

import pytest

from benchmarks.validation.rows import ROWS
from benchmarks.validation.run import predict_row, summarise


def test_rows_are_cited_and_consistent() -> None:
    assert len({r.id for r in ROWS}) == len(ROWS)
    for r in ROWS:
        assert r.source and r.where
        assert (r.tflops_per_gpu is None) != (r.iteration_s is None)
        assert r.gpus == r.dp * r.tp * r.pp
        assert r.global_batch % (r.dp * r.micro_batch) == 0
        assert r.hidden % r.heads == 0 and r.heads % r.tp == 0


def test_eq3_reproduces_table1_aggregate() -> None:
    # Table 1, 1008B on 3072 GPUs: 163 TFLOP/s per GPU = 502.0 PFLOP/s aggregate
    row = next(r for r in ROWS if r.id == "megatron-t1-1008b")
    agg = row.model_flops() / row.measured_iteration_s() / 1e15
    assert agg == pytest.approx(3072 * 163 / 1000, rel=1e-9)


def test_predict_small_row_end_to_end() -> None:
    row = next(r for r in ROWS if r.id == "korthikanti-22b-selective")
    res = predict_row(row)
    assert res["predicted_iteration_s"] > 0
    assert res["measured_iteration_s"] == 1.10
    s = summarise([res])
    assert s["all"]["rows"] == 1
