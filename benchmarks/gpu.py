"""GPU overhead of echo capture vs torch.profiler (CPU+CUDA), interleaved in one process.

Models (``--models``, default all):

* ``gpt``: the GPT example (examples/models.py) 12 layers × 768, seq 512, vocab 8192, fp32,
  micro-batch 8 — the shared H100 recordings' run (GPU-bound);
* ``hf_gpt2``: Hugging Face ``GPT2LMHeadModel`` built from ``GPT2Config()`` (124M, no hub
  download), bf16 autocast, seq 1024, micro-batch 8 (GPU-bound; needs ``transformers``);
* ``small``: the GPT example 4 × 128, seq 64, micro-batch 8 (launch-bound).

For each model, blocks of ``--steps`` timed steps run in turn in the modes ``plain``,
``capture`` (echo_trace.capture, window = the whole block) and ``profiler``
(``torch.profiler.profile`` with CPU and CUDA activities), in a rotating order for
``--reps`` repetitions, so drift hits every mode alike. A step is timed from its start to
``torch.cuda.synchronize()`` after ``optimizer.step()``. Each block's first step and the
step that closes the capture window (files written, Kineto results processed) are not
timed; their cost is reported as ``session_ms``. Overhead = median over repetitions of
(block median ÷ the plain block median of the same repetition) − 1.

Run on a CUDA machine::

    python -m benchmarks.gpu [--models gpt,hf_gpt2,small] [--reps 10] [--steps 10]

Writes ``benchmarks/results/gpu.json``. Without CUDA it prints why and exits 0.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import platform
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:  # `python benchmarks/gpu.py` from anywhere
    sys.path.insert(0, str(REPO))

__all__ = ["MODELS", "MODES", "GpuBenchConfig", "main", "overhead", "parse_args"]

MODELS = ("gpt", "hf_gpt2", "small")
MODES = ("plain", "capture", "profiler")
RESULTS = Path(__file__).resolve().parent / "results" / "gpu.json"


@dataclass(frozen=True, kw_only=True)
class GpuBenchConfig:
    """``reps`` repetitions × ``steps`` timed steps per mode and model."""

    models: tuple[str, ...] = MODELS
    reps: int = 10
    steps: int = 10
    seed: int = 0
    out: str = str(RESULTS)

    def __post_init__(self) -> None:
        for name in ("reps", "steps"):
            if getattr(self, name) < 1:
                raise ValueError(f"--{name} {getattr(self, name)} must be >= 1")
        bad = [m for m in self.models if m not in MODELS]
        if bad or not self.models:
            raise ValueError(f"--models {','.join(self.models)!r}: choose from "
                             f"{', '.join(MODELS)}")


def parse_args(argv: Sequence[str] | None = None) -> GpuBenchConfig:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--models", default=",".join(MODELS),
                    help=f"comma-separated, from {', '.join(MODELS)}")
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default=str(RESULTS))
    a = ap.parse_args(argv)
    try:
        return GpuBenchConfig(models=tuple(m for m in a.models.split(",") if m), reps=a.reps,
                              steps=a.steps, seed=a.seed, out=a.out)
    except ValueError as e:
        ap.error(str(e))
        raise  # unreachable: ap.error exits


def overhead(block_median_s: dict[str, list[float]]) -> dict[str, dict[str, float]]:
    """Per mode: median of its block medians (ms) and the overhead vs ``plain`` (the median
    over repetitions of block ÷ plain block − 1, in %)."""
    plain = block_median_s["plain"]
    out: dict[str, dict[str, float]] = {}
    for mode, blocks in block_median_s.items():
        ratios = [b / p for b, p in zip(blocks, plain, strict=True)]
        out[mode] = {"median_step_ms": 1e3 * statistics.median(blocks),
                     "overhead_pct": 100.0 * (statistics.median(ratios) - 1.0)}
    return out


# ------------------------------------------------------------------ models (CUDA only)
def _build(name: str, seed: int, device: str = "cuda",
           ) -> tuple[Any, Callable[[], None], dict[str, Any]]:
    """(model, one training step, description) on ``device`` (the benchmark: CUDA)."""
    import torch
    import torch.nn.functional as F

    torch.manual_seed(seed)
    dev = torch.device(device)
    if name == "hf_gpt2":
        from transformers import GPT2Config, GPT2LMHeadModel

        model: Any = GPT2LMHeadModel(GPT2Config())
        model = model.to(dev)
        batch, seq, vocab, dtype = 8, 1024, model.config.vocab_size, torch.bfloat16
        desc = {"model": "GPT2LMHeadModel(GPT2Config())", "micro_batch": batch, "seq": seq,
                "dtype": "bf16 autocast"}
    else:
        from examples.models import GPT, GPTConfig

        cfg = (GPTConfig(vocab_size=8192, seq_len=512, hidden=768, layers=12, heads=12)
               if name == "gpt" else GPTConfig(vocab_size=256, seq_len=64, hidden=128,
                                                  layers=4, heads=4))
        model = GPT(cfg).to(dev)
        batch, seq, vocab, dtype = 8, cfg.seq_len, cfg.vocab_size, None
        desc = {"model": f"GPT {cfg.layers}x{cfg.hidden}", "micro_batch": batch, "seq": seq,
                "dtype": "fp32"}
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    g = torch.Generator(device="cpu").manual_seed(seed)
    data = [torch.randint(vocab, (batch, seq + 1), generator=g).to(dev) for _ in range(4)]
    n = [0]

    def step() -> None:
        d = data[n[0] % len(data)]
        n[0] += 1
        x, y = d[:, :-1], d[:, 1:]
        ctx = (torch.autocast(dev.type, dtype=dtype) if dtype is not None
               else contextlib.nullcontext())
        with ctx:
            out = model(x)
            logits = out.logits if hasattr(out, "logits") else out
            loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(), y.reshape(-1))
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    return model, step, desc


def _mode(mode: str, tmp: Path, steps: int, model: Any, cuda: bool = True,
          ) -> contextlib.AbstractContextManager[Any]:
    if mode == "capture":
        import echo_trace

        return echo_trace.capture(out_dir=str(tmp), start_step=0, end_step=steps + 2,
                                  model=model)
    if mode == "profiler":
        from torch.profiler import ProfilerActivity, profile

        acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
        return profile(activities=acts)
    return contextlib.nullcontext()


def _bench_model(name: str, cfg: GpuBenchConfig, root: Path, device: str = "cuda",
                 ) -> dict[str, Any]:
    """The interleaved blocks for one model (``device="cpu"`` only to test the logic)."""
    import torch

    cuda = device == "cuda"
    sync: Callable[[], None] = torch.cuda.synchronize if cuda else (lambda: None)
    model, step, desc = _build(name, cfg.seed, device)
    for _ in range(3):  # warm-up: cuBLAS handles, allocator, AdamW state
        step()
    sync()
    blocks: dict[str, list[float]] = {m: [] for m in MODES}
    session: dict[str, list[float]] = {m: [] for m in MODES}
    for rep in range(cfg.reps):
        k = rep % len(MODES)
        for mode in MODES[k:] + MODES[:k]:
            tmp = root / f"{name}-{mode}-{rep}"
            t_enter = time.perf_counter()
            ctx = _mode(mode, tmp, cfg.steps, model, cuda)
            with ctx:
                step()  # first step of a block: not timed
                sync()
                fixed = time.perf_counter() - t_enter
                times = []
                for _ in range(cfg.steps):
                    t0 = time.perf_counter()
                    step()
                    sync()
                    times.append(time.perf_counter() - t0)
                t1 = time.perf_counter()
                step()  # closes the capture window: not timed
            sync()
            session[mode].append(1e3 * (fixed + time.perf_counter() - t1))
            blocks[mode].append(statistics.median(times))
            shutil.rmtree(tmp, ignore_errors=True)
    del model
    if cuda:
        torch.cuda.empty_cache()
    return {**desc, "modes": overhead(blocks),
            "session_ms": {m: statistics.median(v) for m, v in session.items()},
            "block_median_ms": {m: [1e3 * b for b in v] for m, v in blocks.items()}}


def run(cfg: GpuBenchConfig) -> dict[str, Any]:
    import torch

    root = Path(tempfile.mkdtemp(prefix="echo-gpu-bench-"))
    results: dict[str, Any] = {}
    try:
        for name in cfg.models:
            if name == "hf_gpt2":
                try:
                    import transformers  # noqa: F401
                except ImportError:
                    results[name] = {"skipped": "transformers is not installed"}
                    continue
            results[name] = _bench_model(name, cfg, root)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return {"config": asdict(cfg), "device": torch.cuda.get_device_name(),
            "torch": torch.__version__, "python": platform.python_version(),
            "results": results}


def main(argv: Sequence[str] | None = None) -> int:
    cfg = parse_args(argv)
    import torch

    if not torch.cuda.is_available():
        print("benchmarks.gpu: skipped: CUDA is not available on this machine "
              "(run it on a GPU host)")
        return 0
    out = run(cfg)
    Path(cfg.out).parent.mkdir(parents=True, exist_ok=True)
    Path(cfg.out).write_text(json.dumps(out, indent=1))
    print(f"| model | plain ms | capture % | profiler % |  ({out['device']})")
    print("|---|---|---|---|")
    for name, r in out["results"].items():
        if "modes" not in r:
            print(f"| {name} | {r.get('skipped')} | | |")
            continue
        m = r["modes"]
        print(f"| {name} | {m['plain']['median_step_ms']:.1f} | "
              f"{m['capture']['overhead_pct']:+.1f} | {m['profiler']['overhead_pct']:+.1f} |")
    print(f"wrote {cfg.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
