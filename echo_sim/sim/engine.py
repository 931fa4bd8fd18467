"""The one discrete-event engine: a list scheduler over a task graph with resources.

Replay and simulate differ only in how they build the :class:`TaskGraph`; both run it here.

Model
-----
* A *task* has a duration (µs), a set of *resources* it holds for its whole duration
  (a rank's compute stream, a rank's communication channel, a shared network link) and
  predecessors. A collective across ranks is **one** task holding every member's
  communication channel, so it starts only when all members have issued it and all their
  channels are free — the synchronisation a real collective has.
* A task becomes *ready* when its last predecessor ends (or at ``release_us``).
  It starts at ``start = max(ready, free_at[r] for r in resources)`` and ends at
  ``start + dur``; the resources are then busy until the end.
* Ready tasks are taken in order of (ready time, priority, insertion order): the
  dPRO replayer's rule, deterministic for ties. Resources are FIFO in that order; a task
  never back-fills an idle gap left behind an earlier-ready task (in-order streams,
  as CUDA streams and NCCL communicators behave).

Speed: pure Python lists and one ``heapq`` — about 1-2 µs of bookkeeping per task and edge;
no per-event objects. Task ids are dense ints.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from echo_sim.errors import EchoError

__all__ = ["Schedule", "TaskGraph", "run"]


class TaskGraph:
    """Tasks, their resources and their dependency edges."""

    __slots__ = ("dur_us", "resources", "priority", "release_us", "succ", "npred",
                 "labels", "resource_names", "_resource_index")

    def __init__(self) -> None:
        self.dur_us: list[float] = []
        self.resources: list[tuple[int, ...]] = []
        self.priority: list[int] = []
        self.release_us: list[float] = []
        self.succ: list[list[int]] = []
        self.npred: list[int] = []
        self.labels: list[object] = []
        self.resource_names: list[str] = []
        self._resource_index: dict[str, int] = {}

    def __len__(self) -> int:
        return len(self.dur_us)

    def resource(self, name: str) -> int:
        """Id of the resource called ``name``, created on first use."""
        i = self._resource_index.get(name)
        if i is None:
            i = self._resource_index[name] = len(self.resource_names)
            self.resource_names.append(name)
        return i

    def task(
        self,
        dur_us: float,
        resources: Sequence[int] = (),
        *,
        priority: int = 0,
        release_us: float = 0.0,
        label: object = None,
    ) -> int:
        """Add a task; returns its id. ``priority``: lower runs first among equally ready tasks."""
        if dur_us < 0:
            raise EchoError(f"task {label!r} has negative duration {dur_us} us")
        self.dur_us.append(float(dur_us))
        self.resources.append(tuple(resources))
        self.priority.append(priority)
        self.release_us.append(float(release_us))
        self.succ.append([])
        self.npred.append(0)
        self.labels.append(label)
        return len(self.dur_us) - 1

    def edge(self, src: int, dst: int) -> None:
        """``dst`` cannot start before ``src`` ends."""
        self.succ[src].append(dst)
        self.npred[dst] += 1

    def edges(self, pairs: Iterable[tuple[int, int]]) -> None:
        succ, npred = self.succ, self.npred
        for a, b in pairs:
            succ[a].append(b)
            npred[b] += 1


@dataclass
class Schedule:
    """Result of :func:`run`: start/end per task (µs) and each resource's busy time."""

    start_us: np.ndarray
    end_us: np.ndarray
    busy_us: np.ndarray  # per resource id
    resource_names: list[str]

    @property
    def makespan_us(self) -> float:
        """Time from 0 to the end of the last task."""
        return float(self.end_us.max()) if self.end_us.size else 0.0

    def critical_predecessor(self, graph: TaskGraph) -> np.ndarray:
        """For every task, the predecessor whose end made it ready (-1 if none / resource-bound).

        Walking these links back from the last task gives the critical path through
        dependencies (a task that waited on a busy resource links to the task that held it).
        """
        n = len(graph)
        crit = np.full(n, -1, dtype=np.int64)
        end = self.end_us
        start = self.start_us
        best = np.full(n, -np.inf)
        for u in range(n):
            eu = end[u]
            for v in graph.succ[u]:
                if eu > best[v]:
                    best[v] = eu
                    crit[v] = u
        # Tasks that started later than their ready time waited on a resource: link to
        # the task that released that resource (the latest-ending task on it before start).
        holders: dict[int, list[int]] = {}
        for t in np.argsort(end, kind="stable"):
            for r in graph.resources[t]:
                holders.setdefault(r, []).append(int(t))
        ends_by_res = {r: end[np.asarray(ts)] for r, ts in holders.items()}
        for t in range(n):
            ready = max(best[t], graph.release_us[t])
            if start[t] > ready + 1e-9:
                for r in graph.resources[t]:
                    ts = holders[r]
                    k = int(np.searchsorted(ends_by_res[r], start[t] + 1e-9, side="right")) - 1
                    while k >= 0 and ts[k] == t:
                        k -= 1
                    if k >= 0 and end[ts[k]] >= start[t] - 1e-9:
                        crit[t] = ts[k]
                        break
        return crit


def run(graph: TaskGraph) -> Schedule:
    """Schedule every task; raises :class:`EchoError` if the graph has a cycle."""
    n = len(graph)
    dur = graph.dur_us
    res = graph.resources
    prio = graph.priority
    succ = graph.succ
    npred = list(graph.npred)
    ready = list(graph.release_us)
    free = [0.0] * len(graph.resource_names)
    busy = [0.0] * len(graph.resource_names)
    start = [0.0] * n
    end = [0.0] * n
    heap = [(ready[t], prio[t], t) for t in range(n) if npred[t] == 0]
    heapq.heapify(heap)
    push, pop = heapq.heappush, heapq.heappop
    done = 0
    while heap:
        rt, _, t = pop(heap)
        s = rt
        rs = res[t]
        for r in rs:
            if free[r] > s:
                s = free[r]
        e = s + dur[t]
        for r in rs:
            free[r] = e
            busy[r] += dur[t]
        start[t] = s
        end[t] = e
        done += 1
        for v in succ[t]:
            if e > ready[v]:
                ready[v] = e
            npred[v] -= 1
            if npred[v] == 0:
                push(heap, (ready[v], prio[v], v))
    if done != n:
        stuck = [graph.labels[t] for t in range(n) if npred[t] > 0][:3]
        raise EchoError(f"task graph has a cycle ({n - done} tasks never ready, e.g. {stuck})")
    return Schedule(np.asarray(start), np.asarray(end), np.asarray(busy), list(graph.resource_names))
