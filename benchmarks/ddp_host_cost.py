"""DDP's host cost inside real training steps vs the microbenchmark ``simulate --dp`` prices it with.

``simulate --dp N`` adds ``DistributedDataParallel``'s host work to a one-process trace:
the forward's pre-processing on its first op, the reducer's per-parameter autograd hooks
and bucket copies on each backward op, the per-call part on the last
(:func:`echo_sim.cost.cpu_overheads.ddp_hooks`, ``a + b·params + c·bytes`` fitted on
``profile-comm``'s samples). This checks that price against what the same work costs inside
real models' steps, measured side by side in the same two gloo processes:

* **in-model**, per model (the examples' GPT, the Hugging Face BERT and Llama and the
  CIFAR-style ResNet at the accuracy benchmark's shapes): the calling thread's CPU time of forward (with the loss) and
  of backward of ``DistributedDataParallel(model)`` minus that of the plain model, samples of
  the two interleaved, a barrier before each, gradients set to None after each (as a
  training step's ``zero_grad`` does);
* **blocks**: what ``profile-comm`` measures now (stacks of transformer MLP blocks on 3-D
  input that needs grad, :func:`echo_sim.measure.host_overheads.ddp_samples`), read at each
  model's parameters and bytes as ``simulate`` reads it;
* **Linear stacks**: what it measured before 2026-11-27 (two to eight ``nn.Linear`` on 2-D
  input), read the same way.

Thread CPU time leaves out peer waits and preemption, so the medians are intrinsic costs; the
all-reduces run on gloo's thread beside the backward, as in the job. Each round measures
everything once; the spread over rounds is the noise.

Usage::

    python benchmarks/ddp_host_cost.py [--models gpt,bert,llama,resnet] [--samples 12] [--rounds 3]
        [--output benchmarks/results/ddp_host_cost.json]

Writes the JSON and prints a markdown table; takes about a minute on 2 cores.
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

__all__ = ["MODELS", "fw_bw", "main", "model_and_loss", "table", "wrapped_minus_plain"]

RESULTS = REPO / "benchmarks" / "results" / "ddp_host_cost.json"
MODELS = ("gpt", "bert", "llama", "resnet")
LINEAR_STACKS = ((2, 32), (8, 32), (2, 512))  # (Linears, width): the microbenchmark before


# ------------------------------------------------------------------------------ worker
def model_and_loss(name: str) -> tuple[Callable[[], Any], Callable[[Any], Any]]:
    """(build, loss) of the model ``name`` (:data:`MODELS`) at the accuracy benchmark's
    shapes: ``build()`` makes it afresh (seeded), ``loss(model)`` is its loss on one batch."""
    import torch
    import torch.nn.functional as F

    if name == "gpt":
        import examples.train as train
        from examples.models import GPT, token_batch

        cfg = train.parse_flags(["--model", "gpt", "--layers", "2", "--hidden", "128"])
        x, y = token_batch(cfg.gpt(), cfg.batch, seed=0, step=0, index=0)

        def build() -> Any:
            torch.manual_seed(0)
            return GPT(cfg.gpt())

        def loss(m: Any) -> Any:
            out = m(x)
            return F.cross_entropy(out.reshape(-1, out.shape[-1]), y.reshape(-1))

        return build, loss
    if name == "bert":
        from benchmarks.workloads import hf_encoder

        bcfg = hf_encoder.parse_flags([])
        xb, yb = hf_encoder.batch(bcfg, bcfg.micro_batch, 0, 0)
        return (lambda: hf_encoder.build_model(bcfg),
                lambda m: F.cross_entropy(m(xb).logits, yb))
    if name == "llama":
        from benchmarks.workloads import hf_llama

        lcfg = hf_llama.parse_flags([])
        ids = hf_llama.batch(lcfg, lcfg.micro_batch, 0, 0)

        def lm_loss(m: Any) -> Any:
            logits = m(ids).logits[:, :-1]
            return F.cross_entropy(logits.reshape(-1, logits.shape[-1]),
                                   ids[:, 1:].reshape(-1))

        return lambda: hf_llama.build_model(lcfg), lm_loss
    if name == "resnet":
        from benchmarks.workloads import resnet

        rcfg = resnet.parse_flags(["--width", "16", "--blocks", "2", "--micro-batch", "12"])
        xr, yr = resnet.batch(rcfg.micro_batch, 0, 0)
        return lambda: resnet.build_model(rcfg), lambda m: F.cross_entropy(m(xr), yr)
    raise ValueError(f"models: unknown model {name!r}; known: {', '.join(MODELS)}")


def fw_bw(model: Any, loss: Callable[[Any], Any], *, zero: bool = True
           ) -> tuple[float, float]:
    """Thread CPU µs of the forward (with the loss) and of the backward, after a barrier;
    gradients set to None after (``zero``; else they accumulate, as the microbenchmark
    before 2026-11-27 let them)."""
    import torch.distributed as dist

    dist.barrier()
    c0 = time.thread_time()
    out = loss(model)
    c1 = time.thread_time()
    (out if out.dim() == 0 else out.sum()).backward()
    c2 = time.thread_time()
    if zero:
        model.zero_grad(set_to_none=True)
    return (c1 - c0) * 1e6, (c2 - c1) * 1e6


def wrapped_minus_plain(wrapped: Any, plain: Any, loss: Callable[[Any], Any], samples: int,
                        *, warmup: int = 1, zero: bool = True) -> dict[str, Any]:
    """Median forward and backward µs (:func:`fw_bw`) of ``wrapped`` minus ``plain``,
    ``samples`` of each interleaved after ``warmup`` untimed rounds, and the plain ones;
    ``fw_pairs_us`` / ``bw_pairs_us``: each round's wrapped minus plain (the two ran back to
    back, so a drift of the host's pace cancels in the pair), for an interval of the
    difference (``benchmarks.accuracy.median_ci``)."""
    got: dict[str, list[float]] = {"f1": [], "b1": [], "f0": [], "b0": []}
    for i in range(samples + warmup):
        for model, tag in ((wrapped, "1"), (plain, "0")):
            f, b = fw_bw(model, loss, zero=zero)
            if i >= warmup:
                got["f" + tag].append(f)
                got["b" + tag].append(b)
    med = {k: statistics.median(v) for k, v in got.items()}
    return {"fw_us": med["f1"] - med["f0"], "bw_us": med["b1"] - med["b0"],
            "plain_fw_us": med["f0"], "plain_bw_us": med["b0"],
            "fw_pairs_us": [a - b for a, b in zip(got["f1"], got["f0"], strict=True)],
            "bw_pairs_us": [a - b for a, b in zip(got["b1"], got["b0"], strict=True)]}


def _in_model(build: Callable[[], Any], loss: Callable[[Any], Any],
              samples: int) -> dict[str, Any]:
    """Median forward and backward µs of DDP(model) minus the plain model, interleaved."""
    from torch import nn

    # two warm-up rounds: DDP rebuilds its buckets after one
    return wrapped_minus_plain(nn.parallel.DistributedDataParallel(build()), build(), loss,
                               samples, warmup=2)


def _linear_stacks(samples: int) -> dict[str, list[float]]:
    """The microbenchmark before 2026-11-27, as it ran (``ddp_*`` samples of Linear stacks
    on 2-D input without grad, gradients accumulating), for comparison."""
    import torch
    from torch import nn

    out: dict[str, list[float]] = {k: [] for k in ("ddp_fw_cpu_us", "ddp_bw_cpu_us",
                                                   "ddp_params", "ddp_bytes")}
    for linears, h in LINEAR_STACKS:
        x = torch.randn(64, h)  # its 64 tokens: little compute beside the hooks

        def build(linears: int = linears, h: int = h) -> Any:
            return nn.Sequential(*(nn.Linear(h, h) for _ in range(linears)))

        med = wrapped_minus_plain(nn.parallel.DistributedDataParallel(build()), build(),
                                  lambda m, x=x: m(x), samples, zero=False)  # as it did
        out["ddp_fw_cpu_us"].append(max(med["fw_us"], 0.0))
        out["ddp_bw_cpu_us"].append(max(med["bw_us"], 0.0))
        out["ddp_params"].append(2.0 * linears)
        out["ddp_bytes"].append(4.0 * linears * (h * h + h))
    return out


def _price(calibration: dict[str, list[float]], world: int) -> dict[str, list[float]]:
    """The (a, b, c) planes ``simulate`` fits on ``calibration``'s DDP samples."""
    from echo_sim.cost.comm_profile import CommProfile
    from echo_sim.cost.cpu_overheads import ddp_hooks

    cost = ddp_hooks(CommProfile(backend="gloo", device="cpu", host="", world_size=world,
                                 samples={}, calibration=calibration))
    assert cost is not None
    return {"fw": list(cost.fw), "bw": list(cost.bw)}


def worker(models: Sequence[str], samples: int, rounds: int, out: Path) -> None:
    """One rank (under torchrun): every model's in-model cost and both microbenchmarks'
    prices, per round; rank 0 writes ``out``."""
    import torch
    import torch.distributed as dist

    from echo_sim.measure.host_overheads import ddp_samples

    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    world = dist.get_world_size()
    built = {m: model_and_loss(m) for m in models}
    res: dict[str, Any] = {"models": {}, "blocks": [], "linear_stacks": []}
    for m, (build, _) in built.items():
        model = build()
        res["models"][m] = {"params": sum(1 for _ in model.parameters()),
                            "bytes": sum(p.numel() * p.element_size()
                                         for p in model.parameters()), "rounds": []}
    for _ in range(rounds):
        for m, (build, loss) in built.items():
            res["models"][m]["rounds"].append(_in_model(build, loss, samples))
        res["blocks"].append(_price(ddp_samples(samples), world))
        res["linear_stacks"].append(_price(_linear_stacks(samples), world))
    if dist.get_rank() == 0:
        out.write_text(json.dumps(res, indent=1))
    dist.barrier()
    dist.destroy_process_group()


# ------------------------------------------------------------------------------ parent
def _at(plane: Sequence[float], params: float, nbytes: float) -> float:
    return plane[0] + plane[1] * params + plane[2] * nbytes


def table(res: dict[str, Any]) -> str:
    """Markdown: per model, in-model µs per round against both microbenchmarks' prices at
    the model's parameters and bytes, and their ratios (backward, the part that matters)."""
    from benchmarks.torchrun_job import value_range as rng

    lines = ["| model | parameters | MiB | in-model fw / bw µs | blocks fw / bw µs (now) | "
             "Linear stacks fw / bw µs (before) | in-model bw ÷ blocks | in-model bw ÷ "
             "Linear stacks |", "|---|---|---|---|---|---|---|---|"]
    for m, r in res["models"].items():
        n, nb = r["params"], r["bytes"]
        fw = [x["fw_us"] for x in r["rounds"]]
        bw = [x["bw_us"] for x in r["rounds"]]
        kf = [_at(k["fw"], n, nb) for k in res["blocks"]]
        kb = [_at(k["bw"], n, nb) for k in res["blocks"]]
        lf = [_at(k["fw"], n, nb) for k in res["linear_stacks"]]
        lb = [_at(k["bw"], n, nb) for k in res["linear_stacks"]]
        lines.append(f"| {m} | {n} | {nb / (1 << 20):.1f} | {rng(fw)} / {rng(bw)} | "
                     f"{rng(kf)} / {rng(kb)} | {rng(lf)} / {rng(lb)} | "
                     f"{rng([a / b for a, b in zip(bw, kb, strict=True)], 2)} | "
                     f"{rng([a / b for a, b in zip(bw, lb, strict=True)], 2)} |")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    from benchmarks.torchrun_job import host_cost_main

    return host_cost_main(argv, script=__file__, doc=__doc__ or "", models=MODELS,
                          results=RESULTS, rounds=3, worker=worker, table=table)


if __name__ == "__main__":
    raise SystemExit(main())
