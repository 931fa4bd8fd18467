"""Does what precedes a collective change what it costs on this host? An interleaved probe.

    python benchmarks/collective_after_work.py [--ops all_reduce,all_gather]
        [--sizes 256KB,680KB,1160KB] [--modes barrier,work5,work20,b2b] [--runs 20]
        [--rounds 3] [--nproc 2] [--output FILE]

``profile-comm`` times each collective after a barrier (idle mode), or after a fixed amount of
compute (``--busy-us``); a training job meets its collectives straight from compute of its own
length. On a host whose ranks share CPU cores (gloo on CPU) that changes how often a call
stalls for milliseconds, and in which direction depends on the host: on the 2-core VM of
2026-11-27 a 774 KiB all-gather stalled in 24-30 % of runs after a barrier and in 3-12 % after
0.5-8 ms of compute (``echo_sim.measure.profile_comm``'s docstring); on the quieter host of
2026-11-29 an all-reduce of 256 KiB-1.2 MiB ran ~0.3-0.8 ms after a barrier and ~3.5 ms after
20 ms of compute (its median). This probe measures it for this host, with nothing of echo's
models in it, on ``--nproc`` gloo processes (one torch thread each):

* ``barrier``: a barrier, then the timed collective (``profile-comm``'s idle mode);
* ``workN``: a barrier, then ``profile-comm --busy-us`` N·1000's fixed work on every rank (a
  number of small matrix products that take N ms on rank 0 alone,
  :func:`echo_sim.measure.work.calibrate_busy`), then the timed collective (a job's compute
  before its collective);
* ``b2b``: the timed collective right after the previous one (no barrier, no compute).

A run's time is the **last arrival's** (``profile-comm``'s clock with host calibrations, the
shortest of the ranks' own times: :func:`echo_sim.measure.work.to_run_clock`). The modes go round-robin (``--rounds`` rounds of
``--runs`` runs per mode, op and size), so that a slow spell of the host spreads over every
mode. Per (op, size, mode): median, 10 %-trimmed mean (what ``profile-comm`` keeps), 90th
percentile and the **stalled** share: runs >= 2 ms over the call's unstalled time (the 10th
percentile of its runs in every mode).

A host where the ``workN`` rows' trimmed means differ from ``barrier``'s by more than a
collective's share of the step it is asked to predict prices a job's collectives with the
wrong stall rate in idle mode; ``replay-comm`` (the job's own work before each collective)
is the profile to compare there.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from echo_sim.cost.comm_profile import trimmed_mean
from echo_sim.errors import EchoError
from echo_sim.measure.profile_comm import parse_sizes
from echo_sim.measure.ranks import join_ranks, run_ranks, write_result
from echo_sim.measure.work import calibrate_busy, make_op, to_run_clock, whole_numel

OPS = ("all_reduce", "all_gather")
STALL_US = 2000.0  # a run this far over the call's unstalled time counts as stalled


def _mode_work_ms(mode: str) -> float | None:
    """Milliseconds of compute before the collective (None: back to back, no barrier)."""
    if mode == "barrier":
        return 0.0
    if mode == "b2b":
        return None
    return float(mode[len("work"):])


def _worker(rank: int, nproc: int, store: str, ops: list[str], sizes: list[int],
            modes: list[str], runs: int, rounds: int, result_path: str) -> None:
    import torch
    import torch.distributed as dist

    join_ranks(rank, nproc, store, "gloo")
    calls = {(op, n): make_op(op, whole_numel(n, nproc), rank, nproc, "cpu", None)
             for op in ops for n in sizes}
    # profile-comm's busy work: a fixed number of products, calibrated on rank 0 alone
    works = {m: calibrate_busy(w * 1e3, rank, nproc, "cpu")
             for m in modes if (w := _mode_work_ms(m))}
    for call in calls.values():  # warm-up: gloo's buffers and pairs for every shape
        for _ in range(3):
            call()
    samples: dict[str, list[float]] = {}
    for _ in range(rounds):
        for (op, n), call in calls.items():
            for mode in modes:
                times = torch.zeros(runs, dtype=torch.float64)
                for i in range(runs):
                    if _mode_work_ms(mode) is not None:
                        dist.barrier()
                        if mode in works:
                            works[mode].run()
                    t0 = time.perf_counter()
                    call()
                    times[i] = (time.perf_counter() - t0) * 1e6
                to_run_clock(times, "last_arrival", nproc)  # profile-comm's clock
                samples.setdefault(f"{op}|{n}|{mode}", []).extend(times.tolist())
    if rank == 0:
        write_result(result_path, {"samples": samples})
    dist.destroy_process_group()


def summarise(samples: dict[str, list[float]]) -> list[dict[str, Any]]:
    """One row per (op, size, mode): median, trimmed mean, p90 and stalled share (µs, %).

    Stalled: a run at least :data:`STALL_US` over the call's unstalled time, the 10th
    percentile of every run of that (op, size) in every mode."""
    pooled: dict[tuple[str, str], list[float]] = {}
    for key, xs in samples.items():
        op, n, _ = key.split("|")
        pooled.setdefault((op, n), []).extend(xs)
    rows = []
    for key, xs in samples.items():
        op, n, mode = key.split("|")
        every = sorted(pooled[op, n])
        ref = every[len(every) // 10]
        v = sorted(xs)
        rows.append({"op": op, "bytes": int(n), "mode": mode, "runs": len(v),
                     "median_us": round(statistics.median(v), 1),
                     "trimmed_mean_us": round(trimmed_mean(v), 1),
                     "p90_us": round(v[(9 * len(v)) // 10], 1),
                     "stalled_pct": round(100.0 * sum(x >= ref + STALL_US for x in v) / len(v),
                                          1)})
    return rows


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--ops", default="all_reduce,all_gather",
                   help="comma list of all_reduce, all_gather (default both)")
    p.add_argument("--sizes", default="256KB,680KB,1160KB",
                   help="whole-buffer message sizes (default 256KB,680KB,1160KB: the "
                        "example GPT's DDP buckets and a small one)")
    p.add_argument("--modes", default="barrier,work5,work20,b2b",
                   help="comma list of barrier, workN (N ms of compute first), b2b "
                        "(default barrier,work5,work20,b2b)")
    p.add_argument("--runs", type=int, default=20, help="runs per mode in a round (default 20)")
    p.add_argument("--rounds", type=int, default=3, help="round-robin rounds (default 3)")
    p.add_argument("--nproc", type=int, default=2, help="gloo processes (default 2)")
    p.add_argument("--timeout", type=float, default=600.0,
                   help="seconds before every process is killed (default 600)")
    p.add_argument("--output", help="also write the result JSON here")
    a = p.parse_args(argv)
    try:
        ops = [o for o in a.ops.split(",") if o]
        bad = [o for o in ops if o not in OPS]
        if bad:
            raise EchoError(f"ops: {bad[0]!r} is not one of {', '.join(OPS)}")
        modes = [m for m in a.modes.split(",") if m]
        for m in modes:
            if m not in ("barrier", "b2b") and not (m.startswith("work")
                                                    and m[4:].replace(".", "", 1).isdigit()):
                raise EchoError(f"modes: {m!r} is not barrier, b2b or workN (N ms)")
        sizes = [whole_numel(n, a.nproc) * 4 for n in parse_sizes(a.sizes)]
        if a.runs < 1 or a.rounds < 1 or a.nproc < 2:
            raise EchoError("runs and rounds must be >= 1 and nproc >= 2")
        t0 = time.time()
        raw = run_ranks(_worker, (ops, sizes, modes, a.runs, a.rounds), nproc=a.nproc,
                        timeout_s=a.timeout, what="collective_after_work", backend="gloo")
    except EchoError as e:
        print(f"collective_after_work: error: {e}", file=sys.stderr)
        return 2
    rows = summarise(raw["samples"])
    print("| op | bytes | mode | runs | median us | trimmed mean us | p90 us | stalled % |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['op']} | {r['bytes']:,} | {r['mode']} | {r['runs']} | {r['median_us']:,.0f} "
              f"| {r['trimmed_mean_us']:,.0f} | {r['p90_us']:,.0f} | {r['stalled_pct']:.0f} |")
    load = os.getloadavg()
    print(f"\n{a.nproc} gloo processes, {time.time() - t0:.0f} s, 1-min load {load[0]:.2f}")
    if a.output:
        Path(a.output).write_text(json.dumps({
            "benchmark": "collective_after_work", "date": time.strftime("%Y-%m-%dT%H:%M:%S"),
            "nproc": a.nproc, "cpu_count": os.cpu_count(), "load_avg_1min": load[0],
            "stall_us": STALL_US, "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
