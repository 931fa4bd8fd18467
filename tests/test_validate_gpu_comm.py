"""validate's gradient_comm_order rule: a gradient collective never starts before the
backward producing its first gradient."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from echo_sim.trace.model import Cat, TraceBuilder
from echo_sim.trace.validate import check_gradient_comm_order, validate

SHARED = Path(os.environ.get("ECHO_SHARED_DIR", Path(__file__).resolve().parents[2] / "shared")
              ) / "reference" / "gpu-h100"


def _trace(comm_ts: float, params: list[str] | None):  # type: ignore[no-untyped-def]
    b = TraceBuilder()
    b.add(rank=0, name="STEP", cat=Cat.STEP, ts_us=0, dur_us=100, step=1, tid=1)
    b.add(rank=0, name="FW.a", cat=Cat.FW, ts_us=1, dur_us=9, step=1)
    b.add(rank=0, name="FW.b", cat=Cat.FW, ts_us=10, dur_us=10, step=1)
    b.add(rank=0, name="BW.b", cat=Cat.BW, ts_us=30, dur_us=10, step=1)
    b.add(rank=0, name="BW.a", cat=Cat.BW, ts_us=40, dur_us=10, step=1)
    args = {"path": "ddp", "bucket": 0, **({"params": params} if params else {})}
    b.add(rank=0, name="Comm.bucket0", cat=Cat.COMM, ts_us=comm_ts, dur_us=5, step=1,
          tid=100, collective="all_reduce", nbytes=64, group_ranks=[0, 1], seq=0,
          comm_args=args)
    return b.build()


def test_bucket_checked_against_its_parameters_backward() -> None:
    assert check_gradient_comm_order(_trace(41, ["a.weight"])) == []
    bad = check_gradient_comm_order(_trace(35, ["a.weight"]))
    assert len(bad) == 1 and bad[0].severity == "error" and "BW.a" in bad[0].message
    assert "5.000 us before" in bad[0].message


def test_bucket_without_params_checked_against_first_backward() -> None:
    assert check_gradient_comm_order(_trace(31, None)) == []
    bad = check_gradient_comm_order(_trace(20, None))
    assert len(bad) == 1 and "BW.b" in bad[0].message
    assert any(v.rule == "gradient_comm_order" for v in validate(_trace(20, None)))


def test_flags_the_cpu_enqueue_defect_of_the_h100_nccl_recording() -> None:
    """tests/data/gpu/echo_ddp_nccl_1rank: the shared echo DDP/NCCL recording (trace
    gzipped), whose Comm.bucket* carry CPU enqueue times on a GPU-clock timeline."""
    from echo_sim.load import load_trace

    data = Path(__file__).resolve().parent / "data" / "gpu" / "echo_ddp_nccl_1rank"
    bad = check_gradient_comm_order(load_trace(data))
    assert bad and bad[0].rule == "gradient_comm_order"
    assert "Comm.bucket0" in bad[0].message and "BW.head" in bad[0].message


@pytest.mark.skipif(not SHARED.is_dir(), reason="../shared/reference/gpu-h100 not present")
def test_shared_recordings() -> None:
    from echo_sim.load import load_trace

    bad = check_gradient_comm_order(load_trace(SHARED / "echo" / "gpt12_fp32_ddp_nccl_1rank"))
    assert len(bad) == 6 and bad[-1].message == "... and 50 more"  # 55 of 56 buckets
    single = load_trace(SHARED / "echo" / "gpt12_fp32_single")
    assert check_gradient_comm_order(single) == []
