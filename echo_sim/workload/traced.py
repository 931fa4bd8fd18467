"""The workload of a whole traced job, from a trace of one or many ranks.

:func:`traced_workload` is what ``simulate`` and ``search`` both start from, so a layout
costs the same in each. For a one-rank trace it is
:func:`~echo_sim.workload.ops.extract_workload`. For a multi-rank trace
(:func:`~echo_sim.workload.traced_layout.traced_layout` says how it was laid out):

* a stage is represented by a typical rank: each op's time (duration and host gap) is its
  median over the stage's ranks (:func:`typical_rank_workload`; for two ranks their mean),
  the rest (memory, parameters) is the stage's rank with the highest measured peak. The
  trace's own collectives are priced as a typical member met them, with its share of the
  wait for the last member (:mod:`echo_sim.cost.trace_comm`), so a typical rank's compute
  plus that wait comes to the straggler's pace: for two ranks ``mean + |gap| / 2 = max``.
  (Until 2026-11-28 the rank with the longest median step stood for its stage. In a
  synchronous job every rank's step is about as long, the fast ranks' in their waits, so
  that pick was the straggler or the fastest by a fraction of a millisecond: a user's
  2-process DDP trace with one rank 25 ms slower in compute came out −18 % or +13 % by which
  rank was picked, and −2.5 % from their mean, with collectives priced as they then were);
* pipeline stages: one rank of each, joined into the whole model and cut where the job cut
  (:func:`~echo_sim.workload.stages.join_stages`);
* FSDP: the optimizer step updated the rank's ``1/dp`` shard; the whole model's is ``dp``
  times it (sharding at the target divides it again);
* tensor parallelism: the shards taken back to the whole model's
  (:func:`~echo_sim.workload.tensor_parallel.traced_tp_workload`);
* the trace's own collectives as the job met them
  (:func:`~echo_sim.cost.trace_comm.traced_comm_profile`) and the traced layout ride along
  on the workload (``traced_comm``, ``traced_layout``), for the simulator to price the
  calls they cover on the traced hardware.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import numpy as np

from echo_sim.cost.trace_comm import traced_comm_profile
from echo_sim.errors import TraceFormatError
from echo_sim.trace.model import COLLECTIVES, Cat, Trace
from echo_sim.workload.ops import Workload, extract_workload
from echo_sim.workload.pool import median_workload
from echo_sim.workload.stages import join_stages
from echo_sim.workload.tensor_parallel import traced_tp_workload
from echo_sim.workload.traced_layout import traced_layout

__all__ = ["MAX_TYPICAL_RANKS", "typical_rank_workload", "traced_workload"]

MAX_TYPICAL_RANKS = 16
"""At most this many ranks of a stage (evenly spaced in rank order) are extracted for its
typical rank: each costs one pass over its events."""


def _spaced(ranks: Sequence[int], n: int) -> list[int]:
    rs = sorted(ranks)
    if len(rs) <= n:
        return rs
    return [rs[round(i * (len(rs) - 1) / (n - 1))] for i in range(n)]


def typical_rank_workload(trace: Trace, ranks: Sequence[int]) -> Workload:
    """One stage's ranks (data- or tensor-parallel peers running the same ops) as one typical
    rank (see the module doc): per op, ``dur_us`` and ``gap_us`` are the median over the
    ranks (at most :data:`MAX_TYPICAL_RANKS` of them), as are ``step_time_us``, ``pre_us``
    and ``post_us``; everything else is the rank with the highest measured peak memory (the
    one that runs out first; ties: the lowest). A rank whose op sequence differs from that
    rank's, or that has no complete step, is left out (its ops cannot be paired); the
    workload's ``pool_note`` says how many ranks the times come from. Raises the first
    rank's :class:`TraceFormatError` when no rank of the stage can be read."""
    picked = _spaced(ranks, MAX_TYPICAL_RANKS)
    if len(picked) == 1:
        return extract_workload(trace, rank=picked[0])
    each: list[Workload] = []
    failed: list[tuple[int, TraceFormatError]] = []
    for r in picked:
        try:
            each.append(extract_workload(trace, rank=r))
        except TraceFormatError as e:  # a rank with no complete step: the others stand
            failed.append((r, e))
    if not each:
        raise failed[0][1]
    base = max(each, key=lambda w: (w.peak_memory_bytes, -w.rank))
    names = [o.name for o in base.ops]
    same = [w for w in each if [o.name for o in w.ops] == names]
    left_out = sorted(({w.rank for w in each} - {w.rank for w in same})
                      | {r for r, _ in failed})
    busy = [sum(o.time_us for o in w.ops) for w in same]  # µs a step
    note = (f"compute: a typical rank, each op's median over {len(same)} of the stage's "
            f"{len(ranks)} ranks (their ops {' / '.join(f'{b / 1e3:.1f}' for b in busy[:8])}"
            f"{' / ...' if len(busy) > 8 else ''} ms a step)"
            + (f"; rank(s) {', '.join(map(str, left_out))} ran other ops or none and are "
               "left out" if left_out else "")
            + f"; memory and parameters: rank {base.rank}'s (the highest peak)")
    return replace(median_workload(base, same), pool_note=note,
                   rank_busy_us=tuple((w.rank, b) for w, b in zip(same, busy, strict=True)))


def _tp_all_reduces(trace: Trace, rank: int, tp: int) -> float:
    """Median all-reduces over ``tp``-rank groups that ``rank`` issued per traced step."""
    ev = trace.events
    rows = trace.rank_rows(rank)
    rows = rows[(ev.cat[rows] == Cat.COMM) & (ev.step[rows] >= 0)
                & (ev.coll[rows] == COLLECTIVES.index("all_reduce")) & (ev.group[rows] >= 0)]
    sizes = np.asarray([len(trace.groups[int(g)]) for g in ev.group[rows]], dtype=np.int64)
    rows = rows[sizes == tp]
    steps = list(trace.steps) or sorted({int(x) for x in ev.step[rows]})
    return float(np.median([np.count_nonzero(ev.step[rows] == s) for s in steps])) \
        if steps else 0.0


def traced_workload(trace: Trace) -> Workload:
    """The whole traced job's workload (see the module doc)."""
    tl = traced_layout(trace)
    if tl.pp > 1:
        workload = join_stages([typical_rank_workload(trace, st) for st in tl.stages])
    elif tl.parallel and len(tl.stages[0]) > 1:
        workload = typical_rank_workload(trace, tl.stages[0])
    else:
        workload = extract_workload(trace)
    if tl.fsdp and tl.dp > 1:
        workload = workload.with_ops([
            replace(o, dur_us=o.dur_us * tl.dp, gap_us=o.gap_us * tl.dp)
            if o.phase == "U" else o for o in workload.ops])
    if tl.tp > 1:
        per_mb = _tp_all_reduces(trace, workload.rank, tl.tp) / max(
            workload.traced_micro_batches, 1)
        workload = traced_tp_workload(workload, tl.tp, per_mb)
    return replace(workload, traced_layout=tl,
                   traced_comm=traced_comm_profile(trace) if tl.parallel else None)
