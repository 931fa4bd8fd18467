"""Is this host quiet enough to compare one run with another? A pinned compute probe.

    python benchmarks/host_pace.py [--cores 2,3,10] [--phase-s 15] [--output FILE]

A prediction made from a trace taken at one moment is checked against a job run minutes later
(``benchmarks/accuracy.py``); the check can be no finer than the host's own pace holds between
those moments. This probe measures that pace directly, with nothing of echo in it: a worker
process pinned to one core (``os.sched_setaffinity``, one torch thread) times blocks of a fixed
amount of work (40 products of two 256 × 256 fp32 matrices, about 50 ms on the development VM)
for ``--phase-s`` seconds. Phases, one after another, with the cores ``A,B,C`` of ``--cores``:

* ``solo``: one worker on A;
* ``pair``: workers on A and B at once (the two cores the accuracy benchmark pins its ranks
  to: two vCPUs that may share a physical core, which a guest cannot see);
* ``apart``: workers on A and C at once (a core far from A);
* ``solo-again``: one worker on A, to show drift over the probe.

Per phase and worker: the median block time, its 10th and 90th percentile, and the **drift**:
the blocks grouped into seconds, (max − min) / median of the per-second medians, in %. A host
is quiet for the accuracy benchmark when each phase's drift and the solo / solo-again
difference are well under the 10 % it is asked to resolve, and ``pair`` is no slower than
``solo`` (else two ranks on A, B do not run at the pace one traced process did).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

WORK = 40  # matrix products per timed block
N = 256  # matrix side


def _worker(core: int, start: float, end: float, out: Any) -> None:
    os.sched_setaffinity(0, {core})
    import torch

    torch.set_num_threads(1)
    a, b = torch.randn(N, N), torch.randn(N, N)
    for _ in range(5):
        a @ b
    while time.time() < start:
        time.sleep(0.001)
    blocks: list[tuple[float, float]] = []
    while (now := time.time()) < end:
        t = time.perf_counter()
        for _ in range(WORK):
            a @ b
        blocks.append((now - start, (time.perf_counter() - t) * 1e3))
    out.put((core, blocks))


def _summary(blocks: list[tuple[float, float]]) -> dict[str, float]:
    times = sorted(ms for _, ms in blocks)
    per_s: dict[int, list[float]] = {}
    for t, ms in blocks:
        per_s.setdefault(int(t), []).append(ms)
    meds = [statistics.median(v) for v in per_s.values() if len(v) >= 3]
    med = statistics.median(times)
    return {"blocks": len(times), "median_ms": round(med, 3),
            "p10_ms": round(times[len(times) // 10], 3),
            "p90_ms": round(times[(9 * len(times)) // 10], 3),
            "drift_pct": round(100 * (max(meds) - min(meds)) / med, 1) if meds else 0.0}


def run_phase(cores: list[int], seconds: float) -> dict[str, Any]:
    """Workers on ``cores`` at once for ``seconds``; one summary per core."""
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    start = time.time() + 4.0  # every worker has imported torch by then
    procs = [ctx.Process(target=_worker, args=(c, start, start + seconds, out)) for c in cores]
    for p in procs:
        p.start()
    got = dict(out.get(timeout=seconds + 60) for _ in procs)
    for p in procs:
        p.join()
    return {str(c): _summary(got[c]) for c in cores}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--cores", default="2,3,10",
                   help="A,B,C: the solo core, its pair partner, a far core (default 2,3,10)")
    p.add_argument("--phase-s", type=float, default=15.0, help="seconds per phase (default 15)")
    p.add_argument("--output", default="", help="also write the result JSON here")
    a = p.parse_args(argv)
    try:
        core_a, core_b, core_c = (int(c) for c in a.cores.split(","))
    except ValueError:
        p.error(f"--cores {a.cores!r}: three core numbers A,B,C")
    have = os.sched_getaffinity(0)
    missing = {core_a, core_b, core_c} - have
    if missing:
        p.error(f"--cores {a.cores}: cores {sorted(missing)} not available (have {sorted(have)})")
    if not 1 <= a.phase_s <= 600:
        p.error(f"--phase-s {a.phase_s}: 1..600")
    phases = [("solo", [core_a]), ("pair", [core_a, core_b]), ("apart", [core_a, core_c]),
              ("solo-again", [core_a])]
    doc: dict[str, Any] = {"cores": [core_a, core_b, core_c], "phase_s": a.phase_s,
                           "load_avg_before": os.getloadavg(), "phases": {}}
    print("| phase | core | blocks | median ms | p10 | p90 | drift % |")
    print("|---|---|---|---|---|---|---|")
    for name, cores in phases:
        res = run_phase(cores, a.phase_s)
        doc["phases"][name] = res
        for core, s in res.items():
            print(f"| {name} | {core} | {s['blocks']} | {s['median_ms']:.2f} | {s['p10_ms']:.2f} "
                  f"| {s['p90_ms']:.2f} | {s['drift_pct']:.1f} |", flush=True)
    doc["load_avg_after"] = os.getloadavg()
    solo = doc["phases"]["solo"][str(core_a)]["median_ms"]
    for name in ("pair", "apart", "solo-again"):
        m = doc["phases"][name][str(core_a)]["median_ms"]
        print(f"{name} vs solo on core {core_a}: {100 * (m / solo - 1):+.1f} %")
    if a.output:
        Path(a.output).write_text(json.dumps(doc, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
