"""Simulation speed: one iteration of a GPT-175B-shaped job at 128 / 1,024 / 8,192 GPUs.

The workload is ``echo_sim.sim.synth``'s one-GPU trace of GPT-3 175B (96 layers, hidden 12288,
96 heads, sequence 2048, vocabulary 51200, micro-batch 1, bf16, H100 roofline) laid out 3D
on DGX-H100 nodes: TP 8 inside a node, PP 8, DP filling the rest, global batch 1536
(Narayanan et al. 2021's 175B setting), 1F1B. Each case runs in a fresh process so its
wall time (trace extraction + graph build + engine run + breakdown + memory) and peak RSS
are its own. Symmetric mode simulates one rank per pipeline stage; one smaller case also
runs ``--mode full`` (every rank) to show what symmetry saves.

Targets: <= 10 s at 1,024 GPUs, <= 60 s at 8,192, peak memory < 4 GB.

Usage::

    python benchmarks/sim_speed.py [--cases 128,1024,8192,full64]

Prints a markdown table and writes ``benchmarks/results/sim_speed.json``.
"""

from __future__ import annotations

import argparse
import json
import platform
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

__all__ = ["CASES", "main", "run_case"]

# name -> (dp, tp, pp, global batch, mode)
CASES: dict[str, tuple[int, int, int, int, str]] = {
    "128": (2, 8, 8, 1536, "symmetric"),
    "1024": (16, 8, 8, 1536, "symmetric"),
    "8192": (128, 8, 8, 1536, "symmetric"),
    "full64": (1, 8, 8, 64, "full"),
}
TARGET_S = {"1024": 10.0, "8192": 60.0}
SHAPE = dict(layers=96, hidden=12288, heads=96, seq=2048, vocab=51200, micro_batch=1)


def run_case(name: str) -> dict[str, Any]:
    """Run one case in this process; returns its figures."""
    from echo_sim.sim.simulate import SimConfig, simulate
    from echo_sim.sim.synth import GPTShape, SynthConfig, synth_trace

    dp, tp, pp, gb, mode = CASES[name]
    trace = synth_trace(SynthConfig(model=GPTShape(**SHAPE), gpu="h100", dtype="bf16", steps=2))
    t0 = time.perf_counter()
    res = simulate(trace, SimConfig(dp=dp, tp=tp, pp=pp, micro_batch=1, global_batch=gb,
                                    schedule="1f1b", cluster="dgx-h100", mode=mode),
                   keep=False)
    wall = time.perf_counter() - t0
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux: KiB
    return {"case": name, "gpus": dp * tp * pp, "dp": dp, "tp": tp, "pp": pp,
            "global_batch": gb, "micro_batches": res.micro_batches, "mode": mode,
            "simulated_ranks": len(res.simulated_ranks), "tasks": res.num_tasks,
            "wall_s": round(wall, 3), "peak_rss_bytes": int(rss),
            "predicted_iteration_s": round(res.iteration_time_us / 1e6, 4),
            "predicted_peak_memory_gib": round(res.max_peak_memory_bytes / 2**30, 2),
            "target_s": TARGET_S.get(name)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python benchmarks/sim_speed.py",
        description="Simulation speed: one iteration of a GPT-175B-shaped job at several GPU "
                    "counts, each case in a fresh process (wall time, peak RSS); writes "
                    "benchmarks/results/sim_speed.json.")
    ap.add_argument("--cases", default=",".join(CASES),
                    help=f"cases to run (default {','.join(CASES)})")
    ap.add_argument("--case", help=argparse.SUPPRESS)  # child process: one case, JSON out
    a = ap.parse_args(sys.argv[1:] if argv is None else argv)
    if a.case:
        print(json.dumps(run_case(a.case)))
        return 0
    names = [n for n in a.cases.split(",") if n]
    bad = [n for n in names if n not in CASES]
    if bad:
        ap.error(f"--cases: unknown {', '.join(bad)}; valid: {', '.join(CASES)}")
    rows = []
    for name in names:
        out = subprocess.run([sys.executable, __file__, "--case", name], capture_output=True,
                             text=True, check=True, env={"OMP_NUM_THREADS": "1",
                                                         "PATH": "/usr/bin:/bin"})
        rows.append(json.loads(out.stdout.strip().splitlines()[-1]))
    print("| case | GPUs | dp x tp x pp | micro-batches | mode | simulated ranks | tasks | "
          "wall s | target s | peak RSS MiB | predicted iteration s | predicted peak GiB |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['case']} | {r['gpus']} | {r['dp']} x {r['tp']} x {r['pp']} | "
              f"{r['micro_batches']} | {r['mode']} | {r['simulated_ranks']} | {r['tasks']} | "
              f"{r['wall_s']:.2f} | {r['target_s'] or '-'} | {r['peak_rss_bytes'] / 2**20:.0f} | "
              f"{r['predicted_iteration_s']:.3f} | {r['predicted_peak_memory_gib']:.1f} |")
    out_dir = REPO / "benchmarks" / "results"
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "sim_speed.json").write_text(json.dumps({
        "benchmark": "sim_speed", "model": {"name": "gpt-175b", **SHAPE},
        "cluster": "dgx-h100", "machine": {"python": platform.python_version(),
                                            "processor": platform.processor(),
                                            "cpus": _cpus()},
        "rows": rows}, indent=1) + "\n")
    return 0


def _cpus() -> int:
    import os

    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 0


if __name__ == "__main__":
    raise SystemExit(main())
