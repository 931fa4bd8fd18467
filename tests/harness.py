"""Small harness for real multi-process tests (gloo on CPU): no mocks of torch.

* :func:`run_torchrun` launches a script under ``torch.distributed.run`` on a free port,
  in its own process group, killed whole on timeout so a hung rank cannot hang CI.
* :func:`spawn` runs ``fn(rank, world_size, *args)`` in ``world_size`` fresh processes
  with a gloo process group built on a FileStore (no ports at all).

Both hide GPUs from the processes they start, so these tests run alike on any machine.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent

__all__ = ["REPO", "base_env", "free_port", "run_command", "run_python", "run_torchrun", "spawn"]


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def base_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The current environment, one thread per process, repo importable, TRACE_* cleared,
    GPUs hidden (``CUDA_VISIBLE_DEVICES=""``: gloo jobs run the same on a GPU box; a GPU
    test passes ``extra={"CUDA_VISIBLE_DEVICES": ...}``)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("TRACE_")}
    env["OMP_NUM_THREADS"] = "1"
    env["CUDA_VISIBLE_DEVICES"] = ""
    env["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(REPO), env.get("PYTHONPATH", "")) if p
    )
    env.setdefault("PYTHONUNBUFFERED", "1")
    if extra:
        env.update(extra)
    return env


def _run(cmd: Sequence[str], env: Mapping[str, str], timeout: float, cwd: str | Path | None,
         ) -> subprocess.CompletedProcess[str]:
    proc = subprocess.Popen(
        list(cmd), env=dict(env), cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True, start_new_session=True,
    )
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        raise AssertionError(
            f"timed out after {timeout}s: {' '.join(cmd)}\nstdout:\n{out[-3000:]}\n"
            f"stderr:\n{err[-3000:]}"
        ) from None
    return subprocess.CompletedProcess(list(cmd), proc.returncode, out, err)


def run_command(cmd: Sequence[str], *, env: Mapping[str, str] | None = None,
                timeout: float = 120, cwd: str | Path | None = None,
                ) -> subprocess.CompletedProcess[str]:
    """``CMD...`` (a script, ``bash FILE``) with :func:`base_env` plus ``env``; killed whole
    on timeout."""
    return _run(cmd, base_env(env), timeout, cwd)


def run_python(args: Sequence[str], *, env: Mapping[str, str] | None = None,
               timeout: float = 120, cwd: str | Path | None = None,
               ) -> subprocess.CompletedProcess[str]:
    """``python ARGS...`` with :func:`base_env` plus ``env``."""
    return run_command([sys.executable, *args], env=env, timeout=timeout, cwd=cwd)


def run_torchrun(args: Sequence[str], *, nproc: int = 2, env: Mapping[str, str] | None = None,
                 timeout: float = 240, cwd: str | Path | None = None,
                 ) -> subprocess.CompletedProcess[str]:
    """``torchrun --nproc_per_node NPROC ARGS...`` on a free port; killed whole on timeout."""
    cmd = [
        sys.executable, "-m", "torch.distributed.run", f"--nproc_per_node={nproc}",
        "--master_addr=127.0.0.1", f"--master_port={free_port()}", *args,
    ]
    return _run(cmd, base_env(env), timeout, cwd)


def _spawn_entry(rank: int, world_size: int, store_path: str, fn: Callable[..., Any],
                 args: tuple[Any, ...]) -> None:
    import torch.distributed as dist

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
    the call with that rank's traceback; a hang past ``timeout`` kills every process.
    """
    import torch.multiprocessing as mp

    os.environ.setdefault("OMP_NUM_THREADS", "1")
    with tempfile.TemporaryDirectory() as d:
        ctx = mp.start_processes(
            _spawn_entry, args=(world_size, os.path.join(d, "store"), fn, args),
            nprocs=world_size, join=False, start_method="spawn",
        )
        import time

        deadline = time.monotonic() + timeout
        while not ctx.join(timeout=1.0):
            if time.monotonic() > deadline:
                for p in ctx.processes:
                    if p.is_alive():
                        p.kill()
                raise AssertionError(f"spawned ranks timed out after {timeout}s")
