"""Processes for benchmarks (and the tests, through :mod:`tests.harness`): a Python script or a
``torchrun`` job, started in its own session with one thread per process, the repository
importable and GPUs hidden, killed whole on timeout so a hung rank cannot hang a run.

* :func:`run_python` — ``python ARGS...``;
* :func:`run_torchrun` — ``torchrun --nproc_per_node N ARGS...`` on a free port;
* :func:`run_command` — any command line with the same environment;
* :func:`base_env` — that environment: the caller's, ``TRACE_*`` cleared (a benchmark's jobs
  are traced only where it asks), ``OMP_NUM_THREADS=1``, ``CUDA_VISIBLE_DEVICES=""``.

A run past its timeout raises :class:`LaunchTimeout` with the ends of its output.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

__all__ = ["REPO", "LaunchTimeout", "base_env", "free_port", "run_command", "run_python",
           "run_torchrun"]

REPO = Path(__file__).resolve().parent.parent


class LaunchTimeout(AssertionError):
    """A process (group) ran past its timeout and was killed. An ``AssertionError``, so that
    a test reads it as a failure with the process's output, not as an error of the test."""


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def base_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The current environment, one thread per process, repo importable, TRACE_* cleared,
    GPUs hidden (``CUDA_VISIBLE_DEVICES=""``: gloo jobs run the same on a GPU box; a GPU
    run passes ``extra={"CUDA_VISIBLE_DEVICES": ...}``)."""
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
        raise LaunchTimeout(
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
