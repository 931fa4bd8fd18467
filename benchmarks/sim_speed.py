"""Simulation speed: one iteration of a GPT-175B-shaped job at 128 / 1,024 / 8,192 GPUs.

The workload is ``echo_sim.sim.synth``'s one-GPU trace of GPT-3 175B (96 layers, hidden 12288,
96 heads, sequence 2048, vocabulary 51200, micro-batch 1, bf16, H100 roofline) laid out 3D
on DGX-H100 nodes: TP 8 inside a node, PP 8, DP filling the rest, global batch 1536
(Narayanan et al. 2021's 175B setting), 1F1B. Each case runs in a fresh process so its
wall time (trace extraction + graph build + engine run + breakdown + memory) and peak RSS
are its own. Symmetric mode simulates one rank per pipeline stage; one smaller case also
runs ``--mode full`` (every rank) to show what symmetry saves.

Targets: <= 10 s at 1,024 GPUs, <= 60 s at 8,192, peak memory < 4 GB.

``--steps-sweep 5000,20000,40000`` instead times the command a user runs,
``python -m echo_sim simulate DIR``, on one-rank traces of ``benchmarks/gen_trace.py`` with
that many captured steps (3 leaf modules, one DDP bucket: 9 events per step, the size of
``tests/data/load/echo_2rank``'s steps), each in a fresh process: the workload is the median
over every captured step, so its cost must grow linearly with them (target <= 5 s at 40 k).

Usage::

    python benchmarks/sim_speed.py [--cases 128,1024,8192,full64]
    python benchmarks/sim_speed.py --steps-sweep 5000,20000,40000 [--sweep-dir DIR]

Prints a markdown table and writes ``benchmarks/results/sim_speed.json`` (the sweep:
``benchmarks/results/sim_speed_steps.json``).
"""

from __future__ import annotations

import argparse
import json
import os
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
STEPS_TARGET_S = {40_000: 5.0}
EVENTS_PER_STEP = 9  # gen_trace with 1 bucket: 3 FW + 3 BW + Comm + UPDATE + STEP
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


def _load() -> float:
    return round(os.getloadavg()[0], 2) if hasattr(os, "getloadavg") else -1.0


def steps_sweep(counts: list[int], work: Path, *, timeout_s: float) -> list[dict[str, Any]]:
    """Time ``python -m echo_sim simulate`` on a generated trace of each step count."""
    from benchmarks.gen_trace import generate

    rows = []
    for steps in counts:
        trace = work / f"steps{steps}"
        if not (trace / "0_0" / "meta.json").exists():
            generate(trace, ranks=1, events=steps * EVENTS_PER_STEP, steps=steps, buckets=1)
        load_before = _load()
        t0 = time.perf_counter()
        try:
            out = subprocess.run([sys.executable, "-m", "echo_sim", "simulate", str(trace)],
                                 capture_output=True, text=True, timeout=timeout_s, cwd=REPO,
                                 env={"OMP_NUM_THREADS": "1", "PATH": "/usr/bin:/bin"})
            rc: int | None = out.returncode
        except subprocess.TimeoutExpired:
            rc = None
        wall = time.perf_counter() - t0
        if rc not in (0, None):
            raise RuntimeError(f"simulate on {steps} steps exited {rc}: {out.stderr[-500:]}")
        rows.append({"steps": steps, "events": steps * EVENTS_PER_STEP,
                     "wall_s": round(wall, 3) if rc == 0 else None,
                     "timed_out_after_s": None if rc == 0 else timeout_s,
                     "target_s": STEPS_TARGET_S.get(steps),
                     "load_avg_1m_before": load_before, "load_avg_1m_after": _load()})
    return rows


def _sweep_main(a: argparse.Namespace, ap: argparse.ArgumentParser) -> int:
    import tempfile

    try:
        counts = [int(n) for n in a.steps_sweep.split(",") if n]
    except ValueError:
        ap.error(f"--steps-sweep {a.steps_sweep!r}: expected step counts like 5000,20000")
    if not counts or any(not 1 <= n <= 1_000_000 for n in counts):
        ap.error("--steps-sweep: each count must be in 1..1000000")
    with tempfile.TemporaryDirectory(prefix="sim_steps_") as tmp:
        work = Path(a.sweep_dir) if a.sweep_dir else Path(tmp)
        rows = steps_sweep(counts, work, timeout_s=a.sweep_timeout)
    print(f"cpus {_cpus()}; `python -m echo_sim simulate DIR`, one rank, "
          f"{EVENTS_PER_STEP} events per step")
    print("| steps | events | wall s | target s | 1-min load before / after |")
    print("|---|---|---|---|---|")
    for r in rows:
        wall = f"{r['wall_s']:.2f}" if r["wall_s"] is not None else \
            f"> {r['timed_out_after_s']:g} (stopped)"
        print(f"| {r['steps']:,} | {r['events']:,} | {wall} | {r['target_s'] or '-'} | "
              f"{r['load_avg_1m_before']} / {r['load_avg_1m_after']} |")
    out_dir = REPO / "benchmarks" / "results"
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "sim_speed_steps.json").write_text(json.dumps({
        "benchmark": "sim_speed --steps-sweep", "command": "python -m echo_sim simulate DIR",
        "machine": {"python": platform.python_version(), "cpus": _cpus()},
        "rows": rows}, indent=1) + "\n")
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python benchmarks/sim_speed.py",
        description="Simulation speed: one iteration of a GPT-175B-shaped job at several GPU "
                    "counts, each case in a fresh process (wall time, peak RSS); writes "
                    "benchmarks/results/sim_speed.json.")
    ap.add_argument("--cases", default=",".join(CASES),
                    help=f"cases to run (default {','.join(CASES)})")
    ap.add_argument("--case", help=argparse.SUPPRESS)  # child process: one case, JSON out
    ap.add_argument("--steps-sweep", metavar="N,N,...",
                    help="instead: time `python -m echo_sim simulate` on one-rank traces of "
                         "these many captured steps (e.g. 5000,20000,40000); writes "
                         "benchmarks/results/sim_speed_steps.json")
    ap.add_argument("--sweep-dir", help="keep the generated sweep traces here (reused when "
                                        "present; default: a temporary directory)")
    ap.add_argument("--sweep-timeout", type=float, default=600.0,
                    help="stop a sweep run after this many seconds (default 600)")
    a = ap.parse_args(sys.argv[1:] if argv is None else argv)
    if a.steps_sweep:
        return _sweep_main(a, ap)
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
