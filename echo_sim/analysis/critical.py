"""Critical path of one iteration through the global multi-rank graph.

Method: replay the step (:func:`echo_sim.sim.replay.replay`) and walk
:meth:`echo_sim.sim.engine.Schedule.critical_predecessor` back from the task that ends last.
We chose this over ``networkx.dag_longest_path`` on the measured graph because

* a collective is *one* replay task that starts when its last member has issued it, so
  the path crosses ranks exactly where a straggler holds the others back; on the measured
  graph every member's duration includes its own waiting and the longest path would
  count waiting as communication;
* resources are respected: a task delayed by a busy compute stream or an in-order
  communication channel links to the task that held it — a longest path over dependency
  edges alone cannot see that;
* host delays (the measured gaps before each op) are explicit in the replay, so they
  appear on the path as their own category instead of vanishing;
* the segments add up to the replayed iteration span, which replay keeps within a few
  percent of the measured one.

Segments are reported in microseconds from the start of the path, with categories
``FW``, ``BW``, ``Comm``, ``UPDATE`` and ``host delay`` — the measured gaps before ops
that no dependency explains: Python overhead, data loading, and the time of operations
outside any traced module (functional ops such as attention's matmuls and softmax when
only modules are traced).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from echo_sim.errors import ConfigError
from echo_sim.sim.replay import (
    TASK_COMPUTE,
    TASK_FINISH,
    TASK_INSTANCE,
    ReplayResult,
    ScaleRule,
    replay,
)
from echo_sim.trace.model import CAT_NAMES, Trace

__all__ = ["CATEGORIES", "CRITICAL_PID", "CriticalPath", "Segment", "critical_path",
           "perfetto_events"]

CATEGORIES: tuple[str, ...] = ("FW", "BW", "Comm", "UPDATE", "host delay")
_HOST = "host delay"
_TOL_US = 1e-6
CRITICAL_PID = 999_999
"""Process id of the "critical path" track in :func:`perfetto_events` (no rank has it)."""


@dataclass(frozen=True)
class Segment:
    """One piece of the path: an op, a communication instance, or a host delay."""

    name: str
    cat: str  # one of CATEGORIES
    ranks: tuple[int, ...]
    start_us: float  # from the start of the path
    dur_us: float
    rows: tuple[int, ...]  # trace rows of the event(s); () for gaps

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "cat": self.cat, "ranks": list(self.ranks),
                "start_us": round(self.start_us, 3), "dur_us": round(self.dur_us, 3)}


@dataclass
class CriticalPath:
    """The critical path of one step, and the replay it was read from."""

    step: int
    segments: list[Segment]
    replay: ReplayResult
    shares_us: dict[str, float] = field(default_factory=dict)

    @property
    def total_us(self) -> float:
        return float(sum(s.dur_us for s in self.segments))

    @property
    def rows(self) -> set[int]:
        """Trace rows of every event on the path (for highlighting)."""
        return {r for s in self.segments for r in s.rows}

    def shares_pct(self) -> dict[str, float]:
        tot = self.total_us
        return {c: (100.0 * v / tot if tot > 0 else 0.0) for c, v in self.shares_us.items()}

    def to_dict(self) -> dict[str, Any]:
        pct = self.shares_pct()
        return {
            "step": self.step,
            "total_us": round(self.total_us, 3),
            "replayed_iteration_time_us": round(self.replay.replayed_iteration_time_us, 3),
            "measured_iteration_time_us": round(self.replay.measured_iteration_time_us, 3),
            "shares": {c: {"us": round(self.shares_us[c], 3), "pct": round(pct[c], 2)}
                       for c in CATEGORIES},
            "ranks_on_path": sorted({r for s in self.segments for r in s.ranks}),
            "segments": [s.to_dict() for s in self.segments],
        }

    def text(self, max_runs: int = 60) -> str:
        pct = self.shares_pct()
        lines = [
            f"critical path of step {self.step}: {self.total_us / 1e3:.3f} ms over "
            f"{len(self.segments)} segments (measured iteration "
            f"{self.replay.measured_iteration_time_us / 1e3:.3f} ms)",
            f"{'category':<12} {'ms':>10} {'share':>8}",
        ]
        for c in CATEGORIES:
            lines.append(f"{c:<12} {self.shares_us[c] / 1e3:>10.3f} {pct[c]:>7.1f}%")
        lines.append("")
        lines.append(f"{'start ms':>10} {'ms':>9}  {'category':<11} {'ranks':<8} events")
        runs = _runs(self.segments)
        for start, dur, cat, ranks, names in runs[:max_runs]:
            shown = names[0] if len(names) == 1 else f"{names[0]} … {names[-1]} ({len(names)})"
            lines.append(f"{start / 1e3:>10.3f} {dur / 1e3:>9.3f}  {cat:<11} "
                         f"{','.join(map(str, ranks)):<8} {shown}")
        if len(runs) > max_runs:
            lines.append(f"… {len(runs) - max_runs} more runs (--json lists every segment)")
        return "\n".join(lines)


def _runs(segments: Sequence[Segment]) -> list[tuple[float, float, str, tuple[int, ...], list[str]]]:
    """Consecutive segments of one category on the same ranks, merged for printing."""
    runs: list[tuple[float, float, str, tuple[int, ...], list[str]]] = []
    for s in segments:
        if runs and runs[-1][2] == s.cat and runs[-1][3] == s.ranks:
            start, dur, cat, ranks, names = runs[-1]
            runs[-1] = (start, dur + s.dur_us, cat, ranks, names + [s.name])
        else:
            runs.append((s.start_us, s.dur_us, s.cat, s.ranks, [s.name]))
    return runs


def critical_path(trace: Trace, *, step: int | None = None,
                  scale: Sequence[str] | Sequence[ScaleRule] = ()) -> CriticalPath:
    """Critical path of ``step`` (default: the last captured step); see the module doc."""
    if not trace.steps:
        raise ConfigError(f"trace {trace.source or '(in memory)'} has no captured steps")
    if step is None:
        step = max(trace.steps)
    res = replay(trace, scale=scale, steps=[step])
    return CriticalPath(step, *_walk(res))


def _walk(res: ReplayResult) -> tuple[list[Segment], ReplayResult, dict[str, float]]:
    tr, g, sched = res.trace, res.graph, res.schedule
    ev = tr.events
    crit = sched.critical_predecessor(g)
    deps = res.deps
    members: dict[int, list[int]] = {}
    for r, i in zip(deps.comm.tolist(), deps.comm_inst.tolist(), strict=True):
        members.setdefault(i, []).append(r)
    nc, nm = deps.compute.size, deps.comm.size
    t = int(np.argmax(sched.end_us))
    path: list[int] = []
    while t >= 0:
        path.append(t)
        t = int(crit[t])
    path.reverse()
    origin = float(sched.start_us[path[0]])
    segs: list[Segment] = []
    cursor = origin
    for t in path:
        start, end = float(sched.start_us[t]), float(sched.end_us[t])
        if start > cursor + _TOL_US:
            segs.append(Segment("(wait)", _HOST, (), cursor - origin, start - cursor, ()))
        row = int(res.task_row[t])
        name = tr.names[int(ev.name[row])]
        kind = int(res.task_kind[t])
        if kind == TASK_INSTANCE:
            rows = tuple(members[t - nc - nm])
            ranks = tuple(sorted({int(ev.rank[r]) for r in rows}))
            segs.append(Segment(name, "Comm", ranks, start - origin, end - start, rows))
        elif kind == TASK_FINISH:
            if end - start > _TOL_US:
                segs.append(Segment(f"{name} (completion)", "Comm", (int(ev.rank[row]),),
                                    start - origin, end - start, (row,)))
        else:
            ranks = (int(ev.rank[row]),)
            delay = float(res.task_delay_us[t]) if kind == TASK_COMPUTE else end - start
            if delay > _TOL_US:
                label = f"before {name}" if kind == TASK_COMPUTE else f"issue {name}"
                segs.append(Segment(label, _HOST, ranks, start - origin, delay, ()))
            if kind == TASK_COMPUTE:
                segs.append(Segment(name, CAT_NAMES[int(ev.cat[row])], ranks,
                                    start + delay - origin, end - start - delay, (row,)))
        cursor = max(cursor, end)
    shares = {c: 0.0 for c in CATEGORIES}
    for s in segs:
        shares[s.cat if s.cat in shares else _HOST] += s.dur_us
    return segs, res, shares


def _origin_us(cp: CriticalPath, replayed: Trace, mapping: np.ndarray) -> float:
    """Time in ``replayed`` where the path starts: a compute segment's replayed start minus
    its offset on the path."""
    for s in cp.segments:
        if s.rows and s.cat != "Comm" and mapping[s.rows[0]] >= 0:
            return float(replayed.events.ts_us[mapping[s.rows[0]]]) - s.start_us
    return 0.0


def perfetto_events(cp: CriticalPath, events: list[dict], replayed: Trace,
                    mapping: np.ndarray) -> list[dict]:
    """``events`` (the replayed timeline, path rows marked ``args.critical``) plus what
    Perfetto shows, since it ignores ``cname`` colours:

    * a process "critical path (step N)" sorted first, holding every segment in order
      (ops, communication, host delays) with its category and ranks;
    * flow arrows (``ph`` ``s`` → ``f``, bound to the enclosing slices) linking the path's
      slices on the rank tracks in path order, so the path can be followed across ranks.

    ``replayed`` / ``mapping``: ``cp.replay.replayed_trace()`` and ``replayed_row_map()``,
    which ``events`` were made from.
    """
    out = list(events)
    origin = _origin_us(cp, replayed, mapping)
    pid = CRITICAL_PID
    out += [
        {"name": "process_name", "ph": "M", "pid": pid, "tid": 0,
         "args": {"name": f"critical path (step {cp.step})"}},
        {"name": "process_sort_index", "ph": "M", "pid": pid, "tid": 0,
         "args": {"sort_index": -1}},
        {"name": "thread_name", "ph": "M", "pid": pid, "tid": 0, "args": {"name": "path"}},
    ]
    for s in cp.segments:
        out.append({"name": s.name, "cat": s.cat, "ph": "X", "pid": pid, "tid": 0,
                    "ts": round(origin + s.start_us, 3), "dur": round(s.dur_us, 3),
                    "args": {"category": s.cat, "ranks": list(s.ranks)}})
    on_path = sorted((e for e in events if e.get("ph") == "X"
                      and e.get("args", {}).get("critical")), key=lambda e: e["ts"])
    for k, (a, b) in enumerate(zip(on_path, on_path[1:], strict=False)):
        common = {"name": "critical path", "cat": "critical", "id": k}
        out.append({**common, "ph": "s", "pid": a["pid"], "tid": a["tid"], "ts": a["ts"]})
        out.append({**common, "ph": "f", "bp": "e", "pid": b["pid"], "tid": b["tid"],
                    "ts": b["ts"]})
    return out
