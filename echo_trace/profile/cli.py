"""``python -m echo_trace.profile`` (also ``echo-trace profile``): trace a model by name.

Runtime mode trains ``--warmup`` untraced steps then ``--num-repeats`` captured steps and
prints where the trace went and the median step time; graph mode writes the workload graph
(operator graph via ``torch.export``, FLOPs and bytes per operator, timed by a roofline)
without running a training step, plus a Chakra execution trace for ASTRA-sim.

    python -m echo_trace.profile --framework huggingface --model gpt2 --tiny \\
        --batch-size 2 --seq-len 64 --num-repeats 3 --path traces/gpt2
    python -m echo_trace.profile --framework pytorch --model-source local \\
        --model mypkg.models:make_model --mode graph --path traces/mine

``--nproc N`` starts N processes with torchrun (gloo on CPU, NCCL on CUDA; DDP or DeepSpeed).
Bad input prints one line naming the flag and exits with status 2.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from collections.abc import Sequence

from echo_trace.profile.models import ProfileError, build_model, parse_overrides

__all__ = ["build_parser", "main"]

FRAMEWORKS = ("pytorch", "huggingface", "deepspeed", "megatron")


def _framework(value: str) -> str:
    """``--framework``, in echo's spelling or the Echo tracer's (``PyTorch``,
    ``DeepSpeed``, ``Megatron-LM``)."""
    v = value.strip().lower()
    return {"megatron-lm": "megatron", "megatron_lm": "megatron"}.get(v, v)


def _mode(value: str) -> str:
    """``--mode``, in echo's spelling or the Echo tracer's (``runtime_profiling``,
    ``graph_profiling``)."""
    return value.strip().lower().removesuffix("_profiling")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="echo-trace profile",
        description="Trace a model by name: a few training steps (runtime) or its operator "
                    "graph (graph), written as an echo trace that echo_sim reads.")
    p.add_argument("--framework", type=_framework, choices=FRAMEWORKS, default="pytorch",
                   help="training stack (default pytorch; the Echo tracer's PyTorch, "
                        "DeepSpeed, Megatron-LM spellings too)")
    p.add_argument("--model", required=True,
                   help="transformers model type or local config dir (--model-source "
                        "huggingface), or MODULE:CALLABLE (--model-source local)")
    p.add_argument("--model-source", "--model_source", choices=("local", "huggingface"),
                   default=None,
                   help="where --model comes from (default: huggingface for --framework "
                        "huggingface/megatron, else local)")
    p.add_argument("--batch-size", "--batchsize", "--batch_size", type=int, default=2,
                   help="micro-batch size (default 2)")
    p.add_argument("--seq-len", type=int, default=64, help="sequence length (default 64)")
    p.add_argument("--num-repeats", "--num_repeats", type=int, default=3,
                   help="captured steps (runtime) or steps written (graph) (default 3)")
    p.add_argument("--warmup", type=int, default=2, help="untraced warm-up steps (default 2)")
    p.add_argument("--steps", type=int, default=None,
                   help="total training steps (default warmup + num-repeats; extra steps run "
                        "untraced after the captured ones)")
    p.add_argument("--path", default="traces", help="output directory (default ./traces)")
    p.add_argument("--mode", type=_mode, choices=("runtime", "graph"), default="runtime",
                   help="runtime: train and capture; graph: operator graph, no training "
                        "(the Echo tracer's runtime_profiling / graph_profiling too)")
    p.add_argument("--nproc", type=int, default=1,
                   help="runtime: processes to launch with torchrun; graph: data-parallel "
                        "ranks in the Chakra export (default 1)")
    p.add_argument("--tiny", action="store_true",
                   help="shrink a transformers config (2 layers, hidden 64, 2 heads) for CI")
    p.add_argument("--config-overrides", default=None,
                   help="transformers config attributes, e.g. n_layer=2,n_embd=64")
    p.add_argument("--zero-stage", type=int, default=1, choices=(0, 1, 2, 3),
                   help="DeepSpeed ZeRO stage (default 1); graph mode: the collectives of "
                        "the Chakra export with --framework deepspeed")
    p.add_argument("--overwrite", action="store_true", help="replace files already in --path")
    p.add_argument("--gzip", action="store_true", help="write trace.json.gz")
    g = p.add_argument_group("graph mode roofline (default: one A100, bf16 dense)")
    g.add_argument("--peak-tflops", type=float, default=312.0,
                   help="peak matmul TFLOP/s (default 312, A100 bf16 dense)")
    g.add_argument("--mem-bw-gbs", type=float, default=2039.0,
                   help="memory bandwidth GB/s (default 2039, A100 80GB SXM)")
    g.add_argument("--efficiency", type=float, default=0.5,
                   help="fraction of peak FLOP/s reached (default 0.5)")
    g.add_argument("--device-name", default="a100",
                   help="device the roofline figures describe, written to meta.json so "
                        "echo_sim can rescale (default a100)")
    return p


def _check(opts: argparse.Namespace) -> None:
    for flag, value, low in (("--batch-size", opts.batch_size, 1), ("--seq-len", opts.seq_len, 1),
                             ("--num-repeats", opts.num_repeats, 1), ("--warmup", opts.warmup, 0),
                             ("--nproc", opts.nproc, 1)):
        if value < low:
            raise ProfileError(f"{flag} {value}: expected an integer >= {low}")
    if opts.steps is not None and opts.steps < opts.warmup + opts.num_repeats:
        raise ProfileError(f"--steps {opts.steps}: expected >= --warmup + --num-repeats "
                           f"({opts.warmup + opts.num_repeats})")
    if not 0 < opts.efficiency <= 1:
        raise ProfileError(f"--efficiency {opts.efficiency}: expected a number in (0, 1]")
    if opts.peak_tflops <= 0 or opts.mem_bw_gbs <= 0:
        raise ProfileError("--peak-tflops and --mem-bw-gbs must be > 0")
    if opts.framework == "megatron" and opts.model_source == "local":
        raise ProfileError("--framework megatron builds megatron-core's GPTModel: use "
                           "--model gpt (no --model-source local)")


def _launch(opts: argparse.Namespace, argv: Sequence[str]) -> int:
    """Re-run this command under torchrun with ``--nproc`` processes."""
    child = [a for a in argv]
    i = 0
    out: list[str] = []
    while i < len(child):  # drop --nproc N / --nproc=N
        if child[i] == "--nproc":
            i += 2
            continue
        if child[i].startswith("--nproc="):
            i += 1
            continue
        out.append(child[i])
        i += 1
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone",
           f"--nproc_per_node={opts.nproc}", "-m", "echo_trace.profile", *out]
    return subprocess.run(cmd, check=False).returncode


def _run_graph(opts: argparse.Namespace) -> int:
    from echo_trace.graph_mode import GraphSpec, write_graph_trace

    if opts.framework == "megatron":
        from integrations.megatron import build_gpt

        bundle = build_gpt(opts.batch_size, opts.seq_len, tiny=opts.tiny,
                           overrides=parse_overrides(opts.config_overrides))
    elif opts.model_source == "huggingface":
        # no weights needed: parameters live on the meta device (a 70B config fits anywhere)
        import torch

        from echo_trace.profile.models import ModelBundle, to_device

        with torch.device("meta"):
            built = build_model(opts.model, opts.model_source, batch_size=opts.batch_size,
                                seq_len=opts.seq_len, tiny=opts.tiny,
                                overrides=parse_overrides(opts.config_overrides))
        make = built.make_batch
        bundle = ModelBundle(model=built.model, loss_fn=built.loss_fn, info=built.info,
                             make_batch=lambda: to_device(make(), torch.device("meta")))
    else:
        bundle = build_model(opts.model, opts.model_source, batch_size=opts.batch_size,
                             seq_len=opts.seq_len, tiny=opts.tiny,
                             overrides=parse_overrides(opts.config_overrides))
    spec = GraphSpec(path=opts.path, steps=opts.num_repeats, peak_tflops=opts.peak_tflops,
                     mem_bw_gbs=opts.mem_bw_gbs, efficiency=opts.efficiency,
                     overwrite=opts.overwrite, framework=opts.framework,
                     device_name=opts.device_name, data_parallel=opts.nproc,
                     zero_stage=opts.zero_stage if opts.framework == "deepspeed" else 0)
    res = write_graph_trace(bundle, spec)
    print(f"echo-trace profile: graph of {res.num_ops} operators ({res.method}) in "
          f"{res.num_events} events -> {res.rank_dir}")
    print(f"chakra execution trace -> {res.chakra_path}")
    print(f"estimated step time {res.step_time_us / 1e3:.3f} ms "
          f"({res.step_flops / 1e9:.3f} GFLOP per step, roofline)")
    return 0


def _run_runtime(opts: argparse.Namespace) -> int:
    from echo_trace.profile.runtime import RuntimeSpec, run_runtime

    if opts.framework == "megatron":
        from integrations.megatron import build_gpt

        bundle = build_gpt(opts.batch_size, opts.seq_len, tiny=opts.tiny,
                           overrides=parse_overrides(opts.config_overrides))
    else:
        bundle = build_model(opts.model, opts.model_source, batch_size=opts.batch_size,
                             seq_len=opts.seq_len, tiny=opts.tiny,
                             overrides=parse_overrides(opts.config_overrides))
    spec = RuntimeSpec(framework=opts.framework, path=opts.path, warmup=opts.warmup,
                       repeats=opts.num_repeats, steps=opts.steps, zero_stage=opts.zero_stage,
                       overwrite=opts.overwrite, gzip=opts.gzip)
    res = run_runtime(spec, bundle)
    if res.rank_dir is None:
        print(f"echo-trace profile: rank {res.rank}: no trace written (see the log above)",
              file=sys.stderr)
        return 1
    print(f"echo-trace profile: rank {res.rank}/{res.world_size} trace -> {res.rank_dir}")
    print(f"step time {res.step_time_us / 1e3:.3f} ms (median of {len(res.step_times_us)} "
          f"captured steps)")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Run the profiler; exit status 0, 2 on bad input (one line on stderr)."""
    args = list(sys.argv[1:] if argv is None else argv)
    if args and args[0] == "profile":  # `echo-trace profile ...`
        args = args[1:]
    opts = build_parser().parse_args(args)
    if opts.model_source is None:
        opts.model_source = "huggingface" if opts.framework in ("huggingface", "megatron") \
            else "local"
    try:
        _check(opts)
        if opts.nproc > 1 and opts.mode == "runtime" and "WORLD_SIZE" not in os.environ:
            return _launch(opts, args)
        if opts.mode == "graph":
            return _run_graph(opts)
        return _run_runtime(opts)
    except ProfileError as e:
        print(f"echo-trace profile: {e}", file=sys.stderr)
        return 2

