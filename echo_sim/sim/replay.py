"""Replay: run the measured dependency graph through the discrete-event engine.

The task graph (built with numpy from :func:`echo_sim.trace.graph.build_deps`, wait edges on):

* one task per leaf compute event on ``rank<r>/compute``; its duration is
  ``host delay + measured dur × scale``. The *host delay* is the measured gap between the
  event's start and the latest end of its predecessors (Python overhead, data loading,
  kernel launch — dPRO's ``delay``); without it replay underestimates;
* one resource-less *issue* task per ``Comm`` event: the gap from its (finished)
  predecessor to the issue, so a collective starts no earlier than measured relative to
  the compute that launched it;
* one task per collective instance, holding the ``rank<r>/comm`` channel of every member
  (one channel per rank and process group: collectives of different groups overlap;
  ``comm_queues="op"``, dPRO's ``--del_queue``, gives every operation name its own channel,
  :mod:`echo_sim.sim.comm_channels`):
  it starts when the last member has issued it and all channels are free; one task per
  send/recv pair, holding the sender's ``rank<r>/send`` and the receiver's
  ``rank<r>/recv`` channel (a rank sends and receives concurrently, as
  ``batch_isend_irecv`` does). Its duration is the measured transfer time: the earliest
  member completion (the receive's, for a pair) minus the last member start, a member
  starting at the later of its issue and the completion of the previous operation on its
  in-order channel — earlier members' durations include waiting for the last one;
* one resource-less *finish* task per ``Comm`` event: its measured end minus the
  instance's completion (a rank that saw the operation complete later — copy-out,
  preemption — keeps that lag); what depends on the event depends on this task.

What-if: ``scale=("Comm.*=0.5", "BW.*=0.8")`` multiplies the measured duration of every
event whose name matches the glob (``fnmatch``, case-sensitive); when several match, the
last expression wins. Host delays are never scaled.

Iteration time of a step on a rank: the ``STEP`` marker (measured) and, replayed, the span
of its replayed events widened by the measured head (marker start → first event) and tail
(last event → marker end). A step's time is that of its slowest rank; reported figures are
medians over steps, in microseconds.
"""

from __future__ import annotations

import fnmatch
import gc
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from echo_sim.errors import ConfigError
from echo_sim.sim.comm_channels import COMM_QUEUES, channel_keys, channel_name
from echo_sim.sim.engine import Schedule, TaskGraph, run
from echo_sim.trace.graph import (
    EDGE_ORDER,
    EDGE_STEP,
    Deps,
    build_deps,
    issue_predecessor,
    time_tolerance_us,
)
from echo_sim.trace.model import COLLECTIVES, Cat, Trace

__all__ = [
    "COMM_QUEUES",
    "DURATIONS",
    "MAX_SCALE_FACTOR",
    "TASK_COMPUTE",
    "TASK_FINISH",
    "TASK_INSTANCE",
    "TASK_ISSUE",
    "ReplayResult",
    "ScaleRule",
    "parse_scale",
    "replay",
]

TASK_COMPUTE, TASK_ISSUE, TASK_INSTANCE, TASK_FINISH = 0, 1, 2, 3
MAX_SCALE_FACTOR = 1e6
"""Largest --scale factor: a million times slower keeps every scaled duration and the
replayed times that sum them finite (a factor of 1e308 made them inf, then NaN)."""
DURATIONS: tuple[str, ...] = ("measured", "mean", "median")
"""Where replayed durations come from (see :func:`replay`)."""
_SEND = COLLECTIVES.index("send")


@dataclass(frozen=True, kw_only=True)
class ScaleRule:
    """Multiply the duration of events whose name matches ``glob`` by ``factor``."""

    glob: str
    factor: float

    def __post_init__(self) -> None:
        if not self.glob:
            raise ConfigError("--scale glob is empty; use e.g. 'Comm.*=0.5'")
        if not (math.isfinite(self.factor) and 0 <= self.factor <= MAX_SCALE_FACTOR):
            raise ConfigError(
                f"--scale factor {self.factor!r} for {self.glob!r} is out of range; valid: a "
                f"number in [0, {MAX_SCALE_FACTOR:g}] (0: the events take no time)"
            )


def parse_scale(exprs: Sequence[str]) -> tuple[ScaleRule, ...]:
    """``["Comm.*=0.5", "BW.*=0.8"]`` → rules; a malformed expression is a ConfigError."""
    rules = []
    for e in exprs:
        glob, sep, value = str(e).rpartition("=")
        if not sep:
            raise ConfigError(f"--scale {e!r} is not GLOB=FACTOR, e.g. 'Comm.*=0.5'")
        try:
            factor = float(value)
        except ValueError:
            raise ConfigError(
                f"--scale {e!r}: factor {value!r} is not a number, e.g. 'Comm.*=0.5'"
            ) from None
        rules.append(ScaleRule(glob=glob.strip(), factor=factor))
    return tuple(rules)


def _name_factors(trace: Trace, rules: Sequence[ScaleRule]) -> np.ndarray:
    factors = np.ones(len(trace.names), dtype=np.float64)
    for rule in rules:
        hit = np.fromiter((fnmatch.fnmatchcase(n, rule.glob) for n in trace.names), bool,
                          count=len(trace.names))
        if not hit.any():
            examples = ", ".join(sorted({n.split(".")[0] + ".*" for n in trace.names})[:6])
            raise ConfigError(
                f"--scale glob {rule.glob!r} matches no event name; names look like {examples}"
            )
        factors[hit] = rule.factor
    return factors


@dataclass
class ReplayResult:
    """A replayed schedule and how it compares with the measured one (times in µs)."""

    trace: Trace
    deps: Deps
    graph: TaskGraph
    schedule: Schedule
    rules: tuple[ScaleRule, ...]
    t0_us: float  # trace time of replay time 0
    task_kind: np.ndarray  # TASK_COMPUTE / TASK_ISSUE / TASK_INSTANCE / TASK_FINISH
    task_row: np.ndarray  # event row (instance: its first member; issue/finish: the member)
    task_delay_us: np.ndarray  # host delay at the head of each task's duration
    row_start_us: np.ndarray  # per trace row: replayed start on the trace clock (nan: not replayed)
    row_end_us: np.ndarray
    per_step: list[dict[str, Any]] = field(default_factory=list)
    durations: str = "measured"
    comm_queues: str = "group"
    num_comm_channels: int = 0

    @property
    def measured_iteration_time_us(self) -> float:
        return _median([s["measured_us"] for s in self.per_step])

    @property
    def replayed_iteration_time_us(self) -> float:
        return _median([s["replayed_us"] for s in self.per_step])

    @property
    def error_pct(self) -> float:
        m = self.measured_iteration_time_us
        return 100.0 * (self.replayed_iteration_time_us - m) / m if m > 0 else float("nan")

    @property
    def measured_mean_iteration_time_us(self) -> float:
        vals = [s["measured_us"] for s in self.per_step]
        return float(np.mean(vals)) if vals else float("nan")

    @property
    def replayed_mean_iteration_time_us(self) -> float:
        vals = [s["replayed_us"] for s in self.per_step]
        return float(np.mean(vals)) if vals else float("nan")

    @property
    def mean_error_pct(self) -> float:
        """Replayed vs measured *mean* iteration time (the figure for mean durations)."""
        m = self.measured_mean_iteration_time_us
        return 100.0 * (self.replayed_mean_iteration_time_us - m) / m if m > 0 else float("nan")

    @property
    def median_abs_step_error_pct(self) -> float:
        return _median([abs(s["error_pct"]) for s in self.per_step])

    def task_step(self) -> np.ndarray:
        return self.trace.events.step[self.task_row]

    def to_dict(self) -> dict[str, Any]:
        return {
            "replayed_iteration_time_us": _r(self.replayed_iteration_time_us),
            "measured_iteration_time_us": _r(self.measured_iteration_time_us),
            "error_pct": _r(self.error_pct),
            "median_abs_step_error_pct": _r(self.median_abs_step_error_pct),
            "measured_mean_iteration_time_us": _r(self.measured_mean_iteration_time_us),
            "replayed_mean_iteration_time_us": _r(self.replayed_mean_iteration_time_us),
            "mean_error_pct": _r(self.mean_error_pct),
            "steps": [{k: _r(v) for k, v in s.items()} for s in self.per_step],
            "scale": [f"{r.glob}={r.factor:g}" for r in self.rules],
            "durations": self.durations,
            "comm_queues": self.comm_queues,
            "num_comm_channels": self.num_comm_channels,
            "ranks": sorted(int(r) for r in np.unique(self.trace.events.rank)),
            "num_tasks": len(self.graph),
            "num_events": int(self.deps.compute.size + self.deps.comm.size),
            "num_comm_instances": self.deps.n_inst,
            "unmatched_comm": self.deps.n_unmatched,
            "unmatched_examples": self.deps.unmatched[:10],
        }

    def text(self) -> str:
        lines = [
            f"replay of {self.deps.compute.size + self.deps.comm.size} events "
            f"({self.deps.n_inst} comm instances) on {len(np.unique(self.trace.events.rank))} "
            f"rank(s), steps {self.deps.steps}, {self.durations} durations, "
            f"{self.num_comm_channels} comm channel(s) ("
            + ("one per rank and process group" if self.comm_queues == "group" else
               "one per rank, process group and operation: --del-queue") + ")"
            + (f", scale {' '.join(f'{r.glob}={r.factor:g}' for r in self.rules)}"
               if self.rules else ""),
            f"{'step':>8} {'measured ms':>12} {'replayed ms':>12} {'error':>8}",
        ]
        for s in self.per_step:
            lines.append(f"{s['step']:>8} {s['measured_us'] / 1e3:>12.3f} "
                         f"{s['replayed_us'] / 1e3:>12.3f} {s['error_pct']:>+7.2f}%")
        lines.append(f"{'median':>8} {self.measured_iteration_time_us / 1e3:>12.3f} "
                     f"{self.replayed_iteration_time_us / 1e3:>12.3f} {self.error_pct:>+7.2f}%")
        lines.append(f"{'mean':>8} {self.measured_mean_iteration_time_us / 1e3:>12.3f} "
                     f"{self.replayed_mean_iteration_time_us / 1e3:>12.3f} "
                     f"{self.mean_error_pct:>+7.2f}%")
        if self.deps.n_unmatched:
            lines.append(f"warning: {self.deps.n_unmatched} communication operation(s) without "
                         f"all their members, e.g. {self.deps.unmatched[0]}")
        return "\n".join(lines)

    def replayed_trace(self) -> Trace:
        """The trace with replayed times: leaf compute and Comm events, plus STEP markers
        spanning each replayed iteration (rows re-sorted by (rank, ts))."""
        return _retimed_trace(self)

    def replayed_row_map(self) -> np.ndarray:
        """Per original trace row, its row in :meth:`replayed_trace` (-1 when dropped)."""
        return _retimed_rows(self)[1]


def _median(xs: Sequence[float]) -> float:
    vals = [x for x in xs if x == x]
    return float(np.median(vals)) if vals else float("nan")


def _r(v: Any) -> Any:
    return round(v, 3) if isinstance(v, float) else v


# --------------------------------------------------------------------------- build
def replay(trace: Trace, *, scale: Sequence[str] | Sequence[ScaleRule] = (),
           steps: Sequence[int] | None = None, durations: str = "measured",
           comm_queues: str = "group") -> ReplayResult:
    """Replay the selected steps (all by default) of ``trace``; see the module doc.

    ``durations``: ``"measured"`` gives every event its own step's measurement;
    ``"mean"`` / ``"median"`` give it the mean / median over the selected steps of the
    same (rank, name, occurrence) — op time, host delay, transfer, completion lag — so
    every step replays the typical iteration, as dPRO's replayer does with averaged
    durations. Means add up (the mean iteration of a chain is the sum of mean op times);
    medians of right-skewed op times add up to less than the median iteration.

    ``comm_queues``: ``"group"`` (one in-order channel per rank and process group) or
    ``"op"`` (dPRO's ``--del_queue``: each operation name its own channel); see
    :mod:`echo_sim.sim.comm_channels`.
    """
    if comm_queues not in COMM_QUEUES:
        raise ConfigError(f"comm_queues {comm_queues!r}: choose one of {', '.join(COMM_QUEUES)}")
    if durations not in DURATIONS:
        raise ConfigError(f"--durations {durations!r}: choose one of {', '.join(DURATIONS)}")
    rules = tuple(r if isinstance(r, ScaleRule) else parse_scale([r])[0] for r in scale)
    factors = _name_factors(trace, rules)
    # echo_trace writes dag.gml by the same rules build_deps applies, so for echo traces
    # the rebuilt edges are the dag's and checking every rank's dag against the events
    # (60% of replay time on a 64-rank trace) buys nothing; foreign formats use theirs.
    deps = build_deps(trace, steps, wait_edges=True, use_dags=trace.source_format != "echo")
    ev = trace.events
    comp, comm, inst = deps.compute, deps.comm, deps.comm_inst
    nc, nm, ni = comp.size, comm.size, deps.n_inst
    if nc + nm == 0:
        raise ConfigError(f"trace {trace.source or '(in memory)'} has no FW/BW/UPDATE/Comm "
                          f"events in steps {deps.steps}")
    end = ev.ts_us + ev.dur_us
    src, dst, kind = _replay_edges(trace, deps, end)

    # Task ids: compute [0, nc), issue [nc, nc+nm), instance [nc+nm, +ni), finish [.., +nm).
    # A row as an edge destination is its compute / issue task; as a source its compute /
    # finish task (the instance as this rank saw it complete).
    fin0 = nc + nm + ni
    task_src = np.full(len(ev), -1, dtype=np.int64)
    task_dst = np.full(len(ev), -1, dtype=np.int64)
    task_src[comp] = task_dst[comp] = np.arange(nc)
    task_dst[comm] = nc + np.arange(nm)
    task_src[comm] = fin0 + np.arange(nm)
    # Latest measured end of each row's predecessors: the host delay / issue gap reference.
    pred_end = np.full(len(ev), -np.inf)
    np.maximum.at(pred_end, dst, end[src])
    t0 = float(min(ev.ts_us[comp].min() if nc else np.inf, ev.ts_us[comm].min() if nm else np.inf))

    rows = np.concatenate([comp, comm])
    has_pred = np.isfinite(pred_end[rows])
    gap = np.where(has_pred, np.maximum(ev.ts_us[rows] - pred_end[rows], 0.0), 0.0)
    release = np.where(has_pred, 0.0, ev.ts_us[rows] - t0)

    chan = channel_keys(trace, comm, comm_queues)
    inst_dur, inst_row, inst_ts, lag = _instance_durations(trace, comm, inst, ni, end, chan)
    comp_dur = ev.dur_us[comp]
    if durations != "measured":
        ident = _identity(trace, rows)
        gap = _by_key(ident, gap, durations)
        comp_dur = _by_key(ident[:nc], comp_dur, durations)
        lag = _by_key(ident[nc:], lag, durations)
        inst_dur = _by_key(_identity(trace, inst_row), inst_dur, durations)
    comm_factor = factors[ev.name[comm]]
    op = np.concatenate([comp_dur * factors[ev.name[comp]], np.zeros(nm),
                         inst_dur * factors[ev.name[inst_row]], lag * comm_factor])
    delay = np.concatenate([gap, np.zeros(ni + nm)])
    dur = op + delay
    kinds = np.concatenate([np.full(nc, TASK_COMPUTE), np.full(nm, TASK_ISSUE),
                            np.full(ni, TASK_INSTANCE), np.full(nm, TASK_FINISH)]).astype(np.int8)
    task_row = np.concatenate([rows, inst_row, comm])
    order_time = np.concatenate([ev.ts_us[comp], ev.ts_us[comm], inst_ts, end[comm]])
    priority = np.empty(order_time.shape[0], dtype=np.int64)
    priority[np.argsort(order_time, kind="stable")] = np.arange(order_time.shape[0])

    # Speed shortcut: the cyclic GC has nothing to free here (no reference cycles) but
    # rescans the million small lists/tuples built below again and again; pause it.
    gc_was_on = gc.isenabled()
    gc.disable()
    try:
        g = TaskGraph()
        resources = _resources(g, trace, comp, comm, inst, ni, chan, comm_queues)
        e_src = np.concatenate([task_src[src], nc + np.arange(nm), nc + nm + inst])
        e_dst = np.concatenate([task_dst[dst], nc + nm + inst, fin0 + np.arange(nm)])
        _fill(g, dur, resources, priority, np.concatenate([release, np.zeros(ni + nm)]),
              e_src, e_dst, task_row)
        schedule = run(g)
    finally:
        if gc_was_on:
            gc.enable()

    row_start = np.full(len(ev), np.nan)
    row_end = np.full(len(ev), np.nan)
    s, e = schedule.start_us + t0, schedule.end_us + t0
    row_start[comp] = s[:nc] + delay[:nc]
    row_end[comp] = e[:nc]
    row_start[comm] = e[nc:nc + nm]  # a Comm slice starts when its rank issues it
    row_end[comm] = e[fin0:]
    result = ReplayResult(trace, deps, g, schedule, rules, t0, kinds, task_row, delay,
                          row_start, row_end, durations=durations, comm_queues=comm_queues,
                          num_comm_channels=int(np.unique(chan).size))
    result.per_step = _per_step(trace, deps, row_start, row_end)
    return result


def _identity(trace: Trace, rows: np.ndarray) -> np.ndarray:
    """One int64 per row for (rank, name, occ): the same event in every step."""
    ev = trace.events
    occ = ev.occ[rows].astype(np.int64)
    span = int(occ.max()) + 1 if occ.size else 1
    return ((ev.rank[rows].astype(np.int64) * (len(trace.names) + 1)
             + ev.name[rows].astype(np.int64)) * span + occ)


def _by_key(key: np.ndarray, values: np.ndarray, how: str) -> np.ndarray:
    """Each value replaced by the mean or median of the values sharing its key."""
    if key.size == 0:
        return values
    _, inv = np.unique(key, return_inverse=True)
    inv = inv.reshape(-1)
    counts = np.bincount(inv)
    if how == "mean":
        return (np.bincount(inv, weights=values) / counts)[inv]
    order = np.lexsort((values, inv))
    v = values[order]
    starts = np.cumsum(counts) - counts
    med = 0.5 * (v[starts + (counts - 1) // 2] + v[starts + counts // 2])
    return med[inv]


def _replay_edges(trace: Trace, deps: Deps, end: np.ndarray,
                  ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The graph's edges made consistent with the measurement for replay.

    * compute → Comm edges whose compute was still running at issue are moved to the
      last compute that had finished (the Comm was launched from inside it);
    * Comm → compute edges where the Comm (on that rank) ended after the compute started
      are dropped: that compute did not wait for it.
    """
    ev = trace.events
    tol = time_tolerance_us(trace)
    src, dst, kind = deps.src, deps.dst, deps.kind
    is_comm = ev.cat == Cat.COMM
    into_comm = is_comm[dst] & ~is_comm[src]
    late = into_comm & (end[src] > ev.ts_us[dst] + tol)
    if late.any():
        finished = np.full(len(ev), -1, dtype=np.int64)
        finished[deps.comm] = issue_predecessor(trace, deps)
        src = src.copy()
        src[late] = finished[dst[late]]
    keep = src >= 0
    out_comm = is_comm[src] & ~is_comm[dst]
    keep &= ~(out_comm & (end[src] > ev.ts_us[dst] + tol))
    keep |= (kind == EDGE_ORDER) | (kind == EDGE_STEP)
    keep &= src >= 0
    return src[keep], dst[keep], kind[keep]


def _instance_durations(trace: Trace, comm: np.ndarray, inst: np.ndarray, ni: int,
                        end: np.ndarray, chan: np.ndarray,
                        ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per instance: transfer time (µs), first member row, last member's issue time; per
    member row: its completion lag (µs), how much later than the instance it ended.

    transfer = completion − last start, where completion is the earliest member end
    (a send's end is left out when its receive was traced: gloo and NCCL may report a
    send done before, or long after, the data arrived) and a member starts at the later
    of its issue and the completion of the previous operation on its channel (the
    channel is in-order, so that wait is queueing, not transfer).
    """
    ev = trace.events
    ts = ev.ts_us[comm]
    cend = end[comm]
    is_send = ev.coll[comm] == _SEND
    done = np.full(ni, np.inf)
    np.minimum.at(done, inst, np.where(is_send, np.inf, cend))
    only_sends = ~np.isfinite(done)
    if only_sends.any():
        any_end = np.full(ni, np.inf)
        np.minimum.at(any_end, inst, cend)
        done[only_sends] = any_end[only_sends]
    member_done = done[inst]
    eff_start = ts.copy()
    order = np.lexsort((ts, chan))
    c_sorted = chan[order]
    bounds = np.flatnonzero(np.diff(c_sorted)) + 1
    for seg in np.split(order, bounds):
        if seg.size > 1:
            prev = np.maximum.accumulate(member_done[seg])[:-1]
            eff_start[seg[1:]] = np.maximum(ts[seg[1:]], prev)
    last_start = np.full(ni, -np.inf)
    np.maximum.at(last_start, inst, eff_start)
    inst_dur = np.maximum(done - last_start, 0.0)
    inst_ts = np.full(ni, -np.inf)
    np.maximum.at(inst_ts, inst, ts)
    first = np.full(ni, -1, dtype=np.int64)
    first[inst[::-1]] = comm[::-1]
    lag = np.maximum(cend - member_done, 0.0)
    return np.where(np.isfinite(inst_dur), inst_dur, 0.0), first, inst_ts, lag


def _resources(g: TaskGraph, trace: Trace, comp: np.ndarray, comm: np.ndarray,
               inst: np.ndarray, ni: int, chan: np.ndarray, comm_queues: str,
               ) -> list[tuple[int, ...]]:
    ev = trace.events
    ranks = sorted(int(r) for r in np.unique(np.concatenate([ev.rank[comp], ev.rank[comm]])))
    cres = np.zeros(max(ranks) + 1, dtype=np.int64)
    for r in ranks:
        cres[r] = g.resource(f"rank{r}/compute")
    out: list[tuple[int, ...]] = [(x,) for x in cres[ev.rank[comp]].tolist()]
    out += [()] * comm.size
    members: list[set[int]] = [set() for _ in range(ni)]
    # one in-order channel per key (comm_channels.channel_keys): collectives of different
    # process groups overlap, as each NCCL communicator / gloo context has its own
    res_of: dict[int, int] = {}
    member_res = []
    for key, row in zip(chan.tolist(), comm.tolist(), strict=True):
        res = res_of.get(key)
        if res is None:
            res = res_of[key] = g.resource(channel_name(trace, row, comm_queues))
        member_res.append(res)
    for i, m in zip(inst.tolist(), member_res, strict=True):
        members[i].add(m)
    out += [tuple(sorted(m)) for m in members]
    out += [()] * comm.size
    return out


def _fill(g: TaskGraph, dur: np.ndarray, resources: list[tuple[int, ...]],
          priority: np.ndarray, release: np.ndarray, src: np.ndarray, dst: np.ndarray,
          labels: np.ndarray) -> None:
    """Fill a TaskGraph in bulk (same content as task()/edge() calls, ~20x faster)."""
    n = dur.shape[0]
    g.dur_us = dur.tolist()
    g.resources = resources
    g.priority = priority.tolist()
    g.release_us = release.tolist()
    g.labels = labels.tolist()
    order = np.argsort(src, kind="stable")
    dsts = dst[order].tolist()
    b = np.concatenate([[0], np.cumsum(np.bincount(src, minlength=n))]).tolist()
    g.succ = list(map(dsts.__getitem__, map(slice, b[:-1], b[1:])))
    g.npred = np.bincount(dst, minlength=n).tolist()


# --------------------------------------------------------------------------- iteration times
def _step_keys(trace: Trace, deps: Deps, rows: np.ndarray) -> tuple[np.ndarray, list[int]]:
    ev = trace.events
    ranks = sorted(int(r) for r in np.unique(ev.rank))
    rank_idx = np.zeros(max(ranks) + 1, dtype=np.int64)
    rank_idx[ranks] = np.arange(len(ranks))
    step_idx = {s: i for i, s in enumerate(deps.steps)}
    lut = np.full(int(max(deps.steps)) + 1, -1, dtype=np.int64)
    for s, i in step_idx.items():
        lut[s] = i
    return rank_idx[ev.rank[rows]] * len(deps.steps) + lut[ev.step[rows]], ranks


def _spans(trace: Trace, deps: Deps, row_start: np.ndarray, row_end: np.ndarray,
           ) -> tuple[list[int], np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per (rank, step) key: measured first start / last end and replayed ones."""
    ev = trace.events
    rows = np.concatenate([deps.compute, deps.comm])
    key, ranks = _step_keys(trace, deps, rows)
    nk = len(ranks) * len(deps.steps)
    m_first, r_first = np.full(nk, np.inf), np.full(nk, np.inf)
    m_last, r_last = np.full(nk, -np.inf), np.full(nk, -np.inf)
    np.minimum.at(m_first, key, ev.ts_us[rows])
    np.maximum.at(m_last, key, ev.ts_us[rows] + ev.dur_us[rows])
    np.minimum.at(r_first, key, row_start[rows])
    np.maximum.at(r_last, key, row_end[rows])
    return ranks, m_first, m_last, r_first, r_last


def _step_markers(trace: Trace, deps: Deps) -> np.ndarray:
    ev = trace.events
    return np.flatnonzero((ev.cat == Cat.STEP) & np.isin(ev.step, deps.steps))


def _per_step(trace: Trace, deps: Deps, row_start: np.ndarray, row_end: np.ndarray,
              ) -> list[dict[str, Any]]:
    ev = trace.events
    ranks, m_first, m_last, r_first, r_last = _spans(trace, deps, row_start, row_end)
    b_start, b_end = m_first.copy(), m_last.copy()
    markers = _step_markers(trace, deps)
    if markers.size:
        mkey, _ = _step_keys(trace, deps, markers)
        b_start[mkey] = ev.ts_us[markers]
        b_end[mkey] = ev.ts_us[markers] + ev.dur_us[markers]
    seen = np.isfinite(m_first)
    shape = (len(ranks), len(deps.steps))
    with np.errstate(invalid="ignore"):
        measured = np.where(seen, b_end - b_start, np.nan).reshape(shape)
        replayed = np.where(seen, (r_last + (b_end - m_last)) - (r_first - (m_first - b_start)),
                            np.nan).reshape(shape)
    out = []
    for j, step in enumerate(deps.steps):
        col_m, col_r = measured[:, j], replayed[:, j]
        if np.isnan(col_m).all():
            continue
        m, r = float(np.nanmax(col_m)), float(np.nanmax(col_r))
        out.append({
            "step": step, "measured_us": m, "replayed_us": r,
            "error_pct": 100.0 * (r - m) / m if m > 0 else float("nan"),
            "slowest_rank_measured": ranks[int(np.nanargmax(col_m))],
            "slowest_rank_replayed": ranks[int(np.nanargmax(col_r))],
        })
    return out


# --------------------------------------------------------------------------- retimed trace
def _retimed_rows(res: ReplayResult) -> tuple[np.ndarray, np.ndarray]:
    """Rows kept in the replayed trace, sorted (rank, replayed ts); and the row map."""
    ev = res.trace.events
    deps = res.deps
    markers = _step_markers(res.trace, deps)
    rows = np.concatenate([deps.compute, deps.comm, markers])
    start = _marker_times(res, markers)[0]
    ts = np.concatenate([res.row_start_us[deps.compute], res.row_start_us[deps.comm], start])
    order = np.lexsort((ts, ev.rank[rows]))
    rows = rows[order]
    mapping = np.full(len(ev), -1, dtype=np.int64)
    mapping[rows] = np.arange(rows.shape[0])
    return rows, mapping


def _marker_times(res: ReplayResult, markers: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Replayed (start, end) of STEP markers: the measured head/tail around replayed events."""
    ev = res.trace.events
    if markers.size == 0:
        return np.zeros(0), np.zeros(0)
    _, m_first, m_last, r_first, r_last = _spans(res.trace, res.deps, res.row_start_us,
                                                  res.row_end_us)
    mkey, _ = _step_keys(res.trace, res.deps, markers)
    ok = np.isfinite(r_first[mkey])
    with np.errstate(invalid="ignore"):
        start = np.where(ok, r_first[mkey] - (m_first[mkey] - ev.ts_us[markers]),
                         ev.ts_us[markers])
        stop = np.where(ok, r_last[mkey] + (ev.ts_us[markers] + ev.dur_us[markers]
                                            - m_last[mkey]),
                        ev.ts_us[markers] + ev.dur_us[markers])
    return start, stop


def _retimed_trace(res: ReplayResult) -> Trace:
    tr = res.trace
    rows, mapping = _retimed_rows(res)
    markers = _step_markers(tr, res.deps)
    start, stop = res.row_start_us.copy(), res.row_end_us.copy()
    start[markers], stop[markers] = _marker_times(res, markers)
    events = tr.events.take(rows)
    events.ts_us = start[rows]
    events.dur_us = np.maximum(stop[rows] - start[rows], 0.0)
    comm_args = {int(mapping[r]): a for r, a in tr.comm_args.items() if mapping[r] >= 0}
    return Trace(events=events, names=list(tr.names), ranks=dict(tr.ranks),
                 steps=list(res.deps.steps), groups=list(tr.groups), kinds=list(tr.kinds),
                 comm_args=comm_args, source_format="echo-replay", source=tr.source)
