"""DTensor's host cost per sharded Linear: inside real tensor-parallel steps vs the microbenchmark.

``simulate --tp N`` adds to every sharded Linear of a one-process trace the host cost
``profile-comm`` calibrated (:func:`echo_sim.cost.cpu_overheads.dtensor_dispatch`). This
checks that calibration against the cost the same Linears pay inside real models' training
steps, measured side by side in the same two gloo processes:

* **in-model**, per model (the examples' GPT, the Hugging Face Llama with its config's
  ``base_model_tp_plan``, BERT with a Megatron plan — the accuracy benchmark's shapes): the
  calling thread's CPU time of forward and of backward of the ``parallelize_module`` model
  minus that of the plain model of the local shards' shapes (every DTensor ``nn.Linear``
  replaced by a plain one of its local weight's shape), divided by the sharded Linears;
  samples of the two interleaved, a barrier before each (the ranks in step, as in the job);
* **block**: what ``profile-comm`` measures (:func:`echo_sim.measure.host_overheads.
  measure_host_overheads`' tensor-parallel MLP block, per Linear) at the same moment;
* **pair**: the isolated Colwise + Rowwise Linear pair on 2-D input that needs no grad,
  which ``profile-comm`` measured before, at the same activation sizes;
* **optimizer**: a per-parameter-loop AdamW step right after each backward, TP model
  minus plain, per DTensor parameter, against the block's (``simulate``'s figure for a
  tensor-parallel loop) and the back-to-back microbenchmark's (before);
* **local ÷ whole**: forward + backward of the plain local-shard model over the plain whole
  model's — the sharded compute, which ``simulate``'s sharding rule
  (:func:`echo_sim.workload.tensor_parallel.tp_factors`) predicts from a one-process trace.

Thread CPU time leaves out peer waits (they block the thread) and preemption by other load,
so the medians are intrinsic costs. The table reports, per model, forward / backward µs per
sharded Linear and the block's figure at that model's activation bytes (the line through
its two sizes, as ``simulate`` uses it), each round separately (their spread is the noise).

Usage::

    python benchmarks/tp_host_cost.py [--models gpt,llama,bert] [--samples 12] [--rounds 2]
        [--output benchmarks/results/tp_host_cost.json]

Writes the JSON and prints a markdown table; takes about a minute on 2 cores.
"""

from __future__ import annotations

import dataclasses
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

RESULTS = REPO / "benchmarks" / "results" / "tp_host_cost.json"
MODELS = ("gpt", "llama", "bert")


# ------------------------------------------------------------------------------ worker
def _local_copy(tp_model: Any, fresh: Any) -> tuple[Any, int]:
    """``fresh`` (the same model, unsharded) with every Linear that is a DTensor in
    ``tp_model`` replaced by a plain Linear of its local weight's shape; the count."""
    from torch import nn
    from torch.distributed.tensor import DTensor

    n = 0
    for name, mod in list(tp_model.named_modules()):
        if isinstance(mod, nn.Linear) and isinstance(mod.weight, DTensor):
            w = mod.weight.to_local()
            parent, leaf = name.rsplit(".", 1)
            setattr(fresh.get_submodule(parent), leaf,
                    nn.Linear(w.shape[1], w.shape[0], bias=mod.bias is not None))
            n += 1
    return fresh, n


@dataclasses.dataclass(frozen=True)
class Built:
    """One model at the accuracy benchmark's shapes, three ways, and how to run it."""

    tp: Any  # parallelize_module'd over the world mesh
    plain: Any  # every DTensor Linear replaced by a plain one of its local shard's shape
    whole: Any  # unsharded
    linears: int  # sharded Linears
    loss: Callable[[Any], Any]  # a model's loss on this rank's batch
    act_bytes: float  # a column op's input activation, float32


def _model(name: str, world: int) -> Built:
    """:class:`Built` of the model ``name`` (:data:`MODELS`)."""
    if name == "gpt":
        import torch

        import examples.train as train
        from examples.models import GPT, token_batch

        cfg = train.parse_flags(["--model", "gpt", "--layers", "2", "--hidden", "128"])

        def build() -> Any:
            torch.manual_seed(0)
            return GPT(cfg.gpt())

        tp = train.apply_tp(build(), torch.device("cpu"), world)
        x, y = token_batch(cfg.gpt(), cfg.batch, seed=0, step=0, index=0)

        def loss(m: Any) -> Any:
            out = m(x)
            return torch.nn.functional.cross_entropy(out.reshape(-1, out.shape[-1]),
                                                     y.reshape(-1))

        act = float(cfg.batch * cfg.seq * cfg.hidden * 4)
    elif name == "llama":
        from benchmarks.workloads import hf_llama

        lcfg = hf_llama.parse_flags([])
        tp = _parallelize(hf_llama.build_model(lcfg), hf_llama.tp_plan, "model", world)
        ids = hf_llama.batch(lcfg, lcfg.micro_batch, 0, 0)

        def loss(m: Any) -> Any:
            return m(ids).logits.float().mean()

        build = lambda: hf_llama.build_model(lcfg)  # noqa: E731
        act = float(lcfg.micro_batch * lcfg.seq * lcfg.hidden * 4)
    elif name == "bert":
        from benchmarks.workloads import hf_encoder

        bcfg = hf_encoder.parse_flags([])
        tp = _parallelize(hf_encoder.build_model(bcfg), hf_encoder.tp_plan, "bert.encoder",
                          world)
        ids, _ = hf_encoder.batch(bcfg, bcfg.micro_batch, 0, 0)

        def loss(m: Any) -> Any:
            return m(ids).logits.mean()

        build = lambda: hf_encoder.build_model(bcfg)  # noqa: E731
        act = float(bcfg.micro_batch * bcfg.seq * bcfg.hidden * 4)
    else:
        raise ValueError(f"models: unknown model {name!r}; known: {', '.join(MODELS)}")
    plain, n = _local_copy(tp, build())
    return Built(tp=tp, plain=plain, whole=build(), linears=n, loss=loss, act_bytes=act)


def _parallelize(model: Any, plan_of: Callable[[Any], dict[str, Any]], under: str,
                 world: int) -> Any:
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor.parallel import parallelize_module

    parallelize_module(model.get_submodule(under), init_device_mesh("cpu", (world,)),
                       plan_of(model))
    return model


def _fw_bw(model: Any, loss: Callable[[Any], Any],
           opt: Any = None) -> tuple[float, float, float]:
    """Thread CPU µs of the forward (with the loss), of the backward and of ``opt.step()``
    right after it (0 without ``opt``), after a barrier; a non-scalar output is summed in
    the backward's time (as the microbenchmarks do)."""
    import torch.distributed as dist

    dist.barrier()
    c0 = time.thread_time()
    out = loss(model)
    c1 = time.thread_time()
    (out if out.dim() == 0 else out.sum()).backward()
    c2 = time.thread_time()
    if opt is not None:
        opt.step()
    c3 = time.thread_time()
    model.zero_grad(set_to_none=True)
    return (c1 - c0) * 1e6, (c2 - c1) * 1e6, (c3 - c2) * 1e6


def _pair(mesh: Any, samples: int, sizes: Sequence[tuple[int, int]]) -> list[tuple[float, float]]:
    """The older microbenchmark: (fw, bw) µs per Linear of an isolated Colwise + Rowwise
    pair on 2-D input without grad, per (tokens, hidden)."""
    import torch
    from torch import nn
    from torch.distributed.tensor.parallel import (
        ColwiseParallel,
        RowwiseParallel,
        parallelize_module,
    )

    out = []
    for tokens, h in sizes:
        x = torch.randn(tokens, h)
        tp = parallelize_module(nn.Sequential(nn.Linear(h, 4 * h), nn.Linear(4 * h, h)), mesh,
                                {"0": ColwiseParallel(), "1": RowwiseParallel()})
        w = 4 * h // mesh.size()
        plain = nn.Sequential(nn.Linear(h, w), nn.Linear(w, h))
        def loss(m: Any, x: Any = x) -> Any:
            return m(x)

        f, b, _ = _per_linear(tp, plain, loss, 2, samples)
        out.append((f, b))
    return out


def _per_linear(tp: Any, plain: Any, loss: Callable[[Any], Any], n: int, samples: int,
                n_dt: int = 0) -> tuple[float, float, float]:
    """(median TP - median plain) / n for forward and backward, samples interleaved; with
    ``n_dt`` (the TP model's DTensor parameters) also a per-parameter-loop AdamW step right
    after each backward, (median TP - median plain) / ``n_dt`` (else 0)."""
    import torch

    opts = ((torch.optim.AdamW(tp.parameters(), foreach=False),
             torch.optim.AdamW(plain.parameters(), foreach=False)) if n_dt else (None, None))
    got: list[list[float]] = [[] for _ in range(6)]
    for i in range(samples + 2):  # two warm-up rounds: caches, sharding propagation, state
        row = (*_fw_bw(tp, loss, opts[0]), *_fw_bw(plain, loss, opts[1]))
        if i >= 2:
            for j, v in enumerate(row):
                got[j].append(v)
    med = [statistics.median(v) for v in got]
    return ((med[0] - med[3]) / n, (med[1] - med[4]) / n,
            (med[2] - med[5]) / n_dt if n_dt else 0.0)


def _ratio(local: Any, whole: Any, loss: Callable[[Any], Any], samples: int) -> float:
    """Median forward + backward thread CPU of the plain local-shard model over the whole
    model's (samples interleaved): the sharded compute ``simulate``'s rule predicts."""
    got: list[list[float]] = [[], []]
    for i in range(samples + 2):
        for j, m in enumerate((local, whole)):
            f, b, _ = _fw_bw(m, loss)
            if i >= 2:  # warm-up
                got[j].append(f + b)
    return statistics.median(got[0]) / statistics.median(got[1])


def worker(models: Sequence[str], samples: int, rounds: int, out: Path) -> None:
    """One rank (under torchrun): every model's in-model cost, the block and the pair, per
    round; rank 0 writes ``out``."""
    import torch
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import DTensor

    from echo_sim.cost.comm_profile import CommProfile
    from echo_sim.cost.cpu_overheads import (
        dtensor_dispatch,
        optimizer_per_param,
        tp_optimizer_per_param,
    )
    from echo_sim.measure.host_overheads import (
        OPTIM_PARAMS,
        TP_SHAPES,
        optimizer_samples,
        tp_block_samples,
    )

    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    world = dist.get_world_size()
    mesh = init_device_mesh("cpu", (world,))
    built = {m: _model(m, world) for m in models}
    res: dict[str, Any] = {"models": {m: {"sharded_linears": b.linears,
                                          "act_bytes": b.act_bytes, "rounds": []}
                                      for m, b in built.items()},
                           "block": [], "pair": []}
    pair_sizes = [(b * t, h) for b, t, h in TP_SHAPES]
    for _ in range(rounds):
        for m, b in built.items():
            n_dt = sum(isinstance(q, DTensor) for q in b.tp.parameters())
            f, bw, u = _per_linear(b.tp, b.plain, b.loss, b.linears, samples, n_dt)
            res["models"][m]["rounds"].append({
                "fw_us": f, "bw_us": bw, "optim_us_per_param": u,
                "local_over_whole": _ratio(b.plain, b.whole, b.loss, samples)})
        # the block as profile-comm measures and simulate reads it (one rank's samples)
        cal = tp_block_samples(mesh, samples)
        prof = CommProfile(backend="gloo", device="cpu", host="", world_size=world,
                           samples={}, calibration=cal)
        cost = dtensor_dispatch(prof)
        after = tp_optimizer_per_param(prof)
        back = optimizer_per_param(dataclasses.replace(prof, calibration=optimizer_samples(
            mesh, samples)), foreach=False, params=OPTIM_PARAMS)
        assert cost is not None and after is not None and back is not None
        res["block"].append({"fw_a_us": cost.fw_a_us, "fw_b_us_per_byte": cost.fw_b_us_per_byte,
                             "bw_a_us": cost.bw_a_us, "bw_b_us_per_byte": cost.bw_b_us_per_byte,
                             "optim_us_per_param": after.value,
                             "optim_back_to_back_us_per_param": back.value})
        res["pair"].append([{"act_bytes": 4.0 * t * h, "fw_us": f, "bw_us": b}
                            for (t, h), (f, b) in zip(pair_sizes, _pair(mesh, samples,
                                                                          pair_sizes),
                                                       strict=True)])
    if dist.get_rank() == 0:
        out.write_text(json.dumps(res, indent=1))
    dist.barrier()
    dist.destroy_process_group()


# ------------------------------------------------------------------------------ parent
def _at(points: Sequence[dict[str, float]], key: str, nbytes: float) -> float:
    """The pair's cost at ``nbytes``: the line through its sizes, as ``simulate`` read the
    pair's profiles (:func:`echo_sim.cost.cpu_overheads.dtensor_dispatch`)."""
    from echo_sim.cost.cpu_overheads import line_fit

    a, b = line_fit([q["act_bytes"] for q in points], [q[key] for q in points])
    return a + b * nbytes


def table(res: dict[str, Any]) -> str:
    """Markdown: per model, in-model µs per Linear per round against the block's and the
    pair's figures at the model's activation bytes."""
    from benchmarks.torchrun_job import value_range as rng

    lines = ["| model | sharded Linears | activation | in-model fw / bw µs | block fw / bw µs | "
             "pair fw / bw µs | in-model ÷ block (fw+bw) | optimizer µs per DTensor "
             "parameter: in-model / block after backward / back to back | local shards ÷ "
             "whole model |", "|---|---|---|---|---|---|---|---|---|"]
    for m, r in res["models"].items():
        act = r["act_bytes"]
        fw = [x["fw_us"] for x in r["rounds"]]
        bw = [x["bw_us"] for x in r["rounds"]]
        bf = [b["fw_a_us"] + b["fw_b_us_per_byte"] * act for b in res["block"]]
        bb = [b["bw_a_us"] + b["bw_b_us_per_byte"] * act for b in res["block"]]
        pf = [_at(p, "fw_us", act) for p in res["pair"]]
        pb = [_at(p, "bw_us", act) for p in res["pair"]]
        ratio = [(f + b) / (x + y) for f, b, x, y in zip(fw, bw, bf, bb, strict=True)]
        lines.append(f"| {m} | {r['sharded_linears']} | {act / 1024:.0f} KiB | {rng(fw)} / "
                     f"{rng(bw)} | {rng(bf)} / {rng(bb)} | {rng(pf)} / {rng(pb)} | "
                     f"{rng(ratio, 2)} | {rng([x['optim_us_per_param'] for x in r['rounds']])}"
                     f" / {rng([b['optim_us_per_param'] for b in res['block']])} / "
                     f"{rng([b['optim_back_to_back_us_per_param'] for b in res['block']])} | "
                     f"{rng([x['local_over_whole'] for x in r['rounds']], 3)} |")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    from benchmarks.torchrun_job import host_cost_main

    return host_cost_main(argv, script=__file__, doc=__doc__ or "", models=MODELS,
                          results=RESULTS, rounds=2, worker=worker, table=table)


if __name__ == "__main__":
    raise SystemExit(main())
