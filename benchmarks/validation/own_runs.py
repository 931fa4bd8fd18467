"""This repository's own measured runs: ``synth`` and ``simulate`` against real hardware.

Kept apart from the published at-scale rows (:mod:`benchmarks.validation.rows`): their
median / worst stay comparable across versions, and these rows check the one-GPU models
(:mod:`echo_sim.cost.kernels`, :mod:`echo_sim.sim.synth`, the memory model) on a machine
nobody tuned them to.

``h100-gpt12-fp32``: ``examples/train.py --layout single --model gpt --layers 12 --hidden
768 --heads 12 --seq 512 --vocab 8192 --micro-batch 8`` (fp32, ``torch.optim.AdamW``
foreach, eager attention) on one NVIDIA H100 80GB HBM3, torch 2.11+cu130. Files (copied
under ``data/h100-gpt12-fp32/`` from the shared reference recordings ``gpu-h100/``):

* ``gpt12_fp32_plain_steps.json`` — the script's own step times without capture
  (``time.perf_counter`` around a step that ends in ``loss.item()``); steps 0-1 are
  warm-up (CUDA context, cuBLAS handles, the optimizer's lazily created state), the
  measured figure is the median of steps 2+, with their min-max spread.
* ``echo/gpt12_fp32_single/0_0/`` — an echo_trace capture of the same run by an early
  echo_trace (before commit b63449a) whose ``peak_cuda_allocated_bytes`` is the highest
  *50 ms sample* of ``torch.cuda.memory_allocated`` in the step, not the allocator's
  high-water mark: a **lower bound** of the peak (step 3: 3,637,107,200 B, sampled during
  the backward of block 11). ``peak_cuda_reserved_bytes`` (5,616,173,056 B; no
  ``empty_cache`` in the script, so reserved never shrinks and every sample is the
  high-water mark of the segments, which hold every allocation) is an **upper bound**.
  Memory predictions are scored against that interval: error 0 inside, else the distance
  to the nearer bound relative to it.

* ``echo-cpu/gpt12_fp32_single/0_0/`` — the same script and shape captured on the CPU
  development machine by the current echo_trace (``examples/train.py ... --steps 3
  --capture --trace-start 1 --trace-end 2``, 2 threads), whose ``meta.json`` holds
  ``saved_activations``: autograd's saved tensors at the end of the first forward
  (:mod:`echo_trace.hooks.saved`). Activations are the same bytes on any device, so
  ``simulate --gpu h100`` of this capture predicts the H100 run's memory; it checks the
  saved-activation model the older GPU capture lacks (its leaf-module ``out_bytes`` miss the
  attention core's tensors).

The interval is wide, so each memory prediction is also compared with a **replay** of the
allocator's live bytes (:func:`replay_peak_bytes`): PyTorch's own
``torch.distributed._tools.mem_tracker.MemTracker`` over ``FakeTensorMode`` runs the
script's exact ops (``examples.models.GPT``, ``F.cross_entropy``, ``AdamW(foreach=True)``,
``zero_grad(set_to_none=True)``) for two steps at full size without computing anything,
and reports the peak of live tensor bytes. A replay, not a measurement: it counts no cuBLAS
workspace (the capture shows ~91 MiB of such memory at step boundaries) and uses the CPU
decompositions of the few composite ops whose CUDA ones differ.

Nothing here tunes a model: the rows only read predictions.
"""

from __future__ import annotations

import json
import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["OWN_RUNS", "OwnRun", "interval_error", "markdown_own", "predict_own",
           "replay_peak_bytes", "summarise_own"]

DATA = Path(__file__).resolve().parent / "data"


@dataclass(frozen=True, kw_only=True)
class OwnRun:
    """One measured single-GPU run of ``examples/train.py`` and its recordings."""

    id: str
    source: str
    layers: int
    hidden: int
    heads: int
    seq: int
    vocab: int
    micro_batch: int
    gpu: str
    dtype: str
    attention: str
    optimizer: str
    steps_file: str  # relative to DATA: the script's own step times (plain run)
    trace_dir: str  # relative to DATA: the echo_trace capture
    cpu_trace_dir: str = ""  # relative to DATA: a CPU capture of the same shape (or none)
    warmup_steps: int = 2
    trace_step: int = 3  # the capture step whose peaks bound the allocator peak

    def step_times_s(self) -> list[float]:
        data = json.loads((DATA / self.steps_file).read_text(encoding="utf-8"))
        return [float(x) for x in data["step_s"][self.warmup_steps:]]

    def memory_bounds(self) -> tuple[float, float]:
        """(lower, upper) bytes of the allocator peak from the capture's STEP event."""
        trace = json.loads((DATA / self.trace_dir / "0_0" / "trace.json").read_text("utf-8"))
        for e in trace["traceEvents"]:
            args = e.get("args", {})
            if e.get("cat") == "step" and args.get("step") == self.trace_step:
                return (float(args["peak_cuda_allocated_bytes"]),
                        float(args["peak_cuda_reserved_bytes"]))
        raise ValueError(f"{self.trace_dir}: no STEP event of step {self.trace_step}")


OWN_RUNS: tuple[OwnRun, ...] = (
    OwnRun(id="h100-gpt12-fp32", source="this repo: benchmarks/validation/data/"
           "h100-gpt12-fp32 (shared reference gpu-h100/echo, H100 80GB HBM3, torch 2.11)",
           layers=12, hidden=768, heads=12, seq=512, vocab=8192, micro_batch=8, gpu="h100",
           dtype="fp32", attention="eager", optimizer="foreach",
           steps_file="h100-gpt12-fp32/gpt12_fp32_plain_steps.json",
           trace_dir="h100-gpt12-fp32/echo/gpt12_fp32_single",
           cpu_trace_dir="h100-gpt12-fp32/echo-cpu/gpt12_fp32_single"),
)
"""Every own measured run (module docstring)."""


def interval_error(pred: float, lo: float, hi: float) -> float:
    """0 inside ``[lo, hi]``; else ``pred / bound - 1`` against the nearer bound."""
    if pred < lo:
        return pred / lo - 1.0
    if pred > hi:
        return pred / hi - 1.0
    return 0.0


def replay_peak_bytes(run: OwnRun) -> float | None:
    """Peak live bytes of two training steps of ``run`` replayed on fake tensors (module
    docstring); ``None`` without torch."""
    try:
        import torch
        import torch.nn.functional as F
        from torch._subclasses.fake_tensor import FakeTensorMode
        from torch.distributed._tools.mem_tracker import MemTracker
    except ImportError:
        return None
    from examples.models import GPT, GPTConfig

    with FakeTensorMode():
        model = GPT(GPTConfig(vocab_size=run.vocab, seq_len=run.seq, hidden=run.hidden,
                              layers=run.layers, heads=run.heads))
        opt = torch.optim.AdamW(model.parameters(), lr=3e-3, foreach=run.optimizer == "foreach",
                                fused=run.optimizer == "fused" or None)
        x = torch.randint(0, run.vocab, (run.micro_batch, run.seq))
        y = torch.randint(0, run.vocab, (run.micro_batch, run.seq))
        tracker = MemTracker()
        tracker.track_external(model, opt)
        with tracker:
            for i in range(2):  # the second step holds the optimizer state from the start
                opt.zero_grad(set_to_none=True)
                out = model(x)
                F.cross_entropy(out.reshape(-1, run.vocab), y.reshape(-1)).backward()
                opt.step()
                if i == 0:
                    tracker.reset_mod_stats()
        peak = tracker.get_tracker_snapshot("peak")
    return float(sum(v["Total"] for v in peak.values()))


def predict_own(run: OwnRun) -> dict[str, Any]:
    """Synthesise and simulate ``run``; simulate its capture; compare with the recordings."""
    from echo_sim.load import load_trace
    from echo_sim.sim.simulate import SimConfig, simulate
    from echo_sim.sim.synth import GPTShape, SynthConfig, synth_trace

    shape = GPTShape(layers=run.layers, hidden=run.hidden, heads=run.heads, seq=run.seq,
                     vocab=run.vocab, micro_batch=run.micro_batch)
    synth = synth_trace(SynthConfig(model=shape, gpu=run.gpu, dtype=run.dtype, steps=3,
                                    attention=run.attention, optimizer=run.optimizer))
    res = simulate(synth, SimConfig(), keep=False)
    recorded = simulate(load_trace(DATA / run.trace_dir), SimConfig(), keep=False)
    steps = run.step_times_s()
    meas_s = statistics.median(steps)
    pred_s = res.iteration_time_us / 1e6
    lo, hi = run.memory_bounds()
    synth_mem = float(res.max_peak_memory_bytes)
    rec_mem = float(recorded.max_peak_memory_bytes)
    replay = replay_peak_bytes(run)
    cpu_mem = None
    if run.cpu_trace_dir:
        cpu = simulate(load_trace(DATA / run.cpu_trace_dir), SimConfig(gpu=run.gpu), keep=False)
        cpu_mem = float(cpu.max_peak_memory_bytes)
    return {
        "id": run.id, "source": run.source, "gpu": run.gpu, "dtype": run.dtype,
        "attention": run.attention, "optimizer": run.optimizer,
        "measured_step_s": meas_s, "measured_step_min_s": min(steps),
        "measured_step_max_s": max(steps), "measured_steps": len(steps),
        "predicted_step_s": pred_s, "time_error": meas_s / pred_s - 1.0,
        "recorded_simulate_step_s": recorded.iteration_time_us / 1e6,
        "memory_lower_bytes": lo, "memory_upper_bytes": hi,
        "synth_peak_bytes": synth_mem, "synth_memory_error": interval_error(synth_mem, lo, hi),
        "recorded_peak_bytes": rec_mem,
        "recorded_memory_error": interval_error(rec_mem, lo, hi),
        "replay_peak_bytes": replay,
        "synth_vs_replay": synth_mem / replay - 1.0 if replay else None,
        "recorded_vs_replay": rec_mem / replay - 1.0 if replay else None,
        "cpu_capture_peak_bytes": cpu_mem,
        "cpu_capture_vs_replay": cpu_mem / replay - 1.0 if replay and cpu_mem else None,
        "synth_memory": res.ranks[0].memory,
    }


def summarise_own(results: list[dict[str, Any]]) -> dict[str, Any]:
    """Median and worst |error| of the own runs, per metric."""
    out: dict[str, Any] = {"rows": len(results)}
    for key in ("time_error", "synth_memory_error", "recorded_memory_error"):
        errs = [abs(r[key]) for r in results]
        out[key] = {"median_abs": statistics.median(errs) if errs else 0.0,
                    "worst_abs": max(errs, default=0.0)}
    return out


def markdown_own(results: list[dict[str, Any]]) -> str:
    """The own-runs table (time, memory vs the allocator-peak bounds)."""
    gb = 1e9
    lines = ["## This repository's own measured runs", "",
             "| run | measured step (median, min-max) | synth | error | simulate of capture | "
             "allocator peak bounds | synth memory | error | simulate memory (capture) | "
             "error |", "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in results:
        lines.append(
            f"| {r['id']} | {r['measured_step_s'] * 1e3:.1f} ms "
            f"({r['measured_step_min_s'] * 1e3:.1f}-{r['measured_step_max_s'] * 1e3:.1f}, "
            f"n={r['measured_steps']}) | {r['predicted_step_s'] * 1e3:.1f} ms | "
            f"{r['time_error']:+.1%} | {r['recorded_simulate_step_s'] * 1e3:.1f} ms | "
            f"{r['memory_lower_bytes'] / gb:.3f}-{r['memory_upper_bytes'] / gb:.3f} GB | "
            f"{r['synth_peak_bytes'] / gb:.3f} GB | {r['synth_memory_error']:+.1%} | "
            f"{r['recorded_peak_bytes'] / gb:.3f} GB | {r['recorded_memory_error']:+.1%} |")
    for r in results:
        if r["replay_peak_bytes"]:
            cpu = (f", simulate --gpu {r['gpu']} of the CPU capture with saved activations "
                   f"{r['cpu_capture_peak_bytes'] / gb:.3f} GB ({r['cpu_capture_vs_replay']:+.1%})"
                   if r.get("cpu_capture_vs_replay") is not None else "")
            lines += ["", f"{r['id']}: allocator replay (torch MemTracker, fake tensors) "
                      f"{r['replay_peak_bytes'] / gb:.3f} GB; synth {r['synth_vs_replay']:+.1%}, "
                      f"simulate of the GPU capture {r['recorded_vs_replay']:+.1%}{cpu}."]
    lines += ["", "Time error: measured / predicted - 1 (as the published rows). Memory error: "
              "0 inside the bounds, else against the nearer bound (own_runs.py docstring)."]
    return "\n".join(lines) + "\n"
