"""What a DDP step pays on a shared host: its bucket all-reduces and buffer broadcast, stamped.

    python benchmarks/ddp_step_stamps.py [--sizes gpt-s,bert,resnet] [--steps 20] [--warmup 3]
        [--output FILE] [--keep DIR]

DDP's bucket all-reduces run in its C++ reducer, where ``benchmarks/accuracy.py``'s worker
cannot stamp them. This probe runs the same real 2-process gloo jobs (the accuracy benchmark's
worker and model sizes, ``OMP_NUM_THREADS=1``) with a **Python comm hook that copies DDP's
default one** (``torch/distributed/algorithms/ddp_comm_hooks/default_hooks.py``: divide the
bucket by the world size, all-reduce it asynchronously) and stamps, on the host's monotonic
clock the processes share, when each bucket is ready (the hook's call, on the compute thread)
and when its all-reduce completes (a callback on its future, on gloo's thread), when the
backward starts and returns, and the buffer broadcast before each forward
(``DistributedDataParallel._sync_buffers``). A Python hook is not the job's C++ one: its
callback takes the GIL on gloo's thread; read the figures as the job's shape, not its exact
price. Per step, on the rank whose step took longest (the one the step time is):

* ``step_ms``, ``cpu_ms``, ``runqueue_ms``, ``comm_threads_cpu_ms``: its step, its compute
  thread's CPU and wait for a core, its other threads' CPU (``benchmarks/accuracy.py``'s);
* per bucket ``k`` (in the order DDP issues them): ``bucket{k}_half_gap_ms`` (half the ranks'
  arrival gap: what the step pays for the later rank over the typical one) and
  ``bucket{k}_after_both_ms`` (both ranks ready to the all-reduce's completion, the ranks'
  mean: the transfer, queued behind earlier buckets, at the host's pace);
* ``hooks_interval_ms`` (rank 0, rank 1): first bucket ready to last bucket ready, the
  backward's compute while the earlier buckets' all-reduces run beside it;
* ``tail_ms``: last bucket ready to the backward's return on the slowest rank;
* ``buffers_ms``: its buffer broadcast (models with buffers: BatchNorm), and
  ``buffers_stalled_pct``: steps where a rank's broadcast took >= 2 ms more than the fastest
  one of the run.

Means and medians over the steps after ``--warmup``; every step's row is kept in the JSON.
``echo_sim simulate``'s timeline of a trace of the same job prices the same quantities (its
``--output`` trace's ``Comm.ddp.*`` events), which is how the README compares them.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: the repository root importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.accuracy import SIZES, WORKLOAD_MODULE, _train_flags  # noqa: E402

__all__ = ["main", "summarize"]

SCRIPT = Path(__file__).resolve()
STALL_US = 2000.0  # a broadcast this much over the run's fastest counts as stalled


def _install(events: list[tuple[str, int, float]]) -> None:
    """Stamp DDP's buckets, buffer broadcast and backward into ``events`` (kind, bucket, µs)."""
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel

    def now() -> float:
        return time.perf_counter() * 1e6

    # DDP checks a hook's signature: a parameter named ``bucket``, and no annotation but the
    # real types (this module's annotations are strings)
    def hook(state, bucket):  # type: ignore[no-untyped-def]
        i = bucket.index()
        events.append(("ready", i, now()))
        buf = bucket.buffer()
        buf.div_(dist.get_world_size())
        fut = dist.all_reduce(buf, async_op=True).get_future()

        def done(f: Any) -> Any:
            events.append(("done", i, now()))
            return f.value()[0]

        return fut.then(done)

    init = DistributedDataParallel.__init__

    def stamped_init(self: Any, *args: Any, **kwargs: Any) -> None:
        init(self, *args, **kwargs)
        self.register_comm_hook(None, hook)

    def around(fn: Any, start: str, end: str) -> Any:
        def stamped(*args: Any, **kwargs: Any) -> Any:
            events.append((start, -1, now()))
            try:
                return fn(*args, **kwargs)
            finally:
                events.append((end, -1, now()))

        return stamped

    DistributedDataParallel.__init__ = stamped_init  # type: ignore[method-assign]
    DistributedDataParallel._sync_buffers = around(  # type: ignore[method-assign]
        DistributedDataParallel._sync_buffers, "sync0", "sync1")
    torch.autograd.backward = around(torch.autograd.backward, "bw0", "bw1")


def _worker(argv: list[str]) -> int:
    """``--worker OUT_DIR MODULE FLAGS...``: the accuracy benchmark's worker, stamped; also
    writes ``stamps<rank>.json``."""
    from benchmarks import accuracy

    events: list[tuple[str, int, float]] = []
    _install(events)
    try:
        return accuracy._worker(argv)
    finally:
        rank = int(os.environ.get("RANK", "0"))
        (Path(argv[0]) / f"stamps{rank}.json").write_text(json.dumps(events))


def _steps(events: list[list[Any]]) -> list[dict[str, Any]]:
    """One dict per backward: its start/return, each bucket's ready/done, and the buffer
    broadcast of the forward before it (if any)."""
    out: list[dict[str, Any]] = []
    pending: dict[str, float] = {}
    for kind, i, t in events:
        if kind in ("sync0", "sync1"):
            pending[kind] = t
        elif kind == "bw0":
            out.append({"bw0": t, "ready": {}, "done": {}, **pending})
            pending = {}
        elif out and kind in ("ready", "done"):
            out[-1][kind][int(i)] = t
        elif out and kind == "bw1":
            out[-1]["bw1"] = t
    return out


def summarize(stamps: list[list[list[Any]]], recs: list[dict[str, Any]],
              warmup: int) -> dict[str, Any]:
    """The module's quantities per step and their means and medians (ms) from both ranks'
    stamps and worker records."""
    per = [_steps(s) for s in stamps]
    n = min(min(len(p) for p in per), min(len(r["step_s"]) for r in recs))
    syncs = [s["sync1"] - s["sync0"] for p in per for s in p[warmup:n] if "sync0" in s]
    fastest = min(syncs) if syncs else 0.0
    rows = []
    for j in range(warmup, n):
        a, b = per[0][j], per[1][j]
        if not a["ready"] or set(a["ready"]) != set(b["ready"]) or "bw1" not in a \
                or "bw1" not in b:
            continue
        slow = max((0, 1), key=lambda r: recs[r]["step_s"][j])
        s, rec = per[slow][j], recs[slow]
        row: dict[str, float] = {
            "step_ms": rec["step_s"][j] * 1e3, "cpu_ms": rec["step_cpu_s"][j] * 1e3,
            "runqueue_ms": (rec.get("step_runqueue_s") or [0.0] * n)[j] * 1e3,
            "comm_threads_cpu_ms": (rec.get("step_other_threads_cpu_s") or [0.0] * n)[j] * 1e3,
            "tail_ms": (s["bw1"] - max(s["ready"].values())) / 1e3}
        for k in sorted(a["ready"]):
            both = max(a["ready"][k], b["ready"][k])
            row[f"bucket{k}_half_gap_ms"] = abs(a["ready"][k] - b["ready"][k]) / 2e3
            if k in a["done"] and k in b["done"]:
                row[f"bucket{k}_after_both_ms"] = (
                    (a["done"][k] + b["done"][k]) / 2 - both) / 1e3
        first, last = min(a["ready"]), max(a["ready"])
        for r, x in enumerate((a, b)):
            row[f"hooks_interval_rank{r}_ms"] = (x["ready"][last] - x["ready"][first]) / 1e3
        if "sync0" in s and "sync0" in a and "sync0" in b:
            row["buffers_ms"] = (s["sync1"] - s["sync0"]) / 1e3
            row["buffers_stalled"] = float(any(
                x["sync1"] - x["sync0"] >= fastest + STALL_US for x in (a, b)))
        rows.append(row)
    keys = sorted({k for r in rows for k in r})
    stats = {k: {"mean": statistics.fmean(v), "median": statistics.median(v)}
             for k in keys if (v := [r[k] for r in rows if k in r])}
    if "buffers_stalled" in stats:
        stats["buffers_stalled_pct"] = {"mean": 100.0 * stats.pop("buffers_stalled")["mean"]}
    return {"steps": len(rows), "stats": stats, "rows": rows}


def _run(size: str, steps: int, warmup: int, out: Path, timeout: float) -> dict[str, Any]:
    from benchmarks.launch import run_torchrun

    flags = _train_flags("ddp", size, steps=steps, capture=None, nproc=2)
    module = WORKLOAD_MODULE.get(size, "examples.train")
    proc = run_torchrun([str(SCRIPT), "--worker", str(out), module, *flags], nproc=2,
                        timeout=timeout)
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
        raise RuntimeError(f"ddp/{size}: exit {proc.returncode}: {' | '.join(tail)}")
    recs = [json.loads((out / f"rank{r}.json").read_text()) for r in range(2)]
    stamps = [json.loads((out / f"stamps{r}.json").read_text()) for r in range(2)]
    return summarize(stamps, recs, warmup)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["--worker"]:
        return _worker(argv[1:])
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog="See the module docstring for every quantity.")
    p.add_argument("--sizes", default="gpt-s,bert,resnet",
                   help=f"comma list of the accuracy benchmark's sizes ({', '.join(SIZES)}; "
                        "default gpt-s,bert,resnet)")
    p.add_argument("--steps", type=int, default=20, help="steps per job (default 20)")
    p.add_argument("--warmup", type=int, default=3, help="steps left out (default 3)")
    p.add_argument("--timeout", type=float, default=300.0, help="seconds per job")
    p.add_argument("--keep", type=Path, default=None, help="keep the jobs' records here")
    p.add_argument("--output", type=Path,
                   default=Path("benchmarks/results/ddp_step_stamps.json"))
    a = p.parse_args(argv)
    sizes = [s for s in a.sizes.split(",") if s]
    bad = [s for s in sizes if s not in SIZES]
    if bad or a.steps <= a.warmup + 1:
        p.error(f"unknown size(s) {bad}" if bad else "--steps must exceed --warmup + 1")
    import tempfile

    doc: dict[str, Any] = {"benchmark": "ddp_step_stamps", "date": time.strftime(
        "%Y-%m-%dT%H:%M:%S"), "machine": {"python": platform.python_version(),
                                          "cpu_count": os.cpu_count(),
                                          "load_avg_1min_before": os.getloadavg()[0]},
        "steps": a.steps, "warmup": a.warmup, "models": {}}
    with tempfile.TemporaryDirectory() as tmp:
        root = a.keep or Path(tmp)
        for size in sizes:
            got = _run(size, a.steps, a.warmup, root / size, a.timeout)
            doc["models"][size] = got
            print(f"ddp/{size}: {got['steps']} steps")
            for k, v in got["stats"].items():
                med = f"  median {v['median']:7.2f}" if "median" in v else ""
                print(f"  {k:28s} mean {v['mean']:7.2f}{med}")
    doc["machine"]["load_avg_1min_after"] = os.getloadavg()[0]
    a.output.parent.mkdir(parents=True, exist_ok=True)
    a.output.write_text(json.dumps(doc, indent=1))
    print(f"wrote {a.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
