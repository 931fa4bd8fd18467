"""Start ``nproc`` local processes that rendezvous through a file, and collect rank 0's result.

The one process launcher of :mod:`echo_sim.measure`: ``torch.multiprocessing`` spawn (fresh
interpreters, as torchrun gives a job), a ``FileStore`` in a temporary directory (no ports),
a hard timeout that kills every process, and rank 0's JSON result read back. A worker is
called as ``worker(rank, nproc, store_path, *args, result_path)`` and must write
``result_path`` atomically from rank 0 once every rank's samples are gathered.
"""

from __future__ import annotations

import json
import logging
import os
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from echo_sim.errors import ProfileError

__all__ = ["join_ranks", "one_line", "run_ranks", "write_result"]


def one_line(text: object) -> str:
    """The last non-empty line of ``text`` (a child's traceback ends with its error)."""
    lines = [ln.strip() for ln in str(text).strip().splitlines() if ln.strip()]
    return lines[-1] if lines else "unknown error"


def run_ranks(worker: Callable[..., None], args: tuple[Any, ...], *, nproc: int,
              timeout_s: float, what: str, backend: str) -> dict[str, Any]:
    """Run ``worker`` in ``nproc`` spawned processes; rank 0's result (parsed JSON).

    ``what`` names the command in errors. Raises :class:`ProfileError` when a process fails
    before the result is written, or the run exceeds ``timeout_s`` (every process killed).
    """
    import torch.multiprocessing as mp
    from torch.multiprocessing.spawn import ProcessException

    with tempfile.TemporaryDirectory(prefix=f"echo-{what}-") as d:
        result_path = os.path.join(d, "result.json")
        ctx = mp.start_processes(
            worker, args=(nproc, os.path.join(d, "store"), *args, result_path),
            nprocs=nproc, join=False, start_method="spawn",
        )
        deadline = time.monotonic() + timeout_s
        try:
            while not ctx.join(timeout=0.5):
                if time.monotonic() > deadline:
                    raise ProfileError(f"{what}: processes still running after "
                                       f"{timeout_s:g} s (--timeout); killed")
        except ProcessException as e:
            if not os.path.exists(result_path):
                raise ProfileError(f"{what}: a {backend} process failed: "
                                   f"{one_line(str(e))}") from None
            # rank 0 writes the result only after every rank's samples are gathered: a
            # process that died afterwards (in gloo's teardown) lost nothing
            logging.getLogger("echo_sim").warning(
                "%s: a %s process failed after the measurement was complete (%s); keeping "
                "the result", what, backend, one_line(str(e)))
        finally:
            for p in ctx.processes:
                if p.is_alive():
                    p.kill()
                    p.join(5)
        try:
            raw: dict[str, Any] = json.loads(Path(result_path).read_text())
        except (OSError, json.JSONDecodeError) as e:
            raise ProfileError(f"{what}: rank 0 wrote no result ({e})") from None
    return raw


def join_ranks(rank: int, nproc: int, store_path: str, backend: str) -> None:
    """In a worker: one intra-op thread unless ``OMP_NUM_THREADS`` says otherwise, then join
    the process group through the ``FileStore`` at ``store_path``."""
    import torch
    import torch.distributed as dist

    if "OMP_NUM_THREADS" not in os.environ:
        # as torchrun does for the job's workers: one intra-op thread per process unless the
        # user says otherwise (more would oversubscribe the cores the ranks share, and the
        # measurements would time thread thrashing the job never sees)
        torch.set_num_threads(1)
    store = dist.FileStore(store_path, nproc)
    dist.init_process_group(backend, store=store, rank=rank, world_size=nproc)


def write_result(result_path: str, data: dict[str, Any]) -> None:
    """Rank 0's result, written atomically (:func:`run_ranks` reads it back)."""
    tmp = result_path + ".tmp"
    Path(tmp).write_text(json.dumps(data))
    os.replace(tmp, result_path)
