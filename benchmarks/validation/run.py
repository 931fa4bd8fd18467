"""Predict every published row of :mod:`benchmarks.validation.rows` and compare.

Each row becomes a one-GPU ``synth`` trace of its model (bf16, the row's micro-batch, on
the cluster's GPU) laid out by ``simulate`` as the row ran (dp x tp x pp, ZeRO-3 as FSDP,
the row's recomputation, schedule and global batch) on the row's cluster preset. Both run
through the CLI in a subprocess, exactly as a user would type them (:func:`row_commands`);
every row's flags are in the output, so the figures are what a user gets. The
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
import subprocess
import sys
import tempfile
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

__all__ = ["main", "predict_row", "row_commands", "summarise"]


def row_commands(row: Row, trace_dir: str) -> tuple[list[str], list[str]]:
    """The two command lines a user runs for ``row``: ``synth`` (the model on the cluster's
    GPU) and ``simulate`` (the row's layout); every knob is a flag of theirs."""
    from echo_sim.cost.hardware import CLUSTERS

    cluster = CLUSTERS[row.cluster]
    synth = ["synth", "--layers", str(row.layers), "--hidden", str(row.hidden), "--heads",
             str(row.heads), "--seq", str(row.seq), "--vocab", str(row.vocab),
             "--micro-batch", str(row.micro_batch), "--gpu", cluster.gpu.name, "--dtype", "bf16",
             "--steps", "1", "--attention", row.attention, "--optimizer", row.optimizer,
             "--output", trace_dir]
    sim = [trace_dir, "--dp", str(row.dp), "--tp", str(row.tp), "--pp", str(row.pp),
           "--micro-batch", str(row.micro_batch), "--global-batch", str(row.global_batch),
           "--cluster", row.cluster, "--gpus-per-node", str(cluster.gpus_per_node)]
    if row.virtual_stages > 1:
        sim += ["--schedule", "interleaved", "--virtual-stages", str(row.virtual_stages)]
    if row.recompute not in (False, "none"):
        sim += ["--recompute", "full" if row.recompute is True else str(row.recompute)]
    if row.sequence_parallel:
        sim.append("--sequence-parallel")
    # DeepSpeed ZeRO-3 as the paper ran it (2021); Megatron-LM's DDP of 2021 reduced once,
    # after backward
    sim += (["--fsdp", "--fsdp-impl", "deepspeed-2021"] if row.zero3
            else ["--data-parallel", "post"])
    return synth, ["simulate", *sim, "--json"]


def _cli(argv: list[str]) -> dict[str, Any]:
    """``python -m echo_sim ARGV`` in a subprocess, as a user runs it; its JSON."""
    proc = subprocess.run([sys.executable, "-m", "echo_sim", *argv], capture_output=True,
                          text=True, timeout=600, cwd=REPO)
    if proc.returncode != 0:
        raise RuntimeError(f"echo_sim {' '.join(argv)}: {proc.stderr.strip()}")
    out: dict[str, Any] = json.loads(proc.stdout) if proc.stdout.strip().startswith("{") else {}
    return out


def predict_row(row: Row) -> dict[str, Any]:
    """Synthesise and simulate ``row`` through the CLI; returns predicted vs measured."""
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        synth, sim = row_commands(row, str(Path(tmp) / "trace"))
        _cli(synth)
        res = _cli(sim)
    wall = time.perf_counter() - t0
    pred_s = res["iteration_time_us"] / 1e6
    meas_s = row.measured_iteration_s()
    flops = row.model_flops()
    flags = " ".join(a for a in sim[2:-1])  # after "simulate TRACE", before --json
    return {
        "id": row.id, "source": row.source, "where": row.where, "gpus": row.gpus,
        "dp": row.dp, "tp": row.tp, "pp": row.pp, "v": row.virtual_stages,
        "micro_batch": row.micro_batch, "global_batch": row.global_batch,
        "recompute": row.recompute, "zero3": row.zero3, "cluster": row.cluster,
        "measured_iteration_s": meas_s, "predicted_iteration_s": pred_s,
        "measured_tflops_per_gpu": flops / (row.gpus * meas_s) / 1e12,
        "predicted_tflops_per_gpu": flops / (row.gpus * pred_s) / 1e12,
        "error": meas_s / pred_s - 1.0,
        "predicted_peak_memory_gib": res["peak_memory_bytes"] / 2**30,
        "breakdown_s": _breakdown(res),
        "simulate_flags": flags, "synth_flags": " ".join(synth[1:-2]),
        "wall_s": wall,
    }


def _breakdown(res: dict[str, Any]) -> dict[str, float]:
    r = max(res["ranks"], key=lambda x: x["compute_us"])
    return {"compute": r["compute_us"] / 1e6, "exposed_comm": r["exposed_comm_us"] / 1e6,
            "bubble": r["bubble_us"] / 1e6, "idle": r["idle_us"] / 1e6}


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
    lines += ["", "Each row is `python -m echo_sim synth ... -o T` then `python -m echo_sim "
              "simulate T FLAGS`, run as printed:", "",
              "| row | simulate flags |", "|---|---|"]
    lines += [f"| {r['id']} | `{r['simulate_flags']}` |" for r in results]
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
