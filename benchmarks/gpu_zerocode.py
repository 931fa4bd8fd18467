"""The zero-code path of benchmarks/gpu.py: one fresh process per mode, as a user runs it.

A child (``python -m benchmarks.gpu_child``) runs N steps of one model and writes each step's
wall time, synchronised before and after (index i = optimizer step i, counted from 0). Per
model and repetition the parent runs it three ways, in a rotating order:

* ``plain``: no capture (every ``TRACE_*`` variable removed);
* ``zerocode``: ``TRACE_ON=1 TRACE_START_STEP=3 TRACE_END_STEP=6 TRACE_DIR=<tmp>
  TRACE_GZIP=1``, activated the way users activate it: the installed ``echo_trace.pth`` when
  this interpreter has it, else ``python -m echo_trace.run`` (:func:`launcher`). Step 2's
  optimizer step opens the window, steps 3 and 4 run wholly inside it, step 5's optimizer
  step closes it (files handed to the writer);
* ``profiler``: ``torch.profiler`` (CPU + CUDA) entered after step 2's optimizer step and
  left after step 5's, in the child: the same steps pay its start and stop.

:func:`window_figures` turns a plain and a traced list into the figures (ratios over the
plain median of steps 2..N-1).
"""

from __future__ import annotations

import json
import os
import signal
import site
import statistics
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

__all__ = ["LAUNCHERS", "WINDOW", "ZC_MODES", "child_env", "launcher", "measure_zerocode",
           "run_logged", "window_figures", "zerocode_cmd", "zerocode_env"]

REPO = Path(__file__).resolve().parent.parent
#: (TRACE_START_STEP, TRACE_END_STEP): steps 3, 4, 5 recorded; files written as step 6 begins.
WINDOW = (3, 6)
ZC_MODES = ("plain", "zerocode", "profiler")
LAUNCHERS = ("pth", "run")
PLAIN_FROM = 2  # plain steps 0 and 1 are warm-up (cuBLAS handles, allocator, AdamW state)


def window_figures(plain_s: Sequence[float], traced_s: Sequence[float], *,
                   start: int = WINDOW[0], end: int = WINDOW[1],
                   plain_from: int = PLAIN_FROM) -> dict[str, Any]:
    """Figures of one traced run against one plain run (per-step seconds, index = step).

    * ``plain_median_ms``: median of plain steps ``plain_from``..;
    * ``in_window_pct``: median of traced steps ``start``..``end - 2`` (wholly inside the
      window) ÷ plain median − 1, in %;
    * ``opening_ratio``: traced step ``start - 1`` (its optimizer step opens the window) ÷
      plain median; ``closing_ratio``: traced step ``end - 1`` (its optimizer step closes the
      window) ÷ plain median;
    * ``after_ms`` / ``after_pct``: median of traced steps ``end``.. (something left running
      after the window shows here), ``None`` when the run has no such step.
    """
    if not 1 <= start < end - 1:
        raise ValueError(f"window {start}..{end}: expected 1 <= start < end - 1")
    if len(traced_s) < end:
        raise ValueError(f"{len(traced_s)} traced steps: the window {start}..{end} needs "
                         f"at least {end}")
    if len(plain_s) <= plain_from:
        raise ValueError(f"{len(plain_s)} plain steps: need more than {plain_from}")
    plain = statistics.median(plain_s[plain_from:])
    inside = statistics.median(traced_s[start:end - 1])
    after = statistics.median(traced_s[end:]) if len(traced_s) > end else None
    return {
        "plain_median_ms": 1e3 * plain,
        "window_ms": [1e3 * t for t in traced_s[start:end - 1]],
        "in_window_pct": 100.0 * (inside / plain - 1.0),
        "opening_ratio": traced_s[start - 1] / plain,
        "closing_ratio": traced_s[end - 1] / plain,
        "after_ms": None if after is None else 1e3 * after,
        "after_pct": None if after is None else 100.0 * (after / plain - 1.0),
    }


# ---------------------------------------------------------------------- child processes
def launcher() -> str:
    """``"pth"`` when this interpreter's site-packages hold ``echo_trace.pth`` (so
    ``TRACE_ON=1`` alone activates capture), else ``"run"`` (``python -m echo_trace.run``)."""
    dirs = [*site.getsitepackages(), site.getusersitepackages()]
    for d in dirs:
        pth = Path(d) / "echo_trace.pth"
        try:
            if "echo_trace" in pth.read_text():
                return "pth"
        except OSError:
            continue
    return "run"


def child_env(device: str, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """This environment without ``TRACE_*``, the repo importable; on CPU, GPUs hidden and one
    OpenMP thread; then ``extra``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("TRACE_")}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH", "")) if p)
    env["PYTHONUNBUFFERED"] = "1"
    if device == "cpu":
        env["CUDA_VISIBLE_DEVICES"] = ""
        env["OMP_NUM_THREADS"] = "1"
    env.update(extra or {})
    return env


def zerocode_env(trace_dir: str | Path, *, start: int = WINDOW[0], end: int = WINDOW[1],
                 extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The ``TRACE_*`` variables of a zero-code run writing gzipped files to ``trace_dir``."""
    return {"TRACE_ON": "1", "TRACE_START_STEP": str(start), "TRACE_END_STEP": str(end),
            "TRACE_DIR": str(trace_dir), "TRACE_GZIP": "1", **(extra or {})}


def zerocode_cmd(target: Sequence[str], how: str, *, torchrun_nproc: int = 0,
                 master_port: int = 0) -> list[str]:
    """The command line that runs ``target`` (``script.py args`` or ``-m module args``) under
    zero-code activation ``how`` (:data:`LAUNCHERS`; ``TRACE_ON=1`` must be in its env).

    With ``torchrun_nproc`` the target runs under ``torch.distributed.run``; with ``run``
    every worker is started as ``python -m echo_trace.run`` (torchrun's ``-m``)."""
    if how not in LAUNCHERS:
        raise ValueError(f"launcher {how!r}: choose from {', '.join(LAUNCHERS)}")
    wrap = ["-m", "echo_trace.run"] if how == "run" else []
    if torchrun_nproc:
        return [*torchrun_prefix(torchrun_nproc, master_port), *wrap, *target]
    return [sys.executable, *wrap, *target]


def torchrun_prefix(nproc: int, master_port: int) -> list[str]:
    """``python -m torch.distributed.run`` with ``nproc`` workers on one node."""
    return [sys.executable, "-m", "torch.distributed.run", f"--nproc_per_node={nproc}",
            "--nnodes=1", "--master_addr=127.0.0.1", f"--master_port={master_port}"]


def run_logged(cmd: Sequence[str], *, env: Mapping[str, str], log: Path, timeout_s: float,
               cwd: Path = REPO) -> tuple[int | None, str]:
    """Run ``cmd`` in its own process group, stdout and stderr to ``log``; on timeout kill
    the whole group. (return code, or None on timeout; the log's last 4000 characters)."""
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("w") as f:
        f.write("$ " + " ".join(cmd) + "\n")
        f.flush()
        proc = subprocess.Popen(list(cmd), env=dict(env), cwd=cwd, stdout=f,
                                stderr=subprocess.STDOUT, start_new_session=True)
        try:
            rc: int | None = proc.wait(timeout=max(1.0, timeout_s))
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            rc = None
    text = log.read_text(errors="replace")
    return rc, text[-4000:]


def echo_lines(text: str, limit: int = 10) -> list[str]:
    """The distinct ``echo_trace`` log lines of a child's output (a capture that turned itself
    off says so here), at most ``limit``."""
    seen: list[str] = []
    for line in text.splitlines():
        line = line.strip()
        if "echo_trace" in line and not line.startswith("$ ") and line not in seen:
            seen.append(line)
    return seen[:limit]


def _child(name: str, mode: str, out: Path, *, steps: int, device: str, tiny: bool,
           seed: int, how: str, root: Path, env: Mapping[str, str], timeout_s: float,
           ) -> tuple[list[float] | None, str]:
    args = ["-m", "benchmarks.gpu_child", "--model", name, "--steps", str(steps), "--out",
            str(out), "--device", device, "--size", "tiny" if tiny else "full",
            "--seed", str(seed)]
    extra = dict(env)
    if mode == "profiler":
        args += ["--profiler-window", f"{WINDOW[0]}:{WINDOW[1]}"]
        cmd = [sys.executable, *args]
    elif mode == "zerocode":
        extra.update(zerocode_env(root / "trace", extra=None))
        cmd = zerocode_cmd(args, how)
    else:
        cmd = [sys.executable, *args]
    rc, text = run_logged(cmd, env=child_env(device, extra), log=out.with_suffix(".log"),
                          timeout_s=timeout_s)
    if rc != 0 or not out.is_file():
        why = "timed out" if rc is None else f"exit {rc}"
        last = (text.strip().splitlines() or [""])[-1]
        return None, f"{mode} child {why}: {last}"
    return list(json.loads(out.read_text())["step_s"]), text


def _median_figures(per_rep: list[dict[str, Any]]) -> dict[str, Any]:
    """The median over repetitions of every numeric figure (lists: the first repetition's)."""
    out: dict[str, Any] = {}
    for key, first in per_rep[0].items():
        vals = [r[key] for r in per_rep if isinstance(r[key], int | float)]
        out[key] = statistics.median(vals) if vals else first
    return out


def measure_zerocode(name: str, *, steps: int, reps: int, device: str, tiny: bool, seed: int,
                     root: Path, env: Mapping[str, str] | None = None,
                     timeout_s: float = 240.0, how: str | None = None) -> dict[str, Any]:
    """The three children of :data:`ZC_MODES` for model ``name``, ``reps`` times in a rotating
    order; figures per mode (medians over repetitions) or ``{"error": ...}``."""
    how = how or launcher()
    steps_ms: dict[str, list[list[float]]] = {m: [] for m in ZC_MODES}
    figures: dict[str, list[dict[str, Any]]] = {"zerocode": [], "profiler": []}
    echo_log: list[str] = []
    traces_written: list[bool] = []
    t0 = time.perf_counter()
    for rep in range(reps):
        k = rep % len(ZC_MODES)
        got: dict[str, list[float]] = {}
        for mode in ZC_MODES[k:] + ZC_MODES[:k]:
            d = root / f"zc-{name}-{mode}-{rep}"
            d.mkdir(parents=True, exist_ok=True)
            step_s, text = _child(name, mode, d / "steps.json", steps=steps, device=device,
                                  tiny=tiny, seed=seed, how=how, root=d, env=env or {},
                                  timeout_s=timeout_s)
            if step_s is None:
                return {"error": text, "launcher": how}
            got[mode] = step_s
            steps_ms[mode].append([1e3 * t for t in step_s])
            if mode == "zerocode":
                echo_log += [ln for ln in echo_lines(text) if ln not in echo_log]
                traces_written.append(any((d / "trace").glob("*/trace.json*")))
        for mode in figures:
            figures[mode].append(window_figures(got["plain"], got[mode]))
    zc = _median_figures(figures["zerocode"])
    return {"launcher": how, "steps": steps, "reps": reps,
            "window": {"start_step": WINDOW[0], "end_step": WINDOW[1]},
            "plain_median_ms": zc["plain_median_ms"],
            "zerocode": zc, "profiler": _median_figures(figures["profiler"]),
            "trace_written": all(traces_written), "echo_log": echo_log[:10],
            "step_ms": steps_ms, "wall_s": time.perf_counter() - t0}
