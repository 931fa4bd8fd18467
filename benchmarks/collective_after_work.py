"""Does what precedes a collective change what it costs on this host? An interleaved probe.

    python benchmarks/collective_after_work.py [--ops all_reduce,all_gather]
        [--sizes 256KB,680KB,1160KB] [--modes barrier,work5,work20,b2b] [--runs 20]
        [--rounds 3] [--nproc 2] [--control] [--output FILE]

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

Each run also stamps every rank's start and end on the host's monotonic clock (the processes
share it): the **arrival gap** (latest start less earliest) and **exit gap**, reported as
the shares of runs whose ranks arrived, or left, >= 2 ms apart and the mean arrival gap; and
the CPU time the rank's **other threads** (gloo's) spent during the call
(``/proc/self/task/*/schedstat``), averaged over the ranks. ``--control`` runs the same work
and synchronisations with no gloo at all (forked processes, a relay process over OS pipes)
for the same shares: what the host does by itself. On the quiet VM of 2026-11-29
(``benchmarks/results/collective_after_work_gaps_vm_2026-11-29.json``): gloo's threads
burned 0.4-1.6 ms of CPU per call (they poll while a call waits); after 5 or 20 ms of the
same work on both ranks, the gloo ranks arrived >= 2 ms apart in 22-42 % of runs (mean gap
0.9-1.5 ms) against 12-15 % (0.4-0.6 ms) for plain processes, and not after a barrier or
back to back (<= 3 %): a one-slice (~3 ms) preemption of one rank's compute, which the
job's next synchronisation pays.

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
from echo_sim.measure.work import (
    BusyWork,
    calibrate_busy,
    make_op,
    rank_spread,
    to_run_clock,
    whole_numel,
)

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:  # run as a script: benchmarks.accuracy for the thread reads
    sys.path.insert(0, str(REPO))

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

    from benchmarks.accuracy import other_threads_s

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
    gaps: dict[str, list[list[float]]] = {}
    for _ in range(rounds):
        for (op, n), call in calls.items():
            for mode in modes:
                times = torch.zeros(runs, dtype=torch.float64)
                stamps = torch.zeros(2, runs, dtype=torch.float64)  # start, end (µs)
                helpers = torch.zeros(runs, dtype=torch.float64)  # other threads' CPU µs
                for i in range(runs):
                    if _mode_work_ms(mode) is not None:
                        dist.barrier()
                        if mode in works:
                            works[mode].run()
                    o0 = other_threads_s()
                    t0 = time.perf_counter()
                    call()
                    t1 = time.perf_counter()
                    o1 = other_threads_s()
                    times[i] = (t1 - t0) * 1e6
                    stamps[0, i], stamps[1, i] = t0 * 1e6, t1 * 1e6
                    if o0 is not None and o1 is not None:
                        helpers[i] = (o1[0] - o0[0]) * 1e6
                to_run_clock(times, "last_arrival", nproc)  # profile-comm's clock
                spread = rank_spread(stamps)  # the ranks' arrival and exit gaps
                dist.all_reduce(helpers)  # summed over the ranks, then per rank
                key = f"{op}|{n}|{mode}"
                samples.setdefault(key, []).extend(times.tolist())
                g = gaps.setdefault(key, [[], [], []])
                g[0].extend(spread[0].tolist())
                g[1].extend(spread[1].tolist())
                g[2].extend((helpers / nproc).tolist())
    if rank == 0:
        write_result(result_path, {"samples": samples, "gaps": gaps})
    dist.destroy_process_group()


def _control(nproc: int, modes: list[str], runs: int, out_dir: str) -> dict[str, list[list[float]]]:
    """The same pattern with no gloo (``--control``): ``nproc`` forked processes do each
    mode's work (the same matrix products, calibrated here alone), then a synchronisation
    through OS pipes that a relay process completes (it reads a byte from every rank, then
    writes one to each: a third thread finishing the "collective", as gloo's own threads do).
    Per mode, the ranks' arrival and exit gaps (µs) over ``runs`` runs. A host whose plain
    processes stall here as the gloo ranks do stalls by itself; one that does not leaves the
    stalls to gloo's threads on cores the ranks keep busy."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # no intra-op pool to inherit across fork (restored below)
    try:
        return _control_runs(nproc, modes, runs, out_dir)
    finally:
        torch.set_num_threads(threads)


def _control_runs(nproc: int, modes: list[str], runs: int,
                  out_dir: str) -> dict[str, list[list[float]]]:
    probe = BusyWork(20, 0.0, nproc, "cpu")
    probe.run()
    per_product = statistics.median(probe.run() for _ in range(5)) / probe.reps
    plans = [(m, _mode_work_ms(m)) for m in modes]
    # every run: a round trip as the barrier (none back to back), then the timed one
    total = runs * sum(1 if ms is None else 2 for _, ms in plans)
    up = [os.pipe() for _ in range(nproc)]
    down = [os.pipe() for _ in range(nproc)]
    kids = []
    relay = os.fork()
    if relay == 0:  # pragma: no cover - a child process
        for _ in range(total):
            for r in range(nproc):
                os.read(up[r][0], 1)
            for r in range(nproc):
                os.write(down[r][1], b"x")
        os._exit(0)
    for rank in range(nproc):
        pid = os.fork()
        if pid == 0:  # pragma: no cover - a child process
            stamps: dict[str, list[list[float]]] = {}

            def sync(rank: int = rank) -> None:
                os.write(up[rank][1], b"x")
                os.read(down[rank][0], 1)

            for mode, ms in plans:
                work = BusyWork(max(1, round((ms or 0.0) * 1e3 / per_product)), 0.0, nproc,
                                "cpu")
                got = stamps.setdefault(mode, [[], []])
                for _ in range(runs):
                    if ms is not None:
                        sync()  # the barrier
                    if ms:
                        work.run()
                    t0 = time.perf_counter()
                    sync()
                    got[0].append(t0 * 1e6)
                    got[1].append(time.perf_counter() * 1e6)
            Path(out_dir, f"control{rank}.json").write_text(json.dumps(stamps))
            os._exit(0)
        kids.append(pid)
    for pid in (relay, *kids):
        os.waitpid(pid, 0)
    per_rank = [json.loads(Path(out_dir, f"control{r}.json").read_text())
                for r in range(nproc)]
    out: dict[str, list[list[float]]] = {}
    for mode, _ in plans:
        cols = [list(zip(*(pr[mode][k] for pr in per_rank), strict=True)) for k in (0, 1)]
        out[mode] = [[max(t) - min(t) for t in col] for col in cols]
    return out


def summarise(samples: dict[str, list[float]],
              gaps: dict[str, list[list[float]]] | None = None) -> list[dict[str, Any]]:
    """One row per (op, size, mode): median, trimmed mean, p90 and stalled share (µs, %);
    with ``gaps`` (per key, the runs' arrival gaps, exit gaps and, optionally, the CPU time
    of each rank's other threads during the call, µs) also the shares of runs whose ranks
    arrived, or left, at least :data:`STALL_US` apart, the mean arrival gap and the other
    threads' mean CPU per call (gloo's: they poll while a call waits).

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
        row: dict[str, Any] = {
            "op": op, "bytes": int(n), "mode": mode, "runs": len(v),
            "median_us": round(statistics.median(v), 1),
            "trimmed_mean_us": round(trimmed_mean(v), 1),
            "p90_us": round(v[(9 * len(v)) // 10], 1),
            "stalled_pct": round(100.0 * sum(x >= ref + STALL_US for x in v) / len(v), 1)}
        if gaps is not None and key in gaps:
            arrival, leave = gaps[key][0], gaps[key][1]
            row["late_arrival_pct"] = round(100.0 * sum(x >= STALL_US for x in arrival)
                                            / len(arrival), 1)
            row["late_exit_pct"] = round(100.0 * sum(x >= STALL_US for x in leave)
                                         / len(leave), 1)
            row["mean_arrival_gap_us"] = round(statistics.mean(arrival), 1)
            if len(gaps[key]) > 2:
                row["helper_threads_cpu_us"] = round(statistics.mean(gaps[key][2]), 1)
        rows.append(row)
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
    p.add_argument("--control", action="store_true",
                   help="also run the same work and synchronisations with no gloo (forked "
                        "processes and a relay process over OS pipes) and report how often "
                        "their ranks arrive or leave >= 2 ms apart: does the host stall by "
                        "itself, or only gloo's threads on busy cores?")
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
    rows = summarise(raw["samples"], raw.get("gaps"))
    print("| op | bytes | mode | runs | median us | trimmed mean us | p90 us | stalled % | "
          "ranks arrived >= 2 ms apart % | left >= 2 ms apart % | mean arrival gap us | "
          "gloo threads' CPU per call us |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['op']} | {r['bytes']:,} | {r['mode']} | {r['runs']} | {r['median_us']:,.0f} "
              f"| {r['trimmed_mean_us']:,.0f} | {r['p90_us']:,.0f} | {r['stalled_pct']:.0f} | "
              f"{r['late_arrival_pct']:.0f} | {r['late_exit_pct']:.0f} | "
              f"{r['mean_arrival_gap_us']:,.0f} | {r['helper_threads_cpu_us']:,.0f} |")
    control: list[dict[str, Any]] = []
    if a.control:
        import tempfile

        with tempfile.TemporaryDirectory() as tmp:
            for mode, (arrival, leave) in _control(a.nproc, modes, a.runs * a.rounds,
                                                   tmp).items():
                control.append({"mode": mode, "runs": len(arrival),
                                "late_arrival_pct": round(100.0 * sum(
                                    x >= STALL_US for x in arrival) / len(arrival), 1),
                                "late_exit_pct": round(100.0 * sum(
                                    x >= STALL_US for x in leave) / len(leave), 1),
                                "mean_arrival_gap_us": round(statistics.mean(arrival), 1)})
        print("\nControl, no gloo (the same work; a relay process over OS pipes):\n")
        print("| mode | runs | ranks arrived >= 2 ms apart % | left >= 2 ms apart % | "
              "mean arrival gap us |\n|---|---|---|---|---|")
        for c in control:
            print(f"| {c['mode']} | {c['runs']} | {c['late_arrival_pct']:.0f} | "
                  f"{c['late_exit_pct']:.0f} | {c['mean_arrival_gap_us']:,.0f} |")
    load = os.getloadavg()
    print(f"\n{a.nproc} gloo processes, {time.time() - t0:.0f} s, 1-min load {load[0]:.2f}")
    if a.output:
        Path(a.output).write_text(json.dumps({
            "benchmark": "collective_after_work", "date": time.strftime("%Y-%m-%dT%H:%M:%S"),
            "nproc": a.nproc, "cpu_count": os.cpu_count(), "load_avg_1min": load[0],
            "stall_us": STALL_US, "rows": rows, "control": control}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
