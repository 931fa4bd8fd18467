"""How much one rank's compute varies from step to step, from the trace's own steps.

At a synchronisation a step waits for the later rank. With the ranks' compute since the
last synchronisation ``X0``, ``X1`` independent draws of one distribution, what the
synchronisation adds over the typical rank is ``E[max(X0, X1)] - E[X] = E|X0 - X1| / 2``
(:data:`echo_sim.cost.cpu_overheads.SYNC_SHARE`). ``E|X0 - X1|`` is the **Gini mean
difference** of ``X`` (Gini 1912; David 1968, "Gini's mean difference rediscovered",
Biometrika 55(3)): the mean of ``|x_s - x_t|`` over pairs of distinct samples, here the
traced steps. It needs no assumption on the distribution's shape: a step now and then
interrupted for a few milliseconds (the jitter of a process on a shared CPU host) gives it
as well as a normal spread does (``2 σ / √π`` for a normal ``X``).

The rank-skew probe (:func:`echo_sim.cost.cpu_overheads.skew`) measures the gap of fixed
synthetic work on the host's busy ranks; a model's own compute varies more from step to
step (allocations, caches, its many short operators). The two are independent, and their
spreads add as variances, as for normal ``X`` exactly: ``gap = hypot(gap_probe, G)``. Alone
(one process, nothing else running) the example GPT, the BERT encoder and the ResNet of
``benchmarks/accuracy.py`` varied by 1.1, 1.5 and 1.4 ms a step (standard deviation over
nine traced steps, 2026-11-29), about as much as each rank of their real 2-process DDP jobs
(0.9, 1.3, 1.6 ms of compute thread CPU), against a probe's 0.7 ms gap.

:func:`step_curve` keeps, per traced step, its cumulative compute at :data:`GRID` + 1 equal
shares of the median step; :func:`part_gaps` gives the Gini mean difference of each part
of a step cut into pieces of about ``w`` µs of compute (what a job with a synchronisation
after every ``w`` µs meets).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

__all__ = ["GRID", "MIN_STEPS", "gini_mean_difference", "part_gaps", "step_curve"]

GRID = 64
"""Shares of the median step at which :func:`step_curve` keeps each step's compute."""

MIN_STEPS = 3
"""Fewest traced steps whose spread is used (two give one pair: no spread to speak of)."""


def gini_mean_difference(x: Sequence[float] | np.ndarray) -> float:
    """The mean of ``|x_i - x_j|`` over pairs ``i != j`` (0 for fewer than two values)."""
    v = np.sort(np.asarray(x, dtype=float))
    n = v.size
    if n < 2:
        return 0.0
    # sum over pairs i < j of (v_j - v_i) = sum_k (2k - n + 1) v_k for sorted v (k from 0)
    return float(2.0 * np.dot(2.0 * np.arange(n) - n + 1, v) / (n * (n - 1)))


def step_curve(cum_us: np.ndarray) -> tuple[tuple[float, ...], ...]:
    """Per step (rows of ``cum_us``: each step's cumulative compute at every operator
    boundary, from 0, µs), its cumulative compute at the operator boundaries nearest
    ``k / GRID`` of the median step, ``k = 0..GRID``; empty for fewer than
    :data:`MIN_STEPS` steps or no compute."""
    cum = np.asarray(cum_us, dtype=float)
    if cum.ndim != 2 or cum.shape[0] < MIN_STEPS or cum.shape[1] < 2:
        return ()
    med = np.median(cum, axis=0)
    if med[-1] <= 0:
        return ()
    at = np.searchsorted(med, med[-1] * np.arange(GRID + 1) / GRID, side="left")
    at = np.clip(at, 0, cum.shape[1] - 1)
    at[-1] = cum.shape[1] - 1
    return tuple(tuple(float(x) for x in row[at]) for row in cum)


def part_gaps(curve: Sequence[Sequence[float]], w_us: float) -> tuple[float, ...]:
    """The Gini mean difference (µs) of each part of the traced step cut into parts of
    about ``w_us`` of compute (``round(step / w_us)`` parts at the curve's shares, at most
    :data:`GRID`): what the ranks' compute between two synchronisations ``w_us`` apart
    spreads by. A part of another length than ``w_us`` (``w_us`` longer than the step, or
    shorter than a share) scales by ``sqrt(w_us / length)``, as the spread of a sum of
    independent pieces does. Empty without a curve."""
    if not curve or w_us <= 0:
        return ()
    c = np.asarray(curve, dtype=float)
    step = float(np.median(c[:, -1]))
    if step <= 0:
        return ()
    n = int(min(max(round(step / w_us), 1), GRID))
    cuts = [round(k * GRID / n) for k in range(n + 1)]
    out = []
    for a, b in zip(cuts, cuts[1:], strict=False):
        part = c[:, b] - c[:, a]
        length = float(np.median(part))
        g = gini_mean_difference(part)
        out.append(g * math.sqrt(w_us / length) if length > 0 else 0.0)
    return tuple(out)
