"""Python processes for tests that start many, without paying for a fresh interpreter's
imports each time.

A :class:`Forker` starts one server process (``python -m tests.forker MODULE...``), which
imports the given modules once and then, for each request, forks one child per rank. Each
child becomes the process ``python ARGV`` would have started: its own session, working
directory, whole environment, ``sys.argv`` and ``sys.path[0]``, stdin from ``/dev/null``,
stdout and stderr to files, then ``runpy`` runs the script or ``-m`` module as
``__main__`` and the interpreter exits as usual (``SystemExit``, atexit handlers, the flush
of stdout). A child costs its own work and the copy-on-write of the server's pages. On the
2-vCPU VM (2026-11-28):

* ``echo_sim statistic`` on a small trace: 0.35 CPU-s against 0.71 for a fresh interpreter
  (the server: 1.0 CPU-s, once);
* a rank of the examples' tiny 3-step DDP job: 1.9 CPU-s against about 4.5, ``import
  torch`` being 3.8 (the server: 6.1 CPU-s, once).

``ranks=N`` starts N children at once with torchrun's per-rank environment (``RANK``,
``LOCAL_RANK``, ``WORLD_SIZE``, ``MASTER_ADDR``/``MASTER_PORT``...), and, as torchrun does,
stops the others when one fails. It stands in for torchrun only where the launcher is not
what a test tests: what a fresh interpreter does before the script (the ``.pth``
``TRACE_ON`` autostart, imports on the way) and torchrun's own behaviour (its signals,
its flags) are tested through :func:`tests.harness.run_torchrun` and ``run_python``.

The server is single-threaded (forking it is safe) and serves one request at a time; use
one forker per thread.
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

__all__ = ["CLI_PRELOAD", "HF_PRELOAD", "TORCH_PRELOAD", "Forker"]

REPO = Path(__file__).resolve().parent.parent

# what echo_sim's commands import when they run (not at the CLI's import)
CLI_PRELOAD = ("echo_sim.cli", "numpy", "matplotlib", "xlsxwriter", "echo_sim.load",
               "echo_sim.sim", "echo_sim.search", "echo_sim.workload",
               "echo_sim.analysis.critical", "echo_sim.render.xlsx", "echo_sim.render.draw",
               "echo_sim.store", "echo_sim.outofcore", "echo_sim.trace.validate")
# what a training job of examples/ or a rank of the tests imports first
TORCH_PRELOAD = ("torch", "torch.distributed", "torch.nn.parallel", "torch.distributed.fsdp",
                 "torch.distributed.tensor", "torch.distributed.pipelining", "numpy",
                 "echo_trace")
# ... and a Hugging Face model's (transformers' models: about 5 CPU-s more)
HF_PRELOAD = (*TORCH_PRELOAD, "transformers", "transformers.models.llama.modeling_llama",
              "transformers.models.bert.modeling_bert", "transformers.models.gpt2.modeling_gpt2",
              "transformers.models.t5.modeling_t5")
GRACE_S = 10.0  # after one rank fails, how long the others get after SIGTERM


class Forker:
    """A server that forks ready Python processes; a context manager. ``preload``: the
    modules it imports once; ``env``: added to :func:`tests.harness.base_env` for it."""

    def __init__(self, preload: Sequence[str] = CLI_PRELOAD,
                 env: Mapping[str, str] | None = None) -> None:
        from tests.harness import base_env

        self._tmp = tempfile.TemporaryDirectory(prefix="echo_forker")
        self._base_env = base_env(env)
        self._server = subprocess.Popen(
            [sys.executable, "-m", "tests.forker", *preload], cwd=REPO, env=self._base_env,
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, start_new_session=True,
        )
        self._count = 0

    def __enter__(self) -> Forker:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Stop the server (it exits when its stdin closes)."""
        if self._server.poll() is None:
            assert self._server.stdin is not None
            self._server.stdin.close()
            try:
                self._server.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(self._server.pid, signal.SIGKILL)
                self._server.wait()
        if self._server.stdout is not None:
            self._server.stdout.close()
        self._tmp.cleanup()

    def _reply(self, timeout: float | None) -> dict[str, Any] | None:
        """The server's next reply line, or None when ``timeout`` (s) passes first."""
        out = self._server.stdout
        assert out is not None
        if timeout is not None and not select.select([out], [], [], timeout)[0]:
            return None
        line = out.readline()
        if not line:
            raise AssertionError(f"the test forker's server exited ({self._server.wait()})")
        return dict(json.loads(line))

    def run(self, argv: Sequence[str], *, cwd: str | Path | None = None, timeout: float = 120,
            env: Mapping[str, str] | None = None, ranks: int = 0,
            ) -> subprocess.CompletedProcess[str]:
        """``python ARGV`` (a script and its arguments, or ``-m MODULE ...``) in ``cwd``
        with :func:`tests.harness.base_env` plus ``env``. ``ranks=N``: N processes at once
        with torchrun's per-rank environment on a free port; the returncode is the first
        failure's, stdout and stderr are the ranks' in rank order. Every child's session
        is killed after ``timeout`` seconds (then an AssertionError, as
        :func:`tests.harness.run_command` raises)."""
        from tests.harness import base_env, free_port

        n = max(ranks, 1)
        full_env = base_env(env)
        per_rank: list[dict[str, str]] = [{} for _ in range(n)]
        if ranks:
            shared = {"WORLD_SIZE": str(n), "LOCAL_WORLD_SIZE": str(n), "GROUP_RANK": "0",
                      "ROLE_WORLD_SIZE": str(n), "MASTER_ADDR": "127.0.0.1",
                      "MASTER_PORT": str(free_port()), "TORCHELASTIC_RESTART_COUNT": "0",
                      "TORCHELASTIC_MAX_RESTARTS": "0", "TORCHELASTIC_RUN_ID": "none"}
            per_rank = [{**shared, "RANK": str(r), "LOCAL_RANK": str(r), "ROLE_RANK": str(r)}
                        for r in range(n)]
        self._count += 1
        files = [(Path(self._tmp.name) / f"{self._count}.{r}.out",
                  Path(self._tmp.name) / f"{self._count}.{r}.err") for r in range(n)]
        request = {"argv": list(argv), "cwd": str(cwd or os.getcwd()), "env": full_env,
                   "ranks": per_rank, "files": [[str(o), str(e)] for o, e in files]}
        assert self._server.stdin is not None
        self._server.stdin.write(json.dumps(request) + "\n")
        self._server.stdin.flush()
        started = self._reply(30)
        assert started is not None, "the test forker's server did not answer"
        done = self._reply(timeout)
        timed_out = done is None
        if timed_out:
            for pid in started["pids"]:
                try:
                    os.killpg(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            done = self._reply(None)
        assert done is not None
        out = "".join(o.read_text(errors="replace") for o, _ in files)
        err = "".join(e.read_text(errors="replace") for _, e in files)
        for o, e in files:
            o.unlink()
            e.unlink()
        if timed_out:
            raise AssertionError(f"timed out after {timeout}s: python {' '.join(argv)}\n"
                                 f"stdout:\n{out[-3000:]}\nstderr:\n{err[-3000:]}")
        return subprocess.CompletedProcess([sys.executable, *argv], done["returncode"], out,
                                           err)


# ---------------------------------------------------------------------------- the server
def _serve(preload: Sequence[str]) -> tuple[dict[str, Any], int] | None:
    """Read requests; fork the children of each and answer ``{"pids"}`` then
    ``{"returncode"}``. Returns (the request, the rank) in a child, None in the server when
    its stdin closes."""
    import importlib

    for name in preload:
        try:
            importlib.import_module(name)
        except ImportError:  # not installed: a child imports it (and fails) as python would
            pass
    for line in sys.stdin:
        request = json.loads(line)
        sys.stdout.flush()
        pids = []
        for rank in range(len(request["ranks"])):
            pid = os.fork()
            if pid == 0:
                return dict(request), rank
            pids.append(pid)
        print(json.dumps({"pids": pids}), flush=True)
        print(json.dumps({"returncode": _wait(pids)}), flush=True)
    return None


def _wait(pids: list[int]) -> int:
    """Wait for every child; after the first failure, SIGTERM the rest and SIGKILL them
    after :data:`GRACE_S`, as torchrun stops a job. The first failure's exit status."""
    left, first = set(pids), 0
    deadline: float | None = None
    while left:
        pid, status = os.waitpid(-1, os.WNOHANG if deadline is not None else 0)
        if pid == 0:  # only while stopping the others
            if time.monotonic() > deadline:  # type: ignore[operator]
                for p in left:
                    _signal(p, signal.SIGKILL)
            time.sleep(0.05)
            continue
        if pid not in left:
            continue
        left.discard(pid)
        code = os.waitstatus_to_exitcode(status)
        if code != 0 and first == 0:
            first = code
            deadline = time.monotonic() + GRACE_S
            for p in left:
                _signal(p, signal.SIGTERM)
    return first


def _signal(pid: int, sig: int) -> None:
    try:
        os.killpg(pid, sig)
    except ProcessLookupError:
        pass


def _become(request: dict[str, Any], rank: int) -> None:
    """In a child: take the request's session, files, directory, environment and argv."""
    os.setsid()
    out, err = request["files"][rank]
    for fd, path, flags in ((0, os.devnull, os.O_RDONLY),
                            (1, out, os.O_WRONLY | os.O_CREAT | os.O_TRUNC),
                            (2, err, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)):
        new = os.open(path, flags, 0o644)
        os.dup2(new, fd)
        os.close(new)
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update({**request["env"], **request["ranks"][rank]})


def _run(argv: list[str]) -> None:
    """``python ARGV`` from here: ``-m MODULE ARGS`` or ``SCRIPT ARGS``."""
    import runpy

    if argv[0] == "-m":
        sys.argv = [argv[1], *argv[2:]]
        sys.path[0] = os.getcwd()
        runpy.run_module(argv[1], run_name="__main__", alter_sys=True)
    else:
        sys.argv = list(argv)
        sys.path[0] = os.path.dirname(os.path.abspath(argv[0]))
        runpy.run_path(argv[0], run_name="__main__")


if __name__ == "__main__":
    job = _serve(sys.argv[1:])
    if job is not None:
        _become(*job)
        _run(job[0]["argv"])
