"""``search(trace, SearchSpace(...))``: every valid layout, pruned exactly, timed by simulate.

1. :func:`~echo_sim.search.space.enumerate_layouts` lists the valid layouts.
2. Memory: layouts whose memory lower bound (:func:`~echo_sim.search.bounds.memory_floor_bytes`)
   exceeds the limit are dropped before any timing.
3. Level-1 probes (one cheap simulation per tensor-parallel degree × micro-batch ×
   recomputation) give every layout a lower bound of its objective; layouts are visited
   in increasing bound order.
4. Branch and bound: a layout whose bound is worse than the ``top``-th best fitting
   layout timed so far is never simulated; since the order is by bound, the first such
   layout ends the search. Each remaining layout (grouped with the schedules that share
   its probe) gets a level-2 probe — exact memory and a pipeline-aware time bound — and,
   if still in the running, the full :func:`~echo_sim.sim.simulate.simulate`.
   Layouts of per-stage tensor-parallel degrees (``--heterogeneous``) have no probe (one
   probe prices one degree): their time bound is 0, so each one that passes the memory
   floor is simulated (their number is bounded in :mod:`echo_sim.search.space`).

Work runs on a local process pool (default: one worker per usable core), serially
(``workers=1``), or on a Ray cluster (``workers="ray"``, when ``ray`` is installed: an
existing cluster from ``RAY_ADDRESS``, else a local instance). Workers receive the
workload once.
"""

from __future__ import annotations

import bisect
import heapq
import os
import time
from collections.abc import Callable, Iterable
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from typing import Any

from echo_sim.errors import ConfigError
from echo_sim.search.bounds import MemoryFloor, OpProbe, host_costs, probe_ops
from echo_sim.search.result import Candidate, SearchResult, candidate_from_sim, score
from echo_sim.search.space import OBJECTIVES, ParallelLayout, SearchSpace, enumerate_layouts
from echo_sim.units import fmt_bytes

__all__ = ["default_workers", "search"]

_WORKLOAD: Any = None  # set in pool workers by _init_worker (never at import)
Outcome = tuple[str, ParallelLayout, Any]


def default_workers() -> int:
    """Usable CPU cores of this process."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not Linux
        return max(1, os.cpu_count() or 1)


def _init_worker(workload: Any) -> None:
    global _WORKLOAD
    _WORKLOAD = workload


def _unpack(workload: Any) -> tuple[Any, tuple[Any, ...]]:
    """(workload, batch workloads) of a task: given, or this pool worker's."""
    w = workload if workload is not None else _WORKLOAD
    return w if isinstance(w, tuple) else (w, ())


def _op_probe_task(workload: Any, layout: ParallelLayout, space: SearchSpace) -> Any:
    """An :class:`OpProbe` without its workload (the caller re-attaches it), or the reason
    simulate rejected the probe."""
    w, extra = _unpack(workload)
    try:
        p = probe_ops(w, layout, space, batch_traces=extra)
    except ConfigError as e:
        return str(e)
    p.workload = None
    return p


def _time_task(workload: Any, layouts: list[ParallelLayout], space: SearchSpace,
               objective: str) -> list[Outcome]:
    """Simulate every layout of ``layouts``."""
    from echo_sim.sim.simulate import simulate

    w, extra = _unpack(workload)
    out: list[Outcome] = []
    for lay in layouts:
        try:
            res = simulate(w, lay.sim_config(space), batch_traces=extra, keep=False)
        except ConfigError as e:
            out.append(("invalid", lay, str(e)))
            continue
        out.append(("timed", lay, candidate_from_sim(lay, res, objective, space.global_batch)))
    return out


# ----------------------------------------------------------------------------- executors
class _Executor:
    """submit(fn, *args) -> Future; fn's first argument is the workload (or None in pools
    whose workers hold it)."""

    name = "1"

    def __init__(self, workload: Any) -> None:
        self.workload = workload

    def submit(self, fn: Callable[..., Any], *args: Any) -> Future[Any]:
        f: Future[Any] = Future()
        try:
            f.set_result(fn(self.workload, *args))
        except Exception as e:  # noqa: BLE001 - handed to the caller through the future
            f.set_exception(e)
        return f

    @property
    def slots(self) -> int:
        return 1

    def close(self) -> None:
        return None


class _Pool(_Executor):
    def __init__(self, workload: Any, n: int) -> None:
        super().__init__(workload)
        self.n = n
        self.name = str(n)
        self.pool = ProcessPoolExecutor(max_workers=n, initializer=_init_worker,
                                        initargs=(workload,))

    def submit(self, fn: Callable[..., Any], *args: Any) -> Future[Any]:
        return self.pool.submit(fn, None, *args)

    @property
    def slots(self) -> int:
        return 2 * self.n

    def close(self) -> None:
        self.pool.shutdown(wait=True, cancel_futures=True)


class _Ray(_Executor):
    name = "ray"

    def __init__(self, workload: Any) -> None:
        super().__init__(workload)
        try:
            import ray
        except ImportError:
            raise ConfigError("workers='ray' needs the ray package (pip install ray); "
                              "use a number of local workers instead") from None
        self.ray = ray
        self.started = False
        if not ray.is_initialized():
            ray.init(address=os.environ.get("RAY_ADDRESS") or None, log_to_driver=False,
                     include_dashboard=False)
            self.started = True
        self.ref = ray.put(workload)
        self.remote: dict[Callable[..., Any], Any] = {}
        self.n = max(1, int(ray.cluster_resources().get("CPU", 1)))

    def submit(self, fn: Callable[..., Any], *args: Any) -> Future[Any]:
        r = self.remote.get(fn)
        if r is None:
            r = self.remote[fn] = self.ray.remote(fn)
        fut: Future[Any] = r.remote(self.ref, *args).future()
        return fut

    @property
    def slots(self) -> int:
        return 2 * self.n

    def close(self) -> None:
        if self.started:
            self.ray.shutdown()


def _executor(workload: Any, workers: int | str | None, jobs: int) -> _Executor:
    if workers == "ray":
        return _Ray(workload)
    if workers is None:
        workers = default_workers()
    if isinstance(workers, str):
        if not workers.isdigit():
            raise ConfigError(f"workers={workers!r}: give a number of processes or 'ray'")
        workers = int(workers)
    if workers < 1:
        raise ConfigError(f"workers={workers} must be >= 1 or 'ray'")
    n = min(workers, max(jobs, 1))
    return _Executor(workload) if n == 1 else _Pool(workload, n)


# ----------------------------------------------------------------------------- search
def _memory_limit(space: SearchSpace) -> int:
    if space.memory_limit_bytes is not None:
        return space.memory_limit_bytes
    from echo_sim.cost.hardware import CLUSTERS

    return int(CLUSTERS[space.cluster.strip().lower()].gpu.memory_bytes)


def _rank(cands: Iterable[Candidate]) -> list[Candidate]:
    return sorted(cands, key=lambda c: (not c.fits, c.score if c.fits else
                                        c.peak_memory_bytes, c.layout))


def search(trace: Any, space: SearchSpace, *, objective: str = "time", top: int = 10,
           workers: int | str | None = None, prune: bool = True,
           progress: Callable[[int, int], None] | bool | None = None,
           batch_traces: tuple[Any, ...] = ()) -> SearchResult:
    """Search ``space`` for the best layouts of the traced model (module docstring).

    ``trace``: a :class:`~echo_sim.trace.model.Trace` or an extracted
    :class:`~echo_sim.workload.ops.Workload`. ``objective``: ``time`` | ``throughput`` |
    ``cost`` (see :func:`~echo_sim.search.result.score`). ``top``: the branch and bound keeps
    the ``top`` best exact (the best is always exact). ``prune=False`` simulates every valid
    layout (the exhaustive reference). ``progress``: True for echo_sim.progress (a bar on a terminal, lines otherwise), or a callable
    ``(done, total)``. ``batch_traces``: traces of the same model at other micro-batch
    sizes, handed to simulate (its batch fit). Raises :class:`ConfigError` when no layout
    is valid or none can fit.
    """
    from echo_sim.workload.ops import Workload, extract_workload
    from echo_sim.workload.traced import traced_workload

    t0 = time.perf_counter()
    if objective not in OBJECTIVES:
        raise ConfigError(f"unknown objective {objective!r}; valid: {', '.join(OBJECTIVES)}")
    if not isinstance(top, int) or top < 1:
        raise ConfigError(f"top={top!r} must be an integer >= 1")
    workload = trace if isinstance(trace, Workload) else traced_workload(trace)
    layouts, notes = enumerate_layouts(workload, space)
    if not layouts:
        raise ConfigError(notes[0])
    limit = _memory_limit(space)
    gb = space.global_batch
    if prune:
        floor = MemoryFloor(workload)
        floors = {lay: floor(lay, gb) for lay in layouts}
        keep = [lay for lay in layouts if floors[lay] <= limit]
        if not keep:
            low = min(layouts, key=lambda x: floors[x])
            raise ConfigError(f"no layout fits the memory limit {fmt_bytes(limit)}: the "
                              f"smallest lower bound is {fmt_bytes(floors[low])} "
                              f"({low.label}); add GPUs, lower the global batch or raise "
                              "the memory limit")
    else:
        keep = layouts
    extra = tuple(b if isinstance(b, Workload) else extract_workload(b) for b in batch_traces)
    ex = _executor((workload, extra) if extra else workload, workers, len(keep))
    bar = _progress(progress, len(keep))
    try:
        outcomes, probes = (_branch_and_bound(ex, keep, space, objective, top, limit, bar)
                            if prune else (_exhaustive(ex, keep, space, objective, bar), 0))
    finally:
        ex.close()
        bar.close()
    timed = [o[2] for o in outcomes if o[0] == "timed"]
    invalid = [(o[1].label, str(o[2])) for o in outcomes if o[0] == "invalid"]
    if not timed:
        mems = [(float(o[2]), o[1]) for o in outcomes if o[0] == "memory"]
        if mems:
            peak, lay = min(mems, key=lambda x: x[0])
            raise ConfigError(f"no layout fits the memory limit {fmt_bytes(limit)}: the smallest "
                              f"predicted peak is {fmt_bytes(peak)} ({lay.label})")
        reason = invalid[0][1] if invalid else "every layout was pruned"
        raise ConfigError(f"no layout could be simulated: {reason}")
    ranked = _rank(timed)
    if not ranked[0].fits:
        raise ConfigError(f"no layout fits the memory limit {fmt_bytes(limit)}: the "
                          f"smallest predicted peak is {fmt_bytes(ranked[0].peak_memory_bytes)} "
                          f"({ranked[0].layout.label})")
    return SearchResult(
        space=space, objective=objective, candidates=ranked, enumerated=len(layouts),
        pruned_memory=len(layouts) - len(keep) + sum(o[0] == "memory" for o in outcomes),
        pruned_bound=sum(o[0] == "bound" for o in outcomes), simulated=len(timed),
        probes=probes, invalid=invalid, wall_s=time.perf_counter() - t0, workers=ex.name)


class _Bar:
    def __init__(self, fn: Callable[[int, int], None] | None, total: int, tq: Any = None):
        self.fn, self.total, self.done, self.tq = fn, total, 0, tq

    def update(self, n: int) -> None:
        self.done += n
        if self.tq is not None:
            self.tq.update(n)
        if self.fn is not None:
            self.fn(self.done, self.total)

    def close(self) -> None:
        if self.tq is not None:
            self.tq.close()


def _progress(progress: Callable[[int, int], None] | bool | None, total: int) -> _Bar:
    if progress is True:  # a bar on a terminal, periodic lines otherwise (echo_sim.progress)
        from echo_sim.progress import Progress

        return _Bar(None, total, Progress(total, "searching", unit="layout"))
    if callable(progress):
        return _Bar(progress, total)
    return _Bar(None, total)


def _exhaustive(ex: _Executor, layouts: list[ParallelLayout], space: SearchSpace,
                objective: str, bar: _Bar) -> list[Outcome]:
    chunk = max(1, len(layouts) // (4 * ex.slots))
    futs = [ex.submit(_time_task, layouts[i:i + chunk], space, objective)
            for i in range(0, len(layouts), chunk)]
    out: list[Outcome] = []
    for f in futs:
        got = f.result()
        out.extend(got)
        bar.update(len(got))
    return out


def _probe_key(lay: ParallelLayout, exact_dp: bool) -> tuple[int, int, int, str, bool, str]:
    # exact_dp (a CPU host profile): the operators carry the data parallelism's host costs
    # (DDP's reducer, FSDP2's unit hooks), which the other shardings do not pay
    if exact_dp:
        return lay.dp, lay.tp, lay.micro_batch, lay.recompute, lay.sp, lay.sharding
    return lay.world, lay.tp, lay.micro_batch, lay.recompute, lay.sp, ""


def _branch_and_bound(ex: _Executor, layouts: list[ParallelLayout], space: SearchSpace,
                      objective: str, top: int, limit: int,
                      bar: _Bar) -> tuple[list[Outcome], int]:
    gb = space.global_batch
    # level 1: one probe per (world, tp, micro-batch, recompute, sequence parallelism), per
    # (dp, ..., sharding) with a CPU host profile
    # (per-stage tensor parallelism: no probe; simulated unless the top-k is already better
    # than nothing could be, i.e. always: its bound is 0)
    exact_dp = host_costs(space)
    keys: dict[tuple[int, int, int, str, bool, str], ParallelLayout] = {}
    for lay in layouts:
        if not lay.stage_tp:
            keys.setdefault(_probe_key(lay, exact_dp), lay)
    futs = {k: ex.submit(_op_probe_task, lay, space) for k, lay in keys.items()}
    probes: dict[tuple[int, int, int, str, bool, str], OpProbe | str] = {}
    for k, f in futs.items():
        p = f.result()
        if isinstance(p, OpProbe):
            p.workload = _unpack(ex.workload)[0]
        probes[k] = p
    outcomes: list[Outcome] = []
    ranked: list[tuple[float, ParallelLayout, OpProbe]] = []
    ranked_het: list[ParallelLayout] = []
    for lay in layouts:
        if lay.stage_tp:
            ranked_het.append(lay)
            continue
        p = probes[_probe_key(lay, exact_dp)]
        if isinstance(p, str):
            outcomes.append(("invalid", lay, p))
            bar.update(1)
            continue
        ranked.append((score(objective, p.time_floor_us(lay, gb), lay, gb), lay, p))
    ranked.sort(key=lambda x: (x[0], x[1]))
    best: list[float] = []
    # heterogeneous tensor parallelism first: bound 0, no probe (bounds.py prices one degree)
    het: list[tuple[float, ParallelLayout, OpProbe | None]] = [(0.0, lay, None)
                                                                for lay in sorted(ranked_het)]
    queue: list[tuple[float, ParallelLayout, OpProbe | None]] = [*het, *ranked]  # max-heap (negated) of the top fitting scores

    floors = [q[0] for q in queue]  # ascending: the het entries' 0, then the sorted bounds
    tail = 0  # layouts at the queue's end already counted done: their bound beats the top-k

    def threshold() -> float:
        return -best[0] if len(best) >= top else float("inf")

    def absorb(got: list[Outcome]) -> None:
        nonlocal tail
        for o in got:
            outcomes.append(o)
            if o[0] == "timed" and o[2].fits:
                heapq.heappush(best, -o[2].score)
                if len(best) > top:
                    heapq.heappop(best)
        # the threshold only falls, so every layout past the first whose bound is above it
        # will never run: count them done now, so the bar's pace (and time left) is that
        # of the layouts still to simulate, not of the whole list
        now = len(queue) - max(bisect.bisect_right(floors, threshold()), i)  # never falls
        bar.update(len(got) + now - tail)
        tail = now

    pending: set[Future[Any]] = set()
    i = 0
    while i < len(queue) or pending:
        while i < len(queue) and len(pending) < ex.slots and queue[i][0] <= threshold():
            _, lay, p = queue[i]
            i += 1
            if p is None:
                pending.add(ex.submit(_time_task, [lay], space, objective))
                continue
            # level 2: simulate's memory model and a pipeline-aware bound on the same split
            # (per-stage recomputation: the probe's memory is its no-recompute one, no bound)
            mem = p.memory_bytes(lay, gb) if not lay.stage_recompute else 0.0
            if mem > limit:
                absorb([("memory", lay, mem)])
                continue
            b2 = score(objective, p.time_bound_us(lay, gb), lay, gb)
            if b2 > threshold():
                absorb([("bound", lay, b2)])
                continue
            pending.add(ex.submit(_time_task, [lay], space, objective))
        if not pending:
            break
        done, pending = wait(pending, return_when=FIRST_COMPLETED)
        for f in done:
            absorb(f.result())
    rest = queue[i:]
    outcomes.extend(("bound", lay, b) for b, lay, _ in rest)
    bar.update(len(rest) - tail)
    return outcomes, len(keys)
