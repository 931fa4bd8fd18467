"""Stall of the step that closes the capture window (issue 7 item 4).

Trains ``examples.models.GPT`` on CPU under ``echo_trace.capture`` for several sessions
(``--reps``), each recording ``--window`` steps with a large ``--max-events`` buffer, and
times every iteration (forward, backward, optimizer step) with ``perf_counter``. The
window closes inside the optimizer step of its last recorded step: that iteration is the
*closing step*. Two modes, interleaved per repetition:

* ``background`` (echo_trace's behaviour): the files are written by the writer thread
  while training goes on;
* ``inline`` (the old behaviour, for reference): the closing iteration also waits for
  the write (``cap.join_writer()`` inside the timed region).

Reported per mode: median closing-step time ÷ median of its neighbours (the recorded
steps before it and the untraced steps after it, while the writer may still be running),
minus 1; and the same figure for the recorded step before the closing one (a control:
the noise floor of the statistic); the same against only the two adjacent steps (which
ran under the same load); and the closing step's CPU time on the training thread
(``time.thread_time``) against its neighbours', which is free of scheduling noise but does
not see GIL waits. Run::

    OMP_NUM_THREADS=1 python -m benchmarks.write_stall [--reps 5] [--out FILE]

Writes ``benchmarks/results/write_stall.json``. Timings depend on the machine's load:
the results file records the CPU count and load average at the start.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:  # `python benchmarks/write_stall.py` from anywhere
    sys.path.insert(0, str(REPO))

import echo_trace  # noqa: E402
from examples.models import GPT, GPTConfig, token_batch  # noqa: E402

__all__ = ["main", "run_session"]


def run_session(mode: str, *, window: int, after: int, batch: int, out_dir: str,
                layers: int = 4) -> dict[str, Any]:
    """One capture session; per-iteration times (ms) and which one closed the window."""
    torch.manual_seed(0)
    cfg = GPTConfig(layers=layers)
    model = GPT(cfg)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    start = 2
    end = start + window
    batches = [token_batch(cfg, batch, seed=0, step=i) for i in range(end + after)]
    times_ms: list[float] = []
    cpu_ms: list[float] = []
    with echo_trace.capture(out_dir, start_step=start, end_step=end,
                            max_events=10_000_000) as cap:
        for i, (x, y) in enumerate(batches):
            t0, c0 = time.perf_counter(), time.thread_time()
            loss = F.cross_entropy(model(x).flatten(0, 1), y.flatten())
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            if mode == "inline" and i == end - 1:
                cap.join_writer()
            t1, c1 = time.perf_counter(), time.thread_time()
            times_ms.append((t1 - t0) * 1e3)
            cpu_ms.append((c1 - c0) * 1e3)
        cap.join_writer()
    trace_bytes = os.path.getsize(os.path.join(out_dir, "0_0", "trace.json"))
    return {"times_ms": times_ms, "cpu_ms": cpu_ms, "closing_index": end - 1, "start": start,
            "trace_bytes": trace_bytes}


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--window", type=int, default=16, help="recorded steps per session")
    ap.add_argument("--after", type=int, default=6, help="steps timed after the window")
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--layers", type=int, default=4, help="GPT blocks (more: a bigger trace)")
    ap.add_argument("--out", default=str(REPO / "benchmarks" / "results" / "write_stall.json"))
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    rows: dict[str, list[dict[str, Any]]] = {"background": [], "inline": []}
    for rep in range(args.reps):
        for mode in (("background", "inline") if rep % 2 == 0 else ("inline", "background")):
            d = tempfile.mkdtemp(prefix="echo_stall_")
            try:
                r = run_session(mode, window=args.window, after=args.after, batch=args.batch,
                                out_dir=d, layers=args.layers)
            finally:
                shutil.rmtree(d, ignore_errors=True)
            t, k, c = r["times_ms"], r["closing_index"], r["cpu_ms"]
            c_nb = c[r["start"] + 1:k] + c[k + 1:]
            before = t[r["start"] + 1:k]  # recorded steps (the first one warms the hooks)
            after = t[k + 1:]
            # control: the recorded step before the closing one, against the same kind of
            # neighbours: the noise floor of this statistic on this machine
            ctrl_nb = t[r["start"] + 1:k - 1] + after
            adj = (t[k - 1] + t[k + 1]) / 2  # the steps right before and after: same load
            rows[mode].append({"closing_ms": t[k], "trace_bytes": r["trace_bytes"],
                               "adjacent_ratio": t[k] / adj - 1,
                               "adjacent_control_ratio": t[k - 2] / ((t[k - 3] + t[k - 1]) / 2)
                               - 1,
                               "control_ratio": t[k - 1] / statistics.median(ctrl_nb) - 1,
                               "cpu_ratio": c[k] / statistics.median(c_nb) - 1, "before_ms": statistics.median(before),
                               "after_ms": statistics.median(after),
                               "neighbours_ms": statistics.median(before + after)})
    result: dict[str, Any] = {
        "machine": {"cpus": os.cpu_count(), "loadavg_1m": os.getloadavg()[0],
                    "python": platform.python_version(), "torch": torch.__version__},
        "config": vars(args), "modes": {}}
    for mode, rs in rows.items():
        ratio = [r["closing_ms"] / r["neighbours_ms"] - 1 for r in rs]
        result["modes"][mode] = {
            "closing_step_slowdown_median": statistics.median(ratio),
            "control_step_slowdown_median": statistics.median(r["control_ratio"] for r in rs),
            "closing_vs_adjacent_median": statistics.median(r["adjacent_ratio"] for r in rs),
            "control_vs_adjacent_median": statistics.median(
                r["adjacent_control_ratio"] for r in rs),
            "closing_step_thread_cpu_slowdown_median": statistics.median(
                r["cpu_ratio"] for r in rs),
            "closing_ms_median": statistics.median(r["closing_ms"] for r in rs),
            "before_ms_median": statistics.median(r["before_ms"] for r in rs),
            "after_ms_median": statistics.median(r["after_ms"] for r in rs),
            "per_rep": rs}
        ctrl = result["modes"][mode]["control_step_slowdown_median"]
        print(f"{mode:>10}: closing step {statistics.median(ratio) * 100:+.1f}% vs neighbours "
              f"(control step {ctrl * 100:+.1f}%; vs the two adjacent steps "
              f"{result['modes'][mode]['closing_vs_adjacent_median'] * 100:+.1f}%, control "
              f"{result['modes'][mode]['control_vs_adjacent_median'] * 100:+.1f}%; "
              f"training-thread CPU time "
              f"{result['modes'][mode]['closing_step_thread_cpu_slowdown_median'] * 100:+.1f}%) "
              f"(closing {result['modes'][mode]['closing_ms_median']:.1f} ms, recorded "
              f"{result['modes'][mode]['before_ms_median']:.1f} ms, after "
              f"{result['modes'][mode]['after_ms_median']:.1f} ms)")
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=1, allow_nan=False) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
