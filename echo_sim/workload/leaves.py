"""The leaf compute events of every captured step of one rank, with their gaps.

:func:`step_leaves` is the measurement :func:`echo_sim.workload.ops.extract_workload` takes
its medians over. Per step (bounds: the STEP marker, else the span of the step's events)::

    leaves  = FW / BW / UPDATE events with no other compute event nested inside them
    dur_us  = end - ts, minus the part of it covered by the union of the step's Comm
              slices the op waited for inside its own event (synchronous ones, and
              asynchronous ones wholly inside it other than DDP's buckets: see
              ``_called_in_ops``); the simulator models those itself
    gap_us  = next leaf's ts - end (>= 0), minus the part of it covered by the union of the
              step's Comm slices (DDP's buckets only before a non-backward op: inside the
              backward the host works on beside them; other asynchronous slices only from
              the end of the last leaf before their end: the host waits for them there,
              and works beside them before); 0 for the step's last leaf
    pre_us  = first leaf's ts - step start (>= 0);  post_us = step end - last leaf's end (>= 0)

Every step is computed at once over flat columns (one sort of the rank's rows by step and
time), so the cost is O(n log n) in the rank's events whatever the number of steps; a
per-step scan of the rank's rows is O(steps x events): 71 s at 40 k steps, against 2 s
(``benchmarks/sim_speed.py --steps-sweep``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from echo_sim.trace.model import Cat, Trace

__all__ = ["NEST_TOL_US", "StepLeaves", "step_leaves"]

NEST_TOL_US = 1.0
"""An event is a parent (not a leaf) when the next one starts inside it and ends inside it:
``ts[j] < end[i] - tol and end[j] <= end[i] + tol``. 1 µs absorbs the float64 rounding of
Unix-epoch µs timestamps (spacing 0.25 µs at 1.8e15 µs), which makes consecutive siblings
overlap by a fraction of a µs."""

_COMPUTE = (int(Cat.FW), int(Cat.BW), int(Cat.UPDATE))


@dataclass(frozen=True, slots=True)
class StepLeaves:
    """Leaves of the steps that have any, flattened: step ``i`` (``steps[i]``) holds leaves
    ``first[i]:first[i + 1]`` of ``rows`` / ``dur_us`` / ``gap_us``, in execution order."""

    steps: np.ndarray  # step numbers, in the order asked for
    first: np.ndarray  # len(steps) + 1 offsets into the leaf columns
    rows: np.ndarray  # event rows of the leaves
    dur_us: np.ndarray
    gap_us: np.ndarray
    pre_us: np.ndarray  # per step
    post_us: np.ndarray
    step_us: np.ndarray

    def __len__(self) -> int:
        return int(self.steps.size)

    def leaf_slice(self, i: int) -> slice:
        return slice(int(self.first[i]), int(self.first[i + 1]))


def _group_bounds(trace: Trace, rows: np.ndarray, k: np.ndarray, n: int
                  ) -> tuple[np.ndarray, np.ndarray]:
    """(start_us, end_us) per group ``0..n-1`` of ``rows`` (sorted by group ``k``): the first
    STEP marker of the group, else the span of its rows; NaN for an empty group."""
    ev = trace.events
    lo, hi = np.full(n, np.nan), np.full(n, np.nan)
    if rows.size == 0:
        return lo, hi
    ts = ev.ts_us[rows]
    end = ts + ev.dur_us[rows]
    starts = np.flatnonzero(np.r_[True, k[1:] != k[:-1]])
    lo[k[starts]] = np.minimum.reduceat(ts, starts)
    hi[k[starts]] = np.maximum.reduceat(end, starts)
    marker = np.flatnonzero(ev.cat[rows] == int(Cat.STEP))
    _, first = np.unique(k[marker], return_index=True)
    m = marker[first]
    lo[k[m]], hi[k[m]] = ts[m], end[m]
    return lo, hi


def _covered_us(lo: np.ndarray, hi: np.ndarray, qk: np.ndarray, a: np.ndarray,
                b: np.ndarray, ik: np.ndarray) -> np.ndarray:
    """Per query ``j``: length of ``[lo[j], hi[j]]`` covered by the union of the intervals
    ``[a, b]`` of the same group (``ik == qk[j]``). Computed as ``F(hi) - F(lo)`` where
    ``F(x)`` is the union's length up to ``x`` within the group."""
    out = np.zeros(lo.size)
    if lo.size == 0 or a.size == 0:
        return out
    order = np.lexsort((a, ik))
    ma: list[float] = []
    mb: list[float] = []
    mk: list[int] = []
    before: list[float] = []  # union length of the group before each merged interval
    for key, s, e in zip(ik[order].tolist(), a[order].tolist(), b[order].tolist(),
                         strict=True):  # one linear pass: merge overlapping intervals
        if mk and mk[-1] == key and s <= mb[-1]:
            mb[-1] = max(mb[-1], e)
            continue
        same = bool(mk) and mk[-1] == key
        before.append(before[-1] + (mb[-1] - ma[-1]) if same else 0.0)
        ma.append(s)
        mb.append(e)
        mk.append(key)
    am, bm, km, cum = (np.asarray(ma), np.asarray(mb), np.asarray(mk, dtype=np.int64),
                       np.asarray(before))

    def upto(x: np.ndarray) -> np.ndarray:
        # index of the last merged interval of the query's group starting at or before x:
        # sort intervals and queries together by (group, time), intervals first on ties
        kind = np.r_[np.zeros(am.size, np.int8), np.ones(x.size, np.int8)]
        order = np.lexsort((kind, np.r_[am, x], np.r_[km, qk]))
        seen = np.cumsum(kind[order] == 0) - 1
        j = np.empty(x.size, dtype=np.int64)
        j[order[kind[order] == 1] - am.size] = seen[kind[order] == 1]
        ok = j >= 0
        ok[ok] = km[j[ok]] == qk[ok]
        f = np.zeros(x.size)
        jj = j[ok]
        f[ok] = cum[jj] + np.minimum(x[ok] - am[jj], bm[jj] - am[jj])
        return f

    return upto(hi) - upto(lo)


def _comm_kinds(trace: Trace, crows: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per Comm row, from its args (read once): (synchronous, DDP's reducer, asynchronous
    other than DDP's)."""
    args = [trace.comm_args.get(int(r), {}) for r in crows.tolist()]
    sync = np.asarray([x.get("async") is False for x in args], dtype=bool)
    ddp = np.asarray([x.get("path") == "ddp" for x in args], dtype=bool)
    other = np.asarray([x.get("async") is True for x in args], dtype=bool) & ~ddp
    return sync, ddp, other


def _called_in_ops(sync: np.ndarray, cand: np.ndarray, ca: np.ndarray, cb: np.ndarray,
                   cks: np.ndarray, lk: np.ndarray, lts: np.ndarray,
                   lend: np.ndarray) -> np.ndarray:
    """Which Comm slices ``[ca, cb]`` (step groups ``cks``) an op waited for inside its own
    event: synchronous ones (``sync``: FSDP2's post-backward reduce-scatter and the next
    unit's all-gather run in a leaf's backward hooks on gloo), and asynchronous ones other
    than DDP's reducer (``cand``) that start and end inside one leaf (DTensor's
    input-gradient all-reduce, issued and waited in the column-parallel op's backward).
    Their time is communication, which the simulator models itself, not the op's compute.
    DDP's buckets run on the backend's own thread beside the backward: not these."""
    out = sync.copy()
    if not cand.any() or lk.size == 0:
        return out
    for g in np.unique(cks[cand]).tolist():
        lo, hi = np.searchsorted(lk, g, "left"), np.searchsorted(lk, g, "right")
        q = np.flatnonzero(cand & (cks == g))
        j = lo + np.searchsorted(lts[lo:hi], ca[q], "right") - 1
        ok = j >= lo
        jj = np.where(ok, j, lo)
        out[q] |= ok & (lend[jj] + NEST_TOL_US >= cb[q])
    return out


def _waited_from(cand: np.ndarray, ca: np.ndarray, cb: np.ndarray, cks: np.ndarray,
                 lk: np.ndarray, lts: np.ndarray, lend: np.ndarray) -> np.ndarray:
    """Where the host began to wait for each Comm slice ``[ca, cb]`` (step groups ``cks``):
    ``ca`` for all but the asynchronous ones ``cand``, whose calls return at once and whose
    slice runs on while the host goes on with its own work (a pipeline stage's ``isend``
    under the next micro-batch's forward, a prefetch). The host blocks on those only in its
    ``wait()``, which is in the gap where the slice ends: from the end of the last leaf
    before ``cb`` (or ``ca`` if later). A slice that ends inside a leaf never blocked the
    host between leaves (its start is returned as ``cb``: an empty interval)."""
    out = ca.copy()
    if not cand.any() or lk.size == 0:
        return out
    for g in np.unique(cks[cand]).tolist():
        lo, hi = np.searchsorted(lk, g, "left"), np.searchsorted(lk, g, "right")
        if hi == lo:
            continue
        q = np.flatnonzero(cand & (cks == g))
        j = lo + np.searchsorted(lts[lo:hi], cb[q], "right") - 1  # last leaf starting <= cb
        ok = j >= lo
        jj = np.where(ok, j, lo)
        inside = ok & (lend[jj] > cb[q] + NEST_TOL_US)
        out[q] = np.where(inside, cb[q], np.where(ok, np.maximum(ca[q], lend[jj]), ca[q]))
    return out


def step_leaves(trace: Trace, rank: int, steps: list[int]) -> StepLeaves:
    """The leaves of ``rank`` in each of ``steps`` (distinct step numbers); steps without a
    compute event are left out."""
    ev = trace.events
    n = len(steps)
    rows = trace.rank_rows(rank)
    want = np.asarray(steps, dtype=np.int64)
    sorted_steps = np.argsort(want, kind="stable")
    st = ev.step[rows].astype(np.int64)
    at = np.clip(np.searchsorted(want[sorted_steps], st), 0, max(n - 1, 0))
    hit = (want[sorted_steps][at] == st) if n else np.zeros(rows.size, dtype=bool)
    rows, k = rows[hit], sorted_steps[at[hit]]
    order = np.argsort(k, kind="stable")  # by step, time (row) order inside a step
    rows, k = rows[order], k[order]
    lo, hi = _group_bounds(trace, rows, k, n)

    cats = ev.cat[rows]
    comp = np.isin(cats, _COMPUTE)
    crow, ck = rows[comp], k[comp]
    ts, dur = ev.ts_us[crow], ev.dur_us[crow]
    order = np.lexsort((-dur, ts, ck))  # per step: parents before their children
    crow, ck, ts, dur = crow[order], ck[order], ts[order], dur[order]
    end = ts + dur
    tol = NEST_TOL_US
    leaf = np.ones(crow.size, dtype=bool)
    leaf[:-1] = ~((ck[1:] == ck[:-1]) & (ts[1:] < end[:-1] - tol) & (end[1:] <= end[:-1] + tol))
    crow, ck, ts, end = crow[leaf], ck[leaf], ts[leaf], end[leaf]

    has_next = np.r_[ck[1:] == ck[:-1], False]
    nxt = np.where(has_next, np.r_[ts[1:], 0.0], hi[ck])
    gap = np.maximum(0.0, nxt - end)
    q = np.flatnonzero(has_next & (gap > 0))
    comm = cats == int(Cat.COMM)
    comm_rows, comm_k = rows[comm], k[comm]
    a = ev.ts_us[comm_rows]
    b = a + ev.dur_us[comm_rows]
    sync, ddp, other = _comm_kinds(trace, comm_rows)
    # an asynchronous slice (not DDP's) blocked the host only from its wait to its end
    wa = _waited_from(other, a, b, comm_k, ck, ts, end)
    cov = _covered_us(end[q], nxt[q], ck[q], wa, b, comm_k)
    # DDP's buckets run on the backend's thread while backward goes on: a gap before another
    # backward op is the host's own work even while a bucket is in flight (only the gap
    # before the optimizer waits for them)
    if ddp.any():
        nxt_bw = np.r_[ev.cat[crow[1:]] == int(Cat.BW), False][q]
        cov_no_ddp = _covered_us(end[q], nxt[q], ck[q], wa[~ddp], b[~ddp], comm_k[~ddp])
        cov = np.where(nxt_bw, cov_no_ddp, cov)
    gap[q] -= np.minimum(gap[q], cov)
    gap[~has_next] = 0.0
    dur = end - ts
    called = _called_in_ops(sync, other, a, b, comm_k, ck, ts, end)
    if called.any():
        dur -= np.minimum(dur, _covered_us(ts, end, ck, a[called], b[called], comm_k[called]))

    counts = np.bincount(ck, minlength=n)
    keep = np.flatnonzero(counts > 0)
    first = np.r_[0, np.cumsum(counts[keep])]
    last = first[1:] - 1
    return StepLeaves(
        steps=want[keep], first=first, rows=crow, dur_us=dur, gap_us=gap,
        pre_us=np.maximum(0.0, ts[first[:-1]] - lo[keep]),
        post_us=np.maximum(0.0, hi[keep] - end[last]), step_us=hi[keep] - lo[keep])
