"""Does a multi-rank trace reproduce its own run? simulate at the traced layout vs the trace.

For every case and every repetition: run the real 2-process gloo job under torchrun with
capture, then through the command line a user runs:

* ``python -m echo_sim collect TRACE --json``: the traced iteration time (median over the
  captured steps of the slowest rank) and the steps' spread (half their inter-quartile range
  over the median);
* ``python -m echo_sim simulate TRACE --json`` with no layout flag (the traced layout), and
  again with ``--comm-profile FILE`` (default ``tests/data/comm/gloo2_calibrated.json``, or
  one measured by ``profile-comm`` when ``--measure-profile`` is given).

Cases: ``ddp``, ``fsdp``, ``tp``, ``pp``: the example GPT under that layout
(``examples/train.py --layout L --capture``); ``user-*``: a user's own script nothing was
tuned on (``benchmarks/workloads/user_job.py``: a ``TransformerEncoder`` language model, the
loss outside any module) under DDP (``user-ddp``), with rank 0 doing extra work in every
forward (``user-straggler``, ``--straggle 120``: rank 1 waits for it in its gradient
buckets), under FSDP2 (``user-fsdp``), with 2 micro-batches a step (``user-accum``), a
5 ms host wait before each (``user-loader``), bf16 autocast (``user-bf16``) and gradient
clipping (``user-clip``).

Reported per case: every repetition's error, the median error, the median spread and the
1-minute load average before and after each repetition. An error no larger than the run's
own spread is "within noise". Writes ``benchmarks/results/self_reproduction.json``.

    python -m benchmarks.self_reproduction [--reps 3] [--layouts ddp,fsdp,tp,pp]
        [--steps 12] [--comm-profile FILE | --measure-profile] [--output FILE]
        (--layouts also takes the user-* cases below)
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

if str(Path(__file__).resolve().parent.parent) not in sys.path:  # run as a script
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from benchmarks.accuracy import half_iqr_pct  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
PROFILE = REPO / "tests" / "data" / "comm" / "gloo2_calibrated.json"
LAYOUTS = ("ddp", "fsdp", "tp", "pp")
USER_CASES = {"user-ddp": (), "user-straggler": ("--straggle", "120"),
              "user-fsdp": ("--fsdp",), "user-accum": ("--accum", "2"),
              "user-loader": ("--sleep-ms", "5"), "user-bf16": ("--autocast",),
              "user-clip": ("--clip",)}

__all__ = ["main", "run", "table"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _cli(*args: str) -> dict[str, Any]:
    done = subprocess.run([sys.executable, "-m", "echo_sim", *args, "--json"],
                          capture_output=True, text=True, timeout=600, cwd=REPO,
                          env={**os.environ, "PYTHONPATH": str(REPO)})
    if done.returncode != 0:
        raise RuntimeError(f"echo_sim {' '.join(args)}: {done.stderr.strip()[-400:]}")
    return json.loads(done.stdout)


def _trace(layout: str, out: Path, steps: int) -> None:
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2",
           "--master_addr", "127.0.0.1", "--master_port", str(_free_port())]
    if layout in USER_CASES:
        cmd += ["benchmarks/workloads/user_job.py", "--steps", str(steps), "--trace-dir",
                str(out), "--trace-start", "2", "--trace-end", str(steps - 1),
                *USER_CASES[layout]]
    else:
        cmd += ["examples/train.py", "--layout", layout, "--model", "gpt", "--steps",
                str(steps), "--capture", "--trace-dir", str(out), "--trace-start", "2",
                "--trace-end", str(steps - 1)]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=900, cwd=REPO,
                          env={**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(REPO)})
    if done.returncode != 0:
        raise RuntimeError(f"{layout} run failed: {done.stderr.strip()[-400:]}")


def run(layouts: tuple[str, ...], reps: int, steps: int, profile: Path,
        root: Path) -> dict[str, Any]:
    """Every repetition of every layout (see the module doc)."""
    rows: dict[str, list[dict[str, Any]]] = {lay: [] for lay in layouts}
    for rep in range(reps):
        for layout in layouts:
            load0 = os.getloadavg()[0]
            trace = root / f"rep{rep}" / layout
            _trace(layout, trace, steps)
            col = _cli("collect", str(trace))
            measured = col["iteration_time_us"]
            spread = half_iqr_pct([s["iteration_us"] for s in col["per_step"]]) / 100
            plain = _cli("simulate", str(trace))["iteration_time_us"]
            with_p = _cli("simulate", str(trace), "--comm-profile", str(profile))
            rows[layout].append({
                "rep": rep, "measured_us": measured, "spread": spread,
                "simulated_us": plain, "simulated_profile_us": with_p["iteration_time_us"],
                "error": plain / measured - 1,
                "error_profile": with_p["iteration_time_us"] / measured - 1,
                "load_avg": [round(load0, 2), round(os.getloadavg()[0], 2)]})
            r = rows[layout][-1]
            print(f"rep {rep} {layout}: traced {measured / 1e3:.1f} ms, simulated "
                  f"{plain / 1e3:.1f} ms ({100 * r['error']:+.1f} %), with the profile "
                  f"{100 * r['error_profile']:+.1f} %, spread {100 * spread:.1f} %",
                  flush=True)
    return {"layouts": rows, "steps": steps, "profile": str(profile),
            "cpu_count": os.cpu_count()}


def table(doc: dict[str, Any]) -> str:
    """The markdown table of :func:`run`'s result."""
    out = ["| layout | traced (median of reps) | error per repetition | with --comm-profile "
           "| median error | median spread | load 1-min |",
           "|---|---|---|---|---|---|---|"]
    for layout, rows in doc["layouts"].items():
        if not rows:
            continue
        errs = [r["error"] for r in rows]
        med = statistics.median(errs)
        spread = statistics.median(r["spread"] for r in rows)
        verdict = f"{100 * med:+.1f} %" + (" (within noise)" if abs(med) <= spread else "")
        loads = [x for r in rows for x in r["load_avg"]]
        with_profile = ", ".join(f"{100 * r['error_profile']:+.1f}" for r in rows)
        out.append(
            f"| {layout} | {statistics.median(r['measured_us'] for r in rows) / 1e3:.1f} ms | "
            f"{', '.join(f'{100 * e:+.1f}' for e in errs)} | "
            f"{with_profile} | {verdict} | "
            f"{100 * spread:.1f} % | {min(loads):.2f}–{max(loads):.2f} |")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.self_reproduction",
                                 description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--reps", type=int, default=3, help="repetitions (default 3)")
    ap.add_argument("--layouts", default=",".join(LAYOUTS),
                    help=f"comma list of {', '.join(LAYOUTS)} (the example GPT) and "
                         f"{', '.join(USER_CASES)} (a user's own script: module doc); "
                         "default: the four layouts")
    ap.add_argument("--steps", type=int, default=12,
                    help="optimizer steps per run; steps 2..steps-2 are traced (default 12)")
    ap.add_argument("--comm-profile", default=str(PROFILE),
                    help="profile for the second prediction (default: the tests' one)")
    ap.add_argument("--measure-profile", action="store_true",
                    help="measure one with profile-comm --nproc 2 first instead")
    ap.add_argument("--output", default=str(REPO / "benchmarks" / "results" /
                                            "self_reproduction.json"), help="result JSON")
    a = ap.parse_args(argv)
    layouts = tuple(x for x in a.layouts.split(",") if x)
    bad = [x for x in layouts if x not in LAYOUTS and x not in USER_CASES]
    if bad or a.reps < 1 or a.steps < 6:
        ap.error(f"--layouts from {', '.join((*LAYOUTS, *USER_CASES))}; --reps >= 1; "
                 "--steps >= 6")
    with tempfile.TemporaryDirectory(prefix="echo-selfrepro-") as tmp:
        profile = Path(a.comm_profile)
        if a.measure_profile:
            profile = Path(tmp) / "comm.json"
            subprocess.run([sys.executable, "-m", "echo_sim", "profile-comm", "--nproc", "2",
                            "--output", str(profile)], check=True, cwd=REPO, timeout=900,
                           env={**os.environ, "PYTHONPATH": str(REPO)})
        doc = run(layouts, a.reps, a.steps, profile, Path(tmp))
    Path(a.output).write_text(json.dumps(doc, indent=1))
    print(table(doc))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
