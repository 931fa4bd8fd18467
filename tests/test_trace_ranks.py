"""Rank detection from launcher environments."""

from __future__ import annotations

import pytest

from echo_trace.ranks import RankInfo, detect_ranks


def test_single_process():
    assert detect_ranks({}) == RankInfo()
    assert RankInfo().dir_name == "0_0"


def test_torchrun_with_group_rank():
    r = detect_ranks({"RANK": "5", "LOCAL_RANK": "1", "WORLD_SIZE": "8",
                      "LOCAL_WORLD_SIZE": "4", "GROUP_RANK": "1"})
    assert r == RankInfo(rank=5, local_rank=1, world_size=8, local_world_size=4, node_rank=1,
                         source="torchrun")
    assert r.dir_name == "1_1"


def test_torchrun_node_rank_from_local_world_size():
    r = detect_ranks({"RANK": "6", "LOCAL_RANK": "2", "WORLD_SIZE": "8",
                      "LOCAL_WORLD_SIZE": "4"})
    assert (r.node_rank, r.local_rank) == (1, 2)


def test_torchrun_beats_slurm():
    r = detect_ranks({"RANK": "1", "LOCAL_RANK": "1", "WORLD_SIZE": "2", "SLURM_PROCID": "0",
                      "SLURM_NTASKS": "1"})
    assert r.source == "torchrun" and r.rank == 1


def test_slurm_with_compressed_tasks_per_node():
    r = detect_ranks({"SLURM_PROCID": "9", "SLURM_LOCALID": "1", "SLURM_NTASKS": "11",
                      "SLURM_NODEID": "2", "SLURM_TASKS_PER_NODE": "4(x2),3"})
    assert r == RankInfo(rank=9, local_rank=1, world_size=11, local_world_size=3, node_rank=2,
                         source="slurm")


def test_slurm_without_node_id():
    r = detect_ranks({"SLURM_PROCID": "5", "SLURM_LOCALID": "1", "SLURM_NTASKS": "8",
                      "SLURM_NTASKS_PER_NODE": "4"})
    assert (r.node_rank, r.local_world_size) == (1, 4)


def test_openmpi():
    r = detect_ranks({"OMPI_COMM_WORLD_RANK": "3", "OMPI_COMM_WORLD_LOCAL_RANK": "1",
                      "OMPI_COMM_WORLD_SIZE": "4", "OMPI_COMM_WORLD_LOCAL_SIZE": "2"})
    assert r == RankInfo(rank=3, local_rank=1, world_size=4, local_world_size=2, node_rank=1,
                         source="openmpi")


@pytest.mark.parametrize("env, word", [
    ({"RANK": "x"}, "RANK"),
    ({"RANK": "4", "WORLD_SIZE": "2"}, "rank=4"),
])
def test_bad_values_raise_naming_them(env, word):
    with pytest.raises(ValueError, match=word):
        detect_ranks(env)


def test_job_token_is_shared_by_the_ranks_of_a_job_and_not_by_another() -> None:
    from echo_trace.ranks import job_token

    a0 = {"MASTER_ADDR": "10.0.0.1", "MASTER_PORT": "29500", "TORCHELASTIC_RUN_ID": "none",
          "RANK": "0"}
    a1 = dict(a0, RANK="1")
    b = dict(a0, MASTER_PORT="29501")
    assert job_token(a0) == job_token(a1) == "job-10.0.0.1-29500"
    assert job_token(b) != job_token(a0)
    assert job_token({"SLURM_JOB_ID": "77", "SLURM_STEP_ID": "0", **a0}) == "slurm-77-0"
    assert job_token({"PMIX_NAMESPACE": "prterun-h/1@1"}) == "mpi-prterun-h_1_1"
    assert job_token({}) is None  # no job-wide name (the writer then uses the pid)
