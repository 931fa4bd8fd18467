"""Several traces of the same job, pooled into one workload: each op's time is its median.

On a CPU host one process computes the same step at its own pace: glibc's allocator history
(whether activations land on fresh pages), where its memory lies, which core it runs on.
On this project's 2-core hosts three traces of the same one-process job, taken one after
the other, differed by 6-36 % in step time (median 17 %; README, "Several runs of one
job"). A prediction made from one trace inherits that process's luck whole; the median
over ``n`` traces of separate runs weighs each process by ``1/n``
(``benchmarks/accuracy.py --traces``, README).

:func:`pool_workloads` takes workloads extracted from traces of one model, layout and
micro-batch (separate runs), and returns the first with, per op (same position in the
step):

* ``dur_us`` and ``gap_us``: the median over the traces (so ``time_us`` is the median's
  own dur + gap, not a median of sums);
* ``step_time_us``, ``pre_us``, ``post_us``, ``minor_faults_per_step``: medians;
* ``steps_used``: the sum.

Everything else, memory included (its baseline is the first trace's measured peak), the
trace's own collectives, the parameter table and the steps' spread (``step_curve_us``: one
process's step-to-step variation, which the pace between separate processes is not), is the
first trace's. Traces of another
micro-batch size belong to the batch fit (``simulate --batch-trace``), not here.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import numpy as np

from echo_sim.errors import ConfigError, TraceMismatchError
from echo_sim.workload.ops import Workload

__all__ = ["median_workload", "pool_workloads"]


def _label(sources: Sequence[str] | None, i: int) -> str:
    return f"trace {i + 1}" + (f" ({sources[i]})" if sources else "")


def _check(workloads: Sequence[Workload], sources: Sequence[str] | None) -> None:
    first = workloads[0]
    names = [o.name for o in first.ops]
    layout = first.traced_layout.describe() if first.traced_layout is not None else ""
    for i, w in enumerate(workloads[1:], 1):
        what = _label(sources, i)
        if w.micro_batch != first.micro_batch:
            raise ConfigError(
                f"{what} ran micro-batch {w.micro_batch}, the first {first.micro_batch}: "
                "pool runs of the same job; a trace at another micro-batch size goes to "
                "--batch-trace (the batch fit)")
        if w.device != first.device:
            raise ConfigError(f"{what} ran on {w.device}, the first on {first.device}: pool "
                              "runs of the same job on the same hardware")
        other = w.traced_layout.describe() if w.traced_layout is not None else ""
        if other != layout:
            raise ConfigError(f"{what} ran {other or 'one process'}, the first "
                              f"{layout or 'one process'}: pool runs of the same layout")
        if [o.name for o in w.ops] != names:
            raise TraceMismatchError(
                f"{what} runs a different op sequence than the first ({len(w.ops)} ops vs "
                f"{len(names)}): pool traces of the same model and step")


def pool_workloads(workloads: Sequence[Workload], sources: Sequence[str] | None = None
                   ) -> Workload:
    """The per-op median of ``workloads`` (module docstring); one workload is returned as
    it is. ``sources``: the traces' paths, for messages and the pooled workload's note."""
    if not workloads:
        raise ConfigError("pool_workloads needs at least one workload")
    if len(workloads) == 1:
        return workloads[0]
    _check(workloads, sources)
    first = workloads[0]
    faults = [w.minor_faults_per_step for w in workloads]
    steps = [w.step_time_us for w in workloads]
    spread = 100.0 * (max(steps) - min(steps)) / float(np.median(steps)) \
        if float(np.median(steps)) > 0 else 0.0
    note = (f"compute: per-op median over {len(workloads)} traces of the same job, whose "
            f"steps took {' / '.join(f'{s / 1e3:.1f}' for s in steps)} ms "
            f"({spread:.0f} % apart; one process's pace weighs 1/{len(workloads)}); memory, "
            "parameters and the trace's own collectives: the first trace's")
    return replace(
        median_workload(first, workloads),
        minor_faults_per_step=(float(np.median([f for f in faults if f is not None]))
                               if all(f is not None for f in faults) else None),
        steps_used=sum(w.steps_used for w in workloads),
        pool_note=note)


def median_workload(base: Workload, workloads: Sequence[Workload]) -> Workload:
    """``base`` with, per op (same position in the step), ``dur_us`` and ``gap_us`` the
    median over ``workloads`` (which run ``base``'s op sequence), and ``step_time_us``,
    ``pre_us`` and ``post_us`` their medians; what :func:`pool_workloads` and a stage's
    typical rank (:func:`echo_sim.workload.traced.typical_rank_workload`) share."""
    dur = np.median([[o.dur_us for o in w.ops] for w in workloads], axis=0)
    gap = np.median([[o.gap_us for o in w.ops] for w in workloads], axis=0)
    ops = tuple(replace(o, dur_us=float(d), gap_us=float(g))
                for o, d, g in zip(base.ops, dur.tolist(), gap.tolist(), strict=True))
    return replace(
        base, ops=ops, step_time_us=float(np.median([w.step_time_us for w in workloads])),
        pre_us=float(np.median([w.pre_us for w in workloads])),
        post_us=float(np.median([w.post_us for w in workloads])))
