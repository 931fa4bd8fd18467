"""The workload of a whole traced job, from a trace of one or many ranks.

:func:`traced_workload` is what ``simulate`` and ``search`` both start from, so a layout
costs the same in each. For a one-rank trace it is
:func:`~echo_sim.workload.ops.extract_workload`. For a multi-rank trace
(:func:`~echo_sim.workload.traced_layout.traced_layout` says how it was laid out):

* the representative rank is the slowest (longest median step) of its stage: a synchronous
  job runs at its slowest rank's pace;
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
from echo_sim.trace.model import COLLECTIVES, Cat, Trace
from echo_sim.workload.ops import Workload, extract_workload
from echo_sim.workload.stages import join_stages
from echo_sim.workload.tensor_parallel import traced_tp_workload
from echo_sim.workload.traced_layout import traced_layout

__all__ = ["slowest_rank", "traced_workload"]


def slowest_rank(trace: Trace, ranks: Sequence[int]) -> int:
    """The rank of ``ranks`` with the longest median step (ties: the lowest rank)."""
    def median_step(r: int) -> float:
        spans = [b - a for a, b in (trace.bounds_of_rows(part) for s, part
                                    in trace.rows_by_step(r).items() if s >= 0 and part.size)]
        return float(np.median(spans)) if spans else 0.0

    return max(sorted(ranks), key=median_step)


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
        workload = join_stages([extract_workload(trace, rank=slowest_rank(trace, st))
                                for st in tl.stages])
    elif tl.parallel and len(tl.stages[0]) > 1:
        workload = extract_workload(trace, rank=slowest_rank(trace, tl.stages[0]))
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
