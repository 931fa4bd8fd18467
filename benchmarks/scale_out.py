"""Scale-out benchmark: trace sets of 1,024 ranks through the columnar store.

Measures, each step in a fresh process whose whole process tree's RSS is sampled every
50 ms (the peak of the sum over the process and all its descendants: worker processes,
Ray's), with wall and CPU seconds and the 1-min load average before and after:

1. **10 M events** (``--events``, 1,024 ranks): ``benchmarks/gen_trace.py`` writes the
   echo JSON (``--gzip``), ``python -m echo_sim convert`` writes the store once, then
   ``collect``, ``statistic`` and ``stragglers`` run on the store (``--engine auto``, which
   picks duckdb at this size). Target: the three together ≤ 60 s on 2 cores, peak RSS
   ≤ 2 GB (all processes). ``--baseline`` adds the same three with ``--engine memory``.
2. **Ray** (``--ray``, needs ray): the three with ``--workers ray`` (a local Ray runtime
   with this machine's cores); their JSON must equal step 1's.
3. **100 M events** (``--big-events``, 1,024 ranks): written into the store directly
   (:func:`gen_store`, same job shape as gen_trace, no JSON), then the three analyses.
   Target: peak RSS ≤ 8 GB.

Usage::

    python -m benchmarks.scale_out [--ranks 1024] [--events 10000000] [--big-events 0]
        [--workers 1] [--ray] [--baseline] [--dir DIR] [--keep]

Prints a markdown table and writes ``benchmarks/results/scale_out.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from benchmarks.scale import machine  # noqa: E402

__all__ = ["gen_store", "main", "run_measured"]

RESULTS = REPO / "benchmarks" / "results" / "scale_out.json"
ANALYSES = ("collect", "statistic", "stragglers")
TARGET_S = 60.0
TARGET_PEAK_GB = 2.0
TARGET_BIG_PEAK_GB = 8.0


def _tree_rss(proc: Any) -> int:
    import psutil

    total = 0
    try:
        procs = [proc, *proc.children(recursive=True)]
    except psutil.Error:
        return 0
    for p in procs:
        try:
            total += p.memory_info().rss
        except psutil.Error:
            continue
    return total


def run_measured(argv: list[str], *, stdout: Path | None = None) -> dict[str, Any]:
    """Run ``argv`` (a fresh interpreter) with its process tree's RSS sampled."""
    import psutil

    load0 = os.getloadavg()[0]
    cpu0 = os.times()
    t0 = time.perf_counter()
    out = stdout.open("wb") if stdout else subprocess.DEVNULL
    try:
        p = subprocess.Popen(argv, stdout=out, stderr=subprocess.PIPE, cwd=REPO,
                             env={**os.environ, "PYTHONPATH": str(REPO)})
        ps = psutil.Process(p.pid)
        peak = [0]
        done = threading.Event()

        def sample() -> None:
            while not done.is_set():
                peak[0] = max(peak[0], _tree_rss(ps))
                time.sleep(0.05)

        th = threading.Thread(target=sample, daemon=True)
        th.start()
        _, err = p.communicate()
        done.set()
        th.join()
    finally:
        if stdout:
            out.close()  # type: ignore[union-attr]
    wall = time.perf_counter() - t0
    cpu1 = os.times()
    if p.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed ({p.returncode}):\n{err.decode()[-3000:]}")
    return {"argv": argv[2:], "wall_s": round(wall, 2), "peak_rss_gb": round(peak[0] / 2**30, 3),
            "cpu_s": round(cpu1.children_user + cpu1.children_system
                           - cpu0.children_user - cpu0.children_system, 1),
            "load_1m_before": round(load0, 2), "load_1m_after": round(os.getloadavg()[0], 2)}


# ---------------------------------------------------------------------------- the big store
def gen_store(out: Path, *, ranks: int, events: int, steps: int = 4, buckets: int = 100,
              seed: int = 0, rows_per_part: int = 1_000_000) -> int:
    """Write a synthetic DDP job (gen_trace's shape: FW and BW per layer, bucket all-reduces
    during backward on two lanes, UPDATE, STEP marker; per-rank jitter, the backward's GPU
    slices busy 80 % of their span) straight into a store; returns the event count."""
    from echo_sim.store.write import RankRows, StoreWriter
    from echo_sim.trace.model import _COLUMNS, COLLECTIVES, Cat, RankInfo
    from echo_sim.trace.outfiles import output_tree

    per_step = max(events // (ranks * steps), buckets + 4)
    layers = (per_step - buckets - 2) // 2
    rng = np.random.default_rng(seed)
    fw = rng.uniform(8, 160, layers)
    bucket_of = np.minimum((np.arange(layers)[::-1] * buckets) // layers, buckets - 1)
    names = ([f"FW.l{i}" for i in range(layers)] + [f"BW.l{i}" for i in range(layers)]
             + [f"Comm.bucket{k}" for k in range(buckets)] + ["UPDATE.AdamW", "STEP"])
    n_comm = 2 * layers
    upd, stp = 2 * layers + buckets, 2 * layers + buckets + 1
    step_len = float(fw.sum() * 3.3 + 2.0 * layers + 400.0)
    ar = COLLECTIVES.index("all_reduce")
    total = 0
    with output_tree(out, overwrite=True) as tree:
        w = StoreWriter(tree, source="gen_store", source_format="echo",
                        rows_per_part=rows_per_part)
        for r in range(ranks):
            cols: dict[str, list[np.ndarray]] = {}

            def add(_cols: dict[str, list[np.ndarray]] = cols, **kw: Any) -> None:
                for k, v in kw.items():
                    _cols.setdefault(k, []).append(np.asarray(v))

            for s in range(steps):
                j = rng.uniform(0.9, 1.1)
                t0 = s * step_len * 1.2 + rng.uniform(0, 50)
                d_fw = fw * j
                ts_fw = t0 + np.concatenate([[0.0], np.cumsum(d_fw)[:-1]])
                t_bw0 = float(ts_fw[-1] + d_fw[-1])
                d_bw = (2 * fw * j)[::-1]
                ts_bw = t_bw0 + np.concatenate([[0.0], np.cumsum(d_bw + 2.0)[:-1]])
                bw_end = ts_bw + d_bw
                issue = np.zeros(buckets)
                np.maximum.at(issue, bucket_of[::-1], bw_end)
                xfer = rng.uniform(20, 200, buckets)
                t_upd = float(max(bw_end[-1], (issue + xfer).max()) + 5.0)
                n = 2 * layers + buckets + 2
                add(ts_us=np.concatenate([ts_fw, ts_bw, issue, [t_upd, t0]]),
                    dur_us=np.concatenate([d_fw, d_bw, xfer, [300.0 * j, t_upd + 310 * j - t0]]),
                    name=np.concatenate([np.arange(layers), layers + np.arange(layers)[::-1],
                                         n_comm + np.arange(buckets), [upd, stp]]),
                    cat=np.concatenate([np.full(layers, Cat.FW), np.full(layers, Cat.BW),
                                        np.full(buckets, Cat.COMM), [Cat.UPDATE, Cat.STEP]]),
                    tid=np.concatenate([np.zeros(2 * layers), 100 + np.arange(buckets) % 2,
                                        [0, 1]]),
                    busy_us=np.concatenate([d_fw, 0.8 * d_bw, xfer, [300.0 * j,
                                                                     t_upd + 310 * j - t0]]),
                    step=np.full(n, s + 2),
                    seq=np.concatenate([np.full(2 * layers, -1), s * buckets + np.arange(buckets),
                                        [-1, -1]]),
                    group=np.concatenate([np.full(2 * layers, -1), np.zeros(buckets),
                                          [-1, -1]]),
                    coll=np.concatenate([np.full(2 * layers, -1), np.full(buckets, ar),
                                         [-1, -1]]),
                    nbytes=np.concatenate([np.zeros(2 * layers), np.full(buckets, 1 << 22),
                                           [0, 0]]))
            c = {k: np.concatenate(v) for k, v in cols.items()}
            order = np.argsort(c["ts_us"], kind="stable")
            m = order.size
            full = {k: np.full(m, d, dtype=dt) for k, (dt, d) in _COLUMNS.items()}
            for k, v in c.items():
                full[k] = v[order].astype(_COLUMNS[k][0])
            full["rank"][:] = r
            w.add_rank(RankRows(RankInfo(rank=r, world_size=ranks, source="gen_store"), full,
                                {}, (np.zeros(0), np.zeros(0, np.int32), np.zeros(0))))
            total += m
        w.finish(names=names, kinds=[], groups=[tuple(range(ranks))], counter_names=[],
                 steps=list(range(2, steps + 2)), drop_other_steps=False, notes=[])
    return total


# ---------------------------------------------------------------------------- main
def _analyses(store: Path, work: Path, tag: str, extra: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for a in ANALYSES:
        out[a] = run_measured([sys.executable, "-m", "echo_sim", a, str(store), "--json",
                               *extra], stdout=work / f"{tag}.{a}.json")
        print(f"  {tag} {a}: {out[a]['wall_s']} s, {out[a]['peak_rss_gb']} GB", flush=True)
    out["total_wall_s"] = round(sum(out[a]["wall_s"] for a in ANALYSES), 2)
    out["peak_rss_gb"] = max(out[a]["peak_rss_gb"] for a in ANALYSES)
    return out


def _same(work: Path, a: str, b: str) -> bool:
    for x in ANALYSES:
        da, db = (json.loads((work / f"{t}.{x}.json").read_text()) for t in (a, b))
        da.pop("source", None), db.pop("source", None)
        if da != db:
            return False
    return True


def _max_rel_diff(work: Path, a: str, b: str) -> float | str:
    """Largest relative difference of any number between two runs' JSON ("structure
    differs" when keys, lengths or non-numbers differ)."""
    worst = 0.0

    def walk(x: Any, y: Any) -> bool:
        nonlocal worst
        if isinstance(x, dict):
            return x.keys() == y.keys() and all(walk(x[k], y[k]) for k in x)
        if isinstance(x, list):
            return len(x) == len(y) and all(walk(i, j) for i, j in zip(x, y, strict=True))
        if isinstance(x, float) and isinstance(y, float | int):
            worst = max(worst, abs(x - y) / max(abs(x), abs(y), 1e-300))
            return True
        return bool(x == y)

    for name in ANALYSES:
        da, db = (json.loads((work / f"{t}.{name}.json").read_text()) for t in (a, b))
        da.pop("source", None), db.pop("source", None)
        if not walk(da, db):
            return "structure differs"
    return worst


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.scale_out",
                                 description=__doc__.split("\n\n")[0])
    ap.add_argument("--ranks", type=int, default=1024, help="ranks (default 1024)")
    ap.add_argument("--events", type=int, default=10_000_000,
                    help="events of the JSON trace set (default 10000000; 0: skip)")
    ap.add_argument("--big-events", type=int, default=0,
                    help="events of the store generated directly (e.g. 100000000; 0: skip)")
    ap.add_argument("--workers", default="",
                    help="--workers of the analyses (default: the engine's, a process per core)")
    ap.add_argument("--ray", action="store_true", help="also run the analyses on Ray")
    ap.add_argument("--baseline", action="store_true",
                    help="also run the analyses with --engine memory")
    ap.add_argument("--dir", default="", help="work directory (default: a temporary one)")
    ap.add_argument("--keep", action="store_true", help="keep the work directory")
    a = ap.parse_args(sys.argv[1:] if argv is None else argv)
    work = Path(a.dir) if a.dir else Path(tempfile.mkdtemp(prefix="echo_scale_out_"))
    work.mkdir(parents=True, exist_ok=True)
    res: dict[str, Any] = {"machine": machine(), "ranks": a.ranks, "workers": a.workers}
    workers = ["--workers", a.workers] if a.workers else []
    try:
        if a.events:
            traces, store = work / "traces", work / "traces.store"
            if not traces.exists():
                res["generate"] = run_measured([sys.executable, "-m", "benchmarks.gen_trace",
                                                str(traces), "--ranks", str(a.ranks),
                                                "--events", str(a.events), "--gzip"])
            res["json_bytes"] = sum(f.stat().st_size for f in traces.rglob("*") if f.is_file())
            shutil.rmtree(store, ignore_errors=True)
            res["convert"] = run_measured([sys.executable, "-m", "echo_sim", "convert",
                                           str(traces), "--to", str(store)])
            print(f"  convert: {res['convert']['wall_s']} s, "
                  f"{res['convert']['peak_rss_gb']} GB", flush=True)
            res["store_bytes"] = sum(f.stat().st_size for f in store.rglob("*") if f.is_file())
            res["events"] = json.loads((store / "store.json").read_text())["num_events"]
            res["store"] = _analyses(store, work, "store", ["--engine", "duckdb", *workers])
            if a.ray:
                res["ray"] = _analyses(store, work, "ray", ["--workers", "ray"])
                res["ray"]["same_as_local"] = _same(work, "store", "ray")
            if a.baseline:
                res["memory"] = _analyses(store, work, "memory", ["--engine", "memory"])
                res["memory"]["max_rel_diff_vs_duckdb"] = _max_rel_diff(work, "memory", "store")
        if a.big_events:
            big = work / "big.store"
            t0 = time.perf_counter()
            n = gen_store(big, ranks=a.ranks, events=a.big_events)
            res["big_generate_s"] = round(time.perf_counter() - t0, 1)
            res["big_events"] = n
            res["big_store_bytes"] = sum(f.stat().st_size for f in big.rglob("*")
                                         if f.is_file())
            res["big"] = _analyses(big, work, "big", ["--engine", "duckdb", *workers])
    finally:
        if not a.keep and not a.dir:
            shutil.rmtree(work, ignore_errors=True)
    res["machine"]["load_average_1m_end"] = round(os.getloadavg()[0], 2)
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(res, indent=2, default=str) + "\n")
    print(_table(res))
    return 0


def _table(res: dict[str, Any]) -> str:
    rows = ["| step | events | wall (s) | peak RSS, all processes (GB) | load 1m |",
            "|---|---|---|---|---|"]

    def row(name: str, ev: Any, m: dict[str, Any]) -> None:
        rows.append(f"| {name} | {ev:,} | {m['wall_s']} | {m['peak_rss_gb']} | "
                    f"{m['load_1m_before']}–{m['load_1m_after']} |")

    if "convert" in res:
        row("convert (JSON → store)", res["events"], res["convert"])
        for key, label in (("store", "from the store"), ("ray", "on Ray"),
                           ("memory", "--engine memory")):
            if key in res:
                for x in ANALYSES:
                    row(f"{x} {label}", res["events"], res[key][x])
                rows.append(f"| **collect + statistic + stragglers {label}** | | "
                            f"**{res[key]['total_wall_s']}** | **{res[key]['peak_rss_gb']}** | |")
    if "big" in res:
        for x in ANALYSES:
            row(f"{x} (store generated directly)", res["big_events"], res["big"][x])
        rows.append(f"| **all three, {res['big_events']:,} events** | | "
                    f"**{res['big']['total_wall_s']}** | **{res['big']['peak_rss_gb']}** | |")
    return "\n".join(rows)


if __name__ == "__main__":
    raise SystemExit(main())
