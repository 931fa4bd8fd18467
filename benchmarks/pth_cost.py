"""Start-up cost of ``echo_trace.pth`` with ``TRACE_ON=1`` in a process that never imports
torch (issue 11: "a process that never imports torch pays nothing").

Runs, interleaved ``--reps`` times, fresh interpreters (``python -c``) that: do nothing
(``none``); execute the current ``echo_trace.pth`` the way ``site`` does (``current``);
execute the ``.pth`` line of an earlier commit (``--old-rev``, default the one before this
change: it imported ``echo_trace._autostart``, hence the whole package, at start-up). Each
with ``TRACE_ON=1``. Reported: the median wall time per mode and its excess over
``none``, the time the ``.pth`` line itself took (measured inside the process, free of
start-up noise), and which echo_trace modules each mode imported. Run::

    OMP_NUM_THREADS=1 python -m benchmarks.pth_cost [--reps 30] [--out FILE]

Writes ``benchmarks/results/pth_cost.json``; wall times depend on the machine's load (the
results file records the load average).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

__all__ = ["main"]

PROBE = ("import sys, time\nt0 = time.perf_counter()\nexec({pth!r})\n"
         "dt = (time.perf_counter() - t0) * 1e3\n"
         "print(dt, ','.join(sorted(m for m in sys.modules if m.startswith('echo_trace'))))")


def _pth_code(text: str) -> str:
    return "\n".join(ln for ln in text.splitlines() if ln.startswith("import"))


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--old-rev", default="53a38ea")
    ap.add_argument("--out", default=str(REPO / "benchmarks" / "results" / "pth_cost.json"))
    args = ap.parse_args(argv)
    old = subprocess.run(["git", "show", f"{args.old_rev}:echo_trace.pth"], cwd=REPO,
                         capture_output=True, text=True, check=True).stdout
    modes = {"none": "pass", "current": _pth_code((REPO / "echo_trace.pth").read_text()),
             "old": _pth_code(old)}
    env = dict(os.environ, TRACE_ON="1", PYTHONPATH=str(REPO))
    times: dict[str, list[float]] = {m: [] for m in modes}
    exec_ms: dict[str, list[float]] = {m: [] for m in modes}
    imported: dict[str, str] = {}
    for _ in range(args.reps):
        for mode, pth in modes.items():
            t0 = time.perf_counter()
            out = subprocess.run([sys.executable, "-c", PROBE.format(pth=pth)], env=env,
                                 capture_output=True, text=True, check=True)
            times[mode].append((time.perf_counter() - t0) * 1e3)
            dt, _, imported[mode] = out.stdout.strip().partition(" ")
            exec_ms[mode].append(float(dt))
    base = statistics.median(times["none"])
    result = {"load_avg_1m": os.getloadavg()[0], "cpus": os.cpu_count(), "reps": args.reps,
              "modes": {m: {"median_ms": statistics.median(t),
                            "excess_ms": statistics.median(t) - base,
                            "pth_exec_ms": statistics.median(exec_ms[m]),
                            "echo_trace_modules": imported[m]} for m, t in times.items()}}
    for m, r in result["modes"].items():
        print(f"{m:>8}: {r['median_ms']:.1f} ms ({r['excess_ms']:+.1f} ms; the .pth line "
              f"itself {r['pth_exec_ms']:.3f} ms), "
              f"imports [{r['echo_trace_modules']}]")
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=1, allow_nan=False) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
