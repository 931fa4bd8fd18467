"""Attribution inputs from a torch.profiler (Kineto) Chrome trace (torch-free).

For offline use and tests: a trace recorded with ``record_function("FW.<module>")`` around
module forwards and ``record_function("STEP<n>")`` around steps (the shared H100 recordings)
gives the same inputs echo's own hooks give at run time:

* ``user_annotation`` ``FW.*`` → ``FW`` marks (a DDP ``module.`` prefix is dropped); when
  only leaf modules are marked, each parent's calls are the maximal runs of consecutive
  leaf ranges under its path (the hull of its children), so work a parent runs between its
  children (attention in ``attn``, a residual add in a block) falls inside it; a path whose
  children are numbered (``blocks`` of ``blocks.0``) is a ModuleList/ModuleDict, never
  called, and gets no range;
* ``STEP<n>`` → ``STEP`` marks, ``Optimizer.step#<Class>.step`` → ``UPDATE.<Class>``,
  ``Optimizer.zero_grad#<Class>.zero_grad`` → ``UPDATE.<Class>.zero_grad``,
  ``nccl:<op>`` / ``gloo:<op>`` → ``Comm.<op>`` with ``bytes``, ``dtype``, ``group_ranks``
  from the enclosed ``record_param_comms`` op;
* ``cpu_op`` with ``Sequence number`` → :class:`CpuOp`, and so does an
  ``autograd::engine::evaluate_function`` op without one (``seq`` -1); ``cuda_runtime``/``cuda_driver``
  with a correlation id → :class:`Launch`; ``kernel``/``gpu_memcpy``/``gpu_memset`` →
  :class:`Activity`.
"""

from __future__ import annotations

import gzip
import json
import re
from pathlib import Path
from typing import Any

from echo_trace.gpu.attribute import Activity, CpuOp, Launch, Mark

__all__ = ["KinetoInputs", "load_kineto"]

_DTYPE_BYTES = {"Float": 4, "Half": 2, "BFloat16": 2, "Double": 8, "Long": 8, "Int": 4,
                "Byte": 1, "Char": 1, "Bool": 1, "Short": 2}
_KINDS = {"kernel": "kernel", "gpu_memcpy": "memcpy", "gpu_memset": "memset"}
_EVAL = "autograd::engine::evaluate_function"
_STEP = re.compile(r"STEP(\d+)$")
_OPT = re.compile(r"Optimizer\.(step|zero_grad)#(\w+)\.")


class KinetoInputs:
    """The four attribution inputs read from one trace."""

    def __init__(self) -> None:
        self.marks: list[Mark] = []
        self.ops: list[CpuOp] = []
        self.launches: list[Launch] = []
        self.activities: list[Activity] = []


def _comm_args(ann: dict[str, Any], rpc: list[dict[str, Any]]) -> dict[str, Any]:
    t0, t1 = ann["ts"], ann["ts"] + ann.get("dur", 0.0)
    for r in rpc:
        if r["tid"] == ann["tid"] and r["ts"] <= t1 and r["ts"] + r.get("dur", 0.0) >= t0:
            a = r.get("args", {})
            dt = str(a.get("dtype", ""))
            n = int(a.get("In msg nelems", 0) or 0)
            ranks = a.get("Process Group Ranks", "[]")
            try:
                group = sorted(int(x) for x in json.loads(ranks))
            except (ValueError, TypeError):
                group = []
            return {"collective": str(a.get("Collective name", "")), "dtype": dt.lower(),
                    "bytes": n * _DTYPE_BYTES.get(dt, 0), "group_ranks": group}
    return {}


def _hulls(leaves: list[Mark]) -> list[Mark]:
    """Parent ranges: maximal runs of consecutive leaf marks sharing each path prefix."""
    out: list[Mark] = []
    open_: dict[str, list[float]] = {}  # prefix -> [start, end]
    tid = leaves[0].tid if leaves else 0
    for m in sorted(leaves, key=lambda m: m.ts_us):
        parts = m.name.removeprefix("FW.").split(".")
        prefixes = {".".join(parts[:i]) for i in range(1, len(parts))
                    if not parts[i].isdigit()}
        for p in list(open_):
            if p not in prefixes:
                s, e = open_.pop(p)
                out.append(Mark("FW." + p, "FW", s, e, tid, {"module": p, "hull": True}))
        for p in prefixes:
            span = open_.setdefault(p, [m.ts_us, m.end_us])
            span[1] = max(span[1], m.end_us)
    for p, (s, e) in open_.items():
        out.append(Mark("FW." + p, "FW", s, e, tid, {"module": p, "hull": True}))
    return out


def load_kineto(path: str | Path, *, hull_parents: bool = True) -> KinetoInputs:
    """Read a Kineto trace (``.json`` or ``.json.gz``) into attribution inputs."""
    p = Path(path)
    opener: Any = gzip.open if p.name.endswith(".gz") else open
    with opener(p, "rt", encoding="utf-8") as f:
        doc = json.load(f)
    events = doc["traceEvents"] if isinstance(doc, dict) else doc
    out = KinetoInputs()
    rpc = [e for e in events if e.get("ph") == "X" and e.get("name") == "record_param_comms"]
    leaves: dict[int, list[Mark]] = {}
    for e in events:
        if e.get("ph") != "X":
            continue
        cat = e.get("cat")
        args = e.get("args") or {}
        ts = float(e["ts"])
        end = ts + float(e.get("dur", 0.0))
        if cat == "user_annotation":
            name = str(e["name"])
            tid = int(e["tid"])
            if name.startswith("FW."):
                path_ = name[3:].removeprefix("module.")
                leaves.setdefault(tid, []).append(
                    Mark("FW." + path_, "FW", ts, end, tid, {"module": path_}))
            elif (sm := _STEP.match(name)) is not None:
                out.marks.append(Mark("STEP", "STEP", ts, end, tid, {"step": int(sm.group(1))}))
            elif (om := _OPT.match(name)) is not None:
                suffix = "" if om.group(1) == "step" else ".zero_grad"
                out.marks.append(Mark(f"UPDATE.{om.group(2)}{suffix}", "UPDATE", ts, end, tid))
            elif name.startswith(("nccl:", "gloo:")):
                op = name.split(":", 1)[1]
                out.marks.append(Mark("Comm." + op, "Comm", ts, end, tid, _comm_args(e, rpc)))
        elif cat == "cpu_op" and "Sequence number" in args:
            out.ops.append(CpuOp(ts, end, int(e["tid"]), int(args["Sequence number"]),
                                 int(args.get("Fwd thread id", 0) or 0)))
        elif cat == "cpu_op" and str(e["name"]).startswith(_EVAL):
            out.ops.append(CpuOp(ts, end, int(e["tid"]), -1, -1))
        elif cat in ("cuda_runtime", "cuda_driver") and "correlation" in args:
            out.launches.append(Launch(int(args["correlation"]), ts, int(e["tid"])))
        elif cat in _KINDS:
            out.activities.append(Activity(str(e["name"]), _KINDS[cat],
                                           int(args.get("stream", e.get("tid", 0))), ts,
                                           float(e.get("dur", 0.0)),
                                           int(args.get("correlation", -1)),
                                           int(args.get("bytes", 0) or 0)))
    for ms in leaves.values():
        out.marks.extend(ms)
        if hull_parents:
            out.marks.extend(_hulls(ms))
    return out
