"""A pipeline-parallel trace's whole model: the workloads of its stages, joined.

Each rank of a pipeline-parallel job runs only its stage's layers, so one rank's workload
(:func:`~echo_sim.workload.ops.extract_workload`) is part of the model. :func:`join_stages`
puts the stages' workloads (one representative rank each, stage 0 first) back together in
execution order, forward of stage 0, 1, ..., then backward of the last stage first, then
every stage's optimizer step, and records which units each stage ran
(:attr:`~echo_sim.workload.ops.Workload.traced_stages`), so that simulating at the traced
number of stages cuts where the traced job cut
(:func:`~echo_sim.workload.build.unit_stages`).

Per step: the host time before the first operator (``pre_us``) is stage 0's (a later
stage's first operator waits for stage 0's activations: the pipeline's fill, which the
schedule makes itself); the time after the last operator (``post_us``) and the step time
are the slowest stage's.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from echo_sim.workload.ops import Op, Workload

__all__ = ["join_stages"]


def join_stages(stages: Sequence[Workload]) -> Workload:
    """One workload of the whole model from its pipeline stages' workloads, stage 0 first."""
    if len(stages) == 1:
        return stages[0]
    order: list[tuple[int, Op]] = []
    for phase, seq in (("F", list(enumerate(stages))),
                       ("B", list(reversed(list(enumerate(stages))))),
                       ("U", list(enumerate(stages)))):
        for s, w in seq:
            order += [(s, o) for o in w.ops if o.phase == phase]
    new_index = {(s, o.index): i for i, (s, o) in enumerate(order)}
    ops = [replace(o, index=i, fw=new_index.get((s, o.fw), -1) if o.fw >= 0 else -1)
           for i, (s, o) in enumerate(order)]
    units = tuple(tuple(dict.fromkeys(o.unit for o in w.ops if o.phase == "F"))
                  for w in stages)
    first = stages[0]
    seen: set[str] = set()
    params = []
    for w in stages:
        for p in w.params:
            if p[0] not in seen:
                seen.add(p[0])
                params.append(p)
    return replace(
        first, ops=tuple(ops), params=tuple(params),
        step_time_us=max(w.step_time_us for w in stages),
        pre_us=first.pre_us, post_us=max(w.post_us for w in stages),
        buckets=tuple(b for w in stages for b in w.buckets),
        peak_memory_bytes=max(w.peak_memory_bytes for w in stages),
        steps_used=min(w.steps_used for w in stages), traced_stages=units,
        tp_time_us={})
