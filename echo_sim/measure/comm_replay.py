"""Replay a job's collectives on this host as the job meets them, into a profile.

A profile from :mod:`echo_sim.measure.profile_comm` times each collective in a loop of its
own (after a barrier, or after fixed busy work). On a host whose ranks share CPU cores the
cost of a collective also depends on what surrounds it: on the 2-core virtual machine this
project is measured on, an FSDP2 job's all-gathers stalled (≥ 2 ms over their median) in 1–11
% of calls where a loop of the same call stalled in 17–30 %, and the profile over-priced
that job's collectives by ~75 %. This module replays one step of a trace — a real multi-
process echo trace, or the timeline ``simulate --output`` writes for a layout — on ``nproc``
fresh gloo processes: for every collective in order, the compute the rank did since the
previous collective began (as matrix products of the same length), then the collective
itself, on the job's message size. The clock is the base profile's (on gloo with the host
calibration: the last-arriving rank's own time, the transfer alone; :func:`simulate` adds
the job's rank skew and overlap as for any profile). Every timed call also records the
ranks' **arrival gap** (the latest rank's start less the earliest's; the processes share
the host's monotonic clock), kept in the profile's calibration (:data:`REPLAY_GAP`, with the
compute before each call, :data:`REPLAY_WORK`): on a last-arrival profile ``simulate`` prices
the job's waits with their mean (:func:`echo_sim.cost.cpu_overheads.replay_skew`) instead of
the rank-skew probe's line in the compute, which misses the gap one collective's late return
leaves at the next.

Semantics, so that the profile means what any profile means:

* every collective runs synchronously; overlap with later compute (DDP's bucket
  all-reduces) is left to simulate's overlap model, as for a looped profile;
* ``work_us`` before a collective is the union of the rank's compute intervals (every
  non-communication event but the step span) between the previous collective's start and
  this one's, so nested events count once;
* one step is replayed (the rank's median-length step), ``warmup`` untimed times, then
  ``steps`` timed times; a (collective, size)'s time is the trimmed mean over every call of
  it in every timed step, as the looped profile's (:func:`trimmed_mean`).

The result is the base profile with the replayed operations' points replaced by the
replay's (its other operations, host calibration and metadata kept); ``replay`` in its JSON
names the trace. Only collectives over every rank are replayed (data or tensor parallelism
over all processes); send/recv and other operations keep the base profile's points.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from typing import Any

from echo_sim.cost.comm_profile import CommProfile, trimmed_mean, trimmed_stderr_pct
from echo_sim.errors import ConfigError
from echo_sim.trace.model import Cat, Trace

__all__ = ["REPLAY_GAP", "REPLAY_OPS", "REPLAY_WORK", "Call", "ReplaySpec", "Schedule",
           "median_work_us", "replay_profile", "schedule"]

REPLAY_OPS: tuple[str, ...] = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all",
                               "broadcast")
"""The collectives a replay runs (the looped profile's, less send/recv)."""
REPLAY_CUT = 0.1  # share of a call's repetitions left out at each end of its mean (1 of 10)
REPLAY_GAP = "replay_gap_us"
"""Calibration key of a replayed profile: every timed call's arrival gap (µs), the latest
rank's start less the earliest's, in the replayed order (:func:`echo_sim.cost.cpu_overheads.
skew` prices the job's waits with it)."""
REPLAY_WORK = "replay_work_us"
"""Calibration key: the compute before each of those calls (µs), aligned with them."""

@dataclass(frozen=True)
class Call:
    """One collective of the replayed step: ``work_us`` of compute, then ``op`` on ``nbytes``
    (whole-buffer bytes, nccl-tests convention)."""

    op: str
    nbytes: int
    work_us: float
    name: str


@dataclass(frozen=True)
class Schedule:
    """One step of one rank: its collectives in order and the compute after the last one."""

    calls: tuple[Call, ...]
    tail_us: float
    world: int
    step: int
    skipped: tuple[str, ...] = ()  # names of communication events not replayed


@dataclass(frozen=True, kw_only=True)
class ReplaySpec:
    """How to replay: ``steps`` timed and ``warmup`` untimed repetitions of the step."""

    steps: int = 10
    warmup: int = 2
    timeout_s: float = 600.0

    def __post_init__(self) -> None:
        if self.steps < 1 or self.warmup < 0:
            raise ConfigError(f"--steps {self.steps} / --warmup {self.warmup}: need steps >= 1 "
                              f"and warmup >= 0")
        if not self.timeout_s > 0:
            raise ConfigError(f"--timeout {self.timeout_s} must be > 0")


def _union_us(spans: list[tuple[float, float]], lo: float, hi: float) -> float:
    """Length of the union of ``spans`` clipped to [lo, hi) (µs)."""
    total, end = 0.0, lo
    for s, e in sorted(spans):
        s, e = max(s, end), min(e, hi)
        if e > s:
            total += e - s
            end = e
    return total


def schedule(trace: Trace) -> Schedule:
    """The collectives of ``trace``'s lowest rank, one step (its median-length one), with
    the compute before each (module docstring).

    Raises :class:`ConfigError` when the trace has no collective to replay, or one of them
    spans fewer than every rank.
    """
    ev = trace.events
    if not len(ev.rank):
        raise ConfigError("the trace has no events")
    rank = int(ev.rank.min())
    by_step = {s: r for s, r in trace.rows_by_step(rank).items() if s >= 0}
    if not by_step:
        raise ConfigError("the trace has no complete step to replay")
    bounds = {s: trace.bounds_of_rows(r) for s, r in by_step.items()}
    lengths = sorted((e - b, s) for s, (b, e) in bounds.items())
    step = lengths[(len(lengths) - 1) // 2][1]  # the median-length step (lower median)
    lo, hi = bounds[step]
    rows = by_step[step]
    cats = ev.cat[rows]
    compute = [(float(ev.ts_us[i]), float(ev.ts_us[i] + ev.dur_us[i]))
               for i, c in zip(rows.tolist(), cats.tolist(), strict=True)
               if c not in (Cat.COMM, Cat.STEP) and ev.dur_us[i] > 0]
    comm = [int(i) for i in rows[cats == Cat.COMM]]  # rows are in time order
    world = max((len(g) for g in trace.groups), default=0)
    calls: list[Call] = []
    skipped: list[str] = []
    prev = lo
    for i in comm:
        op = trace.collective_of(i) or ""
        name = trace.name_of(i)
        if op not in REPLAY_OPS or ev.nbytes[i] <= 0:
            skipped.append(name)
            continue
        members = trace.group_of(i)
        if members is None or len(members) != world or world < 2:
            raise ConfigError(
                f"{name}: a replay runs collectives over every rank; this one spans "
                f"{'unknown ranks' if members is None else list(members)} of {world}")
        start = float(ev.ts_us[i])
        calls.append(Call(op=op, nbytes=int(ev.nbytes[i]),
                          work_us=_union_us(compute, prev, start), name=name))
        prev = start
    if not calls:
        raise ConfigError("the trace has no collective to replay (all_reduce, all_gather, "
                          "reduce_scatter, all_to_all, broadcast over every rank)")
    return Schedule(calls=tuple(calls), tail_us=_union_us(compute, prev, hi), world=world,
                    step=int(step), skipped=tuple(dict.fromkeys(skipped)))


# ------------------------------------------------------------------------------ worker side
def _worker(rank: int, nproc: int, store_path: str, plan: dict[str, Any], clock: str,
            spec: ReplaySpec, result_path: str) -> None:
    import time

    import torch
    import torch.distributed as dist

    from echo_sim.measure.ranks import join_ranks, write_result
    from echo_sim.measure.work import (
        calibrate_busy,
        make_op,
        rank_spread,
        to_run_clock,
        whole_numel,
    )

    join_ranks(rank, nproc, store_path, "gloo")
    try:
        work = calibrate_busy(1000.0, rank, nproc, "cpu")  # products per µs, rank 0 alone
        per_us = work.reps / max(work.alone_us, 1.0)
        runs = {(op, nbytes): make_op(op, whole_numel(nbytes, nproc), rank, nproc, "cpu", None)
                for op, nbytes in plan["kinds"]}
        calls = [(runs[(op, nbytes)], max(0, round(work_us * per_us)))
                 for op, nbytes, work_us in plan["calls"]]
        tail = max(0, round(plan["tail_us"] * per_us))
        own: list[float] = []
        starts: list[float] = []  # when each call began, on the host's monotonic clock (µs)
        for it in range(spec.warmup + spec.steps):
            for run, products in calls:
                work.products(products)
                t0 = time.perf_counter()
                run()
                if it >= spec.warmup:
                    own.append((time.perf_counter() - t0) * 1e6)
                    starts.append(t0 * 1e6)
            work.products(tail)
        times = torch.tensor(own, dtype=torch.float64)
        to_run_clock(times, clock, nproc)
        gaps = rank_spread(torch.tensor(starts, dtype=torch.float64))  # arrival gaps
        if rank == 0:
            write_result(result_path, {"times_us": times.tolist(), "products_per_us": per_us,
                                       "gaps_us": gaps.tolist()})
        dist.barrier()
    finally:
        dist.destroy_process_group()


def replay_profile(trace: Trace, base: CommProfile, spec: ReplaySpec | None = None, *,
                   trace_name: str = "") -> tuple[CommProfile, Schedule]:
    """Replay ``trace``'s step on this host (gloo, one process per rank of its collectives)
    and return ``base`` with the replayed operations' points replaced, and the schedule.

    Raises :class:`ConfigError` for a trace without a replayable step or a base profile of
    another world size or backend, :class:`~echo_sim.errors.ProfileError` when a process
    fails or times out.
    """
    from echo_sim.measure.profile_comm import other_load
    from echo_sim.measure.ranks import run_ranks

    spec = spec or ReplaySpec()
    sched = schedule(trace)
    if base.backend != "gloo":
        raise ConfigError(f"comm profile {base.source or base.host!r} is a {base.backend} "
                          f"profile; a replay runs gloo on this host's CPUs")
    if base.world_size and base.world_size != sched.world:
        raise ConfigError(f"comm profile {base.source or base.host!r} measured "
                          f"{base.world_size} processes; the trace's collectives span "
                          f"{sched.world}")
    kinds = sorted({(c.op, c.nbytes) for c in sched.calls})
    plan = {"kinds": kinds, "calls": [(c.op, c.nbytes, c.work_us) for c in sched.calls],
            "tail_us": sched.tail_us}
    clock = base.run_time
    load_avg = other_load()
    raw = run_ranks(_worker, (plan, clock, spec), nproc=sched.world, timeout_s=spec.timeout_s,
                    what="replay-comm", backend="gloo")
    times = raw["times_us"]
    per_call: dict[tuple[str, int], list[float]] = {k: [] for k in kinds}
    n = len(sched.calls)
    for j, t in enumerate(times):
        c = sched.calls[j % n]
        per_call[(c.op, c.nbytes)].append(float(t))
    samples = dict(base.samples)
    fits = dict(base.fits)
    stderr = dict(base.stderr_pct)
    runs_us = dict(base.runs_us)
    for op in sorted({op for op, _ in kinds}):
        key = (op, sched.world)
        sizes = sorted(s for o, s in kinds if o == op)
        samples[key] = [(s, trimmed_mean(per_call[(op, s)], REPLAY_CUT)) for s in sizes]
        stderr[key] = [round(trimmed_stderr_pct(per_call[(op, s)], REPLAY_CUT), 2) for s in sizes]
        runs_us[key] = [per_call[(op, s)] for s in sizes]
        fits.pop(key, None)  # refitted to the replayed points
    ops = ", ".join(sorted({op for op, _ in kinds}))
    calibration = dict(base.calibration)
    gaps = [float(g) for g in raw.get("gaps_us", [])]
    if gaps:  # the ranks' arrival gaps as the job's own pattern of work and calls leaves them
        calibration[REPLAY_GAP] = gaps
        calibration[REPLAY_WORK] = [sched.calls[j % n].work_us for j in range(len(gaps))]
    note = (f"{ops} replayed from {trace_name or 'a trace'} (step {sched.step}, "
            f"{len(sched.calls)} collectives, {spec.steps} timed repetitions, compute before "
            f"each as {raw['products_per_us']:.3g} matrix products per us); other operations "
            f"and the host calibration from {base.source or 'the base profile'}"
            + (f"; the ranks arrived {statistics.mean(gaps):.0f} us apart on average"
               if gaps else ""))
    prof = replace(base, samples=samples, fits=fits, stderr_pct=stderr, runs_us=runs_us,
                   calibration=calibration,
                   replay=note, iters=spec.steps,
                   load_avg=round(max(base.load_avg, load_avg), 2),
                   created=datetime.now(timezone.utc).isoformat(timespec="seconds"))
    return prof, sched


def median_work_us(sched: Schedule) -> float:
    """The median compute before a collective of ``sched`` (µs)."""
    return statistics.median(c.work_us for c in sched.calls)
