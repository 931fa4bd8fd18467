"""Per-operator time as a function of the micro-batch size.

Two models, both ``t(B) = a + b·B`` per operator (µs; ``B`` in samples):

* **fit** — from traces of the same model at two or more micro-batch sizes: ordinary least
  squares of each op's measured time on ``B`` (TrioSim, Li et al. 2023, found op time linear
  in batch above small sizes; a least-squares line over several sizes keeps the fixed
  part a GPU kernel or host call has). ``a`` is clipped at 0 (the line is refitted
  through the origin), ``b`` at 0 (the op's time is taken as constant).
* **linear** — from one trace at ``B0``: a fixed part that does not grow with the batch,
  ``a = min(gap, median gap) + min(dur, op_overhead_us)`` — the op's host gap up to the
  step's typical one (dispatch, Python) plus a per-call floor (kernel launch / module call,
  ``op_overhead_us``, default 5 µs) — and the rest proportional to the batch:
  ``b = (t0 - a) / B0``. Gaps longer than the typical one are unhooked compute
  (attention core, residual adds) and scale with the batch.

Optimizer ops (``UPDATE``) and the once-per-step host time are batch independent.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from echo_sim.errors import ConfigError, TraceMismatchError
from echo_sim.workload.ops import Workload

__all__ = ["BatchModel", "fit_batch_model", "linear_batch_model", "make_batch_model"]


@dataclass(frozen=True)
class BatchModel:
    """``time_us(B) = a_us + b_us·B`` per op index; ``description`` says which model."""

    kind: str
    a_us: np.ndarray
    b_us: np.ndarray
    base_batch: int
    description: str

    def time_us(self, batch: float) -> np.ndarray:
        """Predicted time of every op (by index) at micro-batch ``batch``."""
        return self.a_us + self.b_us * float(batch)


def linear_batch_model(workload: Workload, *, op_overhead_us: float = 5.0) -> BatchModel:
    """Fixed-overhead + linear model from one trace (see the module docstring)."""
    b0 = workload.micro_batch or 1
    ops = workload.ops
    gaps = np.array([o.gap_us for o in ops if o.phase != "U"]) if ops else np.zeros(0)
    typical = float(np.median(gaps)) if gaps.size else 0.0
    a = np.zeros(len(ops))
    b = np.zeros(len(ops))
    for o in ops:
        if o.phase == "U":
            a[o.index] = o.time_us
            continue
        fixed = min(o.gap_us, typical) + min(o.dur_us, op_overhead_us)
        a[o.index] = fixed
        b[o.index] = max(o.time_us - fixed, 0.0) / b0
    return BatchModel("linear", a, b, b0, (
        f"batch: one trace at micro-batch {b0}; t(B) = fixed + (t0 - fixed)·B/{b0}, fixed = "
        f"host gap up to the median ({typical:.1f} us) + min(dur, {op_overhead_us:g} us)"))


def fit_batch_model(workloads: Sequence[Workload]) -> BatchModel:
    """Least-squares ``a + b·B`` per op over traces at different micro-batch sizes."""
    if len(workloads) < 2:
        raise ConfigError("a batch fit needs traces at two or more micro-batch sizes")
    sizes = [w.micro_batch for w in workloads]
    if any(s is None for s in sizes):
        raise ConfigError("a batch fit needs micro_batch_size in every trace's meta.json")
    xs = np.array(sizes, dtype=float)
    if len(set(xs.tolist())) < 2:
        raise ConfigError(f"batch fit: traces all have micro-batch {int(xs[0])}; need two sizes")
    names = [o.name for o in workloads[0].ops]
    for w in workloads[1:]:
        if [o.name for o in w.ops] != names:
            raise TraceMismatchError("batch fit: the traces run different op sequences "
                                     f"(micro-batch {workloads[0].micro_batch} vs "
                                     f"{w.micro_batch}); trace the same model and step")
    t = np.array([[o.time_us for o in w.ops] for w in workloads])  # (sizes, ops)
    xm = xs.mean()
    b = ((xs - xm)[:, None] * (t - t.mean(axis=0))).sum(axis=0) / ((xs - xm) ** 2).sum()
    a = t.mean(axis=0) - b * xm
    neg_a = a < 0
    b = np.where(neg_a, (t * xs[:, None]).sum(axis=0) / (xs**2).sum(), b)
    a = np.where(neg_a, 0.0, a)
    neg_b = b < 0
    a = np.where(neg_b, t.mean(axis=0), a)
    b = np.where(neg_b, 0.0, b)
    upd = np.array([o.phase == "U" for o in workloads[0].ops])
    a = np.where(upd, t.mean(axis=0), a)
    b = np.where(upd, 0.0, b)
    base = int(workloads[0].micro_batch or 1)
    return BatchModel("fit", a, b, base, (
        f"batch: least-squares t = a + b·B per op over micro-batches "
        f"{sorted({int(x) for x in xs})}"))


def make_batch_model(workloads: Sequence[Workload], *, op_overhead_us: float = 5.0
                     ) -> BatchModel:
    """The fit when traces at two or more micro-batch sizes are given, else linear."""
    if len({w.micro_batch for w in workloads}) >= 2:
        return fit_batch_model(workloads)
    return linear_batch_model(workloads[0], op_overhead_us=op_overhead_us)
