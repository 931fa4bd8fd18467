"""Search: speed at scale, and predicted vs measured ranking of real 2-process layouts.

**speed** — ``echo_sim.search`` on ``synth`` GPT traces (H100 roofline, bf16, DGX-H100
nodes), the full space (dp, tp, pp, vpp, micro-batch, FSDP/DDP, recomputation, 1F1B /
GPipe / interleaved), ``--top`` exact, one process per case so each wall time is its own:
GPT-3 175B on 1,024 GPUs (global batch 1536; target <= 60 s on 2 cores) and GPT-1.3B
(24 layers, hidden 2048, 16 heads, seq 2048; global batch 512) on 32 and 64 GPUs (target
<= 5 s). ``--exhaustive`` also times every layout of the 1.3B/32 case and checks the pruned
best equals the exhaustive one.

**ranking** — for each model (examples' GPT, and an MLP-Mixer from
``benchmarks/workloads/search_models.py``, not in examples/): trace ``--trace-runs``
1-process runs at each of two micro-batch sizes (echo_trace capture, nine steps after three
of warm-up), measure the gloo collectives once (``profile-comm --nproc 2``, idle mode as in
accuracy.py), search the space {DDP, FSDP2, TP, PP(1F1B)} × micro-batch on 2 processes of
``cpu-gloo`` with simulate's batch fit over both micro-batches, from the runs pooled (each
op's median, as ``search PATH PATH ...`` pools them) and from the first run alone,
then run every layout for real under torchrun (2 processes, ``OMP_NUM_THREADS=1``; median
step time after ``--warmup`` steps, rank 0's clock; ``--reps`` repetitions, median). Reported:
Kendall tau-b between predicted and measured times, how far the measured time of the
predicted best is from the measured best, and whether their runs overlap.

Why pool: on a 2-core host one process's pace follows its page faults (glibc's allocator
history). The Mixer at micro-batch 32 took 106-113 ms a step uncaptured and 117-127 ms
captured, with 3.6-9.2 and 9.7-13.8 thousand minor faults a step (two runs each,
2026-11-29).

Usage::

    python benchmarks/search.py [--part speed|ranking|all] [--reps 1] [--steps 8]
        [--warmup 3] [--trace-runs 3] [--exhaustive] [--keep DIR]
        [--output benchmarks/results/search.json]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

__all__ = ["SPEED_CASES", "kendall_tau_b", "main", "ranking", "speed_case"]

GPT175 = dict(layers=96, hidden=12288, heads=96, seq=2048, vocab=51200)
GPT13 = dict(layers=24, hidden=2048, heads=16, seq=2048, vocab=51200)
# name -> (shape, gpus, global batch, target seconds)
SPEED_CASES: dict[str, tuple[dict[str, int], int, int, float]] = {
    "gpt175b-1024": (GPT175, 1024, 1536, 60.0),
    "gpt1.3b-32": (GPT13, 32, 512, 5.0),
    "gpt1.3b-64": (GPT13, 64, 512, 5.0),
}
MODELS: dict[str, dict[str, Any]] = {
    # train.py flags of the GPT; micro-batches; global batch
    "gpt": {"flags": ["--layers", "4", "--hidden", "128", "--heads", "4", "--seq", "64"],
            "micro_batches": (4, 8), "global_batch": 16},
    "mixer": {"flags": ["--layers", "4", "--hidden", "128"], "micro_batches": (16, 32),
              "global_batch": 64},
}
LAYOUTS = ("ddp", "fsdp", "tp", "pp")


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TRACE_")}
    env.update(OMP_NUM_THREADS="1", PYTHONPATH=str(REPO))
    return env


def _cpus() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 0


def _load() -> float:
    return os.getloadavg()[0] if hasattr(os, "getloadavg") else -1.0


# ----------------------------------------------------------------------------- speed
def speed_case(name: str, top: int, exhaustive: bool) -> dict[str, Any]:
    """One speed case in this process."""
    from echo_sim.search import SearchSpace, search
    from echo_sim.sim.synth import GPTShape, SynthConfig, synth_trace
    from echo_sim.workload.ops import extract_workload

    shape, gpus, gb, target = SPEED_CASES[name]
    wl = extract_workload(synth_trace(SynthConfig(model=GPTShape(**shape, micro_batch=1),
                                                  gpu="h100", dtype="bf16", steps=2)))
    space = SearchSpace(gpus=gpus, global_batch=gb, gpus_per_node=8, cluster="dgx-h100")
    load = _load()
    t0 = time.perf_counter()
    res = search(wl, space, top=top, workers=None)
    wall = time.perf_counter() - t0
    best = res.best
    out: dict[str, Any] = {
        "case": name, "gpus": gpus, "global_batch": gb, "model": shape, "top": top,
        "wall_s": round(wall, 2), "target_s": target, "load_avg_1min_before": load,
        "workers": res.workers, "enumerated": res.enumerated,
        "pruned_memory": res.pruned_memory, "pruned_bound": res.pruned_bound,
        "simulated": res.simulated, "probes": res.probes,
        "best": best.to_dict() if best else None,
    }
    if exhaustive:
        t0 = time.perf_counter()
        full = search(wl, space, prune=False, workers=None)
        out["exhaustive_wall_s"] = round(time.perf_counter() - t0, 2)
        out["exhaustive_best"] = full.best.layout.label if full.best else None
        out["best_equals_exhaustive"] = bool(best and full.best and
                                             best.layout == full.best.layout)
    return out


# ----------------------------------------------------------------------------- ranking
def kendall_tau_b(x: list[float], y: list[float]) -> float:
    """Kendall's tau-b of two paired samples (ties in either count as neither)."""
    conc = disc = tx = ty = 0
    n = len(x)
    for i in range(n):
        for j in range(i + 1, n):
            dx, dy = x[i] - x[j], y[i] - y[j]
            if dx == 0 and dy == 0:
                continue
            if dx == 0:
                tx += 1
            elif dy == 0:
                ty += 1
            elif (dx > 0) == (dy > 0):
                conc += 1
            else:
                disc += 1
    den = ((conc + disc + tx) * (conc + disc + ty)) ** 0.5
    return (conc - disc) / den if den else 0.0


def _run(cmd: list[str], timeout: float = 300) -> None:
    proc = subprocess.run(cmd, env=_env(), capture_output=True, text=True, timeout=timeout,
                          cwd=REPO)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({proc.returncode}):\n{proc.stderr[-2000:]}")


def _script(model: str) -> list[str]:
    if model == "gpt":
        return [str(REPO / "examples" / "train.py")]
    return [str(REPO / "benchmarks" / "workloads" / "search_models.py")]


# the one-process traces: steps TRACE_START..TRACE_END-1 of TRACE_END (accuracy.py's nine,
# after the same warm-up as the measured jobs); three steps after one of warm-up left the
# Mixer's mb32 trace at 102-127 ms a step and its mb16 trace 10-15 % slower per sample than
# the jobs it was to rank (2026-11-29)
TRACE_START, TRACE_END = 3, 12


def _trace(model: str, mb: int, out: Path) -> Path:
    spec = MODELS[model]
    window = ["--trace-start", str(TRACE_START), "--trace-end", str(TRACE_END)]
    cmd = [sys.executable, *_script(model), *spec["flags"], "--layout", "single",
           "--steps", str(TRACE_END), "--micro-batch", str(mb), "--global-batch", str(mb),
           "--capture", *(["--trace-dir", str(out)] if model == "gpt" else [str(out)]),
           *window]
    _run(cmd)
    return out


def _measure(model: str, layout: str, mb: int, steps: int, warmup: int, tmp: Path) -> float:
    from benchmarks.launch import free_port

    spec = MODELS[model]
    out = tmp / f"{model}-{layout}-{mb}.json"
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node=2",
           "--master_addr=127.0.0.1", f"--master_port={free_port()}", *_script(model),
           *spec["flags"], "--layout", layout, "--steps", str(steps), "--micro-batch", str(mb),
           "--global-batch", str(spec["global_batch"]), "--time-steps", str(out)]
    _run(cmd)
    return float(statistics.median(json.loads(out.read_text())["step_s"][warmup:]))


def _layout_name(lay: Any) -> str:
    if lay.tp > 1:
        return "tp"
    if lay.pp > 1:
        return "pp"
    return "fsdp" if lay.fsdp else "ddp"


def _ranked(model: str, runs: dict[int, list[tuple[str, Any]]],
            profile: str) -> dict[tuple[str, int], float]:
    """Predicted seconds per (layout, micro-batch): ``search`` from the (path, workload)
    runs traced at the small micro-batch (pooled when several: each op's median, as
    ``search PATH PATH ...``), the big one's runs pooled likewise for its batch fit."""
    from echo_sim.search import SearchSpace, search
    from echo_sim.workload.pool import pool_workloads

    spec = MODELS[model]
    small, big = spec["micro_batches"]
    pooled = [pool_workloads([w for _, w in runs[mb]],
                             [p for p, _ in runs[mb]] if len(runs[mb]) > 1 else None)
              for mb in (small, big)]
    space = SearchSpace(gpus=2, global_batch=spec["global_batch"], gpus_per_node=2,
                        cluster="cpu-gloo", dims=("tp", "pp", "fsdp", "micro-batch"),
                        micro_batch=(small, big), schedules=("1f1b",), recompute=("none",),
                        comm_profile=profile)
    res = search(pooled[0], space, prune=False, workers=1, top=len(LAYOUTS) * 2,
                 batch_traces=(pooled[1],))
    return {(_layout_name(c.layout), c.layout.micro_batch): c.iteration_time_us / 1e6
            for c in res.candidates}


def _judged(rows: list[dict[str, Any]], key: str) -> dict[str, Any]:
    """Kendall tau-b of ``key`` against the measured times, the predicted best, how far its
    measured time is from the measured best's, and whether their repetitions overlap (the
    predicted best within the measured best's spread)."""
    pred = [float(r[key]) for r in rows]
    meas = [float(r["measured_s"]) for r in rows]
    best_pred = min(rows, key=lambda r: float(r[key]))
    best_meas = min(rows, key=lambda r: float(r["measured_s"]))
    return {"kendall_tau_b": kendall_tau_b(pred, meas),
            "predicted_best": f"{best_pred['layout']} mb{best_pred['micro_batch']}",
            "predicted_best_vs_measured_best":
                float(best_pred["measured_s"]) / float(best_meas["measured_s"]) - 1.0,
            "predicted_best_within_spread":
                min(best_pred["measured_reps_s"]) <= max(best_meas["measured_reps_s"])}


def ranking(model: str, profile: str, reps: int, steps: int, warmup: int, tmp: Path,
            trace_runs: int = 1) -> dict[str, Any]:
    """Rank the layouts from ``trace_runs`` traced runs per micro-batch (pooled), and from
    the first run alone, then measure every layout ``reps`` times."""
    from echo_sim.load import load_trace
    from echo_sim.workload.traced import traced_workload

    spec = MODELS[model]
    paths = {mb: [_trace(model, mb, tmp / (f"{model}-trace-{mb}" + (f"-r{k}" if k else "")))
                  for k in range(trace_runs)] for mb in spec["micro_batches"]}
    runs = {mb: [(str(p), traced_workload(load_trace(str(p)))) for p in ps]
            for mb, ps in paths.items()}  # each trace read once, for both rankings
    pooled = _ranked(model, runs, profile)
    first = _ranked(model, {mb: r[:1] for mb, r in runs.items()}, profile) \
        if trace_runs > 1 else pooled
    rows: list[dict[str, Any]] = []
    for (name, mb), predicted in sorted(pooled.items(), key=lambda kv: kv[1]):
        measured = [_measure(model, name, mb, steps, warmup, tmp) for _ in range(reps)]
        rows.append({"layout": name, "micro_batch": mb, "predicted_s": predicted,
                     "predicted_one_trace_s": first[(name, mb)],
                     "measured_s": statistics.median(measured), "measured_reps_s": measured})
    return {"model": model, "global_batch": spec["global_batch"], "trace_runs": trace_runs,
            "rows": rows, **_judged(rows, "predicted_s"),
            "one_trace": _judged(rows, "predicted_one_trace_s")}


# ----------------------------------------------------------------------------- main
def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="search speed and ranking quality")
    ap.add_argument("--part", choices=["speed", "ranking", "all"], default="all",
                    help="which half to run (default all)")
    ap.add_argument("--cases", default=",".join(SPEED_CASES), help="speed cases to run")
    ap.add_argument("--top", type=int, default=10, help="layouts ranked exactly (default 10)")
    ap.add_argument("--exhaustive", action="store_true",
                    help="also time every layout of the gpt1.3b-32 case")
    ap.add_argument("--models", default=",".join(MODELS), help="ranking models")
    ap.add_argument("--reps", type=int, default=1, help="real runs per layout (default 1)")
    ap.add_argument("--steps", type=int, default=8, help="steps per real run (default 8)")
    ap.add_argument("--warmup", type=int, default=3, help="steps left out (default 3)")
    ap.add_argument("--trace-runs", type=int, default=3,
                    help="ranking: one-process runs traced per micro-batch, pooled as "
                         "`search PATH PATH ...` pools them (default 3; the first alone is "
                         "ranked too)")
    ap.add_argument("--keep", default=None, metavar="DIR",
                    help="ranking: keep the traces and the comm profile under DIR (another "
                         "version's search can then rank the same inputs: python -m echo_sim "
                         "search DIR/MODEL-trace-MB ...)")
    ap.add_argument("--case", default=None, help=argparse.SUPPRESS)  # child: one speed case
    ap.add_argument("--output", default=str(REPO / "benchmarks" / "results" / "search.json"),
                    help="results JSON")
    a = ap.parse_args(argv)
    if a.trace_runs < 1:
        ap.error(f"--trace-runs {a.trace_runs}: trace at least one run")
    if a.case:
        print(json.dumps(speed_case(a.case, a.top, a.exhaustive and a.case == "gpt1.3b-32")))
        return 0
    out: dict[str, Any] = {"benchmark": "search", "machine": {
        "python": platform.python_version(), "cpus": _cpus(), "processor": platform.processor(),
        "load_avg_1min_at_start": round(os.getloadavg()[0], 2),
        "note": "wall times and measured step times follow the host's load; "
                "load_avg_1min_before gives the load each speed case started under"}}
    if a.part in ("speed", "all"):
        rows = []
        for name in a.cases.split(","):
            cmd = [sys.executable, __file__, "--case", name, "--top", str(a.top)]
            if a.exhaustive:
                cmd.append("--exhaustive")
            proc = subprocess.run(cmd, env=_env(), capture_output=True, text=True, check=True)
            rows.append(json.loads(proc.stdout.strip().splitlines()[-1]))
        out["speed"] = rows
        print("| case | GPUs | layouts | pruned memory | pruned bound | simulated | wall s | "
              "target s | load | best | predicted s |")
        print("|---|---|---|---|---|---|---|---|---|---|---|")
        for r in rows:
            b = r["best"] or {}
            print(f"| {r['case']} | {r['gpus']} | {r['enumerated']} | {r['pruned_memory']} | "
                  f"{r['pruned_bound']} | {r['simulated']} | {r['wall_s']} | {r['target_s']} | "
                  f"{r['load_avg_1min_before']:.1f} | {b.get('label')} | "
                  f"{b.get('iteration_time_us', 0) / 1e6:.3f} |")
    if a.part in ("ranking", "all"):
        with tempfile.TemporaryDirectory() as d:
            tmp = Path(a.keep or d)
            tmp.mkdir(parents=True, exist_ok=True)
            profile = str(tmp / "comm.json")
            # the profile benchmarks/accuracy.py takes: idle mode, profile-comm's default
            # timed runs per size (60; 15 before 2026-11-27)
            _run([sys.executable, "-m", "echo_sim", "profile-comm", "--nproc", "2",
                  "--sizes", "1KB..16MB", "--no-progress", "-o", profile],
                 timeout=600)
            out["ranking"] = [ranking(m, profile, a.reps, a.steps, a.warmup, tmp,
                                      a.trace_runs) for m in a.models.split(",")]
        for r in out["ranking"]:
            for label, j in ((f"{r['trace_runs']} traced runs pooled", r),
                             ("the first traced run", r["one_trace"])):
                print(f"\n{r['model']}, {label}: Kendall tau-b {j['kendall_tau_b']:.2f}, "
                      f"predicted best {j['predicted_best']} is "
                      f"{j['predicted_best_vs_measured_best']:+.1%} from the measured best ("
                      + ("within" if j["predicted_best_within_spread"] else "outside")
                      + " its runs' spread)")
            print("| layout | micro-batch | predicted s (pooled) | predicted s (first run) | "
                  "measured s (runs) |\n|---|---|---|---|---|")
            for row in r["rows"]:
                runs = ", ".join(f"{x:.4f}" for x in row["measured_reps_s"])
                print(f"| {row['layout']} | {row['micro_batch']} | {row['predicted_s']:.4f} | "
                      f"{row['predicted_one_trace_s']:.4f} | {row['measured_s']:.4f} "
                      f"({runs}) |")
    path = Path(a.output)
    path.parent.mkdir(parents=True, exist_ok=True)
    old = json.loads(path.read_text()) if path.is_file() else {}
    if "speed" in out:  # keep earlier rows of cases not rerun
        done = {r["case"] for r in out["speed"]}
        out["speed"] = [r for r in old.get("speed", []) if r["case"] not in done] + out["speed"]
    old.update(out)
    path.write_text(json.dumps(old, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
