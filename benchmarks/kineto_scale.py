"""Kineto loader scale benchmark: load a synthetic 10^6-event PyTorch profiler trace.

Target (issue 11): ``load_trace`` of a 1,000,000-event Kineto trace in <= 15 s. The trace is
generated here with the profiler's own layout: ``ProfilerStep#N`` user annotations on the
main thread; per step, ``nn.Module: <Class>_<i>`` forward slices holding ``aten::`` ops,
``autograd::engine::evaluate_function:`` backward slices, NCCL ``record_param_comms`` with
``ncclDevKernel_AllReduce`` kernels, an ``Optimizer.step#SGD.step``; GPU kernels on two
streams mirrored by ``gpu_user_annotation`` ProfilerStep spans (as recent CUDA and ROCm
profiles have). With ``--hta`` the same file (and a real one, ``--real``) is also loaded with
HolisticTraceAnalysis when it is installed.

Usage::

    python benchmarks/kineto_scale.py [--events 1000000] [--steps 4] [--real FILE] [--hta]

Each measurement runs in a fresh process (its own peak RSS) and times the load call only
(imports excluded); CPU seconds include child processes. Writes
``benchmarks/results/kineto_scale.json``; wall and CPU seconds are both reported because the
machine may be shared (the load average is recorded).
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

import orjson

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:  # `python benchmarks/kineto_scale.py` from anywhere
    sys.path.insert(0, str(REPO))
from benchmarks.child import run_child  # noqa: E402

RESULTS = REPO / "benchmarks" / "results" / "kineto_scale.json"
TARGET_LOAD_S = 15.0

__all__ = ["generate", "main"]


def generate(path: Path, *, events: int = 1_000_000, steps: int = 4, rank: int = 0) -> int:
    """Write a Kineto-layout trace of about ``events`` X events; returns the count written."""
    out: list[dict[str, Any]] = []
    per_layer = 9  # X events per layer per micro-batch (5 forward, 4 backward)
    layers = max(1, events // (steps * per_layer * 2))
    t = 1_000_000.0
    pid, tid, bw_tid = 1, 1, 2

    def x(name: str, cat: str, ts: float, dur: float, th: int, **args: Any) -> None:
        e: dict[str, Any] = {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": th,
                             "ts": round(ts, 3), "dur": round(dur, 3)}
        if args:
            e["args"] = args
        out.append(e)

    for s in range(steps):
        step_start = t
        gpu_t = t + 5.0
        gpu_start = gpu_t
        for i in range(layers * 2):  # two micro-batches per step
            x(f"nn.Module: Linear_{i % layers}", "python_function", t, 9.0, tid)
            x("aten::linear", "cpu_op", t + 0.5, 8.0, tid, **{"Input Dims": [[64, 256], [256, 256]]})
            x("aten::addmm", "cpu_op", t + 1.0, 6.0, tid)
            x("cudaLaunchKernel", "cuda_runtime", t + 2.0, 3.0, tid)
            x("ampere_sgemm_64x64_nn", "kernel", gpu_t, 6.0, 7 + i % 2)
            gpu_t += 6.0
            t += 10.0
        for i in reversed(range(layers * 2)):
            x("autograd::engine::evaluate_function: AddmmBackward0", "cpu_op", t, 9.0, bw_tid)
            x("AddmmBackward0", "cpu_op", t + 0.5, 8.0, bw_tid)
            x("aten::mm", "cpu_op", t + 1.0, 6.0, bw_tid)
            x("ampere_sgemm_64x64_tn", "kernel", gpu_t, 7.0, 7 + i % 2)
            gpu_t += 7.0
            if i % 16 == 0:
                x("record_param_comms", "cpu_op", t + 8.0, 1.0, bw_tid,
                  **{"Collective name": "allreduce", "In msg nelems": 65536,
                     "Out msg nelems": 65536, "dtype": "Float", "Process Group Ranks": "[0]"})
                x("ncclDevKernel_AllReduce_Sum_f32_RING_LL", "kernel", gpu_t, 20.0, 20,
                  **{"Collective name": "allreduce", "In msg nelems": 65536,
                     "Out msg nelems": 65536, "dtype": "Float", "Process Group Ranks": "[0]"})
            t += 10.0
        x("Optimizer.step#SGD.step", "user_annotation", t, 50.0, tid)
        t += 60.0
        x(f"ProfilerStep#{s}", "user_annotation", step_start, t - step_start, tid)
        for stream in (7, 8):  # GPU mirrors: cover only their stream's kernels
            x(f"ProfilerStep#{s}", "gpu_user_annotation", gpu_start, (gpu_t - gpu_start) / 2,
              stream)
        t = max(t, gpu_t) + 100.0
    doc = {"schemaVersion": 1, "distributedInfo": {"backend": "nccl", "rank": rank,
                                                   "world_size": 1},
           "deviceProperties": [], "traceEvents": out, "baseTimeNanoseconds": 1_700_000_000}
    data = orjson.dumps(doc)
    if path.suffix == ".gz":
        data = gzip.compress(data, 1)
    path.write_bytes(data)
    return len(out)


_CHILD = r"""
import json, os, resource, sys, time

def cpu():
    a, b = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return a.ru_utime + a.ru_stime + b.ru_utime + b.ru_stime

if sys.argv[1] == "echo":
    from echo_sim.load import load_trace
    from echo_sim.analysis.statistic import step_grid
    t0 = time.perf_counter(); c0 = cpu()
    tr = load_trace(sys.argv[2], progress=False)
    wall, cpu_s = time.perf_counter() - t0, cpu() - c0
    n = len(tr.events)
    it = [float(v) for v in step_grid(tr).iteration_us]
else:
    from hta.trace_analysis import TraceAnalysis
    t0 = time.perf_counter(); c0 = cpu()
    ta = TraceAnalysis(trace_dir=os.path.dirname(sys.argv[2]) or ".")
    wall, cpu_s = time.perf_counter() - t0, cpu() - c0
    n = sum(len(t) for t in ta.t.traces.values())
    it = []
def peak():
    # VmHWM, not ru_maxrss: Linux keeps ru_maxrss across fork+exec, so a child started by
    # a big parent would report the parent's peak
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024

print(json.dumps({"wall_s": wall, "cpu_s": cpu_s, "peak_rss_mb": peak(),
                  "rows": n, "iteration_us": it}))
"""


def measure(tool: str, path: Path, hta_path: str = "") -> dict[str, Any]:
    """Load ``path`` with echo_sim (``tool="echo"``) or HTA in a fresh process (HTA loads
    every trace in ``path``'s directory: give it a directory of one file)."""
    py_path = os.pathsep.join(p for p in (str(REPO), hta_path) if p)
    return run_child(_CHILD, tool, str(path), pythonpath=py_path, timeout_s=900)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--events", type=int, default=1_000_000)
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--real", type=Path, help="a real profiler trace to load as well")
    ap.add_argument("--hta", action="store_true", help="also load with HolisticTraceAnalysis")
    ap.add_argument("--hta-path", default="", help="directory HTA was pip-installed into "
                    "(pip install --target DIR --no-deps HolisticTraceAnalysis pandas ...)")
    args = ap.parse_args(argv)
    results: dict[str, Any] = {"load_average": os.getloadavg(), "cores": os.cpu_count(),
                               "target_load_s": TARGET_LOAD_S}
    with tempfile.TemporaryDirectory() as tmp:
        f = Path(tmp) / "synthetic" / "rank0.json"
        f.parent.mkdir()
        results["synthetic_events"] = generate(f, events=args.events, steps=args.steps)
        results["synthetic_mb"] = round(f.stat().st_size / 2**20, 1)
        results["echo_synthetic"] = measure("echo", f)
        if args.hta:
            results["hta_synthetic"] = measure("hta", f, args.hta_path)
    if args.real is not None:
        results["real"] = str(args.real)
        results["echo_real"] = measure("echo", args.real)
        if args.hta:
            results["hta_real"] = measure("hta", args.real, args.hta_path)
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(results, indent=1))
    print(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
