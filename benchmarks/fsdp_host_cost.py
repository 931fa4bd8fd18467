"""FSDP2's host cost inside real training steps vs the microbenchmark ``simulate --fsdp`` prices it with.

``simulate --dp N --fsdp`` adds FSDP2's host work to a one-process trace: per ``fully_shard``
unit, ``a + b·params + c·bytes`` on its first forward op and again on its first backward op
(:func:`echo_sim.cost.cpu_overheads.fsdp_unit`, fitted on ``profile-comm``'s samples: the
pre-forward hooks, the all-gathers' copy-in and copy-out, the buffers' allocation, the
DTensor parameter swaps, the reduce-scatters' issue). This checks that price against what the
same work costs inside real models' steps, measured side by side in the same two gloo
processes:

* **in-model**, per model (the examples' GPT, the Hugging Face BERT and Llama and the
  CIFAR-style ResNet at the accuracy benchmark's shapes, each sharded as its workload shards
  it: one unit per block or layer, then the root): the calling thread's CPU time of forward
  (with the loss) and of backward of the FSDP2 model minus that of the plain model, samples
  of the two interleaved, a barrier before each, gradients set to None after each;
* **blocks**: what ``profile-comm`` measures now (units of transformer MLP blocks on 3-D
  input that needs grad, :func:`echo_sim.measure.host_overheads.fsdp_samples`), summed over
  the model's units at each unit's parameters and bytes, as ``simulate`` sums it;
* **Linear units**: what it measured before 2026-11-27 (units of one to three
  ``nn.Linear`` on 64 tokens of 2-D input), summed the same way.

Thread CPU time leaves out the blocking collectives' waits and preemption, so the medians
are intrinsic costs. Each round measures everything once; the spread over rounds is the
noise of one profile's price.

Usage::

    python benchmarks/fsdp_host_cost.py [--models gpt,bert,llama,resnet] [--samples 12] [--rounds 3]
        [--output benchmarks/results/fsdp_host_cost.json]

Writes the JSON and prints a markdown table; takes two to three minutes on 2 cores.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

__all__ = ["MODELS", "main", "table", "units"]

RESULTS = REPO / "benchmarks" / "results" / "fsdp_host_cost.json"
MODELS = ("gpt", "bert", "llama", "resnet")
LINEAR_UNITS = ((1, 32), (3, 32), (1, 256))  # (Linears per unit, width): the one before


# ------------------------------------------------------------------------------ worker
def units(name: str, model: Any) -> list[Any]:
    """The modules the ``name`` workload shards as units before its root (its own order)."""
    if name == "gpt":
        return list(model.blocks.values())
    if name == "bert":
        return list(model.bert.encoder.layer)
    if name == "llama":
        return list(model.model.layers)
    if name == "resnet":
        return list(model.blocks())
    raise ValueError(f"models: unknown model {name!r}; known: {', '.join(MODELS)}")


def _shapes(name: str, model: Any) -> list[tuple[int, int]]:
    """(parameters, bytes) per unit, the root's (what no unit holds) last, empty ones left
    out: what ``simulate`` prices each unit at."""
    seen: set[int] = set()
    out = []
    for u in units(name, model):
        ps = list(u.parameters())
        seen.update(id(p) for p in ps)
        out.append((len(ps), sum(p.numel() * p.element_size() for p in ps)))
    rest = [p for p in model.parameters() if id(p) not in seen]
    out.append((len(rest), sum(p.numel() * p.element_size() for p in rest)))
    return [s for s in out if s[0]]


def _in_model(name: str, build: Callable[[], Any], loss: Callable[[Any], Any], mesh: Any,
              samples: int) -> dict[str, Any]:
    """Median forward and backward µs of the FSDP2 model minus the plain one, interleaved."""
    from torch.distributed.fsdp import fully_shard

    from benchmarks.ddp_host_cost import wrapped_minus_plain

    sharded = build()
    for u in units(name, sharded):
        fully_shard(u, mesh=mesh)
    fully_shard(sharded, mesh=mesh)
    # one warm-up round: FSDP2's lazy init runs in it
    return wrapped_minus_plain(sharded, build(), loss, samples)


def _linear_units(mesh: Any, samples: int) -> dict[str, list[float]]:
    """The microbenchmark before 2026-11-27, as it ran (``fsdp_*`` samples of units of
    Linears on 64 tokens of 2-D input without grad, gradients accumulating)."""
    import torch
    from torch import nn
    from torch.distributed.fsdp import fully_shard

    from benchmarks.ddp_host_cost import wrapped_minus_plain
    from echo_sim.measure.host_overheads import FSDP_UNITS

    out: dict[str, list[float]] = {k: [] for k in ("fsdp_fw_cpu_us", "fsdp_bw_cpu_us",
                                                   "fsdp_params", "fsdp_unit_bytes")}
    for linears, h in LINEAR_UNITS:
        x = torch.randn(64, h)

        def build(linears: int = linears, h: int = h) -> Any:
            return nn.Sequential(*(nn.Sequential(*(nn.Linear(h, h) for _ in range(linears)))
                                   for _ in range(FSDP_UNITS)))

        sharded = build()
        for unit in sharded:
            fully_shard(unit, mesh=mesh)
        fully_shard(sharded, mesh=mesh)
        med = wrapped_minus_plain(sharded, build(), lambda m, x=x: m(x), samples,
                                  zero=False)  # as it did
        out["fsdp_fw_cpu_us"].append(max(med["fw_us"], 0.0) / FSDP_UNITS)
        out["fsdp_bw_cpu_us"].append(max(med["bw_us"], 0.0) / FSDP_UNITS)
        out["fsdp_params"].append(2.0 * linears)
        out["fsdp_unit_bytes"].append(4.0 * linears * (h * h + h))
    return out


def _price(calibration: dict[str, list[float]], world: int) -> dict[str, list[float]]:
    """The (a, b, c) planes ``simulate`` fits on ``calibration``'s FSDP2 samples."""
    from echo_sim.cost.comm_profile import CommProfile
    from echo_sim.cost.cpu_overheads import fsdp_unit

    cost = fsdp_unit(CommProfile(backend="gloo", device="cpu", host="", world_size=world,
                                 samples={}, calibration=calibration))
    assert cost is not None
    return {"fw": [cost.fw_a_us, cost.fw_b_us, cost.fw_c_us_per_byte],
            "bw": [cost.bw_a_us, cost.bw_b_us, cost.bw_c_us_per_byte]}


def _gathered(samples: list[dict[str, list[float]]]) -> dict[str, list[float]]:
    """Every rank's samples, ranks in turn, as a profile keeps them (configurations once)."""
    from echo_sim.measure.host_overheads import CONFIG_KEYS

    out: dict[str, list[float]] = {}
    for k in samples[0]:
        out[k] = list(samples[0][k]) if k in CONFIG_KEYS else [
            x for s in samples for x in s[k]]
    return out


def worker(models: Sequence[str], samples: int, rounds: int, out: Path) -> None:
    """One rank (under torchrun): every model's in-model cost and both microbenchmarks'
    prices (from every rank's samples, as a profile fits them), per round; rank 0 writes
    ``out``."""
    import torch
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh

    from benchmarks.ddp_host_cost import model_and_loss
    from echo_sim.measure.host_overheads import fsdp_samples

    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    world = dist.get_world_size()
    mesh = init_device_mesh("cpu", (world,))
    built = {m: model_and_loss(m) for m in models}
    res: dict[str, Any] = {"models": {}, "blocks": [], "linear_units": []}
    for m, (build, _) in built.items():
        res["models"][m] = {"units": _shapes(m, build()), "rounds": []}
    for _ in range(rounds):
        for m, (build, loss) in built.items():
            res["models"][m]["rounds"].append(_in_model(m, build, loss, mesh, samples))
        for key, measure in (("blocks", fsdp_samples), ("linear_units", _linear_units)):
            mine = measure(mesh, samples)
            every: list[Any] = [None] * world
            dist.all_gather_object(every, mine)
            res[key].append(_price(_gathered(every), world))
    if dist.get_rank() == 0:
        out.write_text(json.dumps(res, indent=1))
    dist.barrier()
    dist.destroy_process_group()


# ------------------------------------------------------------------------------ parent
def _sum(plane: Sequence[float], shapes: Sequence[Sequence[float]]) -> float:
    """A price summed over units of (parameters, bytes)."""
    return sum(plane[0] + plane[1] * n + plane[2] * nb for n, nb in shapes)


def table(res: dict[str, Any]) -> str:
    """Markdown: per model, in-model µs per step (per round) against both microbenchmarks'
    prices summed over its units, and the in-model ÷ price ratios (forward + backward)."""
    from benchmarks.torchrun_job import value_range as rng

    lines = ["| model | units | parameters per unit | MiB per unit | in-model fw / bw µs | "
             "blocks fw / bw µs (now) | Linear units fw / bw µs (before) | in-model ÷ "
             "blocks | in-model ÷ Linear units |", "|---|---|---|---|---|---|---|---|---|"]
    for m, r in res["models"].items():
        sh = r["units"]
        fw = [x["fw_us"] for x in r["rounds"]]
        bw = [x["bw_us"] for x in r["rounds"]]
        tot = [a + b for a, b in zip(fw, bw, strict=True)]
        cols = []
        ratios = []
        for key in ("blocks", "linear_units"):
            pf = [_sum(k["fw"], sh) for k in res[key]]
            pb = [_sum(k["bw"], sh) for k in res[key]]
            cols.append(f"{rng(pf)} / {rng(pb)}")
            ratios.append(rng([t / (a + b) for t, a, b in zip(tot, pf, pb, strict=True)], 2))
        ns = [n for n, _ in sh]
        mib = [nb / (1 << 20) for _, nb in sh]
        lines.append(f"| {m} | {len(sh)} | {min(ns)}–{max(ns)} | {min(mib):.2f}–{max(mib):.2f} "
                     f"| {rng(fw)} / {rng(bw)} | {cols[0]} | {cols[1]} | {ratios[0]} | "
                     f"{ratios[1]} |")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    from benchmarks.torchrun_job import host_cost_main

    return host_cost_main(argv, script=__file__, doc=__doc__ or "", models=MODELS,
                          results=RESULTS, rounds=3, worker=worker, table=table)


if __name__ == "__main__":
    raise SystemExit(main())
