"""Measured communication profiles: collective time against message size, per group size.

``python -m echo_sim profile-comm`` measures one (:mod:`echo_sim.measure.profile_comm`);
:class:`~echo_sim.cost.collectives.CommModel` prices collectives from it. The file is JSON::

    {"format": "echo-comm-profile/1", "backend": "gloo", "device": "cpu", "device_name": "...",
     "host": "...", "world_size": 2, "nodes": 1, "torch_version": "...", "iters": 10,
     "created": "2025-01-01T00:00:00+00:00",
     "ops": [{"op": "all_reduce", "group_size": 2,
              "sizes_bytes": [1024, ...], "times_us": [35.1, ...],
              "alpha_us": 30.2, "beta_us_per_byte": 0.0004,
              "stderr_pct": [2.1, ...], "runs_us": [[34.0, 36.2, ...], ...]}, ...],
     "cpu_count": 2, "threads_per_rank": 1, "load_avg": 0.3,
     "calibration": {"contention_alone_us": [5012.3, ...], ...}}

``cpu_count`` / ``threads_per_rank`` / ``load_avg`` (cores' worth of other processes'
CPU use right before the measurement, :func:`echo_sim.measure.profile_comm.other_load`;
older profiles: the 1-minute load average) describe the host the profile was measured on
(0: unknown); ``calibration`` holds raw samples of the host microbenchmarks
(:mod:`echo_sim.measure.host_overheads`) that :mod:`echo_sim.cost.cpu_overheads` reads.
Both are optional (older profiles have neither), as is ``stderr_pct`` (each size's standard
error of its time, % of it: :func:`trimmed_stderr_pct`; a profile whose median is above
:data:`MAX_STDERR_PCT` does not price collectives, :meth:`CommProfile.untrusted`) and
``runs_us`` (every timed run of each size, µs, that the time summarises: kept so that a
profile's spread and tail can be inspected and re-estimated later).

Sizes follow the nccl-tests convention (whole buffer; docs/trace-format.md); ``send`` is a
one-way point-to-point message (half a ping-pong). Times are trimmed means
(:func:`trimmed_mean`) over ``iters`` runs, each on the clock ``run_time`` names: the
``"slowest"`` rank's, the ``"last_arrival"`` rank's or the ``"rank_mean"``
(:mod:`echo_sim.measure.profile_comm`).

Fit (Hockney's alpha-beta model, t = alpha + beta·S): least squares on the **relative**
error, minimising Σ((alpha + beta·S_i - t_i) / t_i)², so small latency-bound messages weigh
as much as large bandwidth-bound ones; if that gives a non-positive term, beta falls back
to the slope between the smallest and largest sizes and alpha to the smallest residual.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from echo_sim.errors import ConfigError, ProfileError, TraceFormatError, TraceNotFoundError
from echo_sim.trace.outfiles import atomic_write

__all__ = [
    "PROFILE_FORMAT",
    "CommProfile",
    "fit_alpha_beta",
    "load_comm_profile",
    "MAX_STDERR_PCT",
    "RUN_CUT",
    "STALL_US",
    "Stalls",
    "save_comm_profile",
    "stalls",
    "trimmed",
    "trimmed_mean",
    "trimmed_stderr_pct",
]

PROFILE_FORMAT = "echo-comm-profile/1"

_MIN_ALPHA_US = 1e-3
_MIN_BETA_US_PER_BYTE = 1e-12

Key = tuple[str, int]


RUN_CUT = 1 / 15
"""Share of a size's runs left out at each end of its mean (:func:`trimmed_mean`,
:mod:`echo_sim.measure.profile_comm`): one run in 15, which is what 10 % cut at the 15 runs
per size that ``benchmarks/accuracy.py`` validated the profile with (floor(1.5) = 1); a fixed share, so that more runs make the same mean more
precise instead of cutting more of the stalls a job pays."""


def trimmed(xs: Sequence[float], cut: float) -> list[float]:
    """``xs`` sorted, without its ``floor(cut · n)`` smallest and largest values."""
    v = sorted(float(x) for x in xs)
    k = int(cut * len(v) + 1e-9)  # 60 · (1/15) is 4, not 3.999…
    return v[k:len(v) - k] or v


def trimmed_mean(xs: Sequence[float], cut: float = 0.1) -> float:
    """Mean of ``xs`` without its ``floor(cut · n)`` smallest and largest values."""
    v = trimmed(xs, cut)
    return sum(v) / len(v)


def trimmed_stderr_pct(xs: Sequence[float], cut: float = 0.1) -> float:
    """Standard error of :func:`trimmed_mean` as a percentage of it: 100 · s / √k / mean
    over the ``k`` values kept (s their sample standard deviation; 0 for fewer than 2)."""
    v = trimmed(xs, cut)
    if len(v) < 2:
        return 0.0
    m = sum(v) / len(v)
    return 100.0 * float(np.std(v, ddof=1)) / math.sqrt(len(v)) / m if m > 0 else 0.0


MAX_STDERR_PCT = 20.0
"""A profile whose collective times have a median standard error above this (percent of the
time) is not used to price collectives: the host was too noisy to measure them
(:meth:`CommProfile.untrusted`)."""


STALL_US = 2000.0
"""A timed run this much over its size's median is a stall: a rank descheduled or a halted
virtual CPU woken late (on a shared 2-core VM they cost one 4 ms scheduler tick)."""


@dataclass(frozen=True)
class Stalls:
    """One (op, group size) of a profile: ``runs`` timed runs over all sizes, the fraction
    ``rate`` at least :data:`STALL_US` over their size's median, and ``excess_us``, the
    mean of ``max(run - median, 0)``: what a collective of the job pays for them on
    average."""

    op: str
    group_size: int
    runs: int
    rate: float
    excess_us: float


def stalls(profile: CommProfile) -> list[Stalls]:
    """Per measured (op, group size) with kept runs (``runs_us``), sorted by key; [] for
    profiles that kept none."""
    out = []
    for key in sorted(profile.runs_us):
        rows = [np.asarray(r, dtype=float) for r in profile.runs_us[key] if len(r)]
        if not rows:
            continue
        over = np.concatenate([r - np.median(r) for r in rows])
        out.append(Stalls(op=key[0], group_size=key[1], runs=int(over.size),
                          rate=float(np.mean(over >= STALL_US)),
                          excess_us=float(np.mean(np.maximum(over, 0.0)))))
    return out


def fit_alpha_beta(points: Sequence[tuple[float, float]]) -> tuple[float, float]:
    """(alpha_us, beta_us_per_byte) of ``t = alpha + beta·S`` through (nbytes, time_us) points.

    Both are positive. One point: half of its time is taken as latency, half as bandwidth
    (a guess, stated as one).
    """
    pts = [(float(s), float(t)) for s, t in points if t > 0]
    if not pts:
        raise ProfileError("cannot fit alpha-beta: no positive time")
    if len({s for s, _ in pts}) < 2:
        s, t = max(pts)
        return max(t / 2, _MIN_ALPHA_US), max(t / 2 / max(s, 1.0), _MIN_BETA_US_PER_BYTE)
    s_arr = np.array([p[0] for p in pts])
    t_arr = np.array([p[1] for p in pts])
    w = 1.0 / t_arr**2
    a = np.array([[w.sum(), (w * s_arr).sum()], [(w * s_arr).sum(), (w * s_arr**2).sum()]])
    rhs = np.array([(w * t_arr).sum(), (w * s_arr * t_arr).sum()])
    try:
        alpha, beta = (float(x) for x in np.linalg.solve(a, rhs))
    except np.linalg.LinAlgError:
        alpha, beta = -1.0, -1.0
    if not (alpha > 0 and beta > 0):
        lo, hi = int(np.argmin(s_arr)), int(np.argmax(s_arr))
        slope = (t_arr[hi] - t_arr[lo]) / (s_arr[hi] - s_arr[lo])
        beta = beta if beta > 0 else float(max(slope, _MIN_BETA_US_PER_BYTE))
        alpha = alpha if alpha > 0 else float(np.min(t_arr - beta * s_arr))
    return max(alpha, _MIN_ALPHA_US), max(beta, _MIN_BETA_US_PER_BYTE)


@dataclass
class CommProfile:
    """Measured collective times: ``samples[(op, group_size)]`` = [(nbytes, time_us), ...]
    ascending in size; ``fits[(op, group_size)]`` = (alpha_us, beta_us_per_byte).

    ``nodes``: how many hosts the measured group spanned (1 for a one-host run).
    """

    backend: str
    device: str
    host: str
    world_size: int
    samples: dict[Key, list[tuple[int, float]]]
    fits: dict[Key, tuple[float, float]] = field(default_factory=dict)
    nodes: int = 1
    device_name: str = ""
    torch_version: str = ""
    iters: int = 0
    created: str = ""
    source: str = ""
    cpu_count: int = 0
    threads_per_rank: int = 0
    load_avg: float = 0.0
    calibration: dict[str, list[float]] = field(default_factory=dict)
    # per (op, group_size): the standard error of each size's time, % (empty: not recorded)
    stderr_pct: dict[Key, list[float]] = field(default_factory=dict)
    # whose clock a timed run is: "slowest" rank's (arrival skew included), the
    # "last_arrival" rank's (the transfer alone) or the "rank_mean" of the ranks' own
    # times (busy mode; echo_sim.measure.profile_comm)
    run_time: str = "slowest"
    # per (op, group_size): every timed run of each size, µs (empty: not recorded)
    runs_us: dict[Key, list[list[float]]] = field(default_factory=dict)
    # which operations were replayed from a job's trace (echo_sim.measure.comm_replay), and
    # from which; empty for a looped profile
    replay: str = ""

    def untrusted(self, max_pct: float = MAX_STDERR_PCT) -> str | None:
        """Why the measured times cannot be trusted (None: they can, or the profile records
        no spread): their median standard error is above ``max_pct`` percent."""
        errs = [e for v in self.stderr_pct.values() for e in v]
        if not errs:
            return None
        med = float(np.median(errs))
        if med <= max_pct:
            return None
        return (f"its collective times vary too much to use: median standard error "
                f"{med:.0f} % of the time over {len(errs)} sizes (at most {max_pct:.0f} %); "
                f"measure again on a quieter host or with more --iters")

    def __post_init__(self) -> None:
        for key, pts in self.samples.items():
            self.samples[key] = sorted((int(s), float(t)) for s, t in pts)
            if key not in self.fits:
                self.fits[key] = fit_alpha_beta(self.samples[key])

    @property
    def ops(self) -> list[Key]:
        """The (op, group_size) keys measured, sorted."""
        return sorted(self.samples)

    def time_us(self, op: str, group_size: int, nbytes: int) -> float:
        """Time (us) of ``op`` over ``group_size`` ranks on ``nbytes``, from the samples.

        Inside the measured size range: linear interpolation in log(size). Above it: the
        largest sample plus ``beta``·(extra bytes). Below it: the smallest sample minus
        ``beta``·(missing bytes), never below min(alpha, smallest time).
        """
        key = (op, int(group_size))
        pts = self.samples.get(key)
        if not pts:
            raise ConfigError(f"profile {self.source or self.host!r} has no {op} over "
                              f"{group_size} ranks; measured: "
                              f"{', '.join(f'{o}/{n}' for o, n in self.ops)}")
        alpha, beta = self.fits[key]
        s0, t0 = pts[0]
        s1, t1 = pts[-1]
        if nbytes >= s1:
            return t1 + beta * (nbytes - s1)
        if nbytes <= s0:
            return max(t0 - beta * (s0 - nbytes), min(alpha, t0))
        xs = [math.log(s) for s, _ in pts]
        ys = [t for _, t in pts]
        return float(np.interp(math.log(nbytes), xs, ys))

    def run_factors(self, op: str, group_size: int, nbytes: float) -> np.ndarray | None:
        """The kept timed runs (``runs_us``) of ``op`` over ``group_size`` ranks at the
        measured size nearest ``nbytes`` (in log size), without the :data:`RUN_CUT` share at
        each end as the profile's mean, divided by their mean: the run-to-run spread of a
        collective priced at 1 (sorted; None when the profile kept no runs there)."""
        key = (op, int(group_size))
        rows, pts = self.runs_us.get(key), self.samples.get(key)
        if not rows or not pts or len(rows) != len(pts):
            return None
        x = math.log(max(float(nbytes), 1.0))
        i = min(range(len(pts)), key=lambda j: abs(math.log(pts[j][0]) - x))
        v = np.asarray(trimmed(rows[i], RUN_CUT), dtype=float)
        m = float(v.mean()) if v.size else 0.0
        return v / m if m > 0 else None

    def to_json(self) -> dict[str, Any]:
        return {
            "format": PROFILE_FORMAT, "backend": self.backend, "device": self.device,
            "device_name": self.device_name, "host": self.host, "world_size": self.world_size,
            "nodes": self.nodes, "torch_version": self.torch_version, "iters": self.iters,
            "created": self.created, "cpu_count": self.cpu_count,
            "threads_per_rank": self.threads_per_rank, "load_avg": self.load_avg,
            "run_time": self.run_time,
            **({"replay": self.replay} if self.replay else {}),
            "calibration": {k: [round(x, 3) for x in v] for k, v in self.calibration.items()},
            "ops": [
                {"op": op, "group_size": n,
                 "sizes_bytes": [s for s, _ in self.samples[(op, n)]],
                 "times_us": [round(t, 3) for _, t in self.samples[(op, n)]],
                 "alpha_us": self.fits[(op, n)][0],
                 "beta_us_per_byte": self.fits[(op, n)][1],
                 **({"stderr_pct": [round(x, 2) for x in self.stderr_pct[(op, n)]]}
                    if (op, n) in self.stderr_pct else {}),
                 **({"runs_us": [[round(x, 1) for x in row] for row in self.runs_us[(op, n)]]}
                    if (op, n) in self.runs_us else {})}
                for op, n in self.ops
            ],
        }


def _need(obj: dict[str, Any], key: str, kind: type | tuple[type, ...], where: str) -> Any:
    if key not in obj:
        raise ProfileError(f"{where}: missing {key!r}")
    v = obj[key]
    if not isinstance(v, kind) or isinstance(v, bool):
        raise ProfileError(f"{where}: {key!r} has the wrong type ({type(v).__name__})")
    return v


def _json_int(text: str) -> int | float:
    """A JSON integer; one of more than 18 digits (past any size or time, and past float's
    range from about 309) reads as infinity, which every check below refuses."""
    return int(text) if len(text.lstrip("-")) <= 18 else math.inf


def _runs_ok(row: Any) -> bool:
    """``row`` is a non-empty list of finite numbers >= 0 (JSON ints or floats, no booleans):
    the types checked by ``map`` and the values by numpy, a profile's ~10^5 kept runs in
    milliseconds (search reads the profile once per layout)."""
    if not isinstance(row, list) or not row or not set(map(type, row)) <= {int, float}:
        return False
    v = np.asarray(row, dtype=float)  # integers are at most 18 digits (_json_int)
    return bool(np.isfinite(v).all() and (v >= 0).all())


#: Largest profile read (bytes): real ones are a few hundred KiB.
MAX_PROFILE_BYTES = 64 << 20


def load_comm_profile(path: str | os.PathLike[str]) -> CommProfile:
    """Read a profile written by :func:`save_comm_profile`.

    Raises :class:`ProfileError` (one line, naming the file) when it is missing, not JSON,
    of another format, or has inconsistent sizes/times.
    """
    from echo_sim.load.files import read_regular_file

    p = Path(path)
    try:  # a regular file of bounded size: never /dev/zero read until memory runs out
        raw = json.loads(read_regular_file(p, max_bytes=MAX_PROFILE_BYTES),
                         parse_int=_json_int)
    except TraceNotFoundError:
        raise ProfileError(f"{p}: no such communication profile") from None
    except TraceFormatError as e:
        raise ProfileError(f"{p}: not a communication profile ({e})") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ProfileError(f"{p}: not a JSON communication profile ({e})") from None
    if not isinstance(raw, dict) or raw.get("format") != PROFILE_FORMAT:
        got = raw.get("format") if isinstance(raw, dict) else type(raw).__name__
        raise ProfileError(f"{p}: format {got!r} is not {PROFILE_FORMAT!r}")
    where = str(p)
    samples: dict[Key, list[tuple[int, float]]] = {}
    fits: dict[Key, tuple[float, float]] = {}
    stderr: dict[Key, list[float]] = {}
    runs: dict[Key, list[list[float]]] = {}
    for i, entry in enumerate(_need(raw, "ops", list, where)):
        w = f"{p}: ops[{i}]"
        if not isinstance(entry, dict):
            raise ProfileError(f"{w}: not an object")
        op = _need(entry, "op", str, w)
        n = _need(entry, "group_size", int, w)
        sizes = _need(entry, "sizes_bytes", list, w)
        times = _need(entry, "times_us", list, w)
        if n < 1 or not sizes or len(sizes) != len(times):
            raise ProfileError(f"{w}: needs group_size >= 1 and as many times_us as "
                               f"sizes_bytes (got {len(times)} and {len(sizes)})")
        ok = all(isinstance(s, int) and not isinstance(s, bool) and s > 0 for s in sizes) and all(
            isinstance(t, (int, float)) and not isinstance(t, bool) and math.isfinite(t) and t > 0
            for t in times)
        if not ok:
            raise ProfileError(f"{w}: sizes_bytes must be positive integers and times_us "
                               f"positive numbers")
        samples[(op, n)] = list(zip(sizes, (float(t) for t in times), strict=True))
        if "stderr_pct" in entry:
            errs = _need(entry, "stderr_pct", list, w)
            if len(errs) != len(sizes) or not all(
                    isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)
                    and x >= 0 for x in errs):
                raise ProfileError(f"{w}: stderr_pct must hold one number >= 0 per size")
            stderr[(op, n)] = [float(x) for x in errs]
        if "runs_us" in entry:
            rows = _need(entry, "runs_us", list, w)
            if len(rows) != len(sizes) or not all(_runs_ok(row) for row in rows):
                raise ProfileError(f"{w}: runs_us must hold one non-empty list of numbers >= 0 "
                                   f"per size")
            runs[(op, n)] = [[float(x) for x in row] for row in rows]
        if "alpha_us" in entry and "beta_us_per_byte" in entry:
            a = _need(entry, "alpha_us", (int, float), w)
            b = _need(entry, "beta_us_per_byte", (int, float), w)
            if not (a > 0 and b > 0):
                raise ProfileError(f"{w}: alpha_us and beta_us_per_byte must be > 0")
            fits[(op, n)] = (float(a), float(b))
    if not samples:
        raise ProfileError(f"{p}: no measurements in 'ops'")
    calibration = raw.get("calibration") or {}
    if not isinstance(calibration, dict) or not all(
            isinstance(v, list) and all(isinstance(x, (int, float)) and not isinstance(x, bool)
                                        and math.isfinite(x) for x in v)
            for v in calibration.values()):
        raise ProfileError(f"{p}: 'calibration' must map names to lists of numbers")
    return CommProfile(
        backend=str(raw.get("backend", "")), device=str(raw.get("device", "")),
        host=str(raw.get("host", "")), world_size=int(raw.get("world_size", 0) or 0),
        samples=samples, fits=fits, nodes=int(raw.get("nodes", 1) or 1),
        device_name=str(raw.get("device_name", "")),
        torch_version=str(raw.get("torch_version", "")), iters=int(raw.get("iters", 0) or 0),
        created=str(raw.get("created", "")), source=str(p),
        cpu_count=_count(raw, "cpu_count", where), threads_per_rank=_count(
            raw, "threads_per_rank", where),
        load_avg=_load(raw, where),
        calibration={str(k): [float(x) for x in v] for k, v in calibration.items()},
        stderr_pct=stderr, runs_us=runs,
        run_time=str(raw.get("run_time", "slowest")),
        replay=str(raw.get("replay", "")),
    )


def _load(raw: dict[str, Any], where: str) -> float:
    v = raw.get("load_avg", 0.0)
    if not isinstance(v, (int, float)) or isinstance(v, bool) or not (v >= 0 and math.isfinite(v)):
        raise ProfileError(f"{where}: 'load_avg' must be a non-negative number, got {v!r}")
    return float(v)


def _count(raw: dict[str, Any], key: str, where: str) -> int:
    v = raw.get(key, 0)
    if not isinstance(v, int) or isinstance(v, bool) or v < 0:
        raise ProfileError(f"{where}: {key!r} must be a non-negative integer, got {v!r}")
    return v


def save_comm_profile(profile: CommProfile, path: str | os.PathLike[str], *,
                      overwrite: bool = False) -> Path:
    """Write ``profile`` as JSON atomically and link-safe; returns the path.

    By :func:`~echo_sim.trace.outfiles.atomic_write`: raises
    :class:`~echo_sim.trace.outfiles.OutputError` when the file exists and ``overwrite`` is
    false, is not a regular file, its directory does not exist, or it cannot be written.
    """
    data = json.dumps(profile.to_json(), indent=1) + "\n"
    return atomic_write(os.fspath(path), data.encode(), overwrite=overwrite)
