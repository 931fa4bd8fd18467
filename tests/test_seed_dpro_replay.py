"""dPRO's ``--option replay --del_queue`` and ``--pretty``, spelled as dPRO users type them,
on a ByteProfile trace (the sample layout) and a real echo DDP trace."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from echo_sim.load import load_trace
from echo_sim.sim.replay import TASK_INSTANCE, replay
from tests.cli_util import run

DATA = Path(__file__).parent / "data" / "load"
BPS = DATA / "byteprofile_2rank"  # ByteProfile layout: 2 ranks, tensors grad_fc, grad_conv
REAL_DDP = DATA / "echo_real_ddp"  # echo_trace on two gloo DDP ranks: bucket0, bucket1


def _replay(capsys, *argv):
    code, out, err = run(capsys, "--option", "replay", *argv, "--json")
    assert code == 0, err
    return json.loads(out)


def test_del_queue_gives_each_tensor_its_own_channel(capsys):
    base = _replay(capsys, "--path", BPS, "--sub_option", "smlt_delay_comm",
                   "--delay_ratio", "4")
    dq = _replay(capsys, "--path", BPS, "--sub_option", "smlt_delay_comm",
                 "--delay_ratio", "4", "--del_queue")
    assert base["comm_queues"] == "group" and base["num_comm_channels"] == 2
    assert dq["comm_queues"] == "op" and dq["num_comm_channels"] == 4  # 2 tensors x 2 ranks
    # with comm 4x slower, grad_conv no longer queues behind grad_fc: a shorter iteration
    assert base["replayed_iteration_time_us"] == pytest.approx(19000.0)
    assert dq["replayed_iteration_time_us"] == pytest.approx(15700.0)


def test_del_queue_lets_operations_overlap():
    trace = load_trace(BPS)

    def overlap(comm_queues):
        """Overlap (µs) of the two tensors' transfers in the first step, and rank 0's
        resources."""
        res = replay(trace, scale=["Comm.*=4"], comm_queues=comm_queues)
        ev = trace.events
        span = {}
        for t in np.flatnonzero(res.task_kind == TASK_INSTANCE).tolist():
            r = int(res.task_row[t])
            if ev.step[r] == trace.steps[0]:
                span[trace.name_of(r)] = (res.schedule.start_us[t], res.schedule.end_us[t])
        (a0, a1), (b0, b1) = span["Comm.grad_fc"], span["Comm.grad_conv"]
        names = {n for n in res.schedule.resource_names if n.startswith("rank0/")}
        return min(a1, b1) - max(a0, b0), names

    queued, names_q = overlap("group")
    apart, names_o = overlap("op")
    assert queued <= 1e-6 < apart
    assert names_q == {"rank0/compute", "rank0/comm.g0"}
    assert names_o == {"rank0/compute", "rank0/comm.g0/Comm.grad_fc",
                       "rank0/comm.g0/Comm.grad_conv"}


def test_pretty_prints_a_per_rank_breakdown(capsys):
    code, out, err = run(capsys, "--option", "replay", "--path", REAL_DDP, "--pretty",
                         "--del_queue")
    assert code == 0 and err == ""
    assert "4 comm channel(s) (one per rank, process group and operation" in out
    assert "per rank (means per step):" in out
    d = _replay(capsys, "--path", REAL_DDP, "--pretty")
    per_rank = d["per_rank"]
    assert [x["rank"] for x in per_rank] == [0, 1]
    trace = load_trace(REAL_DDP)
    ev = trace.events
    for x in per_rank:
        # no what-if: the replayed operators take their measured time, the span its measured one
        comp = (ev.rank == x["rank"]) & np.isin(ev.cat, [0, 1, 3]) & (ev.step >= 0)
        assert x["compute_us"] == pytest.approx(ev.dur_us[comp].sum() / 3, rel=1e-6)
        assert x["comm_channels"] == 1
        assert x["replayed_us"] == pytest.approx(x["measured_us"], rel=1e-3)
        assert x["host_delay_us"] > 0 and x["comm_us"] > 0
    # without --pretty there is no breakdown; elsewhere --pretty is still ignored
    assert "per_rank" not in _replay(capsys, "--path", REAL_DDP)
