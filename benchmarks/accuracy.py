"""Prediction accuracy: simulate from a 1-process trace, then run the real 2-process job.

For every case (a parallel layout × an example model size) and every repetition:

1. trace a 1-process run of the same model and micro-batch (``examples/train.py`` or the
   size's workload module, ``--layout single --capture``), shared by all layouts of that
   model size in the repetition;
2. profile the gloo collectives at the start of every repetition (``profile-comm --nproc
   2``, 1 KB..16 MB, ``--profile-iters`` timed runs per size, 15 by default) with its host microbenchmarks (compute
   contention, rank skew, collective/compute overlap, DTensor and FSDP2 host costs), in
   idle mode by default (a barrier before each timed collective: the transfer alone, the
   lowest-noise figure; skew and overlap are then modelled from the microbenchmarks);
   ``--profile-busy-us 5000`` restores busy mode (that much compute on every rank before
   each timed collective, so the collective's time holds the wait after compute);
   ``--second-profile-busy-us US`` also measures a second profile per repetition, right
   after the first, in that mode (0: idle) and reports every case's error from it beside
   the first's: two profiling modes compared on the very same jobs;
3. predict through the command line a user runs: ``python -m echo_sim simulate TRACE
   --dp/--tp/--pp ... --comm-profile P --json`` (no ``--cluster``: the traced hardware,
   i.e. one CPU gloo host with ``nproc`` ranks; the measured profile with its host
   calibration; ``--optimizer foreach|loop`` as the job's AdamW runs), run in the run's
   directory (``--keep``) with paths relative to it; its argv is kept per repetition and
   printed under the table — iteration time and peak memory;
4. run the real job under torchrun (2 processes, ``OMP_NUM_THREADS=1`` each, no capture)
   and measure its iteration time: per step the slowest rank's ``job.step_s``, median over
   the steps after ``--warmup``;
5. compare. Reported per case: medians over repetitions of measured and predicted time,
   the error of those medians, every repetition's own error, and the **noise** of the
   measured job: the larger of the spread between repetitions (half the range of their
   medians over the median) and the step-to-step spread inside a repetition (half the
   inter-quartile range of the slowest rank's step times over their median). An error no
   larger than the noise is reported as "within noise (spread X%)": the benchmark does not
   claim an accuracy finer than it can measure; every row states its spread. With six
   repetitions or more each row also gives its paired errors' median with a
   distribution-free confidence interval (:func:`median_ci`, coverage >= 95 %) and the bound
   it supports ("within ±B %"): on a host whose pace drifts, the claim more repetitions
   sharpen (``--merge`` pools runs).

Allocator: ``--malloc fixed`` runs every process of the run (the traced one, the profile,
the jobs) with glibc's malloc thresholds fixed (:data:`FIXED_MALLOC`). By default glibc
adapts them as the process frees large blocks, so whether a step's activations land on
memory the process already holds or on fresh pages (a minor page fault per 4 KiB) depends
on that process's allocation history: on this benchmark's 2-core VM, ±5-10 % of a model's
compute between a one-process run and the same model in a 2-process job, in either
direction (the example GPT's job slower than its trace, the BERT's trace slower than its
job). Fixed thresholds take that out of both sides, so the table then measures the
simulator's model rather than the allocator's history. The setting (or the ``MALLOC_*``
variables already in the environment) is recorded in ``machine.malloc``; ``--merge``
refuses runs made under different settings.

Load: ``os.getloadavg()`` (1, 5 and 15 minutes) is recorded before and after every
repetition (``machine.load_avg_per_rep``) and around every real job (each repetition's
``load_avg_before`` / ``load_avg_after``); the table gives each row's 1-minute range and the
lines under it every repetition's.

Models: the example GPT / CNN (``examples/train.py``) and three families that are not in
``examples/`` (held out: the simulator was never tuned on them): a conv + attention network
(``benchmarks/workloads/convattn.py``, size ``convattn``), a BERT-style encoder built by
``transformers`` from a ``BertConfig`` (``benchmarks/workloads/hf_encoder.py``, size
``bert``: ddp and fsdp) and a hand-written CIFAR-style ResNet with BatchNorm
(``benchmarks/workloads/resnet.py``, size ``resnet``: ddp and fsdp).

Where the step goes: the worker also records each step's CPU time of the calling (compute)
thread (``time.thread_time``; gloo's collectives run on their own threads, a blocked wait
takes none). Per row, the slowest rank's median host CPU and off-CPU time (the rest of its
step: collective waits and preemption) are printed beside the prediction's compute and
exposed communication (rank 0's ``simulate`` breakdown), so that an error in the host
costs and one in the collectives' prices, which can cancel in the step time, show apart.
The off-CPU time splits further where Linux says (``/proc/thread-self/schedstat``): the
part the compute thread was runnable but waiting for a core (preempted: the other rank,
gloo's threads, other load) and the rest, blocked (waiting in a collective, sleeping).
The process's other threads are read the same way (``/proc/self/task/*/schedstat``): their CPU
time in the step (gloo's TCP loop and run-loop threads, which move the bytes) and their own
wait for a core, which on a host whose ranks fill the cores delays the collectives. The
worker also stamps the job's Python-level collectives (:data:`STAMPED`: FSDP2's, DeepSpeed's,
DDP's buffer broadcast before each forward; not DDP's C++ bucket all-reduces) on the host
clock the ranks share: per step, the ranks' mean
time inside them and half the sum of their arrival gaps (what the step pays for the ranks
not arriving together), beside the prediction's.

Memory: each process (the traced one too) runs through this file's ``--worker`` entry, which
records RSS after the process group is up but *before the model is built* and the process's
peak RSS (``ru_maxrss``) after training (CUDA: the allocator peak). measured delta = max over
ranks (peak - before); predicted delta = the simulate command's peak memory minus the traced
process's RSS before its model was built (the simulator's baseline is absolute: it is the
traced run's sampled peak RSS minus its own model of that run).

``--diagnose`` (first repetition only) also runs each real job with ``--capture`` and puts
its collect figures (FW+BW, communication, exposed) beside the simulated timeline's, and
writes both under ``--keep`` for ``python -m echo_sim compare``.

Usage::

    python benchmarks/accuracy.py [--reps 3] [--layouts ddp,fsdp,tp,pp]
        [--sizes gpt-s,gpt-m,cnn,convattn,bert,resnet,llama] [--steps 20] [--warmup 3] [--diagnose]
        [--keep DIR] [--output FILE] [--comm-profile FILE | --profile-sizes 1KB..16MB]
        [--nproc 2] [--traces N] [--no-plain-single] [--cluster PRESET]
        [--malloc default|fixed]
    python benchmarks/accuracy.py --repredict OLD.json --keep DIR [--output NEW.json]
        [--drop-calibration KEY,KEY...]
    python benchmarks/accuracy.py --merge RUN1.json RUN2.json ... [--output ALL.json]

``--repredict`` runs no job: it predicts every kept repetition again with the current
models (each from its own trace and comm profile) against the measurements on record.
``--merge`` runs no job either: it pools the repetitions of several runs into one table (a
row's median and noise over every repetition of every run; on a shared 2-core host the
same command's runs an hour apart differ by more than one run's own spread).

``--traces N`` takes N one-process traces per model and repetition (separate processes, one
after the other) and predicts every case twice: from the first trace alone (the table's
figures, what one trace gives a user) and from all N pooled, ``simulate TRACE TRACE2 ...``
(each op's median over the runs, :mod:`echo_sim.workload.pool`). On a shared CPU host one
process runs the same step at its own pace, so a one-trace prediction carries that
process's luck; the table under the main one sets the two predictions' errors and spreads
side by side on the same jobs.

``--no-plain-single`` skips the uncaptured 1-process run kept beside each trace to measure
capture overhead (the traced op times the prediction starts from include it).

Prints a markdown table and writes ``benchmarks/results/accuracy.json``.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import shlex
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from echo_sim.commands.checks import int_in  # noqa: E402
from echo_sim.measure.host_overheads import DEFAULT_ROUNDS  # noqa: E402
from echo_sim.measure.profile_comm import DEFAULT_ITERS, HOST_ROUNDS_RANGE  # noqa: E402
from echo_trace.meta import malloc_settings  # noqa: E402  (after the path: run as a script)

__all__ = ["CASES", "FIXED_MALLOC", "SIZES", "Case", "half_iqr_pct", "main", "merge",
           "repredict", "run_benchmark", "table"]

RESULTS = REPO / "benchmarks" / "results" / "accuracy.json"
#: ``--malloc fixed``: glibc's mmap threshold fixed at 64 MiB and its trim threshold at
#: 256 MiB (``mallopt(3)``; setting either turns off glibc's dynamic adjustment of both), so
#: that freed activations stay in the heap and are reused instead of re-faulted each step
FIXED_MALLOC = {"MALLOC_MMAP_THRESHOLD_": str(64 << 20), "MALLOC_TRIM_THRESHOLD_": str(256 << 20)}
SCRIPT = Path(__file__).resolve()

# Model sizes: examples/train.py flags. Micro-batch is the model default (GPT 8, CNN 32).
SIZES: dict[str, tuple[str, ...]] = {
    "gpt-s": ("--model", "gpt", "--layers", "2", "--hidden", "128"),
    "gpt-m": ("--model", "gpt", "--layers", "4", "--hidden", "256"),
    "cnn": ("--model", "cnn"),
    "tiny": ("--model", "gpt", "--layers", "2", "--hidden", "32", "--seq", "16",
             "--vocab", "64", "--micro-batch", "2"),
    # not in examples/ (benchmarks/workloads/); micro-batches for ~40-50 ms steps on one core
    "convattn": ("--blocks", "4", "--width", "64", "--heads", "4", "--micro-batch", "8"),
    "bert": ("--layers", "4", "--hidden", "128", "--heads", "4", "--seq", "64",
             "--vocab", "1000", "--micro-batch", "6"),
    "resnet": ("--width", "16", "--blocks", "2", "--micro-batch", "12"),
    "llama": ("--layers", "2", "--hidden", "256", "--heads", "4", "--kv-heads", "2",
              "--seq", "64", "--vocab", "1000", "--micro-batch", "8"),
}
WORKLOAD_MODULE = {"convattn": "benchmarks.workloads.convattn",  # others: examples.train
                   "bert": "benchmarks.workloads.hf_encoder",
                   "resnet": "benchmarks.workloads.resnet",
                   "llama": "benchmarks.workloads.hf_llama"}
PP_MICRO_BATCHES = 4  # 1F1B over 4 micro-batches per step, so the schedule has a steady state


@dataclass(frozen=True, kw_only=True)
class Case:
    """One comparison: a layout on a model size with ``nproc`` real processes."""

    layout: str
    size: str
    nproc: int = 2

    @property
    def name(self) -> str:
        return f"{self.layout}/{self.size}" + (f"/{self.nproc}p" if self.nproc != 2 else "")


CASES: tuple[Case, ...] = (
    Case(layout="ddp", size="gpt-s"), Case(layout="ddp", size="gpt-m"),
    Case(layout="ddp", size="cnn"),
    Case(layout="fsdp", size="gpt-s"), Case(layout="fsdp", size="gpt-m"),
    Case(layout="tp", size="gpt-s"), Case(layout="tp", size="gpt-m"),
    Case(layout="pp", size="gpt-s"), Case(layout="pp", size="gpt-m"),
    Case(layout="ddp", size="convattn"), Case(layout="fsdp", size="convattn"),
    Case(layout="tp", size="convattn"), Case(layout="pp", size="convattn"),
    Case(layout="ddp", size="bert"), Case(layout="fsdp", size="bert"),
    Case(layout="ddp", size="resnet"), Case(layout="fsdp", size="resnet"),
    Case(layout="ddp", size="llama"), Case(layout="fsdp", size="llama"),
    Case(layout="tp", size="llama"), Case(layout="tp", size="bert"),
    Case(layout="zero1", size="bert"), Case(layout="zero2", size="bert"),
    Case(layout="zero1", size="llama"), Case(layout="zero2", size="llama"),
)
LAYOUTS = ("ddp", "fsdp", "tp", "pp", "zero1", "zero2")


# ------------------------------------------------------------------------------ worker
def _warm_deepspeed(stage: int) -> None:
    """Load DeepSpeed's ZeRO machinery before the memory baseline, as the process group is:
    its import and the modules and C++ ops its first ``initialize`` loads are the framework's
    code, not the job's model memory (measured here with a 3.6 MiB model: +19 MiB at the
    import, then +59 MiB at a ZeRO-1 ``initialize`` against +6 MiB at stage 0). A one-weight
    engine of the same stage, destroyed again."""
    os.environ.setdefault("DS_ACCELERATOR", "cpu")
    import deepspeed
    import torch

    tiny = torch.nn.Linear(1, 1)
    engine, _, _, _ = deepspeed.initialize(
        model=tiny, optimizer=torch.optim.AdamW(tiny.parameters()),
        config={"train_micro_batch_size_per_gpu": 1, "zero_optimization": {"stage": stage}})
    engine.destroy()
    del engine, tiny


def runqueue_wait_s() -> float | None:
    """Seconds the calling thread has spent runnable but waiting for a core (Linux
    ``/proc/thread-self/schedstat``, its second field, in ns); None where it cannot be read."""
    try:
        with open("/proc/thread-self/schedstat") as f:
            return int(f.read().split()[1]) / 1e9
    except (OSError, ValueError, IndexError):
        return None


def other_threads_s() -> tuple[float, float] | None:
    """(CPU, run-queue wait) seconds of every thread of this process but the calling one
    (Linux ``/proc/self/task/*/schedstat``: time on a core, time runnable but waiting for
    one, in ns): gloo's loop and run-loop threads, a data loader's, the profiler's. A thread
    that ended between two readings drops out of the later one; None where it cannot be read.
    """
    import threading

    me = str(threading.get_native_id())
    try:
        tids = [t for t in os.listdir("/proc/self/task") if t != me]
    except OSError:
        return None
    cpu = wait = 0
    for tid in tids:
        try:
            with open(f"/proc/self/task/{tid}/schedstat") as f:
                fields = f.read().split()
            cpu, wait = cpu + int(fields[0]), wait + int(fields[1])
        except (OSError, ValueError, IndexError):
            continue  # the thread ended
    return cpu / 1e9, wait / 1e9


def _worker(argv: list[str]) -> int:
    """``--worker OUT_DIR MODULE TRAIN_FLAGS...``: run MODULE's job (``examples.train`` or a
    ``benchmarks.workloads`` module: ``parse_flags``/``build_job``/``train``), write
    rank<r>.json."""
    import importlib
    import resource

    import psutil
    import torch
    import torch.distributed as dist

    out = Path(argv[0])
    mod = importlib.import_module(argv[1])
    build_job, parse_flags, train = mod.build_job, mod.parse_flags, mod.train
    cfg = parse_flags(argv[2:])
    if "RANK" in os.environ and not dist.is_initialized():
        # the backend train.py's build_job would pick; up before the baseline so that the
        # delta covers model, gradients, optimizer states and activations only
        dist.init_process_group("nccl" if torch.cuda.is_available() else "gloo")
    if cfg.layout in ("zero1", "zero2"):
        _warm_deepspeed(int(cfg.layout[-1]))
    rank = dist.get_rank() if dist.is_initialized() else 0
    rss0 = psutil.Process().memory_info().rss
    job = build_job(cfg)
    cpu_s: list[float] = []
    wait_s: list[float] = []
    others_cpu_s: list[float] = []
    others_wait_s: list[float] = []
    stamps: list[list[float]] = []  # per step: each Python-level collective's start, end (µs)
    _stamp_collectives(stamps)
    step = job.step

    def timed_step(index: int) -> Any:
        """The job's step, the calling (compute) thread's CPU time in it and its time
        runnable but waiting for a core, and the same of the process's other threads."""
        o0 = other_threads_s()
        c0, w0 = time.thread_time(), runqueue_wait_s()
        stamps.append([])
        try:
            return step(index)
        finally:
            cpu_s.append(time.thread_time() - c0)
            w1 = runqueue_wait_s()
            if w0 is not None and w1 is not None:
                wait_s.append(w1 - w0)
            o1 = other_threads_s()
            if o0 is not None and o1 is not None:
                others_cpu_s.append(max(o1[0] - o0[0], 0.0))
                others_wait_s.append(max(o1[1] - o0[1], 0.0))

    job.step = timed_step
    try:
        train(cfg, job)
    finally:
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux: KiB
        cuda_peak = (int(torch.cuda.max_memory_allocated()) if torch.cuda.is_available()
                     else None)
        out.mkdir(parents=True, exist_ok=True)
        (out / f"rank{rank}.json").write_text(json.dumps({
            "rank": rank, "step_s": job.step_s, "step_cpu_s": cpu_s,
            "step_runqueue_s": wait_s,
            "step_other_threads_cpu_s": others_cpu_s,
            "step_other_threads_runqueue_s": others_wait_s,
            "step_collective_stamps_us": stamps,
            "rss_before_model_bytes": rss0,
            "peak_rss_bytes": peak, "peak_cuda_allocated_bytes": cuda_peak,
            "malloc": malloc_settings()}))
        if dist.is_initialized():
            # as examples/train.py's main(): drain, free the job, then tear gloo down
            # (destroying the group with a peer's work in flight aborts the process)
            dist.barrier()
            del job
            import gc

            gc.collect()
            dist.destroy_process_group()
    return 0


STAMPED = ("all_gather_single", "reduce_scatter_single", "all_gather_into_tensor",
           "reduce_scatter_tensor", "all_reduce", "broadcast")
"""The ``torch.distributed`` functions the worker stamps: FSDP2's collectives on CPU
(``torch/distributed/fsdp/_fully_shard/_fsdp_collectives.py`` calls them synchronously) and
DeepSpeed's; not DDP's bucket all-reduces (its C++ reducer) nor DTensor's functional
collectives. DDP's buffer broadcast before each forward (``dist._broadcast_coalesced``, C++)
is stamped around ``DistributedDataParallel._sync_buffers``, the Python method that calls it."""


def _stamp_collectives(stamps: list[list[float]]) -> None:
    """Wrap :data:`STAMPED` so that every call appends its start and end (µs, the host's
    monotonic clock, which the ranks share) to the last list of ``stamps`` (the step being
    timed; nothing outside a timed step). A synchronous call's stamps are its whole time; an
    ``async_op`` one's only its issue. DDP's ``_sync_buffers`` (its buffer broadcast blocks the
    forward on every rank) is stamped the same way."""
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel

    for owner, name in [*((dist, n) for n in STAMPED),
                        (DistributedDataParallel, "_sync_buffers")]:
        fn = getattr(owner, name, None)
        if fn is not None:
            setattr(owner, name, _stamping(fn, stamps))


def _stamping(fn: Any, stamps: list[list[float]]) -> Any:
    """``fn`` (a function, or a method once set on its class) with its start and end appended
    to ``stamps[-1]`` (µs)."""

    def stamped(*args: Any, **kwargs: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            if stamps:
                stamps[-1].extend((t0 * 1e6, time.perf_counter() * 1e6))

    return stamped


def _collectives_us(recs: list[dict[str, Any]], warmup: int) -> tuple[float, float] | None:
    """From the stamped collectives (:func:`_stamp_collectives`) of every rank, medians over
    the steps after ``warmup`` of (the ranks' mean time inside them, half the sum of their
    arrival gaps: what the step pays for the ranks not arriving together, the later rank
    over the typical one), µs; None without stamps or where the ranks' calls differ."""
    per = [r.get("step_collective_stamps_us") or [] for r in recs]
    if len(recs) < 2 or not all(len(p) == len(recs[0]["step_s"]) for p in per):
        return None
    own, half = [], []
    for i in range(warmup, len(per[0])):
        steps = [p[i] for p in per]
        if not steps[0] or any(len(x) != len(steps[0]) for x in steps):
            return None
        starts = [x[0::2] for x in steps]
        ends = [x[1::2] for x in steps]
        own.append(statistics.fmean(sum(e - b for b, e in zip(bs, es, strict=True))
                                    for bs, es in zip(starts, ends, strict=True)))
        half.append(sum(max(c) - min(c) for c in zip(*starts, strict=True)) / 2)
    return (statistics.median(own), statistics.median(half)) if own else None


def _train_flags(case_layout: str, size: str, *, steps: int, capture: Path | None,
                 nproc: int) -> list[str]:
    flags = ["--layout", case_layout, "--steps", str(steps), *SIZES[size]]
    if case_layout == "pp":
        mb = _micro_batch(size)
        flags += ["--global-batch", str(mb * max(PP_MICRO_BATCHES, nproc))]
    if capture is not None:
        flags += ["--capture", "--trace-dir", str(capture), "--trace-start", "2",
                  "--trace-end", str(steps - 1)]
    return flags


def _micro_batch(size: str) -> int:
    flags = SIZES[size]
    if "--micro-batch" in flags:
        return int(flags[flags.index("--micro-batch") + 1])
    return 32 if "cnn" in flags else 8


def _launch(flags: list[str], out: Path, nproc: int, timeout: float,
            size: str = "gpt-s") -> list[dict[str, Any]]:
    """Run the job (``nproc`` 1: plain python; else torchrun); per-rank worker records."""
    from benchmarks.launch import run_python, run_torchrun

    module = WORKLOAD_MODULE.get(size, "examples.train")
    args = [str(SCRIPT), "--worker", str(out), module, *flags]
    proc = (run_python(args, timeout=timeout) if nproc == 1
            else run_torchrun(args, nproc=nproc, timeout=timeout))
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-4:]
        raise RuntimeError(f"exit {proc.returncode}: {' | '.join(tail)}")
    recs = [json.loads((out / f"rank{r}.json").read_text()) for r in range(nproc)]
    return recs


def _slowest_steps(recs: list[dict[str, Any]], warmup: int) -> list[float]:
    n = min(len(r["step_s"]) for r in recs)
    return [max(r["step_s"][i] for r in recs) for i in range(warmup, n)]


def _slowest_per_step(recs: list[dict[str, Any]], warmup: int
                      ) -> list[tuple[int, dict[str, Any]]]:
    """(step index, the record of that step's slowest rank) for every step after ``warmup``."""
    n = min(len(r["step_s"]) for r in recs)
    return [(i, max(recs, key=lambda r: r["step_s"][i])) for i in range(warmup, n)]


def _split_us(recs: list[dict[str, Any]], warmup: int) -> tuple[float, float] | None:
    """(host CPU, off-CPU) µs per step of the slowest rank, medians over steps after
    ``warmup``: its compute thread's CPU time, and the rest of its step (collective waits,
    preemption); None for records without per-step CPU times."""
    if not all(len(r.get("step_cpu_s", ())) == len(r["step_s"]) for r in recs):
        return None
    slow = _slowest_per_step(recs, warmup)
    if not slow:
        return None
    cpu = [r["step_cpu_s"][i] for i, r in slow]
    off = [max(r["step_s"][i] - r["step_cpu_s"][i], 0.0) for i, r in slow]
    return statistics.median(cpu) * 1e6, statistics.median(off) * 1e6


def _other_threads_us(recs: list[dict[str, Any]], warmup: int
                      ) -> tuple[float, float] | None:
    """Medians over steps after ``warmup`` of the CPU time and the run-queue wait (µs) of the
    other threads (:func:`other_threads_s`) of each step's slowest rank; None where a record
    has none."""
    keys = ("step_other_threads_cpu_s", "step_other_threads_runqueue_s")
    if not all(len(r.get(k, ())) == len(r["step_s"]) for r in recs for k in keys):
        return None
    slow = _slowest_per_step(recs, warmup)
    if not slow:
        return None
    cpu, wait = ([r[k][i] for i, r in slow] for k in keys)
    return statistics.median(cpu) * 1e6, statistics.median(wait) * 1e6


def _runqueue_us(recs: list[dict[str, Any]], warmup: int) -> float | None:
    """Median over steps after ``warmup`` of the run-queue wait (µs: runnable, waiting for a
    core) of each step's slowest rank's compute thread; None where a record has none."""
    if not all(len(r.get("step_runqueue_s", ())) == len(r["step_s"]) for r in recs):
        return None
    waits = [r["step_runqueue_s"][i] for i, r in _slowest_per_step(recs, warmup)]
    return statistics.median(waits) * 1e6 if waits else None


def _iteration_us(recs: list[dict[str, Any]], warmup: int) -> float:
    """Median over steps after ``warmup`` of the slowest rank's step time (µs)."""
    return statistics.median(_slowest_steps(recs, warmup)) * 1e6


def half_iqr_pct(xs: list[float]) -> float:
    """Half the inter-quartile range of ``xs`` over their median (%; fewer than 4 values:
    half the range); 0 for fewer than 2."""
    if len(xs) < 2:
        return 0.0
    q1, med, q3 = statistics.quantiles(xs, n=4) if len(xs) >= 4 else (min(xs),
                                                                      statistics.median(xs),
                                                                      max(xs))
    return 100.0 * (q3 - q1) / 2 / med if med else 0.0


def _step_spread_pct(recs: list[dict[str, Any]], warmup: int) -> float:
    """Half the inter-quartile range of the slowest rank's step times over their median (%)."""
    return half_iqr_pct(_slowest_steps(recs, warmup))


def _rep_spread_pct(values: list[float]) -> float:
    """Half the range of per-repetition medians over their median (%); 0 for one value."""
    if len(values) < 2:
        return 0.0
    med = statistics.median(values)
    return 100.0 * (max(values) - min(values)) / 2 / med if med else 0.0


def paired_error(errors_pct: list[float]) -> tuple[float, float]:
    """The median of the repetitions' own errors (each prediction against the job run
    beside it, so drift of the host between repetitions cancels), and half their
    inter-quartile range (percentage points; fewer than 4: half the range)."""
    if not errors_pct:
        return 0.0, 0.0
    med = statistics.median(errors_pct)
    if len(errors_pct) < 2:
        return med, 0.0
    q1, _, q3 = statistics.quantiles(errors_pct, n=4) if len(errors_pct) >= 4 else (
        min(errors_pct), med, max(errors_pct))
    return med, (q3 - q1) / 2


def median_ci(values: list[float], level: float = 0.95) -> tuple[float, float, float] | None:
    """A distribution-free confidence interval for the median of ``values`` (independent
    draws): the order statistics ``[x_(k), x_(n-k+1)]`` with the largest ``k`` whose
    coverage ``1 - 2 * P(Binomial(n, 1/2) < k)`` is at least ``level``. Returns
    ``(low, high, coverage)``, or None when even the range covers less (n <= 5 at 95 %).

    It is what a repetition-paired accuracy figure can claim on a host whose pace drifts:
    each repetition's error (its prediction against the job run beside it) is one draw of
    model error plus drift, and the interval narrows as repetitions are added, where the
    spread of the measured medians does not."""
    n = len(values)
    xs = sorted(values)
    best: tuple[float, float, float] | None = None
    below = 0  # 2**n * P(Binomial(n, 1/2) < k)
    for k in range(1, n // 2 + 1):
        below += math.comb(n, k - 1)
        coverage = 1.0 - 2.0 * below / 2 ** n
        if coverage < level:
            break
        best = (xs[k - 1], xs[n - k], coverage)
    return best


def _mem_delta(recs: list[dict[str, Any]]) -> int:
    key = "peak_cuda_allocated_bytes" if recs[0].get("peak_cuda_allocated_bytes") else None
    if key:
        return max(int(r[key]) for r in recs)
    return max(int(r["peak_rss_bytes"]) - int(r["rss_before_model_bytes"]) for r in recs)


# ------------------------------------------------------------------------------ predict
SIMULATE = ("python", "-m", "echo_sim", "simulate")  # argv[0] runs as this interpreter


class SimulateError(RuntimeError):
    """The simulate command failed; ``argv`` is what ran."""

    def __init__(self, message: str, argv: list[str]) -> None:
        super().__init__(message)
        self.argv = argv


def _sim_flags(case: Case, comm_profile: str, cluster: str | None = None) -> list[str]:
    """The simulate flags that describe ``case``'s real job (every one a user would type)."""
    n = case.nproc
    # no --cluster: the simulator predicts for the traced hardware (one CPU gloo host)
    tail = ["--comm-profile", comm_profile]
    if cluster is not None:
        tail = ["--cluster", cluster, "--nodes", "1", "--gpus-per-node", str(n), *tail]
    if case.layout == "ddp":
        return ["--dp", str(n), *tail]
    if case.layout == "fsdp":
        # the jobs' AdamW runs foreach over FSDP2's DTensor parameters
        return ["--dp", str(n), "--fsdp", "--optimizer", "foreach", *tail]
    if case.layout == "tp":
        # the tp plans keep the embeddings and head replicated; AdamW runs per parameter
        # (foreach takes no mix of DTensor and plain parameters)
        return ["--tp", str(n), "--no-vocab-parallel", "--optimizer", "loop", *tail]
    if case.layout == "pp":
        gb = _micro_batch(case.size) * max(PP_MICRO_BATCHES, n)
        return ["--pp", str(n), "--global-batch", str(gb), "--schedule", "1f1b", *tail]
    if case.layout in ("zero1", "zero2"):
        # DeepSpeed ZeRO-1/2 with its defaults, torch's AdamW as its client optimizer
        return ["--dp", str(n), "--zero-stage", case.layout[-1], *tail]
    raise ValueError(f"unknown layout {case.layout!r}; valid: {', '.join(LAYOUTS)}")


def _rel(path: Path, root: Path) -> str:
    """``path`` relative to ``root`` (the simulate command's working directory) where it
    lies under it, else absolute."""
    try:
        return str(path.resolve().relative_to(root.resolve()))
    except ValueError:
        return str(path.resolve())


def _simulate_argv(trace: Path | list[Path], case: Case, comm_profile: Path,
                   timeline: Path | None, cluster: str | None, root: Path) -> list[str]:
    """``python -m echo_sim simulate TRACE [TRACE...] FLAGS --json [--output DIR --force]``
    (several traces: runs of the same job, pooled per op), paths relative to ``root``."""
    traces = trace if isinstance(trace, list) else [trace]
    argv = [*SIMULATE, *(_rel(t, root) for t in traces),
            *_sim_flags(case, _rel(comm_profile, root), cluster), "--json"]
    if timeline is not None:
        argv += ["--output", _rel(timeline, root), "--force"]
    return argv


def _predict(trace: Path | list[Path], case: Case, comm_profile: Path, timeline: Path | None,
             cluster: str | None = None, *, root: Path,
             timeout: float = 300.0) -> dict[str, Any]:
    """Run the simulate command in ``root`` on the trace directory ``trace`` (a list: runs of
    the same job, pooled); its figures.

    ``sim_wall_s`` is the command's wall time (s), interpreter start and imports included.
    Raises :class:`SimulateError` (with the argv) when the command fails.
    """
    from benchmarks.launch import run_python

    argv = _simulate_argv(trace, case, comm_profile, timeline, cluster, root)
    t0 = time.perf_counter()
    proc = run_python(argv[1:], timeout=timeout, cwd=root)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-2:]
        raise SimulateError(f"simulate exit {proc.returncode}: {' | '.join(tail)}", argv)
    try:
        res = json.loads(proc.stdout)
    except json.JSONDecodeError as e:
        raise SimulateError(f"simulate printed no JSON object ({e})", argv) from None
    return {
        "iteration_time_us": float(res["iteration_time_us"]),
        "peak_memory_bytes": int(res["peak_memory_bytes"]),
        "breakdown": [{"rank": r["rank"], "compute_us": round(r["compute_us"], 1),
                       "exposed_comm_us": round(r["exposed_comm_us"], 1),
                       "bubble_us": round(r["bubble_us"], 1), "idle_us": round(r["idle_us"], 1),
                       "memory": r["memory"]} for r in res["ranks"]],
        "sim_wall_s": round(wall, 3),
        "hardware": res.get("hardware"), "calibration": res.get("calibration"),
        "models": res.get("models"), "warnings": res.get("warnings", []),
        "simulate_argv": argv,
    }


def _replay(timeline: Path, comm_profile: Path, out: Path, *, root: Path,
            timeout: float = 300.0) -> tuple[Path, list[str]]:
    """``python -m echo_sim replay-comm TIMELINE --comm-profile P --output OUT`` in ``root``
    (the case's collectives as its simulated step meets them, over ``comm_profile``); the
    profile written and the argv. Raises :class:`SimulateError` when the command fails."""
    from benchmarks.launch import run_python

    argv = [*SIMULATE[:3], "replay-comm", _rel(timeline, root), "--comm-profile",
            _rel(comm_profile, root), "--output", _rel(out, root), "--force", "--json"]
    proc = run_python(argv[1:], timeout=timeout, cwd=root)
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-2:]
        raise SimulateError(f"replay-comm exit {proc.returncode}: {' | '.join(tail)}", argv)
    return out, argv


def _collect_figures(path: Path) -> dict[str, float]:
    from echo_sim.analysis.collect import collect
    from echo_sim.load import load_trace

    c = collect(load_trace(path))
    return {k: round(float(getattr(c, k)), 1) for k in (
        "iteration_time_us", "fwbw_us", "compute_us", "comm_us", "overlapped_us", "exposed_us")}


# ------------------------------------------------------------------------------ driver
def _err_pct(pred: float, meas: float) -> float:
    return 100.0 * (pred - meas) / meas if meas else float("nan")


def _loadavg() -> list[float]:
    """``os.getloadavg()``: the 1-, 5- and 15-minute load averages (runnable processes)."""
    return [round(x, 2) for x in os.getloadavg()]


def run_benchmark(cases: tuple[Case, ...], *, reps: int, steps: int, warmup: int, root: Path,
                  diagnose: bool, profile_sizes: str = "1KB..16MB",
                  profile_iters: int = DEFAULT_ITERS, profile_host_rounds: int = DEFAULT_ROUNDS,
                  profile_busy_us: float = 0.0, second_busy_us: float | None = None,
                  second_replay: bool = False,
                  comm_profile: Path | None = None, plain_single: bool = True,
                  timeout: float = 300, cluster: str | None = None, traces: int = 1,
                  log: Any = sys.stderr) -> dict[str, Any]:
    """Run every case ``reps`` times; return the JSON document (see the module docstring).
    ``traces`` > 1: that many one-process traces per model and repetition, each case also
    predicted from all of them pooled (``simulate TRACE TRACE2 ...``)."""
    from echo_sim.cost.comm_profile import save_comm_profile
    from echo_sim.measure.profile_comm import ProfileSpec, measure_comm_profile, parse_sizes

    nprocs = sorted({c.nproc for c in cases})

    def measure_profile(path: Path, busy_us: float = profile_busy_us) -> Path:
        # Taken right before the runs it predicts: on a shared CPU host the collectives'
        # cost follows the load, and a profile from minutes earlier no longer fits.
        t0 = time.perf_counter()
        spec = ProfileSpec(nproc=max(nprocs), sizes_bytes=parse_sizes(profile_sizes),
                           group_sizes=tuple(n for n in nprocs if n != max(nprocs)),
                           ops=("all_reduce", "all_gather", "reduce_scatter", "broadcast",
                                "send"), iters=profile_iters, warmup=2, progress=False,
                           busy_us=busy_us, host_rounds=profile_host_rounds)
        path.parent.mkdir(parents=True, exist_ok=True)
        save_comm_profile(measure_comm_profile(spec), path, overwrite=True)
        print(f"comm profile {path}: {time.perf_counter() - t0:.1f} s", file=log)
        return path

    sizes = list(dict.fromkeys(c.size for c in cases))
    raw: dict[str, list[dict[str, Any]]] = {c.name: [] for c in cases}
    singles: list[dict[str, Any]] = []
    loads: list[float] = []
    rep_loads: list[dict[str, Any]] = []
    for rep in range(reps):
        rep_loads.append({"rep": rep, "before": _loadavg()})
        comm = comm_profile or measure_profile(root / f"rep{rep}" / "comm.json")
        # the same repetition's runs predicted from a second profile, measured in another
        # mode right after the first: the two modes compared side by side on the same jobs
        comm_b = (measure_profile(root / f"rep{rep}" / "comm-b.json", second_busy_us)
                  if second_busy_us is not None and comm_profile is None else None)
        for size in sizes:
            base = root / f"rep{rep}" / size
            loads.append(os.getloadavg()[0])
            try:
                srec = _launch(_train_flags("single", size, steps=steps, capture=base / "trace",
                                            nproc=1), base / "single", 1, timeout, size)[0]
                traced = _collect_figures(base / "trace")
            except Exception as e:  # report and go on
                print(f"rep {rep} {size}: single trace failed: {e}", file=log)
                for c in cases:
                    if c.size == size:
                        raw[c.name].append({"rep": rep, "error": f"trace: {e}"})
                continue
            single = {"rep": rep, "size": size, "traced_iteration_us": traced[
                "iteration_time_us"], "rss_before_model_bytes": srec["rss_before_model_bytes"],
                "peak_rss_bytes": srec["peak_rss_bytes"]}
            # more runs of the same one-process job, each its own process: the pooled
            # prediction's per-op medians (the first trace alone stays the headline)
            pool = [base / "trace"]
            for k in range(2, traces + 1):
                try:
                    _launch(_train_flags("single", size, steps=steps, capture=base / f"trace{k}",
                                         nproc=1), base / f"single{k}", 1, timeout, size)
                    pool.append(base / f"trace{k}")
                except Exception as e:  # the pooled figure then has fewer traces
                    print(f"rep {rep} {size}: trace {k} failed: {e}", file=log)
            if len(pool) > 1:
                single["pooled_traced_iteration_us"] = [traced["iteration_time_us"]] + [
                    _collect_figures(t)["iteration_time_us"] for t in pool[1:]]
            if plain_single:
                # the same 1-process job without capture: capture overhead in the trace
                # inflates every predicted op time by this ratio
                try:
                    prec = _launch(_train_flags("single", size, steps=steps, capture=None,
                                                nproc=1), base / "single-plain", 1, timeout,
                                    size)
                    single["plain_iteration_us"] = round(_iteration_us(prec, warmup), 1)
                except Exception as e:  # a diagnostic only
                    single["plain_error"] = f"{type(e).__name__}: {e}"
            singles.append(single)
            for case in (c for c in cases if c.size == size):
                row: dict[str, Any] = {"rep": rep}
                dg = diagnose and rep == 0
                try:
                    timeline = base / f"{case.layout}-sim"
                    pred = _predict(base / "trace", case, comm,
                                    timeline if dg or second_replay else None, cluster,
                                    root=root, timeout=timeout)
                    if second_replay:
                        # the case's own collectives, replayed as its simulated step meets
                        # them, over this repetition's profile
                        comm_b, row["replay_argv"] = _replay(
                            timeline, comm, base / f"{case.layout}-replay.json", root=root,
                            timeout=timeout)
                    pred_b = (_predict(base / "trace", case, comm_b, None, cluster, root=root,
                                       timeout=timeout) if comm_b is not None else None)
                    pred_p = (_predict(pool, case, comm, None, cluster, root=root,
                                       timeout=timeout) if len(pool) > 1 else None)
                    row["load_avg_before"] = _loadavg()
                    recs = _launch(_train_flags(case.layout, size, steps=steps, capture=None,
                                                nproc=case.nproc),
                                   base / f"{case.layout}-real", case.nproc, timeout, size)
                    row["load_avg_after"] = _loadavg()
                except Exception as e:  # one failing case must not hide the others
                    row["error"] = f"{type(e).__name__}: {e}"
                    if isinstance(e, SimulateError):
                        row["simulate_argv"] = e.argv
                    raw[case.name].append(row)
                    print(f"rep {rep} {case.name}: {row['error']}", file=log)
                    continue
                meas = _iteration_us(recs, warmup)
                pred_delta = pred["peak_memory_bytes"] - srec["rss_before_model_bytes"]
                row.update(
                    measured_us=round(meas, 1), predicted_us=round(pred["iteration_time_us"], 1),
                    step_spread_pct=round(_step_spread_pct(recs, warmup), 2),
                    calibration=pred["calibration"], hardware=pred["hardware"],
                    error_pct=round(_err_pct(pred["iteration_time_us"], meas), 2),
                    measured_mem_delta_bytes=_mem_delta(recs),
                    predicted_mem_delta_bytes=int(pred_delta),
                    measured_peak_rss_bytes=max(int(r["peak_rss_bytes"]) for r in recs),
                    predicted_peak_bytes=int(pred["peak_memory_bytes"]),
                    breakdown=pred["breakdown"], sim_wall_s=pred["sim_wall_s"],
                    simulate_argv=pred["simulate_argv"], warnings=pred["warnings"],
                    load_avg_1min=row["load_avg_after"][0])
                row["mem_error_pct"] = round(_err_pct(row["predicted_mem_delta_bytes"],
                                                      row["measured_mem_delta_bytes"]), 2)
                split = _split_us(recs, warmup)
                if split is not None and pred["breakdown"]:
                    b0 = pred["breakdown"][0]
                    rq = _runqueue_us(recs, warmup)
                    ot = _other_threads_us(recs, warmup)
                    co = _collectives_us(recs, warmup)
                    row["split"] = {"measured_cpu_us": round(split[0], 1),
                                    "measured_off_cpu_us": round(split[1], 1),
                                    "measured_runqueue_us": None if rq is None
                                    else round(rq, 1),
                                    "measured_other_threads_cpu_us": None if ot is None
                                    else round(ot[0], 1),
                                    "measured_other_threads_runqueue_us": None if ot is None
                                    else round(ot[1], 1),
                                    "predicted_compute_us": b0["compute_us"],
                                    "predicted_exposed_comm_us": b0["exposed_comm_us"]}
                    if co is not None:  # stamped collectives (FSDP2's, not DDP's)
                        row["split"].update(measured_collectives_us=round(co[0], 1),
                                            measured_half_arrival_gaps_us=round(co[1], 1))
                if pred_b is not None:
                    row.update(second_predicted_us=round(pred_b["iteration_time_us"], 1),
                               second_error_pct=round(_err_pct(pred_b["iteration_time_us"],
                                                               meas), 2))
                if pred_p is not None:
                    row.update(pooled_predicted_us=round(pred_p["iteration_time_us"], 1),
                               pooled_error_pct=round(_err_pct(pred_p["iteration_time_us"],
                                                               meas), 2),
                               pooled_simulate_argv=pred_p["simulate_argv"])
                if dg:
                    cap = base / f"{case.layout}-captured"
                    try:
                        _launch(_train_flags(case.layout, size, steps=steps, capture=cap,
                                             nproc=case.nproc),
                                base / f"{case.layout}-real-cap", case.nproc, timeout, size)
                        row["diagnosis"] = {"traced_single": traced,
                                            "real_captured": _collect_figures(cap),
                                            "simulated": _collect_figures(
                                                base / f"{case.layout}-sim")}
                    except Exception as e:
                        row["diagnosis"] = {"error": f"{type(e).__name__}: {e}"}
                raw[case.name].append(row)
                print(f"rep {rep} {case.name}: measured {meas / 1e3:.2f} ms, predicted "
                      f"{pred['iteration_time_us'] / 1e3:.2f} ms ({row['error_pct']:+.1f}%), "
                      f"memory {row['mem_error_pct']:+.1f}%"
                      + (f"; second profile {row['second_error_pct']:+.1f}%"
                         if pred_b is not None else "")
                      + (f"; pooled {len(pool)} traces {row['pooled_error_pct']:+.1f}%"
                         if pred_p is not None else ""), file=log)
        rep_loads[-1]["after"] = _loadavg()
    doc = _summarise(cases, raw, singles, loads, steps=steps, warmup=warmup, reps=reps,
                     cluster=cluster)
    doc["machine"]["load_avg_per_rep"] = rep_loads
    doc["method"]["comm_profile"] = (
        str(comm_profile) if comm_profile is not None else
        (f"busy mode, {profile_busy_us:g} us of compute before each timed collective"
         if profile_busy_us > 0 else "idle mode, a barrier before each timed collective")
        + f", {profile_iters} timed runs per size, {profile_host_rounds} host rounds")
    if traces > 1:
        doc["method"]["pooled_traces"] = (
            f"{traces} one-process traces per model and repetition (separate processes, one "
            "after the other); pooled: simulate TRACE TRACE2 ... (each op's median time)")
    if second_replay:
        doc["method"]["second_comm_profile"] = (
            "replay-comm of each case's simulated timeline (simulate --output), 10 timed "
            "repetitions of its step, over the repetition's profile")
    elif second_busy_us is not None:
        doc["method"]["second_comm_profile"] = (
            f"busy mode, {second_busy_us:g} us" if second_busy_us > 0 else "idle mode")
    return doc


def _without_calibration(profile: Path, keys: tuple[str, ...]) -> Path:
    """A copy of ``profile`` beside it (``*-without.json``) with the calibration ``keys``
    removed: an ablation of ``--repredict`` (``--drop-calibration``; e.g. a replay's
    ``replay_gap_us`` / ``replay_work_us``, or the chained probe's ``chain_*``, after which
    ``simulate`` prices the waits as before 2026-11-29)."""
    raw = json.loads(profile.read_text())
    for key in keys:
        raw.get("calibration", {}).pop(key, None)
    out = profile.with_name(profile.stem + "-without.json")
    out.write_text(json.dumps(raw))
    return out


def repredict(doc: dict[str, Any], root: Path, cluster: str | None = None, *,
              drop: tuple[str, ...] = ()) -> dict[str, Any]:
    """Predict again every measured repetition of ``doc`` (a result document whose run kept
    its files under ``root``, ``--keep``) from its kept trace and comm profile, with the
    current models (through the simulate command, run in ``root``); measurements are reused
    as they are, a diagnosed repetition's simulated figures are made again. A replayed second
    profile's predictions (``--second-profile-replay``) are made again from the kept replay
    profiles; a busy-mode one's (``--second-profile-busy-us``) are kept as they were.
    ``drop``: calibration keys left out of every profile first (:func:`_without_calibration`). A repetition whose prediction fails keeps its measurement and the error.
    Returns a new document."""
    replayed = str(doc["method"].get("second_comm_profile", "")).startswith("replay-comm")
    cases = tuple(Case(layout=r["layout"], size=r["model"], nproc=r["nproc"])
                  for r in doc["cases"])
    raw: dict[str, list[dict[str, Any]]] = {c.name: [] for c in cases}
    for case, row in zip(cases, doc["cases"], strict=True):
        for rec in row["reps"]:
            if "measured_us" not in rec:
                raw[case.name].append(rec)
                continue
            r = int(rec["rep"])
            base = root / f"rep{r}" / case.size
            # a diagnosed repetition's simulated timeline is written again, so that its
            # figures beside the real job's are today's model's too
            dg = "simulated" in rec.get("diagnosis", {})
            comm = root / f"rep{r}" / "comm.json"
            if drop and comm.exists():
                comm = _without_calibration(comm, drop)
            try:
                pred = _predict(base / "trace", case, comm,
                                base / f"{case.layout}-sim" if dg else None, cluster,
                                root=root)
            except SimulateError as e:
                raw[case.name].append({"rep": r, "measured_us": rec["measured_us"],
                                       "error": str(e), "simulate_argv": e.argv})
                continue
            single: dict[str, Any] = next((s for s in doc["single_traces"] if s["rep"] == r and
                           s["size"] == case.size), {})
            new = dict(rec, predicted_us=round(pred["iteration_time_us"], 1),
                       error_pct=round(_err_pct(pred["iteration_time_us"],
                                                rec["measured_us"]), 2),
                       breakdown=pred["breakdown"], calibration=pred["calibration"],
                       predicted_peak_bytes=int(pred["peak_memory_bytes"]),
                       simulate_argv=pred["simulate_argv"], warnings=pred["warnings"],
                       sim_wall_s=pred["sim_wall_s"])
            if "pooled_predicted_us" in rec:  # the pooled traces it kept, predicted again
                pool = [base / "trace"] + sorted(
                    (t for t in base.glob("trace[0-9]*") if t.name[5:].isdigit()),
                    key=lambda t: int(t.name[5:]))
                try:
                    pp = _predict(pool, case, root / f"rep{r}" / "comm.json", None, cluster,
                                  root=root)
                    new.update(pooled_predicted_us=round(pp["iteration_time_us"], 1),
                               pooled_error_pct=round(_err_pct(pp["iteration_time_us"],
                                                               rec["measured_us"]), 2),
                               pooled_simulate_argv=pp["simulate_argv"])
                except SimulateError as e:
                    for k in ("pooled_predicted_us", "pooled_error_pct"):
                        new.pop(k, None)
                    new["pooled_error"] = str(e)
            replay = base / f"{case.layout}-replay.json"
            if replayed and "second_predicted_us" in rec and replay.exists():
                try:
                    pb = _predict(base / "trace", case, _without_calibration(replay, drop)
                                  if drop else replay, None, cluster, root=root)
                    new.update(second_predicted_us=round(pb["iteration_time_us"], 1),
                               second_error_pct=round(_err_pct(pb["iteration_time_us"],
                                                               rec["measured_us"]), 2))
                except SimulateError as e:
                    for k in ("second_predicted_us", "second_error_pct"):
                        new.pop(k, None)
                    new["second_error"] = str(e)
            if dg:
                new["diagnosis"] = dict(rec["diagnosis"],
                                        simulated=_collect_figures(base / f"{case.layout}-sim"))
            if "rss_before_model_bytes" in single:
                new["predicted_mem_delta_bytes"] = int(pred["peak_memory_bytes"]
                                                       - single["rss_before_model_bytes"])
                new["mem_error_pct"] = round(_err_pct(new["predicted_mem_delta_bytes"],
                                                      new["measured_mem_delta_bytes"]), 2)
            raw[case.name].append(new)
    m = doc["method"]
    out = _summarise(cases, raw, doc["single_traces"], doc["machine"]["load_avg_1min_at_runs"],
                     steps=m["steps"], warmup=m["warmup_steps"], reps=m["reps"], cluster=cluster)
    out["machine"] = doc["machine"]
    out["date"] = doc["date"]
    out["method"]["repredicted"] = time.strftime("%Y-%m-%dT%H:%M:%S")
    if replayed:
        out["method"]["second_comm_profile"] = doc["method"]["second_comm_profile"]
    if drop:
        out["method"]["dropped_calibration"] = list(drop)
    return out


def merge(docs: list[dict[str, Any]]) -> dict[str, Any]:
    """One document of several runs of the benchmark (the same steps and warm-up): every
    case's repetitions pooled (each tagged with its ``run``, the index into ``docs``, and
    that run's date), the summary made again over all of them, so that a row's median and
    noise come from every repetition of every run. A case some run lacks pools the others'.
    Raises ``ValueError`` when the runs differ in steps or warm-up."""
    if not docs:
        raise ValueError("nothing to merge")
    first = docs[0]["method"]
    for d in docs[1:]:
        if (d["method"]["steps"], d["method"]["warmup_steps"]) != (first["steps"],
                                                                   first["warmup_steps"]):
            raise ValueError("runs to merge differ in --steps or --warmup")
    allocs = {json.dumps(d["machine"].get("malloc", {}), sort_keys=True) for d in docs}
    if len(allocs) > 1:
        raise ValueError("runs to merge ran under different malloc settings (--malloc): "
                         + " vs ".join(sorted(allocs)))
    cases: dict[str, Case] = {}
    raw: dict[str, list[dict[str, Any]]] = {}
    singles: list[dict[str, Any]] = []
    loads: list[float] = []
    for i, d in enumerate(docs):
        for row in d["cases"]:
            c = Case(layout=row["layout"], size=row["model"], nproc=row["nproc"])
            cases.setdefault(c.name, c)
            raw.setdefault(c.name, []).extend(dict(r, run=i, run_date=d["date"])
                                              for r in row["reps"])
        singles += [dict(s, run=i) for s in d.get("single_traces", [])]
        loads += d["machine"].get("load_avg_1min_at_runs", [])
    out = _summarise(tuple(cases.values()), raw, singles, loads, steps=first["steps"],
                     warmup=first["warmup_steps"], reps=sum(d["method"]["reps"] for d in docs),
                     cluster=None if first["cluster_preset"].startswith("none")
                     else first["cluster_preset"])
    # the host the runs measured, not the one merging them (``--merge`` runs no job)
    ident = ("python", "platform", "processor", "cpu_count", "torch", "device")
    out["machine"].update({k: docs[0]["machine"][k] for k in ident if k in docs[0]["machine"]})
    hosts = {json.dumps({k: d["machine"].get(k) for k in ident}, sort_keys=True) for d in docs}
    if len(hosts) > 1:
        out["machine"]["hosts"] = [json.loads(h) for h in sorted(hosts)]
    out["machine"]["malloc"] = docs[0]["machine"].get("malloc", {})
    out["machine"]["load_avg_per_rep"] = [dict(x, run=i) for i, d in enumerate(docs)
                                          for x in d["machine"].get("load_avg_per_rep", [])]
    # how the runs measured (profile mode, pooled traces): kept, each distinct wording once
    for key in ("comm_profile", "pooled_traces", "second_comm_profile"):
        said = list(dict.fromkeys(d["method"][key] for d in docs if key in d["method"]))
        if said:
            out["method"][key] = " | ".join(said)
    out["method"]["merged"] = [{"date": d["date"], "reps": d["method"]["reps"],
                                "repredicted": d["method"].get("repredicted")} for d in docs]
    return out


def _second(ok: list[dict[str, Any]], measured_us: float) -> dict[str, Any]:
    """The row's figures from the second profile (``--second-profile-busy-us``), if any."""
    got = [r for r in ok if "second_predicted_us" in r]
    if not got:
        return {}
    p = statistics.median(r["second_predicted_us"] for r in got)
    errs = [r["second_error_pct"] for r in got]
    return {"second_predicted_us": round(p, 1),
            "second_error_pct": round(_err_pct(p, measured_us), 2),
            "second_rep_errors_pct": errs,
            "second_paired_median_pct": round(statistics.median(errs), 2),
            **_ci_fields(errs, "second_")}


def _ci_fields(errors: list[float], prefix: str = "") -> dict[str, Any]:
    """The paired error's claim, within ±bound % at the interval's coverage
    (:func:`median_ci`): ``{prefix}paired_ci_pct``, ``..._coverage``, ``..._bound_pct``;
    empty under six repetitions."""
    ci = median_ci(errors)
    if ci is None:
        return {}
    return {f"{prefix}paired_ci_pct": [round(ci[0], 2), round(ci[1], 2)],
            f"{prefix}paired_ci_coverage": round(ci[2], 4),
            f"{prefix}paired_bound_pct": round(max(abs(ci[0]), abs(ci[1])), 2)}


def _pooled(ok: list[dict[str, Any]], measured_us: float) -> dict[str, Any]:
    """The row's figures from its pooled traces (``--traces``), on the repetitions that have
    them: the error of the medians, each repetition's, the paired error and the spread of
    the predictions, beside the same repetitions' single-trace prediction spread."""
    got = [r for r in ok if "pooled_predicted_us" in r]
    if not got:
        return {}
    p = statistics.median(r["pooled_predicted_us"] for r in got)
    paired, half = paired_error([r["pooled_error_pct"] for r in got])
    return {**_ci_fields([r["pooled_error_pct"] for r in got], "pooled_"),
            "pooled_predicted_us": round(p, 1),
            "pooled_error_pct": round(_err_pct(p, measured_us), 2),
            "pooled_rep_errors_pct": [r["pooled_error_pct"] for r in got],
            "pooled_paired_error_pct": round(paired, 2),
            "pooled_paired_half_iqr_pct": round(half, 2),
            "pooled_prediction_spread_pct": round(_rep_spread_pct(
                [r["pooled_predicted_us"] for r in got]), 2),
            "single_prediction_spread_pct": round(_rep_spread_pct(
                [r["predicted_us"] for r in got]), 2)}


def _summarise(cases: tuple[Case, ...], raw: dict[str, list[dict[str, Any]]],
               singles: list[dict[str, Any]], loads: list[float], *, steps: int, warmup: int,
               reps: int, cluster: str | None = None) -> dict[str, Any]:
    rows = []
    for c in cases:
        ok = [r for r in raw[c.name] if "error_pct" in r]
        row: dict[str, Any] = {"case": c.name, "layout": c.layout, "model": c.size,
                               "nproc": c.nproc, "reps": raw[c.name]}
        argvs = [r["simulate_argv"] for r in raw[c.name] if "simulate_argv" in r]
        if argvs:  # the first repetition's; the others differ in their repN/ paths only
            row["simulate_argv"] = argvs[0]
        one_min = [r[k][0] for r in raw[c.name] for k in ("load_avg_before", "load_avg_after")
                   if k in r]
        if one_min:
            row["load_avg_1min_range"] = [min(one_min), max(one_min)]
        if ok:
            m = statistics.median(r["measured_us"] for r in ok)
            p = statistics.median(r["predicted_us"] for r in ok)
            mm = statistics.median(r["measured_mem_delta_bytes"] for r in ok)
            pm = statistics.median(r["predicted_mem_delta_bytes"] for r in ok)
            # a prediction varies with the comm profile each repetition measured afresh (its
            # host calibrations drift with the host): that spread is noise of the claim too
            pspread = _rep_spread_pct([r["predicted_us"] for r in ok])
            noise = max(_rep_spread_pct([r["measured_us"] for r in ok]),
                        statistics.median(r.get("step_spread_pct", 0.0) for r in ok), pspread)
            err = _err_pct(p, m)
            paired, paired_spread = paired_error([r["error_pct"] for r in ok])
            row.update(_ci_fields([r["error_pct"] for r in ok]))
            row.update(measured_us=round(m, 1), predicted_us=round(p, 1),
                       error_pct=round(err, 2), noise_pct=round(noise, 2),
                       prediction_spread_pct=round(pspread, 2),
                       within_noise=abs(err) <= noise,
                       rep_errors_pct=[r["error_pct"] for r in ok],
                       paired_error_pct=round(paired, 2),
                       paired_half_iqr_pct=round(paired_spread, 2),
                       **_second(ok, m), **_pooled(ok, m),
                       measured_mem_delta_bytes=int(mm), predicted_mem_delta_bytes=int(pm),
                       mem_error_pct=round(_err_pct(pm, mm), 2))
            splits = [r["split"] for r in ok if "split" in r]
            if splits and len(splits) == len(ok):
                keys = [k for k in splits[0] if all(x.get(k) is not None for x in splits)]
                row["split"] = {k: round(statistics.median(x[k] for x in splits), 1)
                                for k in keys}
        else:
            row["error"] = "; ".join(r.get("error", "") for r in raw[c.name]) or "no runs"
        rows.append(row)
    per_layout: dict[str, dict[str, float | None]] = {}
    for lay in dict.fromkeys(c.layout for c in cases):
        errs = [abs(r["error_pct"]) for r in rows if r["layout"] == lay and "error_pct" in r]
        merrs = [abs(r["mem_error_pct"]) for r in rows if r["layout"] == lay and
                 "mem_error_pct" in r]
        noises = [r["noise_pct"] for r in rows if r["layout"] == lay and "noise_pct" in r]
        bounds = [r["paired_bound_pct"] for r in rows if r["layout"] == lay and
                  "paired_bound_pct" in r]
        per_layout[lay] = {
            "max_paired_bound_pct": max(bounds) if bounds else None,
            "median_abs_error_pct": round(statistics.median(errs), 2) if errs else None,
            "median_noise_pct": round(statistics.median(noises), 2) if noises else None,
            "median_abs_mem_error_pct": round(statistics.median(merrs), 2) if merrs else None,
        }
    return {
        "benchmark": "accuracy",
        "date": time.strftime("%Y-%m-%dT%H:%M:%S"),
        "machine": {"python": platform.python_version(), "platform": platform.platform(),
                    "processor": platform.processor() or platform.machine(),
                    "cpu_count": os.cpu_count(), "torch": _torch_version(),
                    "load_avg_1min_at_runs": [round(x, 2) for x in loads],
                    "device": "cpu (gloo), OMP_NUM_THREADS=1 per process"},
        "method": {"reps": reps, "steps": steps, "warmup_steps": warmup,
                   "cluster_preset": cluster or "none (the traced hardware)",
                   "pp_micro_batches": PP_MICRO_BATCHES,
                   "prediction": "python -m echo_sim simulate TRACE FLAGS --json, run in the "
                                 "--keep directory (paths relative to it); each repetition's "
                                 "simulate_argv is the exact command",
                   "memory": "CPU RSS delta: peak RSS (ru_maxrss) minus RSS before the model "
                             "was built, max over ranks"},
        "single_traces": singles,
        "cases": rows,
        "per_layout": per_layout,
    }


def _torch_version() -> str:
    try:
        import torch

        return str(torch.__version__)
    except ImportError:
        return "unavailable"


def _mib(n: float) -> str:
    return f"{n / 2**20:.1f}"


def _verdict(r: dict[str, Any]) -> str:
    """The error as a claim, with the spread it is judged against: "+4.2 (spread 3.0%)" or
    "within noise (spread 9.0%; predictions ±9.0%)" (the spread of the predictions over
    the repetitions' profiles, where there is one)."""
    ps = r.get("prediction_spread_pct")
    spread = (f"(spread {r.get('noise_pct', 0.0):.1f}%"
              + (f"; predictions ±{ps:.1f}%" if ps else "") + ")")
    if r.get("within_noise"):
        return f"within noise {spread}"
    return f"{r['error_pct']:+.1f} {spread}"


def _paired(r: dict[str, Any], prefix: str = "") -> str:
    """The paired error with its confidence interval where the repetitions give one
    ("+3.1 [-2.0..+8.4]"), else with half its inter-quartile range ("+3.1 ±2.2");
    ``prefix="pooled_"``: the pooled traces' figures."""
    err = r.get(f"{prefix}paired_error_pct")
    if err is None:
        return "-"
    if f"{prefix}paired_ci_pct" in r:
        lo, hi = r[f"{prefix}paired_ci_pct"]
        return f"{err:+.1f} [{lo:+.1f}..{hi:+.1f}]"
    return f"{err:+.1f} ±{r[f'{prefix}paired_half_iqr_pct']:.1f}"


def _load_range(r: dict[str, Any]) -> str:
    """A row's 1-minute load average range ("0.8..1.6"); an older document's rows hold one
    figure per repetition (``load_avg_1min``, after its job), "-" when there is none."""
    lo_hi = r.get("load_avg_1min_range")
    if not lo_hi:
        old = [x["load_avg_1min"] for x in r.get("reps", []) if "load_avg_1min" in x]
        lo_hi = [min(old), max(old)] if old else None
    return f"{lo_hi[0]:.1f}..{lo_hi[1]:.1f}" if lo_hi else "-"


def _load_lines(machine: dict[str, Any]) -> list[str]:
    """The machine's load under the table: its range and every repetition's before/after."""
    per_rep = machine.get("load_avg_per_rep") or []
    loads = list(machine.get("load_avg_1min_at_runs") or [])
    loads += [x["before"][0] for x in per_rep] + [x["after"][0] for x in per_rep if "after" in x]
    if not loads:
        return []
    alloc = machine.get("malloc") or {}
    lines = [f"\nmachine: {machine.get('cpu_count')} cores, 1-min load average "
             f"{min(loads):.1f}..{max(loads):.1f} during the runs; malloc: "
             + (" ".join(f"{k}={v}" for k, v in alloc.items()) or "glibc default")]
    if per_rep:
        each = ", ".join(("" if "run" not in x else f"run {x['run']} ")
                         + f"rep {x['rep']} {x['before'][0]:.2f} -> "
                         + (f"{x['after'][0]:.2f}" if "after" in x else "?") for x in per_rep)
        five = [x[k][1] for x in per_rep for k in ("before", "after") if k in x]
        lines.append(f"load average (1-min) before -> after each repetition: {each}; "
                     f"5-min {min(five):.2f}..{max(five):.2f}")
    return lines


def _argv_lines(doc: dict[str, Any]) -> list[str]:
    """Each row's simulate command, as validation.md lists its flags."""
    rows = [r for r in doc["cases"] if r.get("simulate_argv")]
    if not rows:
        return []
    lines = ["", "Each row's prediction is this command, run in the --keep directory (the "
             "first repetition's; the others differ in their repN/ paths only):", "",
             "| case | simulate command |", "|---|---|"]
    lines += [f"| {r['case']} | `{shlex.join(r['simulate_argv'])}` |" for r in rows]
    return lines


def table(doc: dict[str, Any]) -> str:
    """The markdown table of a result document, each row's spread and load, then the
    per-layout medians, the machine's load and each row's simulate command."""
    lines = ["| layout | model | procs | measured ms | predicted ms | error % (spread) "
             "| paired % [CI] | per-rep error % | load 1-min | mem measured MiB "
             "| mem predicted MiB | mem error % |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in doc["cases"]:
        if "error_pct" not in r:
            lines.append(f"| {r['layout']} | {r['model']} | {r['nproc']} | failed: "
                         f"{r['error'][:90]} | | | | | {_load_range(r)} | | | |")
            continue
        reps = ", ".join(f"{e:+.1f}" for e in r["rep_errors_pct"])
        paired = _paired(r)
        lines.append(
            f"| {r['layout']} | {r['model']} | {r['nproc']} | {r['measured_us'] / 1e3:.2f} | "
            f"{r['predicted_us'] / 1e3:.2f} | {_verdict(r)} | {paired} | {reps} | "
            f"{_load_range(r)} | "
            f"{_mib(r['measured_mem_delta_bytes'])} | {_mib(r['predicted_mem_delta_bytes'])} | "
            f"{r['mem_error_pct']:+.1f} |")
    lines += ["", "| layout | median \\|time error\\| % | median noise % | widest paired "
              "bound % | median \\|memory error\\| % |", "|---|---|---|---|---|"]
    for lay, v in doc["per_layout"].items():
        t, m, n, b = (v["median_abs_error_pct"], v["median_abs_mem_error_pct"],
                      v.get("median_noise_pct"), v.get("max_paired_bound_pct"))
        lines.append(f"| {lay} | {'-' if t is None else f'{t:.1f}'} | "
                     f"{'-' if n is None else f'{n:.1f}'} | {'-' if b is None else f'±{b:.1f}'} "
                     f"| {'-' if m is None else f'{m:.1f}'} |")
    lines += _ci_lines(doc["cases"])
    lines += _split_lines(doc["cases"])
    second = [r for r in doc["cases"] if "second_error_pct" in r]
    if second:
        lines += ["", f"Second profile ({doc['method'].get('second_comm_profile', '?')}), the "
                  "same jobs: " + "; ".join(
                      f"{r['layout']} {r['model']} {r['second_error_pct']:+.1f} % (paired "
                      f"median {r.get('second_paired_median_pct', float('nan')):+.1f} %"
                      + (f" [{r['second_paired_ci_pct'][0]:+.1f}..{r['second_paired_ci_pct'][1]:+.1f}]"
                         if "second_paired_ci_pct" in r else "")
                      + "; reps "
                      + ", ".join(f"{e:+.1f}" for e in r["second_rep_errors_pct"]) + ")"
                      for r in second)]
    lines += _pooled_lines(doc)
    lines += _load_lines(doc["machine"])
    lines += _argv_lines(doc)
    return "\n".join(lines)


def _ci_lines(rows: list[dict[str, Any]]) -> list[str]:
    """What the repetitions let each row claim: its paired error lies within +-bound % at
    the interval's coverage (:func:`median_ci`); rows with too few repetitions say so."""
    got = [r for r in rows if "paired_bound_pct" in r]
    if not got:
        n = max((len(r.get("rep_errors_pct", [])) for r in rows), default=0)
        return ["", f"Paired errors: {n} repetitions give no distribution-free 95 % interval "
                "for their median (6 or more do): the rows claim no bound."]
    lines = ["", "Paired errors (each repetition's prediction against the job run beside "
             "it), median with a distribution-free confidence interval over the repetitions: "
             + "; ".join(f"{r['layout']} {r['model']} within ±{r['paired_bound_pct']:.1f} % "
                         f"({100 * r['paired_ci_coverage']:.1f} %, {len(r['rep_errors_pct'])} "
                         "reps)" for r in got)]
    return lines + _bias_lines(got)


def _bias_lines(rows: list[dict[str, Any]]) -> list[str]:
    """The rows whose paired interval excludes zero: their error is a bias of the model
    (or of the host against the trace), not the repetitions' noise, and which way it goes."""
    low = [r for r in rows if r["paired_ci_pct"][1] < 0]
    high = [r for r in rows if r["paired_ci_pct"][0] > 0]
    if not low and not high:
        return ["", "Bias: every row's interval holds zero (no bias the repetitions can show)."]

    def name(r: dict[str, Any]) -> str:
        lo, hi = r["paired_ci_pct"]
        return f"{r['layout']} {r['model']} [{lo:+.1f}..{hi:+.1f} %]"

    parts = [f"{len(group)} {way}-predicted ({', '.join(name(r) for r in group)})"
             for way, group in (("under", low), ("over", high)) if group]
    return ["", f"Bias: the interval of {len(low) + len(high)} of {len(rows)} rows excludes "
            "zero, so those errors are the model's (or the host's against the trace), not the "
            "repetitions' noise: " + "; ".join(parts) + "."]


def _pooled_lines(doc: dict[str, Any]) -> list[str]:
    """Each row predicted from its first trace alone and from all its traces pooled."""
    rows = [r for r in doc["cases"] if "pooled_error_pct" in r]
    if not rows:
        return []
    lines = ["", f"Pooled traces ({doc['method'].get('pooled_traces', '?')}), the same jobs: "
             "error of medians, paired error (with its interval from six repetitions) and "
             "the spread of the predictions over the repetitions, first trace alone vs "
             "pooled:", "",
             "| layout | model | first trace: error | paired | predictions ± | pooled: error "
             "| paired | predictions ± | pooled per repetition |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(
            f"| {r['layout']} | {r['model']} | {r['error_pct']:+.1f} % | {_paired(r)} | "
            f"{r['single_prediction_spread_pct']:.1f} % | {r['pooled_error_pct']:+.1f} % | "
            f"{_paired(r, 'pooled_')} | "
            f"{r['pooled_prediction_spread_pct']:.1f} % | "
            + ", ".join(f"{e:+.1f}" for e in r["pooled_rep_errors_pct"]) + " |")
    return lines


def _split_lines(cases: list[dict[str, Any]]) -> list[str]:
    """Where each row's step goes, measured against predicted (rows with the split)."""
    rows = [r for r in cases if "split" in r]
    if not rows:
        return []
    lines = ["", "Where the step goes (medians; measured: the slowest rank's compute thread "
             "CPU time and the rest of its step; predicted: rank 0's compute and exposed "
             "communication):", "",
             "| layout | model | measured CPU ms | predicted compute ms | CPU error % "
             "| measured off-CPU ms | of it waiting for a core ms | predicted exposed comm ms "
             "| other threads' CPU ms | their wait for a core ms | its stamped collectives "
             "ms | half their arrival gaps ms |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]

    def ms(v: float | None) -> str:
        return "-" if v is None else f"{v / 1e3:.2f}"

    for r in rows:
        x = r["split"]
        cpu, comp = x["measured_cpu_us"], x["predicted_compute_us"]
        lines.append(f"| {r['layout']} | {r['model']} | {cpu / 1e3:.2f} | {comp / 1e3:.2f} | "
                     f"{_err_pct(comp, cpu):+.1f} | {x['measured_off_cpu_us'] / 1e3:.2f} | "
                     f"{ms(x.get('measured_runqueue_us'))} | "
                     f"{x['predicted_exposed_comm_us'] / 1e3:.2f} | "
                     f"{ms(x.get('measured_other_threads_cpu_us'))} | "
                     f"{ms(x.get('measured_other_threads_runqueue_us'))} | "
                     f"{ms(x.get('measured_collectives_us'))} | "
                     f"{ms(x.get('measured_half_arrival_gaps_us'))} |")
    return lines


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="accuracy.py", description=__doc__.split("\n\n")[0],
                                epilog="Prints a markdown table; writes JSON to --output.")
    p.add_argument("--reps", type=int, default=3, help="repetitions (default 3)")
    p.add_argument("--layouts", default="ddp,fsdp,tp,pp",
                   help="comma list of ddp,fsdp,tp,pp,zero1,zero2 (bert, resnet: ddp, fsdp "
                        "only; llama: ddp, fsdp, tp; zero1, zero2: DeepSpeed ZeRO-1/2 jobs of "
                        "bert and llama, needs deepspeed installed)")
    p.add_argument("--sizes", default="gpt-s,gpt-m,cnn,convattn,bert,resnet",
                   help=f"comma list of model sizes: {', '.join(SIZES)}")
    p.add_argument("--steps", type=int, default=20, help="steps per run (default 20; step times on a shared CPU host vary ±25 %%)")
    p.add_argument("--warmup", type=int, default=3, help="steps left out (default 3)")
    p.add_argument("--nproc", type=int, default=2, help="processes per real job (default 2)")
    p.add_argument("--diagnose", action="store_true",
                   help="first repetition: also capture each real job and compare")
    p.add_argument("--keep", default="", metavar="DIR", help="keep traces and runs under DIR")
    p.add_argument("--output", default=str(RESULTS), metavar="FILE",
                   help=f"result JSON (default {RESULTS.relative_to(REPO)})")
    p.add_argument("--comm-profile", default="", metavar="FILE",
                   help="use this profile instead of measuring one per repetition")
    p.add_argument("--profile-busy-us", type=float, default=0.0, metavar="US",
                   help="busy-mode profile: US of compute on every rank before each timed "
                        "collective (default 0: idle mode, a barrier before each)")
    p.add_argument("--second-profile-busy-us", type=float, default=None, metavar="US",
                   help="also measure a second profile per repetition in this mode (0: idle) "
                        "and report each case's error from it beside the first's")
    p.add_argument("--second-profile-replay", action="store_true",
                   help="also predict every case from a replay-comm profile: its simulated "
                        "step's collectives replayed on this host over the repetition's "
                        "profile; each case's error from it is reported beside the first's")
    p.add_argument("--profile-iters", type=int, default=DEFAULT_ITERS, metavar="N",
                   help=f"timed runs per size of the per-repetition profile (default "
                        f"{DEFAULT_ITERS}, as profile-comm; 15 before 2026-11-27)")
    p.add_argument("--profile-host-rounds", type=int_in(*HOST_ROUNDS_RANGE),
                   default=DEFAULT_ROUNDS, metavar="N",
                   help=f"samples of each host microbenchmark in the per-repetition profile "
                        f"(default {DEFAULT_ROUNDS}, as profile-comm --host-rounds; "
                        f"{HOST_ROUNDS_RANGE[0]}..{HOST_ROUNDS_RANGE[1]})")
    p.add_argument("--profile-sizes", default="1KB..16MB",
                   help="message sizes of the per-repetition profile (default 1KB..16MB)")
    p.add_argument("--traces", type=int, default=1, metavar="N",
                   help="one-process traces per model and repetition (default 1); N > 1 also "
                        "predicts every case from all N pooled (simulate TRACE TRACE2 ...: "
                        "each op's median) and reports it beside the first trace's")
    p.add_argument("--no-plain-single", action="store_true",
                   help="skip the uncaptured 1-process run (capture overhead)")
    p.add_argument("--cluster", default=None,
                   help="re-time to this cluster preset (default: none, the traced hardware)")
    p.add_argument("--malloc", choices=("default", "fixed"), default="default",
                   help="glibc malloc of every process the run starts: default (as the "
                        "environment has it) or fixed thresholds (MALLOC_MMAP_THRESHOLD_ 64 "
                        "MiB, MALLOC_TRIM_THRESHOLD_ 256 MiB), so that no process's "
                        "allocation history moves its compute (see the module docstring)")
    p.add_argument("--timeout", type=float, default=300.0, help="seconds per job (default 300)")
    p.add_argument("--merge", nargs="+", default=[], metavar="RESULT_JSON",
                   help="run no job: pool the repetitions of these runs' result JSONs (same "
                        "--steps and --warmup) into one table and --output")
    p.add_argument("--repredict", default="", metavar="RESULT_JSON",
                   help="run no job: predict again the repetitions of RESULT_JSON from the "
                        "traces and profiles its run kept under --keep, with today's models")
    p.add_argument("--drop-calibration", default="", metavar="KEYS",
                   help="with --repredict: leave these comma-separated calibration keys out "
                        "of every kept profile first (an ablation: replay_gap_us,"
                        "replay_work_us for a replay's measured waits; chain_gap_us,"
                        "chain_work_us,chain_work_fractions for the chained skew probe; "
                        "simulate then prices the waits as before 2026-11-29)")
    return p


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["--worker"]:
        return _worker(argv[1:])
    p = _parser()
    a = p.parse_args(argv)
    layouts = [x for x in a.layouts.split(",") if x]
    sizes = [x for x in a.sizes.split(",") if x]
    bad = [s for s in sizes if s not in SIZES]
    if bad:
        p.error(f"--sizes {','.join(bad)}: choose from {', '.join(SIZES)}")
    bad = [x for x in layouts if x not in LAYOUTS]
    if bad:
        p.error(f"--layouts {','.join(bad)}: choose from {', '.join(LAYOUTS)}")
    for name in ("reps", "steps", "nproc", "profile_iters", "traces"):
        if getattr(a, name) < 1:
            p.error(f"--{name.replace('_', '-')} must be >= 1")
    if not 0 <= a.warmup < a.steps:
        p.error(f"--warmup {a.warmup} must be in 0..--steps - 1")
    if a.second_profile_replay and a.second_profile_busy_us is not None:
        p.error("--second-profile-replay and --second-profile-busy-us: choose one second "
                "profile")
    cases = tuple(Case(layout=c.layout, size=c.size, nproc=a.nproc) for c in CASES
                  if c.layout in layouts and c.size in sizes)
    if "tiny" in sizes:
        cases += tuple(Case(layout=lay, size="tiny", nproc=a.nproc) for lay in layouts)
    output = Path(a.output)
    if a.merge:
        try:
            doc = merge([json.loads(Path(f).read_text()) for f in a.merge])
        except (OSError, ValueError, KeyError) as e:
            p.error(f"--merge: {e}")
        output.parent.mkdir(parents=True, exist_ok=True)
        output.write_text(json.dumps(doc, indent=1) + "\n")
        print(table(doc))
        print(f"\nwrote {output}")
        return 0
    if not cases and not a.repredict:
        have = ", ".join(f"{c.size}: {c.layout}" for c in CASES if c.size in sizes)
        p.error(f"no case for --layouts {a.layouts} on --sizes {a.sizes} (cases: {have})")
    if a.drop_calibration and not a.repredict:
        p.error("--drop-calibration: only with --repredict (an ablation of a kept run)")
    if a.repredict:
        if not a.keep:
            p.error("--repredict needs --keep DIR: where that run kept its files")
        doc = repredict(json.loads(Path(a.repredict).read_text()), Path(a.keep), a.cluster,
                        drop=tuple(k for k in a.drop_calibration.split(",") if k))
        output.parent.mkdir(parents=True, exist_ok=True)
        output.write_text(json.dumps(doc, indent=1) + "\n")
        print(table(doc))
        print(f"\nwrote {output}")
        return 0
    if a.keep and any(Path(a.keep).glob("rep[0-9]*")):
        # capture never overwrites a trace: a new run there would predict from the old ones
        p.error(f"--keep {a.keep} already holds a run's repetitions (rep0/ ...); give an "
                "empty or new directory")
    os.environ["OMP_NUM_THREADS"] = "1"  # the profiling processes inherit it
    if a.malloc == "fixed":
        os.environ.update(FIXED_MALLOC)  # every process the run starts inherits them
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(a.keep) if a.keep else Path(tmp)
        doc = run_benchmark(cases, reps=a.reps, steps=a.steps, warmup=a.warmup, root=root,
                            diagnose=a.diagnose, profile_sizes=a.profile_sizes,
                            profile_busy_us=a.profile_busy_us,
                            second_busy_us=a.second_profile_busy_us,
                            second_replay=a.second_profile_replay,
                            profile_iters=a.profile_iters,
                            profile_host_rounds=a.profile_host_rounds,
                            comm_profile=Path(a.comm_profile) if a.comm_profile else None,
                            plain_single=not a.no_plain_single, timeout=a.timeout,
                            cluster=a.cluster, traces=a.traces)
    doc["machine"]["malloc"] = malloc_settings()
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(json.dumps(doc, indent=1) + "\n")
    print(table(doc))
    print(f"\nwrote {output}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
