"""CPU-side costs of a multi-process job that a one-process trace does not contain.

Every figure is calibrated from the host microbenchmarks a communication profile carries
(:mod:`echo_sim.measure.host_overheads`, ``CommProfile.calibration``), from several samples,
with their spread, clamped to what is physically possible. Nothing is fitted to a job being
predicted. The contention factor is a ratio of medians (both sides see the same load). The
per-call costs (DTensor, optimizer, FSDP2 hooks) are the intrinsic cost of a short CPU
operation against a plain reference of the same shapes interleaved with it: the median of
the calling thread's CPU time where the profile has it (other tenants' load and peer waits
do not enter a thread's CPU time), else the **fastest** wall-time sample of each, since
other tenants' load only ever adds time (Chen & Revels 2016, "Robust
benchmarking in noisy environments", arXiv:1608.04295): ``extra = min(t_dtensor) -
min(t_plain)``. (A ratio of the two is no better: on a loaded host the longer call is
preempted more often than the shorter.) The caller scales them by the job's own
contention factor like every other op.

* :func:`contention` — compute slowdown when ``k`` ranks share a host's cores:
  ``median(t_busy) / median(t_alone)`` of the same fixed work, applied only when the ranks
  oversubscribe the cores (``k · threads_per_rank > cpu_count``; otherwise ranks do not
  compete for cores and the factor is 1, whatever the samples say), clamped to
  ``[1, k · threads_per_rank]`` (at worst every thread of every rank on one core).
* :func:`dtensor_dispatch` — per call of a tensor-parallel Linear
  (``ColwiseParallel``/``RowwiseParallel``), the extra host time of DTensor's dispatch,
  sharding propagation and redistribution (PyTorch DTensor, ``torch.distributed.tensor``),
  the issue of its collectives and the bookkeeping of their waits:
  ``(t_dtensor_block - t_plain_block) / 2`` for forward and backward, ``>= 0``, as a line
  ``a + b · S`` in the block's activation bytes ``S`` (batch × seq × hidden × element size,
  the replicated tensor at the column/row boundary) by least squares through the measured
  sizes with ``a, b >= 0`` (:func:`line_fit`; sizes whose cost falls give their mean). The
  block is a transformer MLP block with its residual (the way a job meets a
  column/row pair: three-dimensional activations that require grad, so the backward also
  all-reduces the column op's input gradient); profiles made before it carry an isolated
  pair on two-dimensional input, used the same way. Profiles with the world-mesh samples
  (thread CPU time, so peer waits and preemption stay out) use their **medians**; older
  profiles (one-rank mesh, wall time) their fastest samples and ``b = 0``.
* :func:`optimizer_per_param` — extra time per DTensor parameter of one optimizer step:
  ``(t_step(DTensor params) - t_step(plain params)) / n`` with the same implementation
  (per-parameter loop or multi-tensor ``foreach``), ``>= 0`` (medians of thread CPU times
  on the world mesh; fastest wall times in older profiles). PyTorch's optimizers run
  every tensor op of the update once per parameter in the loop implementation, so each
  DTensor parameter pays DTensor's dispatch ~10 times (``torch/optim/adamw.py``).
* :func:`tp_optimizer_per_param` — the same for a tensor-parallel job's per-parameter
  loop, measured the way the job meets it: the step right after the MLP block's backward
  (``(t_step(TP block) - t_step(plain block)) / n_dtensor``, medians of thread CPU times).
  Inside the example GPT's, the Llama's and BERT's TP steps the extra per DTensor parameter
  was 153–160 / 173–185 / 123–138 µs, the block's after its backward 177–188 µs and the
  back-to-back step's 115–120 µs (``benchmarks/tp_host_cost.py``, 2026-11-27): the
  backward leaves caches that the optimizer pays for.
* :func:`skew` — rank skew between synchronisations on a shared host: the wait at a
  synchronisation grows with the compute before it (peers drift apart, and a process that
  used its time slice is woken later). Measured directly: a small all-reduce after ``W`` =
  0, 1 and 2 runs of the contention work on every rank, its time on the slowest rank's
  clock; ``kappa`` = slope of the 10 %-trimmed means, ``t(W) = t0 + kappa · W`` (least
  squares through the three means, ``kappa >= 0``). The slowest rank is the one that
  arrived first: ``kappa · W`` is its wait, the ranks' expected arrival gap
  ``E|X0 - X1|``. What a synchronisation costs the step over the **typical** rank the
  simulator runs is half of it, for any distribution of the two ranks' compute times,
  since ``max(a, b) = (a + b) / 2 + |a - b| / 2``: ``E[max(X0, X1)] - E[X] = E|X0 - X1| / 2``
  (:data:`SYNC_SHARE`; the same rule prices a trace's own collectives,
  :mod:`echo_sim.cost.trace_comm`). A busy-mode collective measured ``t_busy(S)`` (slowest
  rank's clock) after ``W_busy`` of work then costs, after ``W`` of compute in the job,
  ``max(t_busy(S) - kappa · W_busy, 0) + SYNC_SHARE · kappa · W``; an idle-mode profile (a
  barrier before each timed collective, the last-arriving rank's clock) has ``W_busy = 0``.
  The typical rank is what the simulator runs: the one-process trace's compute, as
  :mod:`echo_sim.workload.ops` takes it (medians over the captured steps). Profiles since
  2026-11-29 also chain 1 MiB all-reduces with compute between and no barrier
  (:func:`chain_skew`): the gap at each of four levels of compute, a late return carried to
  the next synchronisation included, which the line after a barrier misses (2-process FSDP2
  jobs on a 2-core VM paid 1.6-5.0 ms a step where the line priced 0.6-1.1 and the chain
  2.8-5.0); ``gap(W)`` is then that curve, linear between the levels. A profile made
  by ``replay-comm`` (the job's own step replayed) carries the ranks' arrival gap at every
  replayed call; on its last-arrival clock each synchronisation then costs ``SYNC_SHARE ·
  mean gap`` (:func:`replay_skew`): on a host whose ranks fill the cores the gap is mostly
  the previous collective's exit gap carried over, not drift in proportion to ``W``.
  The probes' work is fixed; a model's own compute varies more from step to step. Where the
  trace has three steps or more, each synchronisation's gap is ``hypot(gap(W), G)`` over the
  parts of the traced step ``W`` long, ``G`` each part's Gini mean difference over the
  steps (independent spreads add as variances; :mod:`echo_sim.workload.jitter`).
* :func:`ddp_hooks` — per step of a ``DistributedDataParallel`` model, the host time of its
  forward pre-processing and its reducer (per-parameter autograd hooks, the gradients' copies
  into and out of the flat buckets, the all-reduces' issue; ``torch/nn/parallel/
  distributed.py``, ``torch/csrc/distributed/c10d/reducer.cpp``): ``a + b · params + c ·
  bytes`` for forward and for backward through the medians of thread CPU time (DDP minus the
  plain model) at three (parameters, bytes) models, as :func:`fsdp_unit`.
* :func:`comm_overlap` — a collective and the compute running at once on a shared host
  (DDP's bucket all-reduces during backward, FSDP2's prefetched gathers): gloo's
  communication thread competes with the compute threads for the cores, so both progress
  slower than alone. Processor sharing (Kleinrock 1967, "Time-shared systems: a theoretical
  analysis", JACM 14(2)): while the other runs, a task progresses at rate ``1/s``. Measured
  per all-reduce size ``S`` from a collective of alone-time ``d`` issued right before work
  of alone-time ``w`` that together took ``t`` (collective) and ``W`` (work):
  ``s_comm = t / d`` if the collective ended inside the work, else ``W / (d - (t - W))``
  (it ran alone after the work); ``s_work = W / w`` if the collective outlasted the work,
  else ``t / (w - (W - t))``, from the 10 %-trimmed means of ``d``, ``w``, ``t`` and ``W``
  over the rounds (the expected cost, as the profile's collective times), clamped to ``[1, 64]``
  and ``[1, (threads + 1) / threads]`` (the compute at worst shares each of its cores with
  one communication thread), and taken as 1 when every rank's threads plus its
  communication thread fit the free cores. Between measured sizes, linear in ``log S``.
  ``s_work`` is the **slower rank's** of each round (the rank whose work with the collective
  in flight took longer; the profile pools every rank's rounds in rank order, in step): the
  next synchronisation waits for it, and the cores' loss does not fall on the ranks evenly
  (in a 2-process DDP job on a 2-core VM the interval between its two buckets' hooks
  stretched to 4.8-10.8 ms on one rank while the other's stayed at 4.7-6.2). ``s_comm`` and
  the spread keep every rank's rounds.
* :func:`fsdp_unit` — per FSDP2 unit (``fully_shard``) and pass: the host time of its hooks
  (pre-forward all-gather copy-in / copy-out, buffer allocation, the collective's issue,
  DTensor parameter swaps, post-backward reduce-scatter copy-in,
  Zhao et al. 2023 §3 / ``torch/distributed/fsdp/_fully_shard``):
  ``a + b · params_in_unit + c · unit_bytes`` through the medians of thread CPU time on
  the world mesh at four units of transformer MLP blocks (6-24 parameters, 0.1-2 MiB: a
  layer's range; least squares, each term ``>= 0``). Profiles before 2026-11-27 measured
  three units of one to three Linears on 2-D input, whose price was 0.55-0.9 of the
  in-model cost and moved 20-30 % between profiles (``benchmarks/fsdp_host_cost.py``).
  Older profiles yet (one-rank mesh, fastest wall times, one width): ``c = 0``
  through the two parameter counts, plus the copy-in/copy-out bytes at the measured memcpy
  bandwidth (:func:`fsdp_copy_us`).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from echo_sim.cost.comm_profile import RUN_CUT, CommProfile, trimmed, trimmed_mean

__all__ = [
    "Calibrated",
    "CommOverlap",
    "comm_overlap",
    "DdpCost",
    "ddp_hooks",
    "FsdpUnitCost",
    "contention",
    "fair_share_bound",
    "DTensorCost",
    "dtensor_dispatch",
    "fsdp_copy_us",
    "floor",
    "line_fit",
    "fsdp_unit",
    "optimizer_per_param",
    "tp_optimizer_per_param",
    "plane_fit",
    "robust",
    "chain_skew",
    "replay_skew",
    "skew",
    "SYNC_SHARE",
    "Skew",
]


@dataclass(frozen=True, kw_only=True)
class Calibrated:
    """A calibrated figure: ``value``, its relative spread (half the inter-quartile range
    over the median, %) over ``samples`` samples, and how it was derived."""

    value: float
    spread_pct: float
    samples: int
    note: str


def robust(samples: Sequence[float]) -> tuple[float, float]:
    """(median, spread %) of ``samples``: spread = (q3 - q1) / 2 / median · 100."""
    xs = sorted(float(x) for x in samples)
    if not xs:
        return 0.0, 0.0
    med = statistics.median(xs)
    if len(xs) < 4 or med == 0:
        return med, (100.0 * (xs[-1] - xs[0]) / 2 / abs(med)) if med else 0.0
    q1, _, q3 = statistics.quantiles(xs, n=4)
    return med, 100.0 * (q3 - q1) / 2 / abs(med)


def floor(samples: Sequence[float]) -> tuple[float, float]:
    """(fastest sample, spread % of the samples) — the intrinsic cost of a short operation."""
    _, spread = robust(samples)
    return (min(float(x) for x in samples) if samples else 0.0), spread


def _get(profile: CommProfile | None, *keys: str) -> list[list[float]] | None:
    if profile is None:
        return None
    out = [profile.calibration.get(k) for k in keys]
    if any(not v for v in out):
        return None
    return [list(v) for v in out if v]


def contention(profile: CommProfile | None, ranks_per_host: int) -> Calibrated | None:
    """Compute slowdown of ``ranks_per_host`` ranks sharing the profiled host (see module).

    None when the profile has no contention samples or measured another rank count.
    """
    if profile is None or ranks_per_host < 2:
        return None
    got = _get(profile, "contention_alone_us", "contention_busy_us")
    if got is not None:
        alone_s, busy_s = got
    else:  # profiles before the calibration block: one median per row
        rows = [profile.samples.get((op, ranks_per_host)) for op in ("compute_alone", "compute")]
        if not rows[0] or not rows[1]:
            return None
        alone_s, busy_s = [rows[0][0][1]], [rows[1][0][1]]
    if profile.world_size and profile.world_size != ranks_per_host:
        return None
    alone, sa = robust(alone_s)
    busy, sb = robust(busy_s)
    if not alone > 0:
        return None
    measured = busy / alone
    threads = profile.threads_per_rank or 1
    n = len(alone_s) + len(busy_s)
    spread = (sa**2 + sb**2) ** 0.5
    free = max(profile.cpu_count - profile.load_avg, 0.0)  # cores other load left free
    if profile.cpu_count and ranks_per_host * threads <= free:
        return Calibrated(value=1.0, spread_pct=spread, samples=n, note=(
            f"compute: x1 ({ranks_per_host} ranks x {threads} thread(s) fit the "
            f"{free:.1f} free of {profile.cpu_count} cores; measured x{measured:.3g} not "
            "applied)"))
    bound = fair_share_bound(ranks_per_host, threads, profile.cpu_count, profile.load_avg)
    f = min(max(measured, 1.0), bound)
    cores = (f"{free:.1f} free of {profile.cpu_count} cores, fair-share bound x{bound:.3g}"
             if profile.cpu_count else "cores unknown")
    return Calibrated(value=f, spread_pct=spread, samples=n, note=(
        f"compute: x{f:.3g} for {ranks_per_host} ranks sharing a CPU host ({cores}; median "
        f"{busy:.0f} us all ranks busy / {alone:.0f} us alone over {n} samples, spread "
        f"{spread:.0f}%)"))


def fair_share_bound(ranks: int, threads: int, cpu_count: int, load_avg: float) -> float:
    """Largest slowdown ``ranks`` co-located ranks can cause each other under a fair-share
    scheduler (Linux CFS gives each of ``N`` runnable threads ``min(1, C / N)`` of a core):
    ``min(1, C / (L + t)) / min(1, C / (L + k·t))`` with ``L`` the other runnable load, ``C``
    the cores, ``t`` threads per rank, ``k`` ranks. Unknown cores: ``k·t`` (every thread of
    every rank on one core)."""
    if cpu_count <= 0:
        return float(ranks * threads)
    alone = min(1.0, cpu_count / (load_avg + threads))
    together = min(1.0, cpu_count / (load_avg + ranks * threads))
    return max(alone / together, 1.0)


@dataclass(frozen=True, kw_only=True)
class DTensorCost:
    """Extra host µs per tensor-parallel Linear call: ``a + b · S`` per pass, ``S`` the
    replicated activation bytes at the column/row boundary (see module)."""

    fw_a_us: float
    fw_b_us_per_byte: float
    bw_a_us: float
    bw_b_us_per_byte: float
    samples: int
    notes: tuple[str, str]

    def fw_us(self, nbytes: float) -> float:
        return self.fw_a_us + self.fw_b_us_per_byte * max(nbytes, 0.0)

    def bw_us(self, nbytes: float) -> float:
        return self.bw_a_us + self.bw_b_us_per_byte * max(nbytes, 0.0)


def dtensor_dispatch(profile: CommProfile | None) -> DTensorCost | None:
    """The extra cost per tensor-parallel Linear call (see module), or None."""
    for pre, what in (("tp_block", "a transformer MLP block (LayerNorm, Colwise Linear, GELU, "
                                    "Rowwise Linear, residual) minus the plain shard block"),
                      ("tp", "a Colwise+Rowwise pair minus the plain shard pair")):
        mesh = _get(profile, f"{pre}_fw_cpu_us", f"{pre}_plain_fw_cpu_us", f"{pre}_bw_cpu_us",
                    f"{pre}_plain_bw_cpu_us", "tp_act_bytes")
        if mesh is not None:
            return _dtensor_mesh(mesh, what)
    got = _get(profile, "dtensor_fw_us", "plain_fw_us", "dtensor_bw_us", "plain_bw_us")
    if got is None:
        return None
    vals, notes = [], []
    for (dt, pl), phase in ((got[0:2], "forward"), (got[2:4], "backward")):
        d, spread = floor(dt)
        p, _ = floor(pl)
        v = max(d - p, 0.0) / 2
        vals.append(v)
        notes.append(f"DTensor {phase}: +{v:.0f} us per tensor-parallel Linear ((fastest "
                     f"{d:.0f} - {p:.0f} us) / 2 of a Colwise+Rowwise pair on a one-rank "
                     f"mesh, {len(dt)} samples, spread {spread:.0f}%)")
    return DTensorCost(fw_a_us=vals[0], fw_b_us_per_byte=0.0, bw_a_us=vals[1],
                       bw_b_us_per_byte=0.0, samples=len(got[0]), notes=(notes[0], notes[1]))


def _dtensor_mesh(got: list[list[float]], what: str) -> DTensorCost | None:
    """World-mesh samples: per size, (median DTensor - median plain) / 2; a line in bytes.
    ``what``: the microbenchmark, for the note."""
    fw, fw_pl, bw, bw_pl, sizes = got
    k = len(sizes)
    if len({len(fw), len(fw_pl), len(bw), len(bw_pl)}) != 1 or len(fw) < k:
        return None
    idx = {x: [i for i in range(len(fw)) if sizes[i % k] == x] for x in sizes}
    coef, notes = [], []
    for dt, pl, phase in ((fw, fw_pl, "forward"), (bw, bw_pl, "backward")):
        xs, ys = [], []
        for x, ii in idx.items():
            xs.append(x)
            ys.append(max(statistics.median(dt[i] for i in ii)
                          - statistics.median(pl[i] for i in ii), 0.0) / 2)
        a, b = line_fit(xs, ys)
        _, spread = robust(dt)
        coef.append((a, b))
        pts = ", ".join(f"{y:.0f} us at {_size(x)}" for x, y in sorted(zip(xs, ys,
                                                                            strict=True)))
        notes.append(f"DTensor {phase}: +{a:.0f} us + {b * (1 << 20):.0f} us/MiB of activation "
                     f"per tensor-parallel Linear ({pts}: median thread CPU time of "
                     f"{what} on the profiled ranks' mesh, / 2; {len(fw)} samples, "
                     f"spread {spread:.0f}%)")
    return DTensorCost(fw_a_us=coef[0][0], fw_b_us_per_byte=coef[0][1], bw_a_us=coef[1][0],
                       bw_b_us_per_byte=coef[1][1], samples=len(fw), notes=(notes[0], notes[1]))


def optimizer_per_param(profile: CommProfile | None, *, foreach: bool,
                        params: int) -> Calibrated | None:
    """Extra µs per DTensor parameter of one optimizer step (see module), or None.

    ``params``: how many parameters the microbenchmark's step updated
    (:data:`echo_sim.measure.host_overheads.OPTIM_PARAMS`).
    """
    impl = "foreach" if foreach else "loop"
    how = "multi-tensor foreach" if foreach else "per-parameter loop"
    if params < 1:
        return None
    got = _get(profile, f"optim_dtensor_{impl}_cpu_us", f"optim_plain_{impl}_cpu_us")
    if got is not None:
        (d, spread), (p, _) = robust(got[0]), robust(got[1])
        stat = "median thread CPU time of a step"
    else:
        got = _get(profile, f"optim_dtensor_{impl}_us", f"optim_plain_{impl}_us")
        if got is None:
            return None
        (d, spread), (p, _) = floor(got[0]), floor(got[1])
        stat = "fastest step"
    v = max(d - p, 0.0) / params
    return Calibrated(value=v, spread_pct=spread, samples=len(got[0]), note=(
        f"optimizer: +{v:.1f} us per DTensor parameter ({how}; {stat} over {params} "
        f"parameters {d:.0f} us DTensor vs {p:.0f} us plain, spread {spread:.0f}%)"))


def tp_optimizer_per_param(profile: CommProfile | None) -> Calibrated | None:
    """Extra µs per DTensor parameter of a per-parameter-loop optimizer step taken right
    after the tensor-parallel MLP block's backward (see module), or None (profiles made
    before it: :func:`optimizer_per_param`'s back-to-back figure is the fallback)."""
    got = _get(profile, "tp_block_optim_cpu_us", "tp_block_plain_optim_cpu_us",
               "tp_block_dtensor_params")
    if got is None or not got[2] or got[2][0] < 1:
        return None
    n = got[2][0]
    (d, spread), (p, _) = robust(got[0]), robust(got[1])
    v = max(d - p, 0.0) / n
    return Calibrated(value=v, spread_pct=spread, samples=len(got[0]), note=(
        f"optimizer: +{v:.1f} us per DTensor parameter (per-parameter loop right after a "
        f"backward; median thread CPU time of a step over the tensor-parallel MLP block's "
        f"parameters {d:.0f} us, {n:.0f} of them DTensor, vs {p:.0f} us plain, spread "
        f"{spread:.0f}%)"))


SYNC_SHARE = 0.5
"""The share of the ranks' expected arrival gap ``E|X0 - X1|`` (the first arriver's wait,
which the rank-skew probe measures) that a synchronisation adds to the step over the typical
rank: ``E[max(X0, X1)] - E[X] = E|X0 - X1| / 2``."""


@dataclass(frozen=True, kw_only=True)
class Skew:
    """Wait per synchronisation ``kappa`` µs per µs of compute before it, and the busy work
    ``w_busy_us`` a busy-mode profile ran before each timed collective."""

    kappa: float
    w_busy_us: float
    samples: int
    note: str
    gap_us: float | None = None  # a replay's measured mean arrival gap, whatever the compute
    # the chained probe's (compute µs, mean arrival gap µs) levels, ascending compute
    points: tuple[tuple[float, float], ...] = ()

    def gap_at(self, w_us: float) -> float:
        """The ranks' expected arrival gap ``E|X0 - X1|`` at a synchronisation after
        ``w_us`` of compute: a replay's mean gap; else the chained probe's levels, linear
        between them and flat past either end; else ``kappa · w_us``."""
        if self.gap_us is not None:
            return self.gap_us
        w = max(w_us, 0.0)
        if self.points:
            return float(np.interp(w, [x for x, _ in self.points],
                                   [y for _, y in self.points]))
        return self.kappa * w

    def wait_us(self, w_us: float, jitter: Sequence[float] = ()) -> float:
        """What a synchronisation after ``w_us`` of compute costs the step over the typical
        rank: ``SYNC_SHARE · gap_at(w_us)`` (see the module docstring); with ``jitter``, the
        job's own compute's spread over parts of ``w_us`` (Gini mean differences,
        :func:`echo_sim.workload.jitter.part_gaps`), the mean over the parts of
        ``SYNC_SHARE · hypot(gap_at(w_us), G)`` (independent spreads add as variances)."""
        gap = self.gap_at(w_us)
        if not jitter:
            return SYNC_SHARE * gap
        return SYNC_SHARE * statistics.fmean(math.hypot(gap, g) for g in jitter)

    def collective_us(self, t_busy_us: float, w_us: float,
                      jitter: Sequence[float] = ()) -> float:
        """A collective measured ``t_busy_us`` in busy mode, issued after ``w_us`` of
        compute since the last synchronisation (see the module docstring)."""
        own = self.gap_at(self.w_busy_us) if self.w_busy_us > 0 else 0.0  # idle: none
        return max(t_busy_us - own, 0.0) + self.wait_us(w_us, jitter)


def skew(profile: CommProfile | None) -> Skew | None:
    """The synchronisation wait against compute on the profiled host (module docstring);
    from a replay's own arrival gaps where ``profile`` is a replay of the job timed on the
    last arrival (:func:`replay_skew`)."""
    replayed = replay_skew(profile)
    if replayed is not None:
        return replayed
    got = _get(profile, "sync_work_us", "sync_us", "contention_busy_us")
    chained = chain_skew(profile, got[2] if got is not None else None)
    if chained is not None:
        return chained
    if got is None:
        return None
    work, sync, busy = got
    levels = 3  # 0, 1, 2 runs of the work, in turn
    pts = []
    for k in range(levels):
        w = [work[i] for i in range(k, len(work), levels)]
        t = [sync[i] for i in range(k, len(sync), levels)]
        if w and t:
            pts.append((trimmed_mean(w), trimmed_mean(t)))
    if len(pts) < 2:
        return None
    wm = sum(w for w, _ in pts) / len(pts)
    tm = sum(t for _, t in pts) / len(pts)
    den = sum((w - wm) ** 2 for w, _ in pts)
    kappa = max(sum((w - wm) * (t - tm) for w, t in pts) / den, 0.0) if den > 0 else 0.0
    # a busy-mode profile (``profile-comm --busy-us``) timed on its slowest rank or as the
    # ranks' mean holds the profile's own skew; one timed on the last arrival (the transfer
    # alone) or an idle-mode one (barrier first) does not
    busy_mode = profile is not None and profile.run_time != "last_arrival" and any(
        op == "compute" for op, _ in profile.samples)
    w_busy = statistics.median(busy) if busy_mode else 0.0
    return Skew(kappa=kappa, w_busy_us=w_busy, samples=len(sync), note=(
        f"rank skew: the first rank at a synchronisation waits {kappa * 1e3:.1f} us per ms of "
        f"compute before it (4 KiB all-reduce after 0 / 1 / 2 runs of work: "
        + ", ".join(f"{t:.0f}" for _, t in pts) + " us); "
        + (f"busy-mode collectives less {kappa * w_busy:.0f} us, plus" if busy_mode else
           "idle-mode collectives plus") + f" {SYNC_SHARE:g} x that wait after the job's own "
        "compute (what the later rank adds over the typical one; on CPU hosts whose ranks "
        "fill the cores a replay of the job, replay-comm, measures the waits themselves)"))


def chain_skew(profile: CommProfile | None,
               busy: Sequence[float] | None = None) -> Skew | None:
    """The ranks' arrival gap against the compute before a synchronisation from the chained
    probe (``chain_gap_us`` / ``chain_work_us``,
    :func:`echo_sim.measure.host_overheads.measure_host_overheads`), or None (profiles
    before 2026-11-29). The probe meets its all-reduces as a job does, one after the other
    with compute between and no barrier, so each gap holds the previous collective's late
    return carried over as well as the drift during the compute; the points are each level's
    mean compute and mean gap (the plain mean: the late returns are the cost). ``busy``: the
    contention work's samples, for a busy-mode profile's own skew (as :func:`skew`)."""
    if profile is None:
        return None
    gaps = profile.calibration.get("chain_gap_us") or []
    work = profile.calibration.get("chain_work_us") or []
    levels = len(profile.calibration.get("chain_work_fractions") or [])
    if not gaps or len(gaps) != len(work) or not levels or len(gaps) % levels:
        return None
    pts = sorted((statistics.fmean(work[k::levels]), statistics.fmean(gaps[k::levels]))
                 for k in range(levels))
    busy_mode = profile.run_time != "last_arrival" and any(
        op == "compute" for op, _ in profile.samples)
    w_busy = statistics.median(busy) if busy_mode and busy else 0.0
    (w0, g0), (w1, g1) = pts[0], pts[-1]
    kappa = max((g1 - g0) / (w1 - w0), 0.0) if w1 > w0 else 0.0
    return Skew(kappa=kappa, w_busy_us=w_busy, samples=len(gaps), points=tuple(pts), note=(
        "rank skew: the ranks arrive at a synchronisation "
        + ", ".join(f"{g:.0f} us apart after {w / 1e3:.1f} ms" for w, g in pts)
        + " of compute (1 MiB all-reduces chained with compute between and no barrier, "
        "both ranks' start times on the host clock; linear between, flat past either end); "
        + ("busy-mode collectives less that gap after their work, plus" if busy_mode else
           "idle-mode collectives plus") + f" {SYNC_SHARE:g} x it after the job's own "
        "compute (what the later rank adds over the typical one)"))


def replay_skew(profile: CommProfile | None) -> Skew | None:
    """The ranks' arrival gap as a replay of the job measured it (``replay-comm``:
    :data:`echo_sim.measure.comm_replay.REPLAY_GAP`), or None. The replay runs the job's
    own step: each collective after its rank's compute since the previous one, on the job's
    sizes, so the gaps hold what the rank-skew probe's line in ``W`` misses on a host whose
    ranks fill the cores: the previous collective's exit gap carried to the next one
    (2-process FSDP2 jobs on a 2-core VM, 2026-11-29: correlation 0.78-0.92 between a
    collective's exit gap and the next one's arrival gap; mean gaps 0.26-0.93 ms after
    1.1-3.9 ms of compute, not proportional to it). Each synchronisation then costs the step
    ``SYNC_SHARE`` × the mean gap over every timed call (the plain mean: the late
    returns are the cost). Only for a profile timed on the last arrival, whose collectives
    hold no wait of their own."""
    if profile is None or profile.run_time != "last_arrival":
        return None
    gaps = profile.calibration.get("replay_gap_us") or []
    work = profile.calibration.get("replay_work_us") or []
    if not gaps:
        return None
    gap = statistics.fmean(gaps)
    w = statistics.fmean(work) if len(work) == len(gaps) else 0.0
    return Skew(kappa=gap / w if w > 0 else 0.0, w_busy_us=0.0, samples=len(gaps), gap_us=gap,
                note=(f"rank skew: the ranks arrived {gap:.0f} us apart on average at the "
                      f"replayed step's collectives ({len(gaps)} calls, {w:.0f} us of compute "
                      f"before each on average; replay-comm, both ranks' start times on the "
                      f"host clock); each synchronisation plus {SYNC_SHARE:g} x that gap "
                      "(what the later rank adds over the typical one)"))


@dataclass(frozen=True, kw_only=True)
class FsdpUnitCost:
    """Host µs of one FSDP2 unit per pass: ``a_us + b_us · params + c_us · bytes``
    (``bytes``: the unit's unsharded parameter bytes). ``copy_bytes_per_us`` > 0: the
    copies are not in ``a, b, c`` and cost :func:`fsdp_copy_us` on top."""

    fw_a_us: float
    fw_b_us: float
    bw_a_us: float
    bw_b_us: float
    copy_bytes_per_us: float
    note: str
    fw_c_us_per_byte: float = 0.0
    bw_c_us_per_byte: float = 0.0

    def fw_us(self, params: int, nbytes: float = 0.0) -> float:
        return self.fw_a_us + self.fw_b_us * params + self.fw_c_us_per_byte * nbytes

    def bw_us(self, params: int, nbytes: float = 0.0) -> float:
        return self.bw_a_us + self.bw_b_us * params + self.bw_c_us_per_byte * nbytes


def line_fit(xs: Sequence[float], ys: Sequence[float]) -> tuple[float, float]:
    """(a, b) of y = a + b·x by least squares over the medians per x, ``a, b >= 0`` (a
    negative one is dropped and the other refitted, as :func:`plane_fit`: samples that fall
    with x give their mean, not the smallest x's value). x: >= 2 distinct values."""
    by: dict[float, list[float]] = {}
    for x, y in zip(xs, ys, strict=True):
        by.setdefault(x, []).append(y)
    keys = sorted(by)
    a, b = _nonneg_lstsq(np.array([[1.0, x] for x in keys]),
                         np.array([statistics.median(by[x]) for x in keys]))
    return a, b


def plane_fit(ps: Sequence[float], bs: Sequence[float], ys: Sequence[float]) -> tuple[float, ...]:
    """(a, b, c) of y = a + b·p + c·s by least squares over the medians per (p, s), every
    coefficient >= 0 (a negative one is dropped and the rest refitted)."""
    by: dict[tuple[float, float], list[float]] = {}
    for p, s_, v in zip(ps, bs, ys, strict=True):
        by.setdefault((p, s_), []).append(v)
    keys = sorted(by)
    x = np.array([[1.0, p, s_] for p, s_ in keys])
    y = np.array([statistics.median(by[k]) for k in keys])
    return _nonneg_lstsq(x, y)


def _nonneg_lstsq(x: np.ndarray, y: np.ndarray) -> tuple[float, ...]:
    """Least squares ``x · coef ≈ y`` with every coefficient ``>= 0``: the most negative
    one is dropped and the rest refitted until none is negative (all dropped: zeros)."""
    free = list(range(x.shape[1]))
    coef = np.zeros(x.shape[1])
    while free:
        sol, *_ = np.linalg.lstsq(x[:, free], y, rcond=None)
        if (sol >= 0).all():
            coef[free] = sol
            break
        free.pop(int(np.argmin(sol)))
    return tuple(float(c) for c in coef)


Plane = tuple[float, float, float]


def _pass_planes(fw: list[float], bw: list[float], ps: list[float], nb: list[float]
                 ) -> tuple[Plane, Plane, int] | None:
    """``(a, b, c)`` of forward and of backward through the (parameters, bytes) medians of a
    host microbenchmark that measured ``k = len(ps)`` configurations, each rank in turn
    (sample ``i`` is configuration ``i % k``), and the samples' count; None with fewer than 3
    configurations."""
    k = len(ps)
    if k < 3 or len(nb) != k:
        return None
    xp = [ps[i % k] for i in range(len(fw))]
    xb = [nb[i % k] for i in range(len(fw))]
    fa, fb, fc = plane_fit(xp, xb, fw)
    ba, bb, bc = plane_fit(xp, xb, bw)
    return (fa, fb, fc), (ba, bb, bc), len(fw)


def fsdp_unit(profile: CommProfile | None) -> FsdpUnitCost | None:
    """The per-unit FSDP2 host cost (see module), or None without calibration samples.

    ``fsdp_fw_cpu_us`` / ``fsdp_bw_cpu_us`` (or the older ``fsdp_fw_us`` / ``fsdp_bw_us``)
    hold one median per (rank, configuration), ranks in turn; ``fsdp_params[i % k]`` and
    ``fsdp_unit_bytes[i % k]`` are sample i's parameters and bytes per unit.
    """
    mesh = _get(profile, "fsdp_fw_cpu_us", "fsdp_bw_cpu_us", "fsdp_params", "fsdp_unit_bytes")
    if mesh is not None:
        planes = _pass_planes(*mesh)
        if planes is None:
            return None
        (fa, fb, fc), (ba, bb, bc), n = planes
        mib = 1 << 20
        model = ("units of transformer MLP blocks" if _get(profile, "fsdp_blocks") is not None
                 else "units of Linears, an older profile's: 0.6-0.9 of the in-model cost")
        return FsdpUnitCost(
            fw_a_us=fa, fw_b_us=fb, bw_a_us=ba, bw_b_us=bb, copy_bytes_per_us=0.0,
            fw_c_us_per_byte=fc, bw_c_us_per_byte=bc, note=(
                f"FSDP2 hooks per unit: forward {fa:.0f} + {fb:.1f}/param + {fc * mib:.0f}/MiB "
                f"us, backward {ba:.0f} + {bb:.1f}/param + {bc * mib:.0f}/MiB us (thread CPU "
                f"time on the profiled ranks' mesh, copies and allocation included; "
                f"{n} configuration medians of {model})"))
    got = _get(profile, "fsdp_fw_us", "fsdp_bw_us", "fsdp_params", "copy_bytes_per_us")
    if got is None or len(set(got[2])) < 2:
        return None
    fw, bw, ps, bw_copy = got
    xs = [ps[i % len(ps)] for i in range(len(fw))]
    fa, fb = line_fit(xs, fw)
    ba, bb = line_fit(xs, bw)
    copy = max(bw_copy)  # fastest copy = highest bandwidth
    return FsdpUnitCost(fw_a_us=fa, fw_b_us=fb, bw_a_us=ba, bw_b_us=bb,
                        copy_bytes_per_us=copy, note=(
                            f"FSDP2 hooks per unit: forward {fa:.0f} + {fb:.1f}/param us, "
                            f"backward {ba:.0f} + {bb:.1f}/param us; copy-in/out at "
                            f"{copy / 1e3:.1f} GB/s"))


@dataclass(frozen=True, kw_only=True)
class DdpCost:
    """Host µs of a DDP model's forward and backward: ``a + b · params + c · bytes`` each
    (``params``: parameter tensors, ``bytes``: their bytes)."""

    fw: Plane
    bw: Plane
    note: str

    def fw_us(self, params: float, nbytes: float) -> float:
        a, b, c = self.fw
        return a + b * params + c * nbytes

    def bw_us(self, params: float, nbytes: float) -> float:
        a, b, c = self.bw
        return a + b * params + c * nbytes


def ddp_hooks(profile: CommProfile | None) -> DdpCost | None:
    """DDP's host cost per forward and backward (see module), or None without samples
    (profiles before it). ``ddp_fw_cpu_us`` / ``ddp_bw_cpu_us`` hold one median per (rank,
    configuration), ranks in turn; ``ddp_params[i % k]`` / ``ddp_bytes[i % k]`` are sample
    i's model."""
    got = _get(profile, "ddp_fw_cpu_us", "ddp_bw_cpu_us", "ddp_params", "ddp_bytes")
    planes = None if got is None else _pass_planes(*got)
    if planes is None:
        return None
    f, b, n = planes
    mib = 1 << 20
    model = ("transformer MLP blocks" if _get(profile, "ddp_blocks") is not None else
             "stacks of Linears, an older profile's: a third to a half of the "
             "in-model cost")
    return DdpCost(fw=f, bw=b, note=(
        f"DDP host cost per pass: forward {f[0]:.0f} + {f[1]:.1f}/param + {f[2] * mib:.0f}/MiB"
        f" us, backward {b[0]:.0f} + {b[1]:.1f}/param + {b[2] * mib:.0f}/MiB us (reducer "
        f"hooks, bucket copies, all-reduce issue; thread CPU time, DDP minus plain, "
        f"{n} configuration medians of {model})"))


def fsdp_copy_us(unit_bytes: float, dp: int, copy_bytes_per_us: float) -> tuple[float, float]:
    """(forward, backward) µs of FSDP2's copies for a unit of ``unit_bytes`` (unsharded).

    Forward all-gather: copy-in of the local shard (``S/dp``) into the send buffer and
    copy-out of the gathered ``S`` into the parameters. Backward: the same all-gather again
    (parameters resharded after forward) plus the reduce-scatter's copy-in of the ``S``
    bytes of gradients and copy-out of the ``S/dp`` shard. Bytes / memcpy bandwidth.
    """
    if copy_bytes_per_us <= 0:
        return 0.0, 0.0
    ag = unit_bytes * (1 + 1 / dp)
    return ag / copy_bytes_per_us, 2 * ag / copy_bytes_per_us


@dataclass(frozen=True, kw_only=True)
class CommOverlap:
    """Slowdowns of a collective and of the compute while both run (see module), per
    measured all-reduce size (bytes, ascending)."""

    sizes: tuple[float, ...]
    comm_stretch: tuple[float, ...]
    work_stretch: tuple[float, ...]
    samples: int
    note: str
    # per size: the collective's times beside the work over their mean, sorted (what
    # echo_sim.sim.comm_spread draws a stretched collective's spread from)
    comm_spread: tuple[tuple[float, ...], ...] = ()

    def _at(self, ys: tuple[float, ...], nbytes: float) -> float:
        xs = [math.log(max(x, 1.0)) for x in self.sizes]
        return float(np.interp(math.log(max(nbytes, 1.0)), xs, ys))

    def comm(self, nbytes: float) -> float:
        """The collective's slowdown ``s_comm`` at ``nbytes``."""
        return self._at(self.comm_stretch, nbytes)

    def work(self, nbytes: float) -> float:
        """The compute's slowdown ``s_work`` while an ``nbytes`` collective is in flight."""
        return self._at(self.work_stretch, nbytes)

    def spread(self, nbytes: float) -> np.ndarray | None:
        """The run-to-run spread of a collective beside compute at the measured size nearest
        ``nbytes`` (in log size): its times there over their mean; None if not kept."""
        if len(self.comm_spread) != len(self.sizes):
            return None
        x = math.log(max(nbytes, 1.0))
        i = min(range(len(self.sizes)), key=lambda j: abs(math.log(self.sizes[j]) - x))
        return np.asarray(self.comm_spread[i], dtype=float)


_MAX_COMM_STRETCH = 64.0


def _stretches(d: float, w: float, t: float, big_w: float) -> tuple[float, float]:
    """(s_comm, s_work) of one round (module docstring), unclamped."""
    if t <= big_w:  # the collective ended inside the work
        s_c = t / d
        s_w = t / max(w - (big_w - t), 1e-9)
    else:  # the work ended first; the collective then ran alone
        s_c = big_w / max(d - (t - big_w), 1e-9)
        s_w = big_w / w
    return s_c, s_w


def _by_size(rows: Sequence[tuple[float, ...]]) -> dict[float, list[tuple[float, ...]]]:
    """The overlap rounds ``(bytes, d, w, t, W)`` with ``d, w > 0``, by size: ``(d, w, t, W)``."""
    by: dict[float, list[tuple[float, ...]]] = {}
    for nb, *rest in rows:
        if rest[0] > 0 and rest[1] > 0:
            by.setdefault(nb, []).append(tuple(rest))
    return by


def _slower_rank(rows: Sequence[tuple[float, ...]], ranks: int) -> list[tuple[float, ...]]:
    """Per round, the row of the rank whose work with the collective in flight (``W``, the
    last field) took longest. The profile pools every rank's rounds in rank order, and the
    ranks run the rounds in step, so round ``i`` of rank ``r`` is row ``r · n + i``; rows that
    do not split so (an older or hand-made profile, one rank's rounds) come back unchanged."""
    n = len(rows) // ranks if ranks > 1 else 0
    if n == 0 or n * ranks != len(rows):
        return list(rows)
    blocks = [rows[r * n:(r + 1) * n] for r in range(ranks)]
    if any(b[i][0] != blocks[0][i][0] for b in blocks for i in range(n)):
        return list(rows)
    return [max((b[i] for b in blocks), key=lambda row: row[-1]) for i in range(n)]


def comm_overlap(profile: CommProfile | None, ranks_per_host: int) -> CommOverlap | None:
    """Collective / compute slowdowns while they overlap (module docstring), or None
    without overlap samples (profiles before them) or for another rank count."""
    if profile is None or ranks_per_host < 2:
        return None
    keys = ("overlap_bytes", "overlap_comm_alone_us", "overlap_work_alone_us",
            "overlap_comm_busy_us", "overlap_work_busy_us")
    got = _get(profile, *keys)
    if got is None or (profile.world_size and profile.world_size != ranks_per_host):
        return None
    threads = profile.threads_per_rank or 1
    free = max(profile.cpu_count - profile.load_avg, 0.0)
    fits = bool(profile.cpu_count) and ranks_per_host * (threads + 1) <= free
    rows = list(zip(*got, strict=True))
    by = _by_size(rows)
    if not by:
        return None
    slow = _by_size(_slower_rank(rows, profile.world_size or ranks_per_host))
    sizes = tuple(sorted(by))
    cap_w = (threads + 1) / threads

    def expected(rounds: list[tuple[float, ...]]) -> tuple[float, float]:
        # expected times per size (trimmed means: a step pays the mean cost of its many
        # collectives; a median of per-round ratios swung x1.6 to x10 between profiles)
        d, w, t, big_w = (trimmed_mean([r[i] for r in rounds]) for i in range(4))
        return _stretches(d, w, t, big_w)

    s_c = tuple(1.0 if fits else min(max(expected(by[x])[0], 1.0), _MAX_COMM_STRETCH)
                for x in sizes)
    s_w = tuple(1.0 if fits else min(max(expected(slow.get(x, by[x]))[1], 1.0), cap_w)
                for x in sizes)
    n = sum(len(v) for v in by.values())
    pts = ", ".join(f"{_size(x)} x{c:.2g}/x{w:.2g}" for x, c, w in zip(sizes, s_c, s_w,
                                                                        strict=True))
    how = ("not applied: every rank's threads and its communication thread fit the "
           f"{free:.1f} free of {profile.cpu_count} cores" if fits else
           f"trimmed means of {n} rounds" + ("; the compute's of the slower rank in each"
                                              if slow != by else ""))
    spread = []
    for x in sizes:  # the collective's busy times (every rank's), as its mean keeps them
        v = np.asarray(trimmed([r[2] for r in by[x]], RUN_CUT), dtype=float)
        spread.append(tuple(sorted(float(t) for t in v / v.mean())) if v.mean() > 0 else ())
    return CommOverlap(sizes=sizes, comm_stretch=s_c, work_stretch=s_w, samples=n,
                       comm_spread=tuple(spread), note=(
        f"comm/compute overlap on a shared host: all-reduce / compute slowdown while both "
        f"run {pts} ({how})"))


def _size(nbytes: float) -> str:
    for unit, k in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if nbytes >= k:
            return f"{nbytes / k:g} {unit}"
    return f"{nbytes:g} B"
