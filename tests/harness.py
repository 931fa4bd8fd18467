"""Small harness for real multi-process tests (gloo on CPU): no mocks of torch.

* :func:`run_torchrun` launches a script under ``torch.distributed.run`` on a free port,
  in its own process group, killed whole on timeout so a hung rank cannot hang CI.
* :func:`run_ranks` and :func:`run_forked` run a script (or ``-m`` module) as ``torchrun``'s
  ranks or as one process, forked from a server that imported torch once
  (:mod:`tests.forker`): for tests whose subject is the job, not the launcher.
* :func:`spawn` runs ``fn(rank, world_size, *args)`` in ``world_size`` processes forked from
  a server that imported torch once, with a gloo process group built on a FileStore (no
  ports at all).

All of them hide GPUs from the processes they start, so these tests run alike on any machine.
"""

from __future__ import annotations

import atexit
import os
import subprocess
import tempfile
import threading
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

# the plain launchers live with the benchmarks, which start the same jobs
from benchmarks.launch import REPO, base_env, free_port, run_command, run_python, run_torchrun

__all__ = ["REPO", "base_env", "free_port", "run_command", "run_echo_sim", "run_forked",
           "run_python", "run_ranks", "run_torchrun", "spawn"]


class _Forkers:
    """This process's :class:`tests.forker.Forker` servers, one per preload list, made on
    first use and stopped at exit; one request at a time."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._forkers: dict[tuple[str, ...], Any] = {}

    def run(self, preload: Sequence[str] | None, args: Sequence[str], **kw: Any,
            ) -> subprocess.CompletedProcess[str]:
        from tests.forker import TORCH_PRELOAD, Forker

        key = tuple(TORCH_PRELOAD if preload is None else preload)
        with self._lock:
            if key not in self._forkers:
                self._forkers[key] = Forker(key)
                atexit.register(self._forkers[key].close)
            result: subprocess.CompletedProcess[str] = self._forkers[key].run(args, **kw)
            return result


_FORKERS = _Forkers()


def run_ranks(args: Sequence[str], *, nproc: int = 2, env: Mapping[str, str] | None = None,
              timeout: float = 240, cwd: str | Path | None = None,
              preload: Sequence[str] | None = None) -> subprocess.CompletedProcess[str]:
    """``torchrun --nproc_per_node NPROC ARGS...`` as far as the ranks can tell (their
    environment, a free port, the others stopped when one fails), forked from a server
    that imported ``preload`` (default :data:`tests.forker.TORCH_PRELOAD`); stdout and
    stderr are the ranks' in rank order."""
    return _FORKERS.run(preload, args, ranks=nproc, env=env, timeout=timeout, cwd=cwd)


def run_forked(args: Sequence[str], *, env: Mapping[str, str] | None = None,
               timeout: float = 120, cwd: str | Path | None = None,
               preload: Sequence[str] | None = None) -> subprocess.CompletedProcess[str]:
    """``python ARGS...`` forked from a server that imported ``preload`` (default
    :data:`tests.forker.TORCH_PRELOAD`; see :mod:`tests.forker`)."""
    return _FORKERS.run(preload, args, env=env, timeout=timeout, cwd=cwd)


def run_echo_sim(args: Sequence[str], *, env: Mapping[str, str] | None = None,
                 timeout: float = 120, cwd: str | Path | None = None,
                 ) -> subprocess.CompletedProcess[str]:
    """``python -m echo_sim ARGS...`` forked from a server that imported the CLI and what
    its commands load (:data:`tests.forker.CLI_PRELOAD`): 0.35 CPU-s a small command
    against 0.71 for a fresh interpreter. Tests of what a fresh interpreter imports use
    :func:`run_python`."""
    from tests.forker import CLI_PRELOAD

    return _FORKERS.run(CLI_PRELOAD, ["-m", "echo_sim", *args], env=env, timeout=timeout,
                        cwd=cwd)


def _spawn_entry(rank: int, world_size: int, store_path: str, fn: Callable[..., Any],
                 args: tuple[Any, ...], env: dict[str, str]) -> None:
    import torch.distributed as dist

    os.environ.clear()  # the forkserver's environment is the one it started with
    os.environ.update(env)
    os.environ.update(RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(world_size),
                      LOCAL_WORLD_SIZE=str(world_size), CUDA_VISIBLE_DEVICES="")
    store = dist.FileStore(store_path, world_size)
    dist.init_process_group("gloo", store=store, rank=rank, world_size=world_size)
    ok = False
    try:
        fn(rank, world_size, *args)
        ok = True
    finally:
        if ok:
            # Let every rank finish its collectives before tearing gloo down: destroying
            # the group with a peer's work still in flight aborts the process (SIGABRT).
            dist.barrier()
            import gc

            gc.collect()
        dist.destroy_process_group()


def spawn(fn: Callable[..., Any], world_size: int = 2, *args: Any, timeout: float = 120) -> None:
    """Run ``fn(rank, world_size, *args)`` in ``world_size`` processes with a gloo group.

    ``fn`` must be importable (a module-level function). An exception in any rank fails
    the call with that rank's traceback; a hang past ``timeout`` kills every process. The
    ranks are forked by multiprocessing's forkserver, which imports torch once per test
    process (3.8 CPU-s a rank saved on a 2-vCPU VM), and run in this process's environment.
    """
    import multiprocessing

    import torch.multiprocessing as mp

    os.environ.setdefault("OMP_NUM_THREADS", "1")
    multiprocessing.set_forkserver_preload(["torch", "torch.distributed", "echo_trace"])
    with tempfile.TemporaryDirectory() as d:
        ctx = mp.start_processes(
            _spawn_entry, args=(world_size, os.path.join(d, "store"), fn, args,
                                dict(os.environ)),
            nprocs=world_size, join=False, start_method="forkserver",
        )
        import time

        deadline = time.monotonic() + timeout
        while not ctx.join(timeout=1.0):
            if time.monotonic() > deadline:
                for p in ctx.processes:
                    if p.is_alive():
                        p.kill()
                raise AssertionError(f"spawned ranks timed out after {timeout}s")
