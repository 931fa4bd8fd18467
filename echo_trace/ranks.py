"""Who this process is: global rank, local rank, node rank and world size.

Read at activation from the launcher's environment, in this order: torchrun
(``RANK/LOCAL_RANK/WORLD_SIZE``), Slurm (``SLURM_PROCID/SLURM_LOCALID/SLURM_NTASKS``,
``SLURM_NODEID``), Open MPI (``OMPI_COMM_WORLD_RANK/LOCAL_RANK/SIZE``), else a single
process. ``node_rank`` is ``GROUP_RANK`` (torchrun), ``SLURM_NODEID`` (Slurm), else
``rank // local_world_size``.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass

from echo_trace.config import env_int

__all__ = ["JOB_ENV_VARS", "RANK_ENV_VARS", "RankInfo", "detect_ranks", "job_token"]

#: The launcher variables read by :func:`detect_ranks`.
RANK_ENV_VARS = (
    "RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK",
    "SLURM_PROCID", "SLURM_LOCALID", "SLURM_NTASKS", "SLURM_NODEID", "SLURM_NTASKS_PER_NODE",
    "SLURM_TASKS_PER_NODE", "SLURM_NNODES",
    "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_SIZE",
    "OMPI_COMM_WORLD_LOCAL_SIZE",
)


#: The launcher variables that name the whole job (read by :func:`job_token`), in order.
JOB_ENV_VARS = ("TORCHELASTIC_RUN_ID", "SLURM_JOB_ID", "SLURM_STEP_ID", "PMIX_NAMESPACE",
                "OMPI_MCA_orte_ess_jobid", "MASTER_ADDR", "MASTER_PORT")


def job_token(environ: Mapping[str, str] | None = None) -> str | None:
    """A name every process of this job shares and a concurrent job does not (for the
    ``<TRACE_DIR>.conflict-<token>`` directory of a job that lost its ``TRACE_DIR`` to another:
    one per job, not one per process): Slurm's job and step ids, else the MPI job id, else
    torchrun's rendezvous id with the master's address and port (two jobs running at once
    cannot share a master port); None when the launcher says none of these (a process group
    made from an ``init_method`` URL, a single process). Letters, digits, ``._-`` only."""
    env = os.environ if environ is None else environ

    def get(name: str) -> str:
        v = env.get(name, "").strip()
        return "" if v.lower() in ("", "none") else v

    if get("SLURM_JOB_ID"):
        parts = ["slurm", get("SLURM_JOB_ID"), get("SLURM_STEP_ID")]
    elif get("PMIX_NAMESPACE") or get("OMPI_MCA_orte_ess_jobid"):
        parts = ["mpi", get("PMIX_NAMESPACE") or get("OMPI_MCA_orte_ess_jobid")]
    elif get("MASTER_PORT"):
        parts = ["job", get("TORCHELASTIC_RUN_ID"), get("MASTER_ADDR"), get("MASTER_PORT")]
    else:
        return None
    token = re.sub(r"[^A-Za-z0-9_.-]+", "_", "-".join(p for p in parts if p))
    return token[:80] or None


@dataclass(frozen=True, kw_only=True)
class RankInfo:
    """This process's place in the job; ``source`` is torchrun, slurm, openmpi, dist or single."""

    rank: int = 0
    local_rank: int = 0
    world_size: int = 1
    local_world_size: int = 1
    node_rank: int = 0
    source: str = "single"

    def __post_init__(self) -> None:
        if not 0 <= self.rank < self.world_size:
            raise ValueError(f"rank={self.rank}: expected 0 <= rank < world_size={self.world_size}")
        if self.local_rank < 0 or self.local_world_size < 1 or self.node_rank < 0:
            raise ValueError(f"local_rank={self.local_rank}, local_world_size="
                             f"{self.local_world_size}, node_rank={self.node_rank}: expected "
                             "local_rank >= 0, local_world_size >= 1, node_rank >= 0")

    @property
    def dir_name(self) -> str:
        """The per-process trace directory name, ``<node_rank>_<local_rank>``."""
        return f"{self.node_rank}_{self.local_rank}"


def _slurm_tasks_per_node(env: Mapping[str, str], node: int) -> int | None:
    """Tasks on this node from ``SLURM_TASKS_PER_NODE`` (e.g. ``4(x2),3``) or ``..._PER_NODE``."""
    raw = env.get("SLURM_TASKS_PER_NODE", "").strip()
    if raw:
        counts: list[int] = []
        for part in raw.split(","):
            m = re.fullmatch(r"(\d+)(?:\(x(\d+)\))?", part.strip())
            if m is None:
                counts = []
                break
            counts += [int(m.group(1))] * int(m.group(2) or 1)
        if 0 <= node < len(counts):
            return counts[node]
    per = env.get("SLURM_NTASKS_PER_NODE", "").strip()
    m = re.match(r"\d+", per)
    return int(m.group(0)) if m else None


def detect_ranks(environ: Mapping[str, str] | None = None) -> RankInfo:
    """Rank information from the launcher environment (see the module docstring)."""
    env = os.environ if environ is None else environ
    rank = env_int(env, "RANK")
    if rank is not None:
        world = env_int(env, "WORLD_SIZE") or 1
        local = env_int(env, "LOCAL_RANK")
        local = rank if local is None else local
        lws = env_int(env, "LOCAL_WORLD_SIZE") or world
        node = env_int(env, "GROUP_RANK")
        node = rank // lws if node is None else node
        return RankInfo(rank=rank, local_rank=local, world_size=world, local_world_size=lws,
                        node_rank=node, source="torchrun")
    rank = env_int(env, "SLURM_PROCID")
    if rank is not None:
        world = env_int(env, "SLURM_NTASKS") or 1
        local = env_int(env, "SLURM_LOCALID")
        local = 0 if local is None else local
        node = env_int(env, "SLURM_NODEID")
        lws = _slurm_tasks_per_node(env, node or 0) or max(world // (env_int(env, "SLURM_NNODES") or 1), 1)
        node = rank // lws if node is None else node
        return RankInfo(rank=rank, local_rank=local, world_size=world, local_world_size=lws,
                        node_rank=node, source="slurm")
    rank = env_int(env, "OMPI_COMM_WORLD_RANK")
    if rank is not None:
        world = env_int(env, "OMPI_COMM_WORLD_SIZE") or 1
        local = env_int(env, "OMPI_COMM_WORLD_LOCAL_RANK")
        local = 0 if local is None else local
        lws = env_int(env, "OMPI_COMM_WORLD_LOCAL_SIZE") or world
        return RankInfo(rank=rank, local_rank=local, world_size=world, local_world_size=lws,
                        node_rank=rank // lws, source="openmpi")
    return RankInfo()
