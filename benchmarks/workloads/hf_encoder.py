"""A BERT-style encoder classifier from ``transformers``, trained single / DDP / FSDP2 / TP on gloo.

A model family the simulator was never tuned on (not in ``examples/``): Hugging Face's own
``BertForSequenceClassification`` built from a small :class:`transformers.BertConfig` —
token, position and type embeddings with a LayerNorm, ``layers`` post-norm encoder layers
(self-attention ``query``/``key``/``value``/``output``, an ``intermediate`` and ``output``
MLP, dropout 0.1 as BERT ships), the ``pooler`` and a ``classifier`` — on synthetic token
sequences whose label is their first token modulo the class count (so the loss falls).

Same interface as ``examples/train.py`` and ``benchmarks/workloads/convattn.py``
(``parse_flags`` → ``build_job`` → ``train``, per-step wall times in ``Job.step_s``), so
``benchmarks/accuracy.py`` drives it::

    torchrun --nproc_per_node 2 benchmarks/workloads/hf_encoder.py --layout fsdp --steps 10

``--layout tp`` shards every encoder layer the Megatron way with ``parallelize_module``
over a one-dimensional device mesh (:func:`tp_plan`: ``query``/``key``/``value`` and
``intermediate.dense`` column-parallel, ``attention.output.dense`` and ``output.dense``
row-parallel; embeddings, LayerNorms, pooler and classifier replicated). BERT ships no
tensor-parallel plan of its own; its attention reshapes by head size, so the local shards'
half of the heads run unchanged.

Flags: ``--layout single|ddp|fsdp|tp|zero1|zero2`` (the last two: DeepSpeed ZeRO-1/2 on CPU,
``harness.deepspeed_job``), ``--layers 4``, ``--hidden 128``, ``--heads 4``,
``--seq 64``, ``--vocab 1000``, ``--micro-batch 8``, ``--global-batch N`` (gradient
accumulation: N / (micro-batch × data-parallel degree) micro-batches per step),
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
from transformers import BertConfig, BertForSequenceClassification

from benchmarks.workloads import harness  # noqa: E402

__all__ = ["Config", "Job", "batch", "build_job", "build_model", "parse_flags", "tp_plan", "train"]

LAYOUTS = ("single", "ddp", "fsdp", "tp", "zero1", "zero2")
CLASSES = 10


@dataclass(frozen=True, kw_only=True)
class Config(harness.RunConfig):
    """One run; built from command-line flags by :func:`parse_flags`."""

    layout: str = "single"
    layers: int = 4
    hidden: int = 128
    heads: int = 4
    seq: int = 64
    vocab: int = 1000
    micro_batch: int = 8

    def __post_init__(self) -> None:
        if self.layout not in LAYOUTS:
            raise ValueError(f"--layout {self.layout!r}; valid: {', '.join(LAYOUTS)}")
        for name in ("layers", "hidden", "heads", "seq", "vocab", "micro_batch", "steps"):
            if getattr(self, name) < 1:
                raise ValueError(f"--{name.replace('_', '-')} must be >= 1")
        if self.hidden % self.heads:
            raise ValueError(f"--heads {self.heads} must divide --hidden {self.hidden}")
        if self.vocab < CLASSES:
            raise ValueError(f"--vocab {self.vocab} must be >= {CLASSES} (the class count)")


def parse_flags(argv: Sequence[str]) -> Config:
    p = argparse.ArgumentParser(prog="hf_encoder.py", description=__doc__.split("\n\n")[0])
    p.add_argument("--layout", choices=LAYOUTS, default="single")
    p.add_argument("--layers", type=int, default=4, help="encoder layers (default 4)")
    p.add_argument("--hidden", type=int, default=128, help="hidden width (default 128)")
    p.add_argument("--heads", type=int, default=4, help="attention heads (default 4)")
    p.add_argument("--seq", type=int, default=64, help="tokens per sequence (default 64)")
    p.add_argument("--vocab", type=int, default=1000, help="vocabulary size (default 1000)")
    p.add_argument("--micro-batch", type=int, default=8, help="sequences per forward")
    harness.add_run_flags(p, "sequences")
    a = p.parse_args(list(argv))
    return Config(**vars(a))


Job = harness.Job



def build_model(cfg: Config) -> BertForSequenceClassification:
    """``BertForSequenceClassification`` from a small ``BertConfig`` (seeded: every rank
    starts from the same weights)."""
    torch.manual_seed(0)
    bert = BertConfig(vocab_size=cfg.vocab, hidden_size=cfg.hidden,
                      num_hidden_layers=cfg.layers, num_attention_heads=cfg.heads,
                      intermediate_size=4 * cfg.hidden, max_position_embeddings=cfg.seq)
    bert.num_labels = CLASSES
    return BertForSequenceClassification(bert)


def batch(cfg: Config, n: int, step: int, index: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(1000 * step + index)
    ids = torch.randint(0, cfg.vocab, (n, cfg.seq), generator=g)
    return ids, ids[:, 0] % CLASSES


def tp_plan(model: BertForSequenceClassification) -> dict[str, Any]:
    """Megatron-style ``parallelize_module`` styles for every encoder layer, keyed by the
    paths under ``model.bert.encoder`` (one all-reduce after attention and one after the
    MLP in forward, the same two in backward)."""
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel

    plan: dict[str, Any] = {}
    for i in range(len(model.bert.encoder.layer)):
        pre = f"layer.{i}"
        for name in ("attention.self.query", "attention.self.key", "attention.self.value",
                     "intermediate.dense"):
            plan[f"{pre}.{name}"] = ColwiseParallel()
        for name in ("attention.output.dense", "output.dense"):
            plan[f"{pre}.{name}"] = RowwiseParallel()
    return plan


def _parallelize(model: BertForSequenceClassification, cfg: Config, world: int) -> nn.Module:
    if cfg.layout == "ddp":
        return nn.parallel.DistributedDataParallel(model)
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    mesh = init_device_mesh("cpu", (world,))
    if cfg.layout == "tp":
        from torch.distributed.tensor.parallel import parallelize_module

        if cfg.heads % world:
            raise ValueError(f"--heads {cfg.heads} must divide by the {world} ranks")
        parallelize_module(model.bert.encoder, mesh, tp_plan(model))
        return model
    # one FSDP2 unit per encoder layer, then the root (embeddings, pooler, classifier)
    for layer in model.bert.encoder.layer:
        fully_shard(layer, mesh=mesh)
    fully_shard(model, mesh=mesh)
    return model


def _job(cfg: Config, rank: int, world: int) -> Job:
    bert = build_model(cfg)

    def loss(model: nn.Module, step: int, index: int) -> torch.Tensor:
        x, y = batch(cfg, cfg.micro_batch, step, index)
        return F.cross_entropy(model(x).logits, y)

    if cfg.layout.startswith("zero"):
        return harness.deepspeed_job(cfg, rank, world, bert, loss, stage=int(cfg.layout[-1]))
    model = bert if cfg.layout == "single" else _parallelize(bert, cfg, world)
    # tensor-parallel ranks see the same batch and hold DTensor and plain parameters
    tp = cfg.layout == "tp"
    return harness.data_parallel_job(cfg, rank, world, model, loss, dp=1 if tp else None,
                                     foreach=not tp)


# build_job(cfg), train(cfg, job=None), main(argv=None): as every workload module
build_job, train, main = harness.interface(parse_flags, _job)


if __name__ == "__main__":
    raise SystemExit(main())
