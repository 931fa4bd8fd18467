"""The expected step over the measured run-to-run spread of the collectives (a last pass).

A communication profile prices each collective at the mean of its timed runs, and the
engine schedules those means. Where a collective overlaps compute that may or may not hide
it (DDP's last bucket all-reduces beside the end of backward, a prefetched gather beside one
block), the step is a maximum of the two paths, and the expectation of a maximum is at least
the maximum of the expectations (Jensen's inequality): a schedule of mean durations
under-states the expected step. On a shared or virtual host that gap is not small: there a
collective either takes about its transfer time or stalls for a scheduler tick (2-4 ms; a
third of the runs of 16 KiB-1 MiB on a 2-core VM), and the same all-reduce is hidden in one
step and exposed by milliseconds in the next.

:func:`expected_step` runs the schedule again over ``draws`` draws. In each, a collective
the profile prices gets ``dur + (f - 1) · transfer_us`` (at least 0), ``f`` one of its
measured runs over their mean at the nearest measured size
(:meth:`echo_sim.cost.comm_profile.CommProfile.run_factors`, mean 1, so each collective's
expected time stays the one scheduled) and ``transfer_us`` its transfer as scheduled: beside
compute a collective is stretched (:mod:`echo_sim.sim.overlap`), and so are its stalls (the
profile's overlap rounds spread about as much, relative to their mean, as its idle runs). Latin hypercube sampling (McKay, Beckman & Conover 1979): every
collective's draws take one stratum each of its sorted runs, in an independent random order,
so each marginal is covered evenly and the mean converges faster than with independent
draws; the seed is fixed, so a result is reproducible and two layouts compared under the same
draws. Collectives priced from the trace itself (their times are the job's, stalls included)
or from the analytic model do not vary. When no priced collective's runs spread by more than
:data:`MIN_SPREAD` (a quiet GPU cluster), the mean schedule is the expected one and nothing
is drawn.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np

from echo_sim.sim.engine import Schedule, TaskGraph, run

__all__ = ["DRAWS", "MIN_SPREAD", "StepDraws", "draw_count", "expected_step"]

DRAWS = 64
"""Draws per simulation at most: on the 2-core VM a DDP step's standard deviation over draws
was ~11 % of it, so 64 stratified draws put the mean within ~1 % (one standard error)."""
MIN_SPREAD = 0.05
"""Standard deviation of a collective's runs over their mean below which it is not drawn."""
_TASK_BUDGET = 4_000_000  # task runs over all draws: a 100k-task graph gets 40 draws


@dataclass(frozen=True)
class StepDraws:
    """The makespan over draws: ``mean_us`` (the expected step), its 10th and 90th
    percentiles, the mean-duration schedule's ``base_us``, how many ``draws`` over how many
    ``varied`` collectives, and ``extra`` (per-draw values of ``measure``, averaged)."""

    mean_us: float
    p10_us: float
    p90_us: float
    base_us: float
    draws: int
    varied: int
    extra: np.ndarray

    def note(self) -> str:
        """One line for simulate's ``models``."""
        return (f"collective run-to-run spread: expected step {self.mean_us / 1e3:.3f} ms over "
                f"{self.draws} draws of the measured runs of {self.varied} collective(s) "
                f"(10-90 %: {self.p10_us / 1e3:.3f}-{self.p90_us / 1e3:.3f} ms; the "
                f"schedule of mean times {self.base_us / 1e3:.3f} ms: a collective hidden "
                f"behind compute in one step is exposed in another)")


def draw_count(tasks: int, limit: int = DRAWS) -> int:
    """Draws for a graph of ``tasks`` tasks: at most ``limit``, at least 8, within a budget
    of task runs."""
    return int(max(8, min(limit, _TASK_BUDGET // max(tasks, 1))))


def expected_step(graph: TaskGraph, spreads: Mapping[int, tuple[float, np.ndarray]], *,
                  base: Schedule, draws: int = DRAWS, seed: int = 0,
                  measure: Callable[[Schedule], np.ndarray] | None = None
                  ) -> StepDraws | None:
    """The makespan of ``graph`` over ``draws`` draws (module docstring); None when no task
    of ``spreads`` (task -> (transfer µs, factors of mean 1)) spreads by more than
    :data:`MIN_SPREAD`. ``base``: the schedule of ``graph``'s own durations. ``measure``:
    per schedule, values averaged over the draws into :attr:`StepDraws.extra`. The graph's
    durations are restored before returning."""
    varied = {t: (float(tr), np.sort(np.asarray(f, dtype=float)))
              for t, (tr, f) in spreads.items()
              if len(f) >= 2 and tr > 0 and float(np.std(f)) > MIN_SPREAD}
    if not varied or draws < 1:
        return None
    rng = np.random.default_rng(seed)
    saved = list(graph.dur_us)
    offsets = {}
    for t, (tr, f) in varied.items():
        # one stratum of the sorted runs per draw, strata in random order
        pos = (rng.permutation(draws) + rng.random(draws)) / draws
        picks = f[np.minimum((pos * len(f)).astype(int), len(f) - 1)]
        offsets[t] = (picks - 1.0) * tr
    spans = np.empty(draws)
    extra = None
    try:
        for j in range(draws):
            for t, off in offsets.items():
                graph.dur_us[t] = max(saved[t] + float(off[j]), 0.0)
            sched = run(graph)
            spans[j] = sched.makespan_us
            if measure is not None:
                got = np.asarray(measure(sched), dtype=float)
                extra = got if extra is None else extra + got
    finally:
        graph.dur_us[:] = saved
    return StepDraws(mean_us=float(spans.mean()), p10_us=float(np.percentile(spans, 10)),
                     p90_us=float(np.percentile(spans, 90)), base_us=base.makespan_us,
                     draws=draws, varied=len(varied),
                     extra=extra / draws if extra is not None else np.zeros(0))
