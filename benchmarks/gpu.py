"""GPU overhead of echo capture vs torch.profiler (CPU+CUDA): interleaved in one process, and
the zero-code path in one fresh process per mode.

Models (``--models``, default all):

* ``gpt``: the GPT example (examples/models.py) 12 layers × 768, seq 512, vocab 8192, fp32,
  micro-batch 8 — the shared H100 recordings' run (GPU-bound);
* ``hf_gpt2``: Hugging Face ``GPT2LMHeadModel`` built from ``GPT2Config()`` (124M, no hub
  download), bf16 autocast, seq 1024, micro-batch 8 (GPU-bound; needs ``transformers``);
* ``small``: the GPT example 4 × 128, seq 64, micro-batch 8 (launch-bound);
* ``llama``: a Llama-style decoder from ``transformers.LlamaConfig`` (12 layers, hidden 1024,
  16 heads, 4 KV heads, intermediate 2816, vocab 32000, SDPA), bf16 autocast, seq 1024,
  micro-batch 4 — the H200 recordings' ``llama_launch_bound`` (launch-bound; needs
  ``transformers``).

Path ``interleaved``: for each model, blocks of ``--steps`` timed steps run in turn in the
modes ``plain``, ``capture`` (echo_trace.capture, window = the whole block) and ``profiler``
(``torch.profiler.profile`` with CPU and CUDA activities), in a rotating order for
``--reps`` repetitions, so drift hits every mode alike. A step is timed from its start to
``torch.cuda.synchronize()`` after ``optimizer.step()``. Each block's first step and the
step that closes the capture window (files written, Kineto results processed) are not
timed; their cost is reported as ``session_ms``. Overhead = median over repetitions of
(block median ÷ the plain block median of the same repetition) − 1.

Path ``zerocode`` (benchmarks/gpu_zerocode.py): per model and repetition, three fresh
processes (``python -m benchmarks.gpu_child``) of ``--zerocode-steps`` steps: ``plain``,
``zerocode`` (``TRACE_ON=1``, window steps 3..5, as a user runs it) and ``profiler``
(torch.profiler over the same steps). Reported: the in-window overhead, the steps that open
(2) and close (5) the window as ratios over the plain median, and the steps after the window.

Run on a CUDA machine::

    python -m benchmarks.gpu [--models gpt,hf_gpt2,small,llama] [--reps 10] [--steps 10]
        [--paths interleaved,zerocode] [--zerocode-steps 12] [--zerocode-reps 1]

Writes ``benchmarks/results/gpu.json`` (after every model, so a cut-off run keeps what it
measured). Without CUDA it prints why and exits 0; ``--device cpu`` runs the same logic on
CPU with tiny models (plumbing tests only: its timings mean nothing).
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

__all__ = ["DEVICES", "MODELS", "MODES", "PATHS", "GpuBenchConfig", "main", "micro_batch",
           "overhead", "parse_args"]

MODELS = ("gpt", "hf_gpt2", "small", "llama")
MODES = ("plain", "capture", "profiler")
PATHS = ("interleaved", "zerocode")
DEVICES = ("cuda", "cpu")
HF_MODELS = ("hf_gpt2", "llama")  # need transformers
RESULTS = Path(__file__).resolve().parent / "results" / "gpu.json"

from benchmarks.gpu_zerocode import WINDOW, measure_zerocode  # noqa: E402 (after sys.path)


@dataclass(frozen=True, kw_only=True)
class GpuBenchConfig:
    """``reps`` repetitions × ``steps`` timed steps per mode and model."""

    models: tuple[str, ...] = MODELS
    reps: int = 10
    steps: int = 10
    seed: int = 0
    out: str = str(RESULTS)
    paths: tuple[str, ...] = PATHS
    zerocode_steps: int = 12
    zerocode_reps: int = 1
    device: str = "cuda"

    def __post_init__(self) -> None:
        for name in ("reps", "steps", "zerocode_reps"):
            if getattr(self, name) < 1:
                raise ValueError(f"--{name.replace('_', '-')} {getattr(self, name)} must be >= 1")
        least = WINDOW[1] + 2  # two steps after the window at least
        if self.zerocode_steps < least:
            raise ValueError(f"--zerocode-steps {self.zerocode_steps} must be >= {least} "
                             f"(window steps {WINDOW[0]}..{WINDOW[1] - 1}, then 2 after it)")
        bad = [m for m in self.models if m not in MODELS]
        if bad or not self.models:
            raise ValueError(f"--models {','.join(self.models)!r}: choose from "
                             f"{', '.join(MODELS)}")
        bad = [p for p in self.paths if p not in PATHS]
        if bad or not self.paths:
            raise ValueError(f"--paths {','.join(self.paths)!r}: choose from {', '.join(PATHS)}")
        if self.device not in DEVICES:
            raise ValueError(f"--device {self.device!r}: choose from {', '.join(DEVICES)}")


def parse_args(argv: Sequence[str] | None = None) -> GpuBenchConfig:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--models", default=",".join(MODELS),
                    help=f"comma-separated, from {', '.join(MODELS)}")
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default=str(RESULTS))
    ap.add_argument("--paths", default=",".join(PATHS),
                    help=f"comma-separated, from {', '.join(PATHS)}")
    ap.add_argument("--zerocode-steps", type=int, default=12,
                    help="steps per zero-code child (window steps 3..5; default 12)")
    ap.add_argument("--zerocode-reps", type=int, default=1,
                    help="repetitions of the three zero-code children per model (default 1)")
    ap.add_argument("--device", default="cuda", choices=DEVICES,
                    help="cpu: tiny models, to test the plumbing only (default cuda)")
    a = ap.parse_args(argv)
    try:
        return GpuBenchConfig(models=tuple(m for m in a.models.split(",") if m), reps=a.reps,
                              steps=a.steps, seed=a.seed, out=a.out,
                              paths=tuple(p for p in a.paths.split(",") if p),
                              zerocode_steps=a.zerocode_steps, zerocode_reps=a.zerocode_reps,
                              device=a.device)
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
def micro_batch(name: str, tiny: bool = False) -> int:
    """Samples per step of model ``name`` (``tiny``: the CPU plumbing sizes)."""
    if tiny and name != "small":
        return 2
    return 4 if name == "llama" else 8


def _build(name: str, seed: int, device: str = "cuda", tiny: bool = False,
           ) -> tuple[Any, Callable[[], None], dict[str, Any]]:
    """(model, one training step, description) on ``device`` (the benchmark: CUDA).

    ``tiny`` shrinks ``gpt``, ``hf_gpt2`` and ``llama`` to a few layers of width 64 so the
    same code runs in seconds on CPU (``small`` is already small)."""
    import torch
    import torch.nn.functional as F

    torch.manual_seed(seed)
    dev = torch.device(device)
    batch = micro_batch(name, tiny)
    if name == "hf_gpt2":
        from transformers import GPT2Config, GPT2LMHeadModel

        gcfg = (GPT2Config(n_layer=2, n_embd=64, n_head=2, vocab_size=512, n_positions=64,
                           bos_token_id=0, eos_token_id=0) if tiny else GPT2Config())
        model: Any = GPT2LMHeadModel(gcfg)
        model = model.to(dev)
        seq, vocab, dtype = (32 if tiny else 1024), gcfg.vocab_size, torch.bfloat16
        desc = {"model": f"GPT2LMHeadModel({'tiny' if tiny else 'GPT2Config()'})",
                "micro_batch": batch, "seq": seq, "dtype": "bf16 autocast"}
    elif name == "llama":
        from transformers import LlamaConfig, LlamaForCausalLM

        # The H200 recordings' llama_launch_bound shape (how/llama_train.py).
        lcfg = (LlamaConfig(vocab_size=512, hidden_size=64, intermediate_size=176,
                            num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                            max_position_embeddings=64) if tiny else
                LlamaConfig(vocab_size=32000, hidden_size=1024, intermediate_size=2816,
                            num_hidden_layers=12, num_attention_heads=16,
                            num_key_value_heads=4, max_position_embeddings=1024))
        lcfg._attn_implementation = "sdpa"
        model = LlamaForCausalLM(lcfg)
        model = model.to(dev)
        seq, vocab, dtype = (32 if tiny else 1024), lcfg.vocab_size, torch.bfloat16
        desc = {"model": f"LlamaForCausalLM {lcfg.num_hidden_layers}x{lcfg.hidden_size} "
                         f"({lcfg.num_attention_heads} heads, {lcfg.num_key_value_heads} KV)",
                "micro_batch": batch, "seq": seq, "dtype": "bf16 autocast"}
    else:
        from examples.models import GPT, GPTConfig

        if name == "gpt" and not tiny:
            cfg = GPTConfig(vocab_size=8192, seq_len=512, hidden=768, layers=12, heads=12)
        elif name == "gpt":
            cfg = GPTConfig(vocab_size=256, seq_len=32, hidden=64, layers=2, heads=2)
        else:
            cfg = GPTConfig(vocab_size=256, seq_len=64, hidden=128, layers=4, heads=4)
        model = GPT(cfg).to(dev)
        seq, vocab, dtype = cfg.seq_len, cfg.vocab_size, None
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
    model, step, desc = _build(name, cfg.seed, device, tiny=not cuda)
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


def _write(out: dict[str, Any], path: str) -> None:
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_text(json.dumps(out, indent=1))


def run(cfg: GpuBenchConfig) -> dict[str, Any]:
    """Every model through every path of ``cfg``; the JSON is rewritten after each model."""
    import torch

    cuda = cfg.device == "cuda"
    root = Path(tempfile.mkdtemp(prefix="echo-gpu-bench-"))
    results: dict[str, Any] = {}
    out = {"config": asdict(cfg), "device": torch.cuda.get_device_name() if cuda else "cpu",
           "torch": torch.__version__, "python": platform.python_version(),
           "window": {"start_step": WINDOW[0], "end_step": WINDOW[1]}, "results": results}
    try:
        for name in cfg.models:
            if name in HF_MODELS:
                try:
                    import transformers  # noqa: F401
                except ImportError:
                    results[name] = {"skipped": "transformers is not installed"}
                    continue
            res: dict[str, Any] = {}
            if "interleaved" in cfg.paths:
                res.update(_bench_model(name, cfg, root, cfg.device))
            if "zerocode" in cfg.paths:
                res["zerocode"] = measure_zerocode(
                    name, steps=cfg.zerocode_steps, reps=cfg.zerocode_reps, device=cfg.device,
                    tiny=not cuda, seed=cfg.seed, root=root,
                    env={"TRACE_MICRO_BATCH": str(micro_batch(name, not cuda))})
            results[name] = res
            _write(out, cfg.out)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return out


def _pct(v: Any) -> str:
    return f"{v:+.1f}" if isinstance(v, int | float) else "—"


def _ratio(v: Any) -> str:
    return f"×{v:.2f}" if isinstance(v, int | float) else "—"


def table(out: dict[str, Any]) -> list[str]:
    """The results as markdown table lines (interleaved and zero-code columns)."""
    lines = [f"| model | plain ms | capture % | profiler % | zero-code plain ms | in-window % | "
             f"opening | closing | after-window % | profiler in-window % |  ({out['device']})",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for name, r in out["results"].items():
        if "skipped" in r:
            lines.append(f"| {name} | {r['skipped']} | | | | | | | | |")
            continue
        m = r.get("modes", {})
        z = r.get("zerocode", {})
        zc, zp = z.get("zerocode", {}), z.get("profiler", {})
        cells = [f"{m['plain']['median_step_ms']:.1f}" if m else "—",
                 _pct(m.get("capture", {}).get("overhead_pct")),
                 _pct(m.get("profiler", {}).get("overhead_pct")),
                 f"{z['plain_median_ms']:.1f}" if "plain_median_ms" in z else
                 (z.get("error", "—") if z else "—"),
                 _pct(zc.get("in_window_pct")), _ratio(zc.get("opening_ratio")),
                 _ratio(zc.get("closing_ratio")), _pct(zc.get("after_pct")),
                 _pct(zp.get("in_window_pct"))]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    cfg = parse_args(argv)
    import torch

    if cfg.device == "cuda" and not torch.cuda.is_available():
        print("benchmarks.gpu: skipped: CUDA is not available on this machine "
              "(run it on a GPU host)")
        return 0
    out = run(cfg)
    _write(out, cfg.out)
    print("\n".join(table(out)))
    print(f"wrote {cfg.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
