"""Searched layouts as Aceso config JSON (``search --format aceso``), the file Aceso's search
writes to ``--config-save-path`` and its runtime reads with ``--flexpipe-config FILE``.

Fields, as Aceso's example config has them (seeds/002, "Search")::

    model_name, model_size, num_layers, seq_length, max_position_embeddings,
    num_attention_heads, hidden_size, global_batch_size, micro_batch_size, num_stages,
    num_gpus[stage], checkpoint_activations[stage], resharding_stages[stage],
    num_ops_in_each_stage[stage], model_parallel_size_of_each_op[stage][op],
    data_parallel_size_of_each_op[stage][op], recompute_ops[stage][op],
    algo_of_each_op[stage][op]

How an echo layout fills them:

* the ops of a stage are the forward ops ``simulate`` puts on it (the same stage split, read
  from the plan of the layout's own simulation), so ``sum(num_ops_in_each_stage)`` is the
  model's op count (GPT from an Aceso database: ``1 + 13 · num_layers + 2``, as in Aceso);
* ``num_gpus[s] = dp · tp_s`` of stage ``s`` (a heterogeneous layout's per-stage degree,
  else the layout's one ``tp``); every op of it has ``tp_s`` and ``dp`` (every stage keeps
  ``dp`` replicas, simulate's rule: Aceso's example, ``num_gpus [1, 1, 2]``);
* ``micro_batch_size`` is Aceso's pipeline micro-batch, which each op splits over its
  data-parallel size: echo's per-replica micro-batch ``· dp``;
* recomputation, per stage (a heterogeneous layout's own, else the layout's one mode):
  ``full`` sets every op of the stage (and ``checkpoint_activations``), ``selective`` the
  attention core (``kind == "Attention"``), ``none`` nothing;
* ``algo_of_each_op`` 0 (Aceso's default partition dimension, the one echo's Megatron
  pattern shards) and ``resharding_stages`` false (one layout per stage).

Aceso's runtime runs Megatron-style data, tensor and pipeline parallelism with a 1F1B
schedule: a layout with FSDP, sequence parallelism, GPipe or interleaved virtual stages has
no Aceso form (:func:`has_aceso_form`) and is not written; ``search --format aceso`` searches
:data:`ACESO_DIMENSIONS` unless ``--space`` says otherwise.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from echo_sim.errors import ConfigError
from echo_sim.search.result import Candidate
from echo_sim.search.space import SearchSpace
from echo_sim.trace.outfiles import atomic_write, check_output_dir, check_output_path

__all__ = ["ACESO_DIMENSIONS", "FIELDS", "aceso_config", "aceso_file_name", "has_aceso_form",
           "write_aceso_configs"]

ACESO_DIMENSIONS: tuple[str, ...] = ("dp", "tp", "pp", "micro-batch", "recompute")
"""The search dimensions whose every layout has an Aceso config form."""

FIELDS: tuple[str, ...] = (
    "model_name", "model_size", "num_layers", "seq_length", "max_position_embeddings",
    "num_attention_heads", "hidden_size", "global_batch_size", "micro_batch_size",
    "num_stages", "num_gpus", "checkpoint_activations", "resharding_stages",
    "num_ops_in_each_stage", "model_parallel_size_of_each_op",
    "data_parallel_size_of_each_op", "recompute_ops", "algo_of_each_op",
)


def has_aceso_form(layout: Any) -> bool:
    """True when Aceso's runtime can run ``layout`` (DDP, Megatron TP, 1F1B pipeline)."""
    return (layout.vpp == 1 and layout.sharding == "ddp" and not layout.sp
            and (layout.pp == 1 or layout.schedule == "1f1b"))


def _stage_ops(workload: Any, cand: Candidate, space: SearchSpace) -> list[list[Any]]:
    """Forward ops of every pipeline stage, as the layout's own simulation splits them."""
    from echo_sim.sim.simulate import simulate

    res = simulate(workload, cand.layout.sim_config(space), keep=True)
    if res.built is None:  # pragma: no cover - keep=True always keeps it
        raise ConfigError("layout: simulate kept no plan")
    return [list(sp.fw) for sp in res.built.plan.stages]


def _recompute_flags(ops: list[Any], mode: str) -> list[int]:
    if mode == "full":
        return [1] * len(ops)
    if mode == "selective":
        return [1 if o.kind == "Attention" else 0 for o in ops]
    return [0] * len(ops)


def aceso_config(cand: Candidate, *, workload: Any, space: SearchSpace) -> dict[str, Any]:
    """The Aceso config dict of ``cand`` (module docstring). Raises :class:`ConfigError` for
    a layout without an Aceso form (:func:`has_aceso_form`)."""
    lay = cand.layout
    if not has_aceso_form(lay):
        raise ConfigError(f"cand: layout {lay.label} has no Aceso config form (Aceso runs "
                          "DDP, Megatron tensor parallelism and 1F1B pipelines)")
    model = workload.model
    stages = _stage_ops(workload, cand, space)
    seq = int(model.get("seq") or 0)
    tps = list(lay.stage_tp) or [lay.tp] * lay.pp
    rcs = list(lay.stage_recompute) or [lay.recompute] * lay.pp
    return {
        "model_name": str(model.get("name") or "echo"),
        "model_size": str(model.get("size") or "traced"),
        "num_layers": int(model.get("layers") or workload.num_blocks),
        "seq_length": seq,
        "max_position_embeddings": seq,
        "num_attention_heads": int(model.get("heads") or 0),
        "hidden_size": int(model.get("hidden") or 0),
        "global_batch_size": space.global_batch,
        "micro_batch_size": lay.micro_batch * lay.dp,
        "num_stages": lay.pp,
        "num_gpus": [lay.dp * t for t in tps],
        "checkpoint_activations": [rc != "none" for rc in rcs],
        "resharding_stages": [False] * lay.pp,
        "num_ops_in_each_stage": [len(ops) for ops in stages],
        "model_parallel_size_of_each_op": [[t] * len(ops) for t, ops in zip(tps, stages,
                                                                             strict=True)],
        "data_parallel_size_of_each_op": [[lay.dp] * len(ops) for ops in stages],
        "recompute_ops": [_recompute_flags(ops, rc) for rc, ops in zip(rcs, stages,
                                                                        strict=True)],
        "algo_of_each_op": [[0] * len(ops) for ops in stages],
    }


def aceso_file_name(cfg: dict[str, Any], rank: int) -> str:
    """``{model_name}_{model_size}_top{rank}.json`` (rank from 1)."""
    return f"{cfg['model_name']}_{cfg['model_size']}_top{rank}.json"


def write_aceso_configs(path: str | Path, cands: list[Candidate], *, workload: Any,
                        space: SearchSpace, overwrite: bool = False) -> list[Path]:
    """Write the fitting ones of ``cands`` (best first) as Aceso configs; returns the paths.

    ``path`` ending in ``.json``: the best one, to that file; else a directory (made when
    absent) holding one :func:`aceso_file_name` file per candidate. Layouts without an Aceso
    form (:func:`has_aceso_form`) are skipped. Raises :class:`ConfigError` when nothing fits
    or none has an Aceso form, :class:`~echo_sim.trace.outfiles.OutputError` when a file exists and
    ``overwrite`` is false.
    """
    p = Path(path)
    configs: list[dict[str, Any]] = []
    for c in cands:
        if not c.fits or not has_aceso_form(c.layout):
            continue
        configs.append(aceso_config(c, workload=workload, space=space))
        if p.suffix == ".json":
            break
    if not configs:
        raise ConfigError("cands: no fitting layout with an Aceso config form (Aceso runs "
                          "DDP, Megatron tensor parallelism and 1F1B pipelines)")
    if p.suffix == ".json":
        return [atomic_write(p, _dump(configs[0]), overwrite=overwrite)]
    check_output_dir(p)
    names = [p / aceso_file_name(cfg, i) for i, cfg in enumerate(configs, 1)]
    if p.is_dir():  # refuse before writing any, so a refusal leaves the directory as it was
        for f in names:
            check_output_path(f, overwrite=overwrite)
    p.mkdir(exist_ok=True)
    return [atomic_write(f, _dump(cfg), overwrite=overwrite)
            for f, cfg in zip(names, configs, strict=True)]


def _dump(cfg: dict[str, Any]) -> bytes:
    return (json.dumps(cfg, indent=4) + "\n").encode()
