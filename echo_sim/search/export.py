"""The chosen layout as a config file ``examples/train.py --config FILE`` runs.

Format (JSON, ``"format": "echo-search-config/1"``; in the spirit of Aceso's config
files): ``layout`` (the searched degrees, micro-batch, sharding, recomputation,
schedule), ``prediction`` (iteration time, throughput, peak memory), ``model`` (the
shape, where the trace tells it) and ``train``: the ``examples/train.py`` flags that run
the layout with torch-native parallelism — DDP, FSDP2 ``fully_shard``, DTensor tensor
parallel or ``torch.distributed.pipelining`` (1F1B or GPipe) — or ``null`` with
``train_note`` saying why not (train.py runs one kind of parallelism over all its
processes: a 2-D/3-D layout, or an interleaved schedule, has no train.py form).
A DeepSpeed ZeRO-1/2 row has none either; its ``deepspeed`` entry is the batch and
``zero_optimization`` part of the DeepSpeed config that runs it (``train_batch_size`` =
``train_micro_batch_size_per_gpu`` · ``gradient_accumulation_steps`` · data-parallel degree,
as DeepSpeed checks; ``null`` for every other row).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from echo_sim.search.result import Candidate
from echo_sim.trace.outfiles import atomic_write

__all__ = ["FORMAT", "deepspeed_config", "train_config", "train_flags", "write_train_config"]

FORMAT = "echo-search-config/1"
_MODEL_FLAGS = {"layers": "layers", "hidden": "hidden", "heads": "heads", "seq": "seq",
                "vocab": "vocab"}


def train_flags(cand: Candidate, global_batch: int) -> tuple[dict[str, Any] | None, str]:
    """(train.py settings, note): settings ``None`` when train.py cannot express the layout."""
    lay = cand.layout
    degrees = {"dp": lay.dp, "tp": lay.tp, "pp": lay.pp}
    parallel = [k for k, v in degrees.items() if v > 1]
    if len(parallel) > 1:
        return None, (f"{lay.label} combines {' and '.join(parallel)}; examples/train.py runs "
                      "one kind of parallelism over all processes")
    if lay.vpp > 1:
        return None, "interleaved virtual stages are not expressed by examples/train.py"
    if lay.sp:
        return None, "sequence parallelism is not expressed by examples/train.py"
    if lay.zero:
        return None, (f"ZeRO-{lay.zero} is DeepSpeed's; examples/train.py runs torch-native DDP "
                      "and FSDP2 (run it with DeepSpeed and zero_optimization.stage "
                      f"{lay.zero})")
    if not parallel:
        name = "single"
    elif parallel[0] == "dp":
        name = "fsdp" if lay.fsdp else "ddp"
    else:
        name = parallel[0]
    out: dict[str, Any] = {"layout": name, "micro_batch": lay.micro_batch,
                           "global_batch": global_batch, "recompute": lay.recompute,
                           "schedule": lay.schedule if name == "pp" else "1f1b",
                           "nproc": lay.world}
    return out, f"torchrun --nproc_per_node {lay.world} examples/train.py --config FILE"


def deepspeed_config(cand: Candidate, global_batch: int) -> dict[str, Any] | None:
    """The DeepSpeed config entries of a ZeRO-1/2 row (module docstring); None otherwise."""
    lay = cand.layout
    if not lay.zero:
        return None
    return {"train_batch_size": global_batch,
            "train_micro_batch_size_per_gpu": lay.micro_batch,
            "gradient_accumulation_steps": lay.micro_batches(global_batch),
            "zero_optimization": {"stage": lay.zero}}


def train_config(cand: Candidate, *, global_batch: int, model: dict[str, Any] | None = None,
                 source: str | None = None) -> dict[str, Any]:
    """The config dict of ``cand`` (module docstring)."""
    flags, note = train_flags(cand, global_batch)
    shape = {k: int(v) for k, v in (model or {}).items() if k in _MODEL_FLAGS and v}
    if flags is not None:
        flags.update({_MODEL_FLAGS[k]: v for k, v in shape.items()})
    return {
        "format": FORMAT,
        "source": source,
        "layout": {**cand.layout.to_dict(), "world_size": cand.layout.world,
                   "global_batch": global_batch, "micro_batches": cand.micro_batches},
        "prediction": {"iteration_time_us": cand.iteration_time_us,
                       "samples_per_s": cand.samples_per_s,
                       "peak_memory_bytes": cand.peak_memory_bytes,
                       "memory_limit_bytes": cand.memory_limit_bytes, "fits": cand.fits},
        "model": shape,
        "train": flags,
        "train_note": note,
        "deepspeed": deepspeed_config(cand, global_batch),
    }


def write_train_config(path: str | Path, cand: Candidate, *, global_batch: int,
                       model: dict[str, Any] | None = None, source: str | None = None,
                       overwrite: bool = False) -> Path:
    """Write :func:`train_config` to ``path``; returns the path.

    Atomic and link-safe (:func:`~echo_sim.trace.outfiles.atomic_write`): raises
    :class:`~echo_sim.trace.outfiles.OutputError` when ``path`` exists and ``overwrite`` is
    false, is not a regular file, its directory does not exist, or it cannot be written."""
    cfg = train_config(cand, global_batch=global_batch, model=model, source=source)
    return atomic_write(path, (json.dumps(cfg, indent=1) + "\n").encode(), overwrite=overwrite)
