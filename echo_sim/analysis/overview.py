"""Everything the HTML report shows, computed from one trace: :func:`overview`.

Sections (each computed independently; one that cannot be computed is left empty and its
reason added to :attr:`Overview.missing`, the rest still come):

* **step times**: iteration time per (rank, step) in µs (NaN where a rank has no events);
* **breakdown per step**: the parts of :data:`~echo_sim.analysis.statistic.PARTS`, mean over
  ranks, per step; they add up to the mean iteration time (100 %);
* **operators**: the top operators by total time (:func:`~echo_sim.analysis.statistic.statistic`)
  with FLOPs where the trace records them. Achieved FLOP/s of an operator = its FLOPs ÷ its
  busy time; MFU = achieved ÷ the traced device's peak for the trace's dtype;
* **job FLOPs**: model FLOPs per step = 3 × the forward FLOPs (forward + backward ≈ 3 ×
  forward, the MFU convention of Chowdhery et al. 2022, PaLM, appendix B), per rank;
  achieved = model FLOPs ÷ iteration time; MFU = achieved ÷ peak;
* **communication** per (collective, process group): calls, bytes (whole buffer, nccl-tests
  convention), time, algorithm bandwidth ``bytes / time`` and bus bandwidth = algorithm
  bandwidth × ``2(n−1)/n`` (all_reduce), ``(n−1)/n`` (all_gather, reduce_scatter,
  all_to_all), 1 otherwise (nccl-tests doc/PERFORMANCE.md), n = group size;
* **memory**: every counter series per rank over time (at most :data:`MAX_POINTS` samples
  each, evenly thinned) and its per-step peak;
* **critical path** of one step (:func:`~echo_sim.analysis.critical.critical_path`).

Units: µs, bytes, FLOP; bandwidths in GB/s (1e9 bytes/s); shares are fractions.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from echo_sim.analysis.statistic import PARTS, Statistics, statistic, step_grid, time_partition
from echo_sim.errors import EchoError
from echo_sim.trace.model import COLLECTIVES, Cat, Trace

__all__ = ["MAX_POINTS", "CommRow", "OpRow", "Overview", "bus_factor", "overview", "peak_of"]

MAX_POINTS = 4000
"""Most samples kept per memory series (the report stays small for long captures)."""

_log = logging.getLogger(__name__)


@dataclass(frozen=True)
class OpRow:
    """One operator: durations (µs) as in ``statistic``, FLOPs and what they achieved."""

    name: str
    category: str
    count: int
    total_us: float
    mean_us: float
    share: float
    flops: float  # sum over samples; 0 where not recorded
    busy_us: float
    tflops: float | None  # achieved TFLOP/s = flops / busy time; None without FLOPs
    mfu: float | None  # tflops / peak; None without FLOPs or peak


@dataclass(frozen=True)
class CommRow:
    """Communication of one collective kind in one process group, over ranks and steps."""

    collective: str
    group: str
    group_size: int
    calls: int
    bytes: float
    time_us: float
    algbw_gbps: float | None
    busbw_gbps: float | None


@dataclass
class Overview:
    """What :func:`overview` returns; ``to_dict`` is the report's embedded JSON."""

    source: str
    ranks: list[int]
    steps: list[int]
    iteration_us: np.ndarray  # (ranks, steps)
    parts_per_step: dict[str, list[float]]  # part -> mean µs over ranks, per step
    stats: Statistics
    ops: list[OpRow]
    device: str
    peak_tflops: float | None
    peak_source: str
    model_tflops_per_step: float | None  # model FLOPs per step and rank, TFLOP
    achieved_tflops: float | None
    mfu: float | None
    mfu_per_step: list[float | None]  # per step: mean over ranks of 3·FW FLOPs / time / peak
    comm: list[CommRow]
    memory: dict[str, dict[int, tuple[list[float], list[float]]]]  # series -> rank -> (t, v)
    memory_peak_per_step: dict[str, list[float]]  # series -> per-step max over ranks
    critical: dict[str, Any] | None
    missing: list[str] = field(default_factory=list)
    # each collective's time split across its members (echo_sim.analysis.comm_anatomy);
    # None with one rank or no collective every member of which was traced
    anatomy: dict[str, Any] | None = None

    @property
    def mean_iteration_us(self) -> float:
        v = self.iteration_us[np.isfinite(self.iteration_us)]
        return float(v.mean()) if v.size else float("nan")

    def to_dict(self) -> dict[str, Any]:
        it = np.where(np.isfinite(self.iteration_us), self.iteration_us, -1.0)
        return {
            "source": self.source, "ranks": self.ranks, "steps": self.steps,
            "iteration_us": it.round(3).tolist(), "parts_per_step": self.parts_per_step,
            "categories": self.stats.to_dict()["categories"],
            "ops": [o.__dict__ for o in self.ops], "device": self.device,
            "peak_tflops": self.peak_tflops, "peak_source": self.peak_source,
            "model_tflops_per_step": self.model_tflops_per_step,
            "achieved_tflops": self.achieved_tflops, "mfu": self.mfu,
            "mfu_per_step": self.mfu_per_step,
            "comm": [c.__dict__ for c in self.comm],
            "memory_peak_per_step": self.memory_peak_per_step,
            "critical": self.critical, "missing": self.missing, "anatomy": self.anatomy,
        }


def bus_factor(collective: str, n: int) -> float:
    """nccl-tests' bus-bandwidth factor of ``collective`` over ``n`` ranks (module doc)."""
    if n <= 1:
        return 1.0
    if collective == "all_reduce":
        return 2.0 * (n - 1) / n
    if collective in ("all_gather", "reduce_scatter", "all_to_all"):
        return (n - 1) / n
    return 1.0


def peak_of(trace: Trace, peak_tflops: float | None = None) -> tuple[str, float | None, str]:
    """(device description, peak TFLOP/s or None, where the peak came from) of rank 0's
    device for the dtype its meta.json records (float32 when it records none). float32 on a
    GPU counts at the TF32 rate when meta.json's ``float32_matmul_precision`` is ``high`` or
    ``medium`` (torch's switch for TF32 matmuls)."""
    from echo_sim.cost.compute_scaling import resolve_device

    info = trace.ranks[min(trace.ranks)] if trace.ranks else None
    meta = info.meta if info else {}
    device = str(meta.get("device") or (info.device if info else "") or "unknown")
    name = str(meta.get("device_name") or "")
    desc = " ".join(dict.fromkeys(x for x in (device, name) if x))
    if peak_tflops is not None:
        return desc, peak_tflops, "given (peak_tflops)"
    dtype = str(meta.get("dtype") or meta.get("param_dtype") or "float32")
    gpu = resolve_device(device, name)
    if gpu is None:
        return desc, None, f"no preset for {desc!r}: pass a peak to get MFU"
    if dtype in ("float32", "fp32") and meta.get("float32_matmul_precision") in ("high",
                                                                                 "medium"):
        dtype = "tf32"
    try:
        peak = gpu.peak_flops(dtype) / 1e12
    except EchoError:
        peak, dtype = gpu.peak_flops("fp32") / 1e12, "fp32"
    how = f"{gpu.name} preset, {dtype} dense peak"
    if gpu.name == "cpu":
        how += " (a nominal 16-core AVX2 host: rough)"
    return desc, peak, how


def _ops(trace: Trace, stats: Statistics, rows: np.ndarray, peak: float | None,
         top: int) -> list[OpRow]:
    ev = trace.events
    names = ev.name[rows]
    flops = np.bincount(names, weights=ev.flops[rows], minlength=len(trace.names))
    busy = np.bincount(names, weights=ev.busy_us[rows], minlength=len(trace.names))
    index = {n: i for i, n in enumerate(trace.names)}
    out = []
    for o in stats.ops[:top]:
        i = index[o.name]
        f, b = float(flops[i]), float(busy[i])
        tf = f / b / 1e6 if f > 0 and b > 0 else None  # FLOP/µs → TFLOP/s: ÷ 1e6
        out.append(OpRow(o.name, o.category, o.count, o.total_us, o.mean_us, o.share, f, b,
                         tf, tf / peak if tf is not None and peak else None))
    return out


def _comm(trace: Trace, rows: np.ndarray) -> list[CommRow]:
    ev = trace.events
    sel = rows[(ev.cat[rows] == int(Cat.COMM)) & (ev.coll[rows] >= 0)]
    acc: dict[tuple[int, int], list[float]] = {}
    for c, g, nb, d in zip(ev.coll[sel].tolist(), ev.group[sel].tolist(),
                           ev.nbytes[sel].tolist(), ev.dur_us[sel].tolist(), strict=True):
        a = acc.setdefault((c, g), [0, 0.0, 0.0])
        a[0] += 1
        a[1] += nb
        a[2] += d
    out = []
    for (c, g), (calls, nbytes, t) in sorted(acc.items(), key=lambda kv: -kv[1][2]):
        members = trace.groups[g] if 0 <= g < len(trace.groups) else ()
        n = len(members) or max(len(trace.ranks), 1)
        coll = COLLECTIVES[c] if 0 <= c < len(COLLECTIVES) else str(c)
        alg = nbytes / t / 1e3 if t > 0 and nbytes > 0 else None  # bytes/µs → GB/s: ÷ 1e3
        label = ",".join(map(str, members)) if 0 < len(members) <= 8 else f"{n} ranks"
        out.append(CommRow(coll, label, n, int(calls), float(nbytes), float(t), alg,
                           alg * bus_factor(coll, n) if alg is not None else None))
    return out


def _thin(t: np.ndarray, v: np.ndarray) -> tuple[list[float], list[float]]:
    if t.size > MAX_POINTS:
        keep = np.unique(np.linspace(0, t.size - 1, MAX_POINTS).astype(np.int64))
        # keep each window's maximum too, so thinning never hides the peak
        keep = np.union1d(keep, [int(np.argmax(v))])
        t, v = t[keep], v[keep]
    return t.round(3).tolist(), v.tolist()


def _memory(trace: Trace, ranks: np.ndarray, starts: np.ndarray, ends: np.ndarray,
            steps: list[int]) -> tuple[dict[str, dict[int, tuple[list[float], list[float]]]],
                                       dict[str, list[float]]]:
    """Every counter series over time per rank, and per step its largest sample: each
    rank's samples in ``(start, end]`` of that rank's own step (``starts``/``ends``: ranks ×
    steps, rows in ``ranks`` order), so that a STEP marker's sample at a step's end (its
    peaks, its page faults) counts for that step only, however far the ranks drift apart."""
    c = trace.counters
    series: dict[str, dict[int, tuple[list[float], list[float]]]] = {}
    peaks: dict[str, list[float]] = {}
    if len(c) == 0:
        return series, peaks
    t0 = float(np.nanmin(starts)) if np.isfinite(starts).any() else float(c.ts_us.min())
    row_of = {int(r): i for i, r in enumerate(ranks.tolist())}  # grid row of each rank
    for s, name in enumerate(trace.counter_names):
        m = c.series == s
        if not m.any():
            continue
        per_rank = {}
        row = [float("nan")] * len(steps)
        for r in np.unique(c.rank[m]).tolist():
            mr = m & (c.rank == r)
            order = np.argsort(c.ts_us[mr], kind="stable")
            ts, vals = c.ts_us[mr][order], c.value[mr][order]
            per_rank[int(r)] = _thin(ts - t0, vals)
            i = row_of.get(int(r))
            if i is None:
                continue
            # this rank's samples in (start, end] of each of its steps (sorted: two bisections)
            a = np.searchsorted(ts, starts[i], side="right")
            b = np.searchsorted(ts, ends[i], side="right")
            for j in range(len(steps)):
                if np.isfinite(starts[i, j]) and np.isfinite(ends[i, j]) and b[j] > a[j]:
                    v = float(vals[a[j]:b[j]].max())
                    row[j] = v if not row[j] >= v else row[j]  # nan-safe max over ranks
        series[name] = per_rank
        peaks[name] = row
    return series, peaks


def _section(missing: list[str], what: str, fn: Callable[[], Any], default: Any) -> Any:
    """``fn()``, or ``default`` with ``what: reason`` noted when the trace cannot give it."""
    try:
        return fn()
    except EchoError as e:
        missing.append(f"{what}: {e}")
    except (ValueError, KeyError, IndexError) as e:  # a foreign trace lacking what it needs
        _log.debug("report section %s failed", what, exc_info=True)
        missing.append(f"{what}: not computable from this trace ({type(e).__name__}: {e})")
    return default


def overview(trace: Trace, *, top: int = 25, peak_tflops: float | None = None,
             critical_step: int | None = None) -> Overview:
    """The report's content (module docstring). ``top``: operators listed; ``peak_tflops``:
    the device's peak (None: the preset of the traced device); ``critical_step``: the step
    whose critical path is shown (None: the last captured step)."""
    if top < 1:
        raise EchoError(f"top must be >= 1, got {top}")
    if peak_tflops is not None and not peak_tflops > 0:
        raise EchoError(f"peak_tflops must be > 0, got {peak_tflops}")
    grid = step_grid(trace)
    stats = statistic(trace)
    missing: list[str] = []
    iters = grid.grid(grid.iteration_us)
    valid = np.isfinite(iters)
    parts = time_partition(trace, grid)
    n_valid = np.maximum(valid.sum(axis=0), 1)
    per_step = {p: (grid.grid(parts[p]).sum(axis=0) / n_valid).round(3).tolist() for p in PARTS}

    device, peak, peak_how = peak_of(trace, peak_tflops)
    if peak is None:
        missing.append(f"MFU: {peak_how}")
    ops = _ops(trace, stats, grid.rows, peak, top)
    over = [o.name for o in ops if o.mfu is not None and o.mfu > 1.0]
    if over:
        missing.append(f"MFU above 100 % for {len(over)} operator(s) ({over[0]}...): the peak "
                       f"({peak_how}) is below what ran; older traces do not record "
                       "float32_matmul_precision (TF32): pass the device's peak")
    ev = trace.events
    fw = grid.rows[ev.cat[grid.rows] == int(Cat.FW)]
    fw_flops = float(ev.flops[fw].sum())
    model_tf = achieved = mfu = None
    mfu_steps: list[float | None] = [None] * len(grid.steps)
    if fw_flops > 0:
        cells = int(valid.sum())
        model_tf = 3.0 * fw_flops / max(cells, 1) / 1e12
        achieved = model_tf / (float(iters[valid].mean()) / 1e6)
        mfu = achieved / peak if peak else None
        if peak:
            sel = ev.cat[grid.rows] == int(Cat.FW)
            cell_flops = grid.grid(np.bincount(grid.group[sel], weights=ev.flops[grid.rows][sel],
                                               minlength=grid.n_cells))
            # FLOP/µs → TFLOP/s: ÷ 1e6; mean over the ranks that ran the step
            rate = np.where(valid, 3.0 * cell_flops / np.where(valid, iters, 1.0) / 1e6, np.nan)
            with np.errstate(invalid="ignore"):
                per = np.nanmean(rate, axis=0) / peak
            mfu_steps = [None if not np.isfinite(v) else float(v) for v in per]
    else:
        missing.append("FLOPs, TFLOP/s and MFU: the trace records no FLOPs on its FW events "
                       "(echo_trace records them per module; foreign formats do not)")
    comm = _section(missing, "communication", lambda: _comm(trace, grid.rows), [])
    if not comm and ev.cat[grid.rows].tolist().count(int(Cat.COMM)) == 0:
        missing.append("communication: no Comm events (a single process, or not traced)")
    anatomy = None
    if comm and np.unique(ev.rank[grid.rows]).size > 1:
        from echo_sim.analysis.comm_anatomy import comm_anatomy

        an = _section(missing, "collectives' anatomy", lambda: comm_anatomy(trace), None)
        anatomy = an.to_dict() if an is not None else None
    steps = [int(s) for s in grid.steps]
    memory, mem_peaks = _section(
        missing, "memory",
        lambda: _memory(trace, grid.ranks, grid.grid(grid.start_us), grid.grid(grid.end_us),
                        steps),
        ({}, {}))
    if not memory:
        missing.append("memory over time: the trace has no memory counters")
    step = critical_step if critical_step is not None else (max(trace.steps)
                                                            if trace.steps else None)
    crit = None
    if step is not None:
        from echo_sim.analysis.critical import critical_path

        cp = _section(missing, f"critical path of step {step}",
                      lambda: critical_path(trace, step=step), None)
        crit = cp.to_dict() if cp is not None else None
    else:
        missing.append("critical path: the trace has no captured steps")
    return Overview(
        source=str(trace.source or ""), ranks=[int(r) for r in grid.ranks], steps=steps,
        iteration_us=iters, parts_per_step=per_step, stats=stats, ops=ops, device=device,
        peak_tflops=peak, peak_source=peak_how, model_tflops_per_step=model_tf,
        achieved_tflops=achieved, mfu=mfu, mfu_per_step=mfu_steps, comm=comm, memory=memory,
        memory_peak_per_step=mem_peaks, critical=crit, missing=missing, anatomy=anatomy)
