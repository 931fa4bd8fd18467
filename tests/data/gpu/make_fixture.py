"""Trim a shared H100 Kineto recording to one step for the offline GPU attribution tests.

``python tests/data/gpu/make_fixture.py ../shared/reference/gpu-h100/kineto/kineto_gpt12_single.json.gz
tests/data/gpu/kineto_gpt12_single_step4.json.gz --step 4`` keeps the ``X`` events the
attribution reads (annotations, ops with sequence numbers and ``evaluate_function`` ops,
CUDA runtime/driver launches, kernels, memcpys, memsets, ``record_param_comms``) whose CPU
or GPU time falls in ``STEP<step>``, with only the args it reads, and the first device's
``name``, ``totalGlobalMem`` and ``numSms`` from ``deviceProperties``.
"""

from __future__ import annotations

import argparse
import gzip
import json

__all__ = ["trim"]

_KEEP_ARGS = ("Sequence number", "Fwd thread id", "correlation", "stream", "bytes",
              "Collective name", "In msg nelems", "dtype", "Process Group Ranks")
_CATS = ("user_annotation", "cpu_op", "cuda_runtime", "cuda_driver", "kernel", "gpu_memcpy",
         "gpu_memset")


def _wanted(e: dict) -> bool:
    cat = e.get("cat")
    if e.get("ph") != "X" or cat not in _CATS:
        return False
    if cat == "cpu_op":
        a = e.get("args", {})
        return ("Sequence number" in a or e["name"].startswith("autograd::engine")
                or e["name"] == "record_param_comms")
    if cat in ("cuda_runtime", "cuda_driver"):
        return "correlation" in e.get("args", {})
    return True


def trim(doc: dict, step: int) -> dict:
    """The events of ``STEP<step>`` (launch window on the CPU, activity up to 50 ms after)."""
    evs = doc["traceEvents"]
    st = next(e for e in evs if e.get("name") == f"STEP{step}" and e.get("ph") == "X")
    t0, t1 = st["ts"], st["ts"] + st["dur"]
    out = []
    for e in evs:
        if not _wanted(e):
            continue
        gpu = e["cat"] in ("kernel", "gpu_memcpy", "gpu_memset")
        if not (t0 <= e["ts"] <= (t1 + 50_000 if gpu else t1)):
            continue
        name = e["name"]
        if e["cat"] in ("kernel", "cpu_op") and not name.startswith("autograd::engine") \
                and name != "record_param_comms":
            name = name[:60]
        args = {k: v for k, v in e.get("args", {}).items() if k in _KEEP_ARGS}
        out.append({"ph": "X", "cat": e["cat"], "name": name, "tid": e["tid"],
                    "ts": round(e["ts"] - t0, 3), "dur": e.get("dur", 0.0), "args": args})
    props = [{k: p[k] for k in ("id", "name", "totalGlobalMem", "numSms") if k in p}
             for p in doc.get("deviceProperties", [])[:1]]
    return {"deviceProperties": props, "traceEvents": out}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("src")
    ap.add_argument("dst")
    ap.add_argument("--step", type=int, default=4)
    a = ap.parse_args()
    with gzip.open(a.src, "rt", encoding="utf-8") as f:
        doc = json.load(f)
    with gzip.open(a.dst, "wt", encoding="utf-8") as f:
        json.dump(trim(doc, a.step), f, separators=(",", ":"))


if __name__ == "__main__":
    main()
