"""Predict every published row of :mod:`benchmarks.validation.rows` and compare.

Each row becomes a one-GPU ``synth`` trace of its model (bf16, the row's micro-batch, on
the cluster's GPU) laid out by ``simulate`` as the row ran (dp x tp x pp, ZeRO-3 as FSDP,
the row's recomputation, schedule and global batch) on the row's cluster preset. The
prediction is compared on the paper's metric: achieved TFLOP/s per GPU (eq. (3) FLOPs /
GPUs / predicted iteration time) or the iteration time itself; both errors are the same
ratio, ``predicted / measured - 1`` of throughput.

One set of constants for all rows: nothing here or in the models is fitted to a row.

Usage::

    python -m benchmarks.validation [--rows ID,ID,...] [--out benchmarks/results]

Writes ``validation.json`` and ``validation.md`` under ``--out`` and prints the table.
The published rows' summary (``summary.all`` / ``summary.groups``) counts only them; this
repo's own measured single-GPU runs (:mod:`benchmarks.validation.own_runs`) follow in
their own table and ``summary.own_runs``.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from benchmarks.validation.own_runs import (  # noqa: E402
    OWN_RUNS,
    markdown_own,
    predict_own,
    summarise_own,
)
from benchmarks.validation.rows import ROWS, Row  # noqa: E402

__all__ = ["main", "predict_row", "summarise"]


def predict_row(row: Row) -> dict[str, Any]:
    """Synthesise and simulate ``row``; returns predicted vs measured figures."""
    from echo_sim.cost.hardware import CLUSTERS
    from echo_sim.sim.simulate import SimConfig, simulate
    from echo_sim.sim.synth import GPTShape, SynthConfig, synth_trace

    cluster = CLUSTERS[row.cluster]
    shape = GPTShape(layers=row.layers, hidden=row.hidden, heads=row.heads, seq=row.seq,
                     vocab=row.vocab, micro_batch=row.micro_batch)
    t0 = time.perf_counter()
    trace = synth_trace(SynthConfig(model=shape, gpu=cluster.gpu.name, dtype="bf16", steps=1,
                                    attention=row.attention, optimizer=row.optimizer))
    schedule = "interleaved" if row.virtual_stages > 1 else "1f1b"
    cfg = SimConfig(dp=row.dp, tp=row.tp, pp=row.pp, micro_batch=row.micro_batch,
                    global_batch=row.global_batch, schedule=schedule,
                    virtual_stages=row.virtual_stages, cluster=row.cluster,
                    gpus_per_node=cluster.gpus_per_node, fsdp=row.zero3,
                    recompute=row.recompute,
                    sequence_parallel=row.sequence_parallel,
                    fsdp_impl="deepspeed-2021" if row.zero3 else "fsdp2",
                    data_parallel="ddp" if row.zero3 else "post")
    res = simulate(trace, cfg, keep=False)
    wall = time.perf_counter() - t0
    pred_s = res.iteration_time_us / 1e6
    meas_s = row.measured_iteration_s()
    flops = row.model_flops()
    return {
        "id": row.id, "source": row.source, "where": row.where, "gpus": row.gpus,
        "dp": row.dp, "tp": row.tp, "pp": row.pp, "v": row.virtual_stages,
        "micro_batch": row.micro_batch, "global_batch": row.global_batch,
        "recompute": row.recompute, "zero3": row.zero3, "cluster": row.cluster,
        "measured_iteration_s": meas_s, "predicted_iteration_s": pred_s,
        "measured_tflops_per_gpu": flops / (row.gpus * meas_s) / 1e12,
        "predicted_tflops_per_gpu": flops / (row.gpus * pred_s) / 1e12,
        "error": meas_s / pred_s - 1.0,
        "predicted_peak_memory_gib": res.max_peak_memory_bytes / 2**30,
        "breakdown_s": _breakdown(res),
        "wall_s": wall,
    }


def _breakdown(res: Any) -> dict[str, float]:
    r = max(res.ranks, key=lambda x: x.compute_us)
    return {"compute": r.compute_us / 1e6, "exposed_comm": r.exposed_comm_us / 1e6,
            "bubble": r.bubble_us / 1e6, "idle": r.idle_us / 1e6}


def summarise(results: list[dict[str, Any]]) -> dict[str, Any]:
    """Median and worst |error| over all rows and per group (prefix of the row id)."""
    def stats(rs: list[dict[str, Any]]) -> dict[str, Any]:
        errs = [abs(r["error"]) for r in rs]
        worst = max(rs, key=lambda r: abs(r["error"]))
        return {"rows": len(rs), "median_abs_error": statistics.median(errs),
                "worst_abs_error": max(errs), "worst_row": worst["id"]}
    groups: dict[str, list[dict[str, Any]]] = {}
    for r in results:
        key = ("zero3" if r["zero3"] else r["id"].rsplit("-", 1)[0] if r["id"].startswith(
            "korthikanti") else r["id"].split("-")[0] + "-" + r["id"].split("-")[1])
        groups.setdefault(key, []).append(r)
    return {"all": stats(results), "groups": {k: stats(v) for k, v in groups.items()}}


def _markdown(results: list[dict[str, Any]], summary: dict[str, Any]) -> str:
    lines = ["| row | GPUs | dp·tp·pp (v) | mb | recompute | measured | predicted | error | "
             "compute / exposed comm / bubble (s) |",
             "|---|---:|---|---:|---|---:|---:|---:|---|"]
    for r in results:
        unit = "s" if r["id"].startswith("korthikanti") else "TF/GPU"
        meas = (f"{r['measured_iteration_s']:.2f} s" if unit == "s"
                else f"{r['measured_tflops_per_gpu']:.0f}")
        pred = (f"{r['predicted_iteration_s']:.2f} s" if unit == "s"
                else f"{r['predicted_tflops_per_gpu']:.0f}")
        b = r["breakdown_s"]
        lay = f"{r['dp']}·{r['tp']}·{r['pp']}" + (f" ({r['v']})" if r["v"] > 1 else "")
        lay += " ZeRO-3" if r["zero3"] else ""
        lines.append(f"| {r['id']} | {r['gpus']} | {lay} | {r['micro_batch']} | "
                     f"{r['recompute']} | {meas} | {pred} | {r['error']:+.1%} | "
                     f"{b['compute']:.2f} / {b['exposed_comm']:.2f} / {b['bubble']:.2f} |")
    a = summary["all"]
    lines += ["", f"All {a['rows']} rows: median |error| {a['median_abs_error']:.1%}, worst "
              f"{a['worst_abs_error']:.1%} ({a['worst_row']}).", "",
              "| group | rows | median \\|error\\| | worst \\|error\\| |", "|---|---:|---:|---:|"]
    for k, g in summary["groups"].items():
        lines.append(f"| {k} | {g['rows']} | {g['median_abs_error']:.1%} | "
                     f"{g['worst_abs_error']:.1%} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", default="", help="comma-separated row ids (default: all)")
    ap.add_argument("--no-own", action="store_true",
                    help="skip this repo's own measured runs (own_runs.py)")
    ap.add_argument("--out", default=str(REPO / "benchmarks" / "results"),
                    help="directory for validation.json / validation.md")
    args = ap.parse_args(argv)
    wanted = [x for x in args.rows.split(",") if x]
    known = {r.id for r in ROWS}
    bad = [w for w in wanted if w not in known]
    if bad:
        ap.error(f"--rows: unknown id(s) {', '.join(bad)}; valid: {', '.join(sorted(known))}")
    rows = [r for r in ROWS if not wanted or r.id in wanted]
    results = [predict_row(r) for r in rows]
    summary = summarise(results)
    md = _markdown(results, summary)
    own = [] if args.no_own else [predict_own(r) for r in OWN_RUNS]
    if own:
        summary["own_runs"] = summarise_own(own)
        md += "\n" + markdown_own(own)
    print(md)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "validation.md").write_text(md, encoding="utf-8")
    (out / "validation.json").write_text(json.dumps({
        "summary": summary, "rows": results, "own_runs": own,
        "machine": {"python": platform.python_version(), "host": platform.node(),
                    "note": "simulation only; wall_s measured on a shared 2-core machine"},
    }, indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
