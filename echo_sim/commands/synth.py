"""``python -m echo_sim synth``: write a one-GPU echo trace of a model from its shape alone."""

from __future__ import annotations

from typing import Any

from echo_sim.commands.checks import float_in, int_in
from echo_sim.commands.outputs import check_output_dir, flag_errors
from echo_sim.commands.spec import Command, Result, arg
from echo_sim.cost.hardware import GPUS

__all__ = ["COMMAND", "MAX_LAYERS", "MAX_STEPS", "run"]

# Bounds of the flags: events written = layers x ops per layer x steps.
MAX_LAYERS = 4096
MAX_STEPS = 100


def run(opts: Any) -> Result:
    from echo_sim.sim.synth import GPTShape, SynthConfig, gpt_layer_flops, write_synth

    shape = GPTShape(layers=opts.layers, hidden=opts.hidden, heads=opts.heads, seq=opts.seq,
                     vocab=opts.vocab, micro_batch=opts.micro_batch, mlp_ratio=opts.mlp_ratio)
    cfg = SynthConfig(model=shape, gpu=opts.gpu, dtype=opts.dtype, efficiency=opts.efficiency,
                      steps=opts.steps, attention=opts.attention, optimizer=opts.optimizer)
    check_output_dir("--output", opts.output)
    with flag_errors("--output", opts.output):
        rank_dir = write_synth(cfg, opts.output, overwrite=opts.force)
    from echo_sim.load import load_trace

    trace = load_trace(rank_dir)
    meta = trace.ranks[0].meta
    lo, hi = trace.iteration_bounds(0, trace.steps[0])
    step_us = hi - lo
    b, s, h, v = shape.micro_batch, shape.seq, shape.hidden, shape.vocab
    step_flops = 3 * (shape.layers * gpt_layer_flops(shape) + 2.0 * b * s * h * v)
    model = meta["model"]
    data = {"output": str(rank_dir), "model": model, "gpu": cfg.gpu, "dtype": cfg.dtype,
            "efficiency": cfg.efficiency, "steps": trace.steps, "step_time_us": step_us,
            "step_flops": step_flops, "events": len(trace.events)}
    text = (f"synthetic GPT: {model['params'] / 1e9:.3f} B parameters "
            f"({shape.layers} layers, hidden {h}, {shape.heads} heads, seq {s}, vocab {v}), "
            f"micro-batch {b}\n"
            f"on one {cfg.gpu} ({cfg.dtype}, "
            f"{'kernel models' if cfg.efficiency is None else f'{cfg.efficiency:.0%} of peak'}): "
            f"{step_us / 1e3:.1f} ms per step, {step_flops / 1e12:.1f} TFLOP per step\n"
            f"wrote {len(trace.events)} events over steps {trace.steps} to {rank_dir}")
    return Result(text, data)


COMMAND = Command(
    name="synth",
    help="write a one-GPU trace of a model from its shape (no run needed)",
    description=(
        "Write what echo_trace would record on one GPU for a GPT of the given shape: per\n"
        "operator FW/BW events timed by a roofline on the GPU preset\n"
        "(max(flops / (peak * efficiency), bytes / memory bandwidth)), an AdamW update and\n"
        "STEP markers, with meta.json describing the model. `simulate` takes it like any\n"
        "trace."
    ),
    run=run,
    paths=0,
    epilog="example: python -m echo_sim synth --model gpt --layers 96 --hidden 12288 "
           "--heads 96 --seq 2048 --vocab 51200 --micro-batch 1 --gpu a100 -o gpt175b",
    args=(
        arg("--model", choices=["gpt"], default="gpt", help="model family (default gpt)"),
        arg("--layers", type=int_in(1, MAX_LAYERS), required=True, help="transformer blocks"),
        arg("--hidden", type=int_in(1, 2**20), required=True, help="hidden size"),
        arg("--heads", type=int_in(1, 2**16), required=True,
            help="attention heads (must divide --hidden)"),
        arg("--seq", type=int_in(1, 2**24), required=True, help="sequence length (tokens)"),
        arg("--vocab", type=int_in(1, 2**24), required=True, help="vocabulary size"),
        arg("--micro-batch", type=int_in(1, 2**20), default=1,
            help="sequences per micro-batch (default 1)"),
        arg("--mlp-ratio", type=int_in(1, 64), default=4, help="MLP width / hidden (default 4)"),
        arg("--gpu", default="a100", help=f"GPU preset: {', '.join(GPUS)} (default a100)"),
        arg("--dtype", choices=["fp32", "tf32", "bf16", "fp16"], default="bf16",
            help="parameter/activation dtype and peak rate used (default bf16)"),
        arg("--efficiency", type=float_in(0.0, 1.0, lo_open=True), default=None,
            help="one fraction of peak FLOP/s for every matmul (default: per-kernel shape "
                 "models, echo_sim.cost.kernels)"),
        arg("--attention", choices=["flash", "unfused", "eager"], default="flash",
            help="attention kernel: flash (SDPA), unfused (Megatron: materialised scores, "
                 "fused softmax) or eager (PyTorch ops one by one, examples/models.py)"),
        arg("--optimizer", choices=["fused", "foreach"], default="fused",
            help="AdamW implementation: fused (default; one pass: apex/Megatron, "
                 "fused=True) or foreach (torch.optim.AdamW's default: 8 passes)"),
        arg("--steps", type=int_in(1, MAX_STEPS), default=3, help="identical steps to write (default 3)"),
        arg("--output", "-o", required=True, help="directory to write (gets a 0_0/ rank dir)"),
        arg("--force", action="store_true", help="replace existing files in --output"),
    ),
)
