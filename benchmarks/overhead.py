"""Capture overhead: step time with ``echo_trace.capture`` ÷ the same loop without it.

Also ``torch.profiler.profile`` (CPU activities) on the same loop, for comparison, and
capture with its memory sampler off (to show the sampler's share). One process, one
model, one optimizer: blocks of steps run in turn without capture, with capture and
under the profiler, in a rotating order, for many repetitions, so drift and
noise from other processes hit every mode alike. Reported per mode: the median step time
over all timed steps, and the overhead as the median over repetitions of
(mode's block median ÷ plain block median of the same repetition) − 1.

Each block runs ``steps + 2`` optimizer steps and times the middle ``steps``: the first
step of a block (hooks installed lazily, profiler warm-up) and the last (capture writes
its files right after the optimizer step that closes the window) are not timed, in every
mode. Capture runs at its default settings (leaf modules, memory sampler every 10 ms).
The fixed cost of entering + leaving (writing files / building the profiler's tables) is
reported separately as ``session_ms``.

Run::

    OMP_NUM_THREADS=1 python -m benchmarks.overhead [--reps 20] [--steps 8] [--out FILE]

Writes ``benchmarks/results/overhead.json`` and prints a markdown table.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:  # `python benchmarks/overhead.py` from anywhere
    sys.path.insert(0, str(REPO))

from examples.models import GPT, GPTConfig, token_batch  # noqa: E402

__all__ = ["BenchConfig", "MODES", "main", "parse_flags", "run_benchmark"]

MODES = ("plain", "capture", "capture_nomem", "profiler")
CLOCKS = ("wall", "cpu")  # wall time; CPU time of this process (all its threads)
RESULTS = Path(__file__).resolve().parent / "results" / "overhead.json"


@dataclass(frozen=True, kw_only=True)
class BenchConfig:
    """``reps`` repetitions × ``steps`` timed steps per mode; ``threads`` intra-op threads."""

    reps: int = 20
    steps: int = 8
    batch: int = 8
    threads: int = 1
    seed: int = 0
    out: str = str(RESULTS)

    def __post_init__(self) -> None:
        for name in ("reps", "steps", "batch", "threads"):
            if getattr(self, name) < 1:
                raise ValueError(f"--{name} {getattr(self, name)} must be >= 1")


def _parser() -> argparse.ArgumentParser:
    d = BenchConfig()
    ap = argparse.ArgumentParser(
        prog="python -m benchmarks.overhead",
        description="Capture overhead on the GPT example: step time with echo_trace.capture "
                    "(and with its memory sampler off, and under torch.profiler) against the "
                    "same loop without it, in rotating blocks of steps within one process.")
    ap.add_argument("--reps", type=int, default=d.reps,
                    help=f"repetitions: blocks per mode (default {d.reps})")
    ap.add_argument("--steps", type=int, default=d.steps,
                    help=f"timed steps per block (default {d.steps})")
    ap.add_argument("--batch", type=int, default=d.batch,
                    help=f"micro-batch of the GPT example (default {d.batch})")
    ap.add_argument("--threads", type=int, default=d.threads,
                    help=f"torch intra-op threads (default {d.threads})")
    ap.add_argument("--seed", type=int, default=d.seed, help="seed of model and batches")
    ap.add_argument("--out", default=d.out, help="results JSON (default "
                    "benchmarks/results/overhead.json)")
    return ap


def parse_flags(argv: Sequence[str]) -> BenchConfig:
    """The :class:`BenchConfig` of the command line (``--help`` lists the flags; argparse
    exits with status 2 on a bad one, and so does an impossible value)."""
    ap = _parser()
    a = ap.parse_args(list(argv))
    try:
        return BenchConfig(reps=a.reps, steps=a.steps, batch=a.batch, threads=a.threads,
                           seed=a.seed, out=a.out)
    except ValueError as e:
        ap.error(str(e))
        raise  # unreachable: error() exits


class Loop:
    """The GPT example's training step on pre-generated batches (no data cost in the timing)."""

    def __init__(self, cfg: BenchConfig) -> None:
        torch.manual_seed(cfg.seed)
        self.gpt = GPTConfig()
        self.model = GPT(self.gpt)
        self.opt = torch.optim.AdamW(self.model.parameters(), lr=3e-4)
        self.batches = [token_batch(self.gpt, cfg.batch, seed=cfg.seed, step=i)
                        for i in range(16)]
        self.n = 0

    def step(self) -> tuple[float, float]:
        """One optimizer step; returns its wall time and this process's CPU time (s)."""
        x, y = self.batches[self.n % len(self.batches)]
        self.n += 1
        c0 = time.process_time()
        t0 = time.perf_counter()
        self.opt.zero_grad(set_to_none=True)
        logits = self.model(x)
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))
        loss.backward()
        self.opt.step()
        return time.perf_counter() - t0, time.process_time() - c0


def _plain(_tmp: Path) -> contextlib.AbstractContextManager[Any]:
    return contextlib.nullcontext()


def _capture(steps: int, **settings: Any,
             ) -> Callable[[Path], contextlib.AbstractContextManager[Any]]:
    import echo_trace

    def make(tmp: Path) -> contextlib.AbstractContextManager[Any]:
        # window = the whole block: step 0 opens it, the optimizer step of step
        # ``steps + 1`` closes it and writes the files (that step is not timed)
        return echo_trace.capture(out_dir=str(tmp), start_step=0, end_step=steps + 2,
                                  **settings)

    return make


def _profiler(_tmp: Path) -> contextlib.AbstractContextManager[Any]:
    from torch.profiler import ProfilerActivity, profile

    return profile(activities=[ProfilerActivity.CPU])


@contextlib.contextmanager
def _timed(ctx: contextlib.AbstractContextManager[Any], spent: list[float]) -> Iterator[None]:
    """Enter/exit ``ctx`` and add the time spent entering and leaving to ``spent``."""
    t0 = time.perf_counter()
    with ctx:
        spent.append(time.perf_counter() - t0)
        yield
        t1 = time.perf_counter()
    spent.append(time.perf_counter() - t1)


def run_benchmark(cfg: BenchConfig) -> dict[str, Any]:
    """Run the interleaved blocks; return the results (also what is written as JSON)."""
    torch.set_num_threads(cfg.threads)
    loop = Loop(cfg)
    makers = {"plain": _plain, "capture": _capture(cfg.steps),
              "capture_nomem": _capture(cfg.steps, memory_interval_ms=0), "profiler": _profiler}
    step_s: dict[str, dict[str, list[float]]] = {k: {m: [] for m in MODES} for k in CLOCKS}
    block_median_s: dict[str, dict[str, list[float]]] = {k: {m: [] for m in MODES}
                                                        for k in CLOCKS}
    session_s: dict[str, list[float]] = {m: [] for m in MODES}
    root = Path(tempfile.mkdtemp(prefix="echo-overhead-"))
    try:
        for _ in range(3):  # warm-up: allocator, AdamW state, lazy init
            loop.step()
        for rep in range(cfg.reps):
            k = rep % len(MODES)
            order = MODES[k:] + MODES[:k]  # rotate, so no mode always runs first
            for mode in order:
                tmp = root / f"{mode}{rep}"
                spent: list[float] = []
                with _timed(makers[mode](tmp), spent):
                    loop.step()  # first step of a block: not timed
                    times = [loop.step() for _ in range(cfg.steps)]
                    loop.step()  # closes the capture window (writes files): not timed
                for i, clock in enumerate(CLOCKS):
                    ts = [t[i] for t in times]
                    step_s[clock][mode].extend(ts)
                    block_median_s[clock][mode].append(statistics.median(ts))
                session_s[mode].append(sum(spent))
                shutil.rmtree(tmp, ignore_errors=True)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return _summary(cfg, loop, step_s, block_median_s, session_s)


def _quantile(xs: list[float], q: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, max(0, round(q * (len(s) - 1))))]


def _stats(step_s: dict[str, list[float]], block_median_s: dict[str, list[float]],
           ) -> dict[str, dict[str, float]]:
    plain = block_median_s["plain"]
    out: dict[str, dict[str, float]] = {}
    for m in MODES:
        ratios = [b / p for b, p in zip(block_median_s[m], plain, strict=True)]
        out[m] = {
            "median_step_ms": 1e3 * statistics.median(step_s[m]),
            "p10_step_ms": 1e3 * _quantile(step_s[m], 0.1),
            "p90_step_ms": 1e3 * _quantile(step_s[m], 0.9),
            "overhead_pct": 100 * (statistics.median(ratios) - 1),
            "overhead_pct_p25": 100 * (_quantile(ratios, 0.25) - 1),
            "overhead_pct_p75": 100 * (_quantile(ratios, 0.75) - 1),
            "ratio_of_medians": statistics.median(step_s[m]) / statistics.median(step_s["plain"]),
        }
    return out


def _summary(cfg: BenchConfig, loop: Loop, step_s: dict[str, dict[str, list[float]]],
             block_median_s: dict[str, dict[str, list[float]]],
             session_s: dict[str, list[float]]) -> dict[str, Any]:
    load = os.getloadavg() if hasattr(os, "getloadavg") else None
    return {
        "benchmark": "capture overhead (interleaved, one process)",
        "config": asdict(cfg),
        "model": {"name": "GPT", **asdict(loop.gpt),
                  "params": sum(p.numel() for p in loop.model.parameters())},
        "machine": {"python": platform.python_version(), "torch": torch.__version__,
                    "cpu": platform.processor() or platform.machine(),
                    "cpu_count": os.cpu_count(), "loadavg": load},
        "session_ms": {m: 1e3 * statistics.median(session_s[m]) for m in MODES},
        "wall": _stats(step_s["wall"], block_median_s["wall"]),
        "cpu": _stats(step_s["cpu"], block_median_s["cpu"]),
        "block_median_step_ms": {k: {m: [1e3 * x for x in v[m]] for m in MODES}
                                 for k, v in block_median_s.items()},
    }


def markdown(result: dict[str, Any]) -> str:
    """The results as a markdown table (wall-clock and process-CPU step times)."""
    cfg = result["config"]
    load = result["machine"]["loadavg"]
    lines = [
        f"Capture overhead, GPT example ({result['model']['params']:,} params, batch "
        f"{cfg['batch']}), CPU, {cfg['threads']} thread(s), {cfg['reps']} interleaved "
        f"repetitions x {cfg['steps']} timed steps per mode; load average "
        + ("n/a" if load is None else "/".join(f"{x:.1f}" for x in load)),
        "",
        "| mode | clock | median step (ms) | p10-p90 (ms) | overhead vs plain "
        "(median, IQR) | enter+exit (ms) |",
        "|---|---|---|---|---|---|",
    ]
    labels = {"plain": "no capture", "capture": "echo_trace.capture (defaults)",
              "capture_nomem": "echo_trace.capture, memory sampler off",
              "profiler": "torch.profiler (CPU)"}
    for m in MODES:
        for clock in CLOCKS:
            r = result[clock][m]
            over = ("—" if m == "plain" else
                    f"{r['overhead_pct']:+.1f}% ({r['overhead_pct_p25']:+.1f} .. "
                    f"{r['overhead_pct_p75']:+.1f})")
            lines.append(f"| {labels[m]} | {clock} | {r['median_step_ms']:.2f} | "
                         f"{r['p10_step_ms']:.2f}-{r['p90_step_ms']:.2f} | {over} | "
                         f"{result['session_ms'][m]:.1f} |")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    cfg = parse_flags(sys.argv[1:] if argv is None else argv)
    result = run_benchmark(cfg)
    out = Path(cfg.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=1) + "\n")
    print(markdown(result))
    print(f"\nwritten: {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
