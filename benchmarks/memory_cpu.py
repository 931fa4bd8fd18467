"""Predicted peak memory of a captured trace against torch's own accounting, on CPU.

For each model: run two real training steps under PyTorch's
``torch.distributed._tools.mem_tracker.MemTracker`` (live tensor bytes by module and kind:
parameters, gradients, optimizer state, activations, temporaries; its peak over the second
step, which holds the optimizer state from the start) — the ground truth; then capture
three steps of the same model and batch with ``echo_trace.capture`` and predict the peak
with ``echo_sim simulate --gpu h100`` (re-timed for a GPU, so the CPU process's own memory,
the baseline, is left out and the prediction is tensor bytes only, like MemTracker's).

Models: Hugging Face GPT-2 (``transformers``, random weights from a config, no download;
bf16 autocast, the loss computed inside the model from ``labels``, the LM head tied to the
token embedding) at 2 and 12 layers, and the example GPT (fp32, untied head, loss outside
the model). None of them was used to build the memory model.

Usage::

    OMP_NUM_THREADS=2 python benchmarks/memory_cpu.py [--models hf-gpt2-2,hf-gpt2-12,gpt-4]
        [--batch 2] [--seq 256] [--out FILE]

Prints a markdown table and writes ``benchmarks/results/memory_cpu.json``.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

__all__ = ["MODELS", "main", "measure"]

RESULTS = REPO / "benchmarks" / "results" / "memory_cpu.json"
MODELS = ("hf-gpt2-2", "hf-gpt2-12", "gpt-4")


def _job(name: str, batch: int, seq: int) -> tuple[Any, Any, Callable[[Any, Any], None]]:
    """(model, optimizer, one training step) of ``name``, seeded."""
    import torch
    import torch.nn.functional as F

    torch.manual_seed(0)
    if name.startswith("hf-gpt2-"):
        from transformers import GPT2Config, GPT2LMHeadModel

        cfg = GPT2Config(n_layer=int(name.rsplit("-", 1)[1]), n_embd=768, n_head=12,
                         n_positions=max(seq, 1024), vocab_size=50257)
        model = GPT2LMHeadModel(cfg)
        x = torch.randint(0, cfg.vocab_size, (batch, seq))

        def step(m: Any, opt: Any) -> None:
            with torch.autocast("cpu", dtype=torch.bfloat16):
                out = m(input_ids=x, labels=x)
            out.loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
    else:
        from examples.models import GPT, GPTConfig

        layers = int(name.rsplit("-", 1)[1])
        gcfg = GPTConfig(vocab_size=8192, seq_len=seq, hidden=256, layers=layers, heads=4)
        model = GPT(gcfg)
        x = torch.randint(0, gcfg.vocab_size, (batch, seq))

        def step(m: Any, opt: Any) -> None:
            out = m(x)
            F.cross_entropy(out.reshape(-1, gcfg.vocab_size), x.reshape(-1)).backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
    model.train()
    return model, torch.optim.AdamW(model.parameters(), lr=1e-4), step


def measure(name: str, batch: int, seq: int) -> dict[str, Any]:
    """Ground truth and prediction for one model (module docstring)."""
    from torch.distributed._tools.mem_tracker import MemTracker

    import echo_trace
    from echo_sim.load import load_trace
    from echo_sim.sim.simulate import SimConfig, simulate

    model, opt, step = _job(name, batch, seq)
    tracker = MemTracker()
    tracker.track_external(model, opt)
    with tracker:
        for i in range(2):
            step(model, opt)
            if i == 0:
                tracker.reset_mod_stats()
    truth = float(sum(v["Total"] for v in tracker.get_tracker_snapshot("peak").values()))
    del model, opt, tracker
    model, opt, step = _job(name, batch, seq)
    with tempfile.TemporaryDirectory(prefix="echo_mem_") as d:
        t0 = time.perf_counter()
        with echo_trace.capture(d, start_step=1, end_step=3, memory_interval_ms=0) as cap:
            for _ in range(3):
                step(model, opt)
                cap.step()
        capture_s = time.perf_counter() - t0
        trace = load_trace(next(Path(d).glob("*_0")))
        res = simulate(trace, SimConfig(gpu="h100"))
        saved = (trace.ranks[0].meta.get("saved_activations") or {}).get("saved_bytes")
    pred = float(res.max_peak_memory_bytes)
    return {"model": name, "batch": batch, "seq": seq, "truth_bytes": truth,
            "predicted_bytes": pred, "error": pred / truth - 1.0,
            "predicted_parts": res.ranks[0].memory, "saved_activations_bytes": saved,
            "capture_s": round(capture_s, 2)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python benchmarks/memory_cpu.py",
        description="Predicted peak memory of a captured trace (simulate --gpu h100: tensor "
                    "bytes only) against MemTracker's live tensor bytes of the same training "
                    "steps, on CPU; writes benchmarks/results/memory_cpu.json.")
    ap.add_argument("--models", default=",".join(MODELS),
                    help=f"models to run (default {','.join(MODELS)})")
    ap.add_argument("--batch", type=int, default=2, help="micro-batch (default 2)")
    ap.add_argument("--seq", type=int, default=256, help="sequence length (default 256)")
    ap.add_argument("--out", default=str(RESULTS), help="results JSON")
    a = ap.parse_args(sys.argv[1:] if argv is None else argv)
    names = [n for n in a.models.split(",") if n]
    bad = [n for n in names if n not in MODELS]
    if bad or a.batch < 1 or a.seq < 2:
        ap.error(f"--models among {', '.join(MODELS)}; --batch >= 1; --seq >= 2")
    if any(n.startswith("hf-") for n in names):
        try:
            import transformers  # noqa: F401
        except ImportError:
            ap.error("the hf-gpt2 models need transformers (pip install transformers)")
    rows = [measure(n, a.batch, a.seq) for n in names]
    print("| model | micro-batch × seq | MemTracker peak | predicted | error |")
    print("|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['model']} | {r['batch']} × {r['seq']} | {r['truth_bytes'] / 1e9:.3f} GB | "
              f"{r['predicted_bytes'] / 1e9:.3f} GB | {r['error']:+.1%} |")
    out = Path(a.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({
        "benchmark": "memory_cpu", "date": time.strftime("%Y-%m-%dT%H:%M:%S"),
        "machine": {"python": platform.python_version(), "processor": platform.machine()},
        "rows": rows}, indent=1) + "\n")
    print(f"\nwritten: {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
