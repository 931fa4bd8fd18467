"""Write a synthetic, realistic echo-format trace: 64 ranks, about 10^6 events.

Every rank directory follows ``docs/trace-format.md``: ``trace.json`` (Chrome object form,
``X`` events with the contract's args, ``memory`` counters every 10 ms, ``M`` names),
``meta.json`` and ``dag.gml`` (the last step). Per rank and step: one ``FW`` and one ``BW``
per leaf module (a transformer-like stack of Linear / LayerNorm / GELU layers), DDP
buckets all-reduced during backward (``Comm.bucket<k>``, group = all ranks, ``seq`` equal
on every rank, lanes 100+k never overlapping), one ``UPDATE.AdamW`` and a ``STEP`` marker.
Durations jitter per rank (±10%), so ranks straggle the way real ones do.

Usage::

    python benchmarks/gen_trace.py OUT_DIR [--ranks 64] [--events 1000000] [--steps 4]
        [--buckets 100] [--gzip]
"""

from __future__ import annotations

import argparse
import gzip
import sys
from pathlib import Path
from typing import Any

import numpy as np
import orjson

__all__ = ["generate", "main"]

T0_US = 1_700_000_000_000_000.0  # Unix time in microseconds at the first step
_KINDS = ("Linear", "LayerNorm", "GELU", "Linear")  # one "block" of leaf modules


def _layer_table(layers: int, rng: np.random.Generator) -> list[dict[str, Any]]:
    out = []
    for i in range(layers):
        kind = _KINDS[i % len(_KINDS)]
        hidden = 1024
        pbytes = (hidden * hidden + hidden) * 4 if kind == "Linear" else (
            2 * hidden * 4 if kind == "LayerNorm" else 0)
        io = 8 * 512 * hidden * 4
        fw = float(rng.uniform(40, 160)) if kind == "Linear" else float(rng.uniform(8, 30))
        out.append({
            "module": f"blocks.{i // len(_KINDS)}.{kind.lower()}{i % len(_KINDS)}",
            "type": kind, "param_bytes": pbytes, "in_bytes": io, "out_bytes": io,
            "flops": 2.0 * 8 * 512 * hidden * hidden if kind == "Linear" else None,
            "fw_us": fw,
        })
    return out


def _lanes(starts: list[float], ends: list[float]) -> list[int]:
    busy: list[float] = []
    out = []
    for s, e in zip(starts, ends, strict=True):
        for k, until in enumerate(busy):
            if until <= s:
                busy[k] = e
                out.append(k)
                break
        else:
            busy.append(e)
            out.append(len(busy) - 1)
    return out


def _gml(nodes: list[tuple[str, str, float, int]], edges: list[tuple[int, int]]) -> str:
    """networkx's flat GML layout (what ``networkx.write_gml`` writes)."""
    parts = ["graph [", "  directed 1"]
    for i, (name, cat, dur, step) in enumerate(nodes):
        parts += ["  node [", f"    id {i}", f'    label "{name}"', f'    cat "{cat}"',
                  f"    dur_us {dur!r}", f"    step {step}", "  ]"]
    for u, v in edges:
        parts += ["  edge [", f"    source {u}", f"    target {v}", "  ]"]
    parts.append("]")
    return "\n".join(parts) + "\n"


def generate(out: str | Path, *, ranks: int = 64, events: int = 1_000_000, steps: int = 4,
             buckets: int = 100, compress: bool = False, seed: int = 0) -> int:
    """Write the trace under ``out``; returns the number of ``X`` events written."""
    out = Path(out)
    per_step = max(events // (ranks * steps), buckets + 4)
    layers = (per_step - buckets - 2) // 2  # FW + BW per layer, buckets, UPDATE, STEP
    rng = np.random.default_rng(seed)
    table = _layer_table(layers, rng)
    # DDP buckets gradients in reverse layer order; spread layers evenly over the buckets
    bucket_layers = [[int(i) for i in a]
                     for a in np.array_split(np.arange(layers)[::-1], buckets)]
    params = [[f"{table[i]['module']}.weight" for i in b if table[i]["param_bytes"]]
              for b in bucket_layers]
    bucket_bytes = [sum(int(table[i]["param_bytes"]) for i in b) for b in bucket_layers]
    group = list(range(ranks))
    total = 0
    # the collective ends at the same time on every rank: the slowest issuer plus transfer
    xfer_us = [max(20.0, nb / 10e3) for nb in bucket_bytes]  # ~10 GB/s bus bandwidth
    jitter = rng.uniform(0.9, 1.1, (ranks, steps))
    start = np.zeros((ranks, steps))
    issue = np.zeros((ranks, steps, buckets))
    ready = np.zeros((steps, buckets))
    after_bw = np.zeros((ranks, steps))
    prev_end = T0_US + rng.uniform(0, 50, ranks)
    for s in range(steps):  # timing first: a collective ends when its slowest member issued
        for r in range(ranks):
            j = float(jitter[r, s])
            start[r, s] = t = float(prev_end[r]) + 20.0
            t += sum(x["fw_us"] * j * 1.1 for x in table[1:]) + table[0]["fw_us"] * j
            for k, b in enumerate(bucket_layers):
                t += sum(table[i]["fw_us"] * 2 * j + 2.0 for i in b)
                issue[r, s, k] = t
            after_bw[r, s] = t
        last = 0.0
        for k in range(buckets):
            last = max(last, float(issue[:, s, k].max())) + xfer_us[k]
            ready[s, k] = last
        prev_end = np.maximum(after_bw[:, s], ready[s, -1]) + 5.0 + 300.0 * jitter[:, s] + 10.0
    for r in range(ranks):
        d = out / f"{r // 8}_{r % 8}"
        d.mkdir(parents=True, exist_ok=True)
        evs: list[dict[str, Any]] = [
            {"ph": "M", "name": "process_name", "pid": r, "tid": 0,
             "args": {"name": f"rank {r} (node{r // 8})"}},
            {"ph": "M", "name": "thread_name", "pid": r, "tid": 0, "args": {"name": "compute"}},
            {"ph": "M", "name": "thread_name", "pid": r, "tid": 1, "args": {"name": "steps"}},
        ]
        gml = ""
        for s in range(steps):
            step = s + 2
            j = float(jitter[r, s])
            t = t0 = float(start[r, s])
            seq_nodes: list[tuple[str, str, float, int]] = []

            def x(name: str, cat: str, ts: float, dur: float, tid: int = 0,
                  _evs: list[dict[str, Any]] = evs, _r: int = r, _step: int = step,
                  **args: Any) -> None:
                a = {"step": _step, "occ": 0}
                a.update({k: v for k, v in args.items() if v is not None})
                _evs.append({"ph": "X", "name": name, "cat": cat, "ts": round(ts, 3),
                             "dur": round(dur, 3), "pid": _r, "tid": tid, "args": a})

            for i, lay in enumerate(table):
                dur = lay["fw_us"] * j
                x(f"FW.{lay['module']}", "FW", t, dur, module=lay["module"], type=lay["type"],
                  param_bytes=lay["param_bytes"], in_bytes=lay["in_bytes"],
                  out_bytes=lay["out_bytes"], flops=lay["flops"])
                seq_nodes.append((f"FW.{lay['module']}", "FW", round(dur, 3), step))
                t += dur * 1.1 if i else dur
            comm_spans = []
            for k, b in enumerate(bucket_layers):
                for i in b:
                    lay = table[i]
                    dur = lay["fw_us"] * 2 * j
                    x(f"BW.{lay['module']}", "BW", t, dur, module=lay["module"],
                      type=lay["type"], param_bytes=lay["param_bytes"])
                    seq_nodes.append((f"BW.{lay['module']}", "BW", round(dur, 3), step))
                    t += dur + 2.0
                comm_spans.append((float(issue[r, s, k]), float(ready[s, k]), k))
            lanes = _lanes([c[0] for c in comm_spans], [c[1] for c in comm_spans])
            for (c0, c1, k), lane in zip(comm_spans, lanes, strict=True):
                x(f"Comm.bucket{k}", "Comm", c0, c1 - c0, tid=100 + lane,
                  collective="all_reduce", bytes=bucket_bytes[k], dtype="float32",
                  group_ranks=group, seq=s * buckets + k, path="ddp", bucket=k,
                  params=params[k])
            up = max(t, float(ready[s, -1])) + 5.0
            x("UPDATE.AdamW", "UPDATE", up, 300.0 * j, param_bytes=sum(bucket_bytes))
            end = up + 300.0 * j + 10.0
            x("STEP", "step", t0, end - t0, tid=1, peak_rss_bytes=4_000_000_000 + r)
            for m in np.arange(t0, end, 10_000.0):
                evs.append({"ph": "C", "name": "memory", "pid": r, "tid": 0,
                            "ts": round(float(m), 3),
                            "args": {"rss_bytes": 3_000_000_000 + int(m - t0)}})
            if s == steps - 1:
                nodes = seq_nodes + [(f"Comm.bucket{k}", "Comm", 0.0, step)
                                     for k in range(buckets)]
                nodes += [("UPDATE.AdamW", "UPDATE", 300.0, step), ("NEXT_STEP", "step", 0.0,
                                                                   step)]
                n_seq = len(seq_nodes)
                edges = [(i, i + 1) for i in range(n_seq - 1)]
                last_bw = layers  # index of the first BW node
                for k, b in enumerate(bucket_layers):
                    last_bw += len(b)
                    edges.append((last_bw - 1, n_seq + k))
                    edges.append((n_seq + k, n_seq + buckets))
                edges += [(n_seq - 1, n_seq + buckets), (n_seq + buckets, n_seq + buckets + 1)]
                gml = _gml(nodes, edges)
        total += sum(1 for e in evs if e["ph"] == "X")
        doc = {"traceEvents": evs, "displayTimeUnit": "ms",
               "otherData": {"format": "echo-trace/1", "rank": r, "world_size": ranks,
                             "echo_version": "0.1.0"}}
        raw = orjson.dumps(doc)
        if compress:
            (d / "trace.json.gz").write_bytes(gzip.compress(raw, compresslevel=1))
        else:
            (d / "trace.json").write_bytes(raw)
        (d / "dag.gml").write_text(gml)
        meta = {
            "format": "echo-trace/1", "echo_version": "0.1.0", "torch_version": "synthetic",
            "rank": r, "local_rank": r % 8, "node_rank": r // 8, "world_size": ranks,
            "local_world_size": 8, "rank_source": "torchrun", "backend": "nccl",
            "device": "cuda", "device_name": "synthetic", "host": f"node{r // 8}",
            "pid": 1000 + r, "steps": list(range(2, steps + 2)), "step_source": "optimizer",
            "clock_offset_us": 0.0, "clock_sync": "all_gather", "timer": "cuda_event",
            "micro_batch_size": 8, "param_bytes": sum(bucket_bytes),
            "buckets": [{"index": k, "bytes": bucket_bytes[k], "params": params[k]}
                        for k in range(buckets)],
            "trace_file": "trace.json.gz" if compress else "trace.json",
            "num_events": len(evs), "dropped_events": 0, "disabled_reason": None,
            "memory_interval_ms": 10,
        }
        (d / "meta.json").write_bytes(orjson.dumps(meta))
    return total


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python benchmarks/gen_trace.py",
        description="Write a synthetic echo-format trace (trace.json, meta.json, dag.gml per "
                    "rank) of a transformer-like DDP job, for the scale benchmarks.")
    ap.add_argument("out_dir", help="directory to write the rank directories into")
    ap.add_argument("--ranks", type=int, default=64, help="ranks (default 64)")
    ap.add_argument("--events", type=int, default=1_000_000,
                    help="events over all ranks (default 1000000)")
    ap.add_argument("--steps", type=int, default=4, help="steps per rank (default 4)")
    ap.add_argument("--buckets", type=int, default=100, help="DDP buckets (default 100)")
    ap.add_argument("--gzip", action="store_true", help="write trace.json.gz")
    a = ap.parse_args(sys.argv[1:] if argv is None else argv)
    for name in ("ranks", "events", "steps", "buckets"):
        if getattr(a, name) < 1:
            ap.error(f"--{name} must be >= 1")
    n = generate(a.out_dir, ranks=a.ranks, events=a.events, steps=a.steps,
                 buckets=a.buckets, compress=a.gzip)
    print(f"wrote {n} events for {a.ranks} ranks under {a.out_dir}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
