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
    """A row goes through the CLI (synth, then simulate with the row's flags, as a user types
    them) and gives what the library gives for the same configuration."""
    from echo_sim.sim.simulate import SimConfig, simulate
    from echo_sim.sim.synth import GPTShape, SynthConfig, synth_trace

    row = next(r for r in ROWS if r.id == "korthikanti-22b-selective")
    res = predict_row(row)
    assert res["measured_iteration_s"] == 1.10
    assert "--recompute selective --sequence-parallel --data-parallel post" in \
        res["simulate_flags"]
    s = summarise([res])
    assert s["all"]["rows"] == 1
    trace = synth_trace(SynthConfig(
        model=GPTShape(layers=row.layers, hidden=row.hidden, heads=row.heads, seq=row.seq,
                       vocab=row.vocab, micro_batch=row.micro_batch),
        gpu="a100", dtype="bf16", steps=1, attention=row.attention, optimizer=row.optimizer))
    lib = simulate(trace, SimConfig(dp=row.dp, tp=row.tp, pp=row.pp,
                                    micro_batch=row.micro_batch, global_batch=row.global_batch,
                                    cluster=row.cluster, gpus_per_node=8, recompute="selective",
                                    sequence_parallel=True, data_parallel="post"))
    assert res["predicted_iteration_s"] == pytest.approx(lib.iteration_time_us / 1e6, rel=1e-6)
