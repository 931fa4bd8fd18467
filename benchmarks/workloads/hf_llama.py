"""A Llama decoder from ``transformers``, trained single / DDP / FSDP2 / tensor parallel on gloo.

A model family the simulator was never tuned on (not in ``examples/``): Hugging Face's own
``LlamaForCausalLM`` from a small :class:`transformers.LlamaConfig` — RMSNorm, rotary
positions, grouped-query attention (separate ``q_proj``/``k_proj``/``v_proj``, fewer
key/value heads than query heads), a gated SiLU MLP (``gate_proj``/``up_proj``/``down_proj``)
— on synthetic token sequences that repeat a short random motif (so the loss falls).

``--layout tp`` shards it the way the model's own config says: ``parallelize_module`` over
a one-dimensional device mesh with the config's ``base_model_tp_plan`` (``colwise`` →
``ColwiseParallel``, ``rowwise`` → ``RowwiseParallel``; DTensor parameters, gloo's
all-reduces after each row-parallel projection and in backward before each column group).
The embeddings, final norm and head stay replicated, as that plan leaves them. AdamW runs
per parameter there (``foreach`` takes no mix of DTensor and plain parameters).

Same interface as ``examples/train.py`` (``parse_flags`` → ``build_job`` → ``train``,
per-step wall times in ``Job.step_s``), so ``benchmarks/accuracy.py`` drives it::

    torchrun --nproc_per_node 2 benchmarks/workloads/hf_llama.py --layout tp --steps 10

Flags: ``--layout single|ddp|fsdp|tp|zero1|zero2`` (DeepSpeed ZeRO-1/2 on CPU,
``harness.deepspeed_job``), ``--layers 2``, ``--hidden 256``, ``--heads 4``,
``--kv-heads 2``, ``--seq 64``, ``--vocab 1000``, ``--micro-batch 8``, ``--global-batch N``,
``--steps 10``, ``--capture --trace-dir D --trace-start 2 --trace-end 8``.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

if str(Path(__file__).resolve().parents[2]) not in sys.path:  # run as a script
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
# imported here, not in build_model: benchmarks/accuracy.py's worker samples RSS after
# importing this module and before building the model, so the library is not model memory
from transformers import LlamaConfig, LlamaForCausalLM

from benchmarks.workloads import harness  # noqa: E402

__all__ = ["Config", "Job", "batch", "build_job", "build_model", "parse_flags", "tp_plan", "train"]

LAYOUTS = ("single", "ddp", "fsdp", "tp", "zero1", "zero2")
MOTIF = 8  # tokens per repeated motif


@dataclass(frozen=True, kw_only=True)
class Config(harness.RunConfig):
    """One run; built from command-line flags by :func:`parse_flags`."""

    layout: str = "single"
    layers: int = 2
    hidden: int = 256
    heads: int = 4
    kv_heads: int = 2
    seq: int = 64
    vocab: int = 1000
    micro_batch: int = 8

    def __post_init__(self) -> None:
        if self.layout not in LAYOUTS:
            raise ValueError(f"--layout {self.layout!r}; valid: {', '.join(LAYOUTS)}")
        for name in ("layers", "hidden", "heads", "kv_heads", "seq", "vocab", "micro_batch",
                     "steps"):
            if getattr(self, name) < 1:
                raise ValueError(f"--{name.replace('_', '-')} must be >= 1")
        if self.hidden % self.heads or self.heads % self.kv_heads:
            raise ValueError(f"--heads {self.heads} must divide --hidden {self.hidden} and "
                             f"--kv-heads {self.kv_heads} must divide --heads")


def parse_flags(argv: Sequence[str]) -> Config:
    p = argparse.ArgumentParser(prog="hf_llama.py", description=__doc__.split("\n\n")[0])
    p.add_argument("--layout", choices=LAYOUTS, default="single")
    p.add_argument("--layers", type=int, default=2, help="decoder layers (default 2)")
    p.add_argument("--hidden", type=int, default=256, help="hidden width (default 256)")
    p.add_argument("--heads", type=int, default=4, help="query heads (default 4)")
    p.add_argument("--kv-heads", type=int, default=2, help="key/value heads (default 2)")
    p.add_argument("--seq", type=int, default=64, help="tokens per sequence (default 64)")
    p.add_argument("--vocab", type=int, default=1000, help="vocabulary size (default 1000)")
    p.add_argument("--micro-batch", type=int, default=8, help="sequences per forward")
    harness.add_run_flags(p, "sequences")
    a = p.parse_args(list(argv))
    return Config(**vars(a))


Job = harness.Job


def build_model(cfg: Config) -> LlamaForCausalLM:
    """``LlamaForCausalLM`` from a small ``LlamaConfig`` (seeded: every rank starts from the
    same weights)."""
    torch.manual_seed(0)
    llama = LlamaConfig(vocab_size=cfg.vocab, hidden_size=cfg.hidden,
                        intermediate_size=2 * cfg.hidden, num_hidden_layers=cfg.layers,
                        num_attention_heads=cfg.heads, num_key_value_heads=cfg.kv_heads,
                        max_position_embeddings=cfg.seq)
    return LlamaForCausalLM(llama)


def tp_plan(model: LlamaForCausalLM) -> dict[str, Any]:
    """The config's ``base_model_tp_plan`` as ``parallelize_module`` styles, keyed by the
    paths under ``model.model`` (``layers.*.self_attn.q_proj`` → ``ColwiseParallel()``)."""
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel

    styles = {"colwise": ColwiseParallel, "rowwise": RowwiseParallel}
    plan = dict(model.config.base_model_tp_plan or {})
    bad = sorted({v for v in plan.values() if v not in styles})
    if bad:
        raise ValueError(f"base_model_tp_plan style(s) {', '.join(bad)}: this workload "
                         f"applies {', '.join(styles)} only")
    return {k: styles[v]() for k, v in plan.items()}


def batch(cfg: Config, n: int, step: int, index: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(1000 * step + index)
    motif = torch.randint(0, cfg.vocab, (n, MOTIF), generator=g)
    return motif.repeat(1, -(-cfg.seq // MOTIF))[:, :cfg.seq]


def _parallelize(model: LlamaForCausalLM, cfg: Config, world: int) -> nn.Module:
    if cfg.layout == "ddp":
        return nn.parallel.DistributedDataParallel(model)
    from torch.distributed.device_mesh import init_device_mesh

    mesh = init_device_mesh("cpu", (world,))
    if cfg.layout == "fsdp":
        from torch.distributed.fsdp import fully_shard

        for layer in model.model.layers:  # one FSDP2 unit per decoder layer, then the root
            fully_shard(layer, mesh=mesh)
        fully_shard(model, mesh=mesh)
        return model
    from torch.distributed.tensor.parallel import parallelize_module

    if cfg.kv_heads % world:
        raise ValueError(f"--kv-heads {cfg.kv_heads} must divide by the {world} ranks")
    parallelize_module(model.model, mesh, tp_plan(model))
    return model


def _job(cfg: Config, rank: int, world: int) -> Job:
    llama = build_model(cfg)

    def loss(model: nn.Module, step: int, index: int) -> torch.Tensor:
        ids = batch(cfg, cfg.micro_batch, step, index)
        logits = model(ids).logits[:, :-1]
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), ids[:, 1:].reshape(-1))

    if cfg.layout.startswith("zero"):
        return harness.deepspeed_job(cfg, rank, world, llama, loss, stage=int(cfg.layout[-1]))
    model = llama if cfg.layout == "single" else _parallelize(llama, cfg, world)

    # tensor-parallel ranks see the same batch and hold DTensor and plain parameters
    return harness.data_parallel_job(cfg, rank, world, model, loss,
                                     dp=world if cfg.layout in ("ddp", "fsdp") else 1,
                                     foreach=cfg.layout != "tp")


# build_job(cfg), train(cfg, job=None), main(argv=None): as every workload module
build_job, train, main = harness.interface(parse_flags, _job)


if __name__ == "__main__":
    raise SystemExit(main())
