"""Measure real collective times on this machine: the data behind a :class:`CommProfile`.

The one echo_sim module that imports torch, and only inside its functions.
:func:`measure_comm_profile` starts ``nproc`` processes itself (``torch.multiprocessing``
spawn, a ``FileStore`` rendezvous in a temporary directory: no ports), gloo on CPU or NCCL
when CUDA is available (one GPU per process; on CPU each process counts as one device), and
times, for every message size:

* ``all_reduce``, ``all_gather`` (``all_gather_single``), ``reduce_scatter``
  (``reduce_scatter_single``), ``all_to_all`` (``all_to_all_single``), ``broadcast`` (from
  rank 0) over all processes, and over ranks 0..k-1 for each extra ``group_sizes`` k, and
* ``send``: a ping-pong between ranks 0 and 1, halved (one-way time).

Method (as nccl-tests and the OSU micro-benchmarks do): ``warmup`` untimed runs, then
``iters`` timed runs each preceded by a barrier; a run's time is the slowest rank's
(all-reduce MAX of the per-rank times) — on gloo with the host calibrations, the
last-arriving rank's (MIN: the transfer alone; the barrier's exit skew left out, as
simulate adds the job's own rank skew to every collective from the calibration), and the
profile says which (``"run_time"``); the profile keeps their mean with the fastest and
slowest run in 15 left out (:data:`RUN_CUT`, :func:`trimmed_mean`; its standard error is kept
beside it, ``stderr_pct``). The mean, as nccl-tests reports, because a step pays the
expected cost of its many collectives: on a virtual machine a collective's time is bimodal
(a third of the runs wait milliseconds for a halted vCPU to wake; their median hides that),
and trimming drops rare hiccups. Sixty runs per size by default (:data:`DEFAULT_ITERS`):
with 15, how many of a size's runs happened to stall moved its mean by tens of % between
profiles. The timed runs go
round-robin over the sizes of an operation (one run of every size per round), so that a
slow spell of a shared host spreads over every size instead of shifting a few. Sizes are whole-buffer
bytes (nccl-tests convention) of float32 tensors, rounded to a multiple of 4·nproc bytes.
A hard timeout kills every process.

Busy mode (``busy_us > 0``), for hosts where the ranks share CPU cores (gloo on CPU): each
timed run is preceded, instead of a barrier, by the same fixed amount of compute on every
rank (``busy_us`` of matrix products when one rank runs them alone), as in training, where
ranks reach a collective straight from compute. With the host calibrations a run is, as in
idle mode, the last-arriving rank's own time (the transfer alone; simulate adds the job's
rank skew from the calibration); without them, the mean over the ranks of each one's own
time (``"run_time": "rank_mean"``: what a synchronous job pays per collective, the transfer
plus half the arrival gap and half the exit gap of two ranks). What precedes a collective
changes how often it stalls on a shared host: on the 2-core virtual machine this project is
measured on, a 774 KiB all-gather right after a barrier stalled (>= 2 ms over its median) in
24-30 % of runs and right after 0.5-8 ms of compute in 3-12 %, as the FSDP2 jobs'
all-gathers did (1-11 % of their most frequent size in the four held-out families);
all-reduce and reduce-scatter stalled 14-39 % either way (an interleaved probe, 80-100 runs
per mode). (Measured side by side on the same jobs, ``benchmarks/accuracy.py
--second-profile-busy-us``, busy mode timed as the ranks' mean over-predicted the BERT and
Llama rows by 11-49 % where idle mode stayed mostly within ±12 %: the mean holds half the
busy work's arrival gap on top of the skew simulate adds. Timed on the last arrival, busy
mode was measured the same way: median paired |error| 9.6 % against idle mode's 8.2 %; idle
mode stays the default.)
Every timed run is kept in the profile (``runs_us``, per size; a ping-pong halved).
Busy mode also records the compute contention as two extra rows keyed by the number of
matrix products: ``compute_alone`` (rank 0 running the work alone, the others waiting in a
barrier) and ``compute`` (all ranks running it at once, the median over ranks and runs);
:mod:`echo_sim.sim.simulate` divides them to slow down co-located ranks' compute
(:data:`COMPUTE_OPS`).
"""

from __future__ import annotations

import os
import re
import socket
import statistics
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from echo_sim.cost.comm_profile import RUN_CUT, CommProfile, trimmed_mean, trimmed_stderr_pct
from echo_sim.errors import ConfigError
from echo_sim.measure.host_overheads import CONFIG_KEYS, DEFAULT_ROUNDS, measure_host_overheads
from echo_sim.measure.ranks import join_ranks, write_result
from echo_sim.measure.work import BusyWork, calibrate_busy, make_op, to_run_clock, whole_numel

__all__ = [
    "other_load",
    "COMPUTE_OPS",
    "DEFAULT_ITERS",
    "DEFAULT_SIZES",
    "HOST_ROUNDS_RANGE",
    "MAX_MESSAGE_BYTES",
    "PROFILE_OPS",
    "ProfileSpec",
    "measure_comm_profile",
    "parse_size",
    "parse_sizes",
]

PROFILE_OPS: tuple[str, ...] = (
    "all_reduce", "all_gather", "reduce_scatter", "all_to_all", "broadcast", "send",
)

COMPUTE_OPS: tuple[str, str] = ("compute_alone", "compute")
"""Busy-mode rows: (fixed compute work alone, the same work on all ranks at once)."""

_CONTENTION_WORK_US = 5000.0  # the contention rounds' work when busy mode is off
DEFAULT_ITERS = 60
"""Timed runs per size: the mean of 15 moved by tens of % between profiles at 16 KiB-1 MiB on
the 2-core VM this project is measured on (a third of those runs stall for ~3 ms, and the mean
follows how many did); 60 halves that (``benchmarks/profile_precision.py``)."""

_UNITS = {"": 1, "B": 1, "K": 1 << 10, "KB": 1 << 10, "KIB": 1 << 10, "M": 1 << 20,
          "MB": 1 << 20, "MIB": 1 << 20, "G": 1 << 30, "GB": 1 << 30, "GIB": 1 << 30}


MAX_MESSAGE_BYTES = 1 << 34
"""Largest message a profile measures (16 GiB, twice nccl-tests' usual 8 GB top size):
every rank allocates it, and a collective's output is up to nproc times larger."""


def parse_size(text: str) -> int:
    """``"64MB"`` → 67108864. Units are binary (KB = 1024 bytes, as nccl-tests counts)."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([A-Za-z]*)\s*", text)
    unit = m.group(2).upper() if m else ""
    if m is None or unit not in _UNITS:
        raise ConfigError(f"bad size {text!r}; use a number with B, KB, MB or GB, e.g. 64KB")
    value = float(m.group(1)) * _UNITS[unit]  # a 400-digit number is inf here
    if not 1 <= value <= MAX_MESSAGE_BYTES:
        raise ConfigError(f"size {text!r} is out of range; valid: 1 byte to "
                          f"{MAX_MESSAGE_BYTES >> 30} GB")
    return int(value)


def parse_sizes(text: str) -> tuple[int, ...]:
    """Message sizes: ``"1KB..64MB"`` (×4 steps), ``"1KB..64MBx2"`` (×2), or ``"1KB,8KB,1MB"``."""
    m = re.fullmatch(r"\s*([^.,]+)\.\.([^x,]+?)(?:x(\d+))?\s*", text)
    if m is None:
        sizes = [parse_size(s) for s in text.split(",") if s.strip()]
        if not sizes:
            raise ConfigError(f"bad --sizes {text!r}; e.g. 1KB..64MB, 1KB..64MBx2, 1KB,1MB")
        return tuple(sorted(set(sizes)))
    lo, hi = parse_size(m.group(1)), parse_size(m.group(2))
    factor = int(m.group(3) or 4)
    if hi < lo or factor < 2:
        raise ConfigError(f"bad --sizes {text!r}: need LO <= HI and a step factor >= 2")
    out = [lo]
    while out[-1] * factor <= hi:
        out.append(out[-1] * factor)
    return tuple(out)


DEFAULT_SIZES: tuple[int, ...] = parse_sizes("1KB..64MB")
HOST_ROUNDS_RANGE = (3, 1000)
"""Allowed rounds of the host microbenchmarks (``host_rounds``): each quantity's samples, a
median of at least 3."""


@dataclass(frozen=True, kw_only=True)
class ProfileSpec:
    """What to measure. ``backend``: ``auto`` (NCCL with CUDA, else gloo), ``gloo`` or ``nccl``."""

    nproc: int = 2
    group_sizes: tuple[int, ...] = ()  # sub-group sizes measured besides nproc (ranks 0..k-1)
    sizes_bytes: tuple[int, ...] = DEFAULT_SIZES
    iters: int = DEFAULT_ITERS
    warmup: int = 3
    backend: str = "auto"
    ops: tuple[str, ...] = PROFILE_OPS
    timeout_s: float = 600.0
    progress: bool = True
    busy_us: float = 0.0  # > 0: busy mode (see the module docstring)
    host_overheads: bool = True  # gloo on CPU: also run echo_sim.measure.host_overheads
    host_rounds: int = DEFAULT_ROUNDS  # samples of each host quantity (HOST_ROUNDS_RANGE)

    def __post_init__(self) -> None:
        if self.nproc < 2:
            raise ConfigError(f"--nproc {self.nproc}: need at least 2 processes")
        if self.iters < 1 or self.warmup < 0:
            raise ConfigError(f"--iters {self.iters} / warmup {self.warmup}: need iters >= 1, "
                              f"warmup >= 0")
        if self.backend not in ("auto", "gloo", "nccl"):
            raise ConfigError(f"--backend {self.backend!r}; valid: auto, gloo, nccl")
        bad = [o for o in self.ops if o not in PROFILE_OPS]
        if bad or not self.ops:
            raise ConfigError(f"--ops {','.join(bad) or '(none)'}; valid: {', '.join(PROFILE_OPS)}")
        if not self.sizes_bytes or not 1 <= min(self.sizes_bytes) <= max(
                self.sizes_bytes) <= MAX_MESSAGE_BYTES:
            raise ConfigError(f"sizes_bytes must be byte counts in 1..{MAX_MESSAGE_BYTES}")
        bad_g = [g for g in self.group_sizes if not 2 <= g <= self.nproc]
        if bad_g:
            raise ConfigError(f"--group-sizes {','.join(map(str, bad_g))}: each must be in "
                              f"2..{self.nproc} (--nproc)")
        if not self.timeout_s > 0:
            raise ConfigError(f"--timeout {self.timeout_s} must be > 0")
        if not 0 <= self.busy_us <= 1e6:
            raise ConfigError(f"--busy-us {self.busy_us}: must be in 0..1000000 (0: idle mode)")
        lo, hi = HOST_ROUNDS_RANGE
        if not lo <= self.host_rounds <= hi:
            raise ConfigError(f"host_rounds {self.host_rounds}: must be in {lo}..{hi}")


# ------------------------------------------------------------------------------ worker side
def _run_time(spec: ProfileSpec, backend: str) -> str:
    """Which clock a run's time is (the profile's ``"run_time"``): ``"last_arrival"`` on
    gloo with the host calibrations (:func:`_transfer_only`), in either mode;
    ``"rank_mean"`` in busy mode on gloo without them (the mean over the member ranks of
    each one's own time: a synchronous job pays that per collective, the transfer plus half
    the arrival and exit gaps of two ranks); else ``"slowest"``."""
    if _transfer_only(spec, backend):
        return "last_arrival"
    return "rank_mean" if backend == "gloo" and spec.busy_us > 0 else "slowest"


def _transfer_only(spec: ProfileSpec, backend: str) -> bool:
    """Whether a run's time is its last-arriving rank's (the transfer alone) rather than its
    slowest rank's or the ranks' mean: gloo with the host calibrations, whose rank-skew
    probe prices the waits for a late peer that simulate adds to every collective
    (:func:`echo_sim.cost.cpu_overheads.skew`). The slowest rank's time after a barrier
    holds the barrier's own exit skew, and the ranks' mean after busy work half the work's
    arrival gap, which the job does not pay beside its own."""
    return backend == "gloo" and spec.host_overheads


def _plan(spec: ProfileSpec) -> list[tuple[str, int]]:
    """(op, group size) pairs to measure, in order; ``send`` is always one pair of ranks."""
    sizes = sorted({spec.nproc, *spec.group_sizes})
    return [(op, g) for op in spec.ops for g in ([2] if op == "send" else sizes)]


def _worker(rank: int, nproc: int, store_path: str, backend: str, spec: ProfileSpec,
            result_path: str) -> None:
    import torch
    import torch.distributed as dist

    device: Any = "cpu"
    if backend == "nccl":
        torch.cuda.set_device(rank % torch.cuda.device_count())
        device = torch.device("cuda", torch.cuda.current_device())
    join_ranks(rank, nproc, store_path, backend)
    try:
        sync = torch.cuda.synchronize if backend == "nccl" else (lambda: None)
        bar = None
        if rank == 0 and spec.progress:  # a bar on a terminal, else a line every 15 s
            from echo_sim.progress import Progress

            bar = Progress(len(_plan(spec)) * spec.iters, "profile-comm", unit="round")
        results: list[dict[str, Any]] = []
        busy = calibrate_busy(spec.busy_us, rank, nproc, device) if spec.busy_us > 0 else None
        busy_times: list[float] = []
        clock = _run_time(spec, backend)
        for op, gsize in _plan(spec):
            # every rank creates every group (a collective call); members 0..gsize-1 run it
            group = None if gsize == nproc else dist.new_group(list(range(gsize)))
            member = op == "send" and rank < 2 or op != "send" and rank < gsize
            numels = [whole_numel(nbytes, gsize) for nbytes in spec.sizes_bytes]
            runs = [make_op(op, n, rank, gsize, device, group) if member else None
                    for n in numels]
            for run in runs:
                for _ in range(spec.warmup if run else 0):
                    run()  # type: ignore[misc]
            sync()
            rows = _sample_sizes(spec, runs, busy, busy_times, sync, clock,
                                 2 if op == "send" else gsize, device, bar)
            means = [trimmed_mean(row, RUN_CUT) for row in rows]
            results.append({"op": op, "group_size": gsize,
                            "sizes_bytes": [n * 4 for n in numels],
                            "times_us": [m / 2 if op == "send" else m for m in means],
                            "stderr_pct": [round(trimmed_stderr_pct(row, RUN_CUT), 2)
                                           for row in rows],
                            "runs_us": [[round(t / 2 if op == "send" else t, 1) for t in row]
                                        for row in rows]})
        if bar is not None:
            bar.close()
        if busy is not None:
            results.extend(_compute_rows(busy, busy_times))
        calibration: dict[str, list[float]] = {}
        if spec.host_overheads and backend == "gloo":
            calibration = _host_overheads(spec, rank, nproc, device)
        if rank == 0:
            from echo_sim.store.parallel import cpu_count  # the cores taskset / a cpuset allow

            name = torch.cuda.get_device_name(device) if backend == "nccl" else _cpu_name()
            out = {"backend": backend, "device": "cuda" if backend == "nccl" else "cpu",
                   "device_name": name, "torch_version": torch.__version__, "ops": results,
                   "cpu_count": cpu_count(), "threads_per_rank": torch.get_num_threads(),
                   "calibration": calibration}
            write_result(result_path, out)
        dist.barrier()
    finally:
        dist.destroy_process_group()
    # Skip interpreter teardown: module-level caches (DeviceMesh's, FSDP's) still hold the
    # per-rank gloo groups, and destroying them there can abort the process ("terminate
    # called without an active exception") after the result is already written.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def _sample_sizes(spec: ProfileSpec, runs: list[Any], busy: BusyWork | None,
                  busy_times: list[float], sync: Any, clock: str, members: int,
                  device: Any, bar: Any = None) -> list[list[float]]:
    """Every size's ``spec.iters`` timed runs on the profile's ``clock`` (the same lists on
    every rank), round-robin over the sizes (one run of every size per round), so that a
    slow spell of a shared host spreads over every size instead of shifting a few. A rank
    outside the group (``runs[i] is None``) times nothing and reports a value the clock's
    reduction ignores (it reported 0, which the last-arrival clock's minimum took for every
    run of a sub-group)."""
    import torch
    import torch.distributed as dist

    absent = float("inf") if clock == "last_arrival" else 0.0
    local: list[list[float]] = [[] for _ in runs]
    for _ in range(spec.iters):
        for i, run in enumerate(runs):
            if busy is None:
                dist.barrier()
            else:
                busy_times.append(busy.run())
            sync()
            t0 = time.perf_counter()
            if run is not None:
                run()
            sync()
            local[i].append((time.perf_counter() - t0) * 1e6 if run is not None else absent)
        if bar is not None:
            bar.update(1)
    times = torch.tensor(local, dtype=torch.float64, device=device)
    to_run_clock(times, clock, members)
    return [list(row) for row in times.cpu().tolist()]


def _compute_rows(busy: BusyWork, local_us: list[float]) -> list[dict[str, Any]]:
    """The ``compute_alone`` and ``compute`` rows of busy mode (median over every rank's
    runs of the work)."""
    import torch
    import torch.distributed as dist

    mine = torch.tensor(local_us, dtype=torch.float64)
    every = [torch.empty_like(mine) for _ in range(busy.nproc)]
    dist.all_gather(every, mine)
    concurrent = statistics.median(torch.cat(every).tolist())
    return [{"op": op, "group_size": busy.nproc, "sizes_bytes": [busy.reps],
             "times_us": [t]} for op, t in zip(COMPUTE_OPS, (busy.alone_us, concurrent),
                                               strict=True)]


def _host_overheads(spec: ProfileSpec, rank: int, nproc: int, device: Any
                    ) -> dict[str, list[float]]:
    """Every rank's samples of :func:`~echo_sim.measure.host_overheads.measure_host_overheads`,
    pooled (``contention_alone_us``: rank 0's only, as it is the only one measuring). The
    contention and skew rounds run the same fixed work (``_CONTENTION_WORK_US``) in either
    mode, so the host's calibration does not depend on how the collectives were timed
    (busy mode's own work, before: the skew slope fitted on 2 ms of work came out 2.4 times
    the one fitted on 5 ms, minutes apart on the same host)."""
    import torch.distributed as dist

    work = calibrate_busy(_CONTENTION_WORK_US, rank, nproc, device)
    mine = measure_host_overheads(rank, nproc, work.run, rounds=spec.host_rounds,
                                  products=work.products, reps=work.reps)
    every: list[Any] = [None] * nproc
    dist.all_gather_object(every, mine)
    pooled: dict[str, list[float]] = {}
    for r, samples in enumerate(every):
        for k, v in samples.items():
            if k in CONFIG_KEYS and r:  # the same on every rank
                continue
            pooled.setdefault(k, []).extend(float(x) for x in v)
    pooled["contention_work_products"] = [float(work.reps)]
    return pooled


def _cpu_name() -> str:
    import platform

    return platform.processor() or platform.machine() or "cpu"


# ------------------------------------------------------------------------------ parent side
def _pick_backend(spec: ProfileSpec) -> str:
    import torch

    cuda = torch.cuda.is_available()
    if spec.backend == "nccl":
        if not cuda:
            raise ConfigError("--backend nccl needs CUDA, and torch sees no GPU; use gloo")
        if torch.cuda.device_count() < spec.nproc:
            raise ConfigError(f"--backend nccl with --nproc {spec.nproc} needs that many GPUs; "
                              f"this machine has {torch.cuda.device_count()}")
        return "nccl"
    if spec.backend == "auto" and cuda and torch.cuda.device_count() >= spec.nproc:
        return "nccl"
    return "gloo"


def other_load(window_s: float = 0.5) -> float:
    """The cores' worth of CPU time other processes use right now: the busy share of
    ``/proc/stat``'s CPU time over ``window_s`` times the core count (Linux). Unlike the
    1-minute load average, it holds no memory of work that just ended (such as a previous
    job of a benchmark). Elsewhere: the 1-minute load average."""

    def sample() -> tuple[int, int] | None:
        try:
            with open("/proc/stat", encoding="ascii") as f:
                parts = [int(x) for x in f.readline().split()[1:]]
        except (OSError, ValueError):
            return None
        idle = parts[3] + (parts[4] if len(parts) > 4 else 0)  # idle + iowait
        return sum(parts[:8]), idle

    a = sample()
    if a is None:
        return os.getloadavg()[0]
    time.sleep(window_s)
    b = sample()
    if b is None or b[0] <= a[0]:
        return os.getloadavg()[0]
    busy = 1.0 - (b[1] - a[1]) / (b[0] - a[0])
    return max(busy, 0.0) * (os.cpu_count() or 1)


def measure_comm_profile(spec: ProfileSpec | None = None) -> CommProfile:
    """Measure collectives in ``spec.nproc`` fresh processes; returns the fitted profile.

    Raises :class:`ProfileError` if a process fails or the run exceeds ``spec.timeout_s``.
    """
    from echo_sim.measure.ranks import run_ranks

    spec = spec or ProfileSpec()
    backend = _pick_backend(spec)
    load_avg = other_load()  # the host's other load, before our processes start
    raw = run_ranks(_worker, (backend, spec), nproc=spec.nproc, timeout_s=spec.timeout_s,
                    what="profile-comm", backend=backend)
    samples = {
        (r["op"], int(r["group_size"])): list(zip(r["sizes_bytes"], r["times_us"], strict=True))
        for r in raw["ops"]
    }
    stderr = {(r["op"], int(r["group_size"])): [float(x) for x in r["stderr_pct"]]
              for r in raw["ops"] if "stderr_pct" in r}
    runs = {(r["op"], int(r["group_size"])): [[float(x) for x in row] for row in r["runs_us"]]
            for r in raw["ops"] if "runs_us" in r}
    return CommProfile(
        cpu_count=int(raw.get("cpu_count", 0)), threads_per_rank=int(raw.get("threads_per_rank", 0)),
        load_avg=round(load_avg, 2),
        calibration={k: [float(x) for x in v] for k, v in (raw.get("calibration") or {}).items()},
        backend=raw["backend"], device=raw["device"], host=socket.gethostname(),
        world_size=spec.nproc, samples=samples, nodes=1, device_name=raw["device_name"],
        stderr_pct=stderr, runs_us=runs,
        run_time=_run_time(spec, raw["backend"]),
        torch_version=raw["torch_version"], iters=spec.iters,
        created=datetime.now(timezone.utc).isoformat(timespec="seconds"),
    )


def summary_rows(profile: CommProfile) -> Sequence[tuple[str, int, int, float, float]]:
    """(op, group size, nbytes, time_us, algorithm bandwidth GB/s) per measured point."""
    rows = []
    for op, n in profile.ops:
        for s, t in profile.samples[(op, n)]:
            rows.append((op, n, s, t, s / t / 1e3))
    return rows
