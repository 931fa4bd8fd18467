"""Graph mode: a model's workload graph without timing a training run.

:func:`write_graph_trace` exports the model's forward (+ loss) operator graph
(:mod:`~echo_trace.graph_mode.ops`), writes it as an echo trace directory
``<path>/0_0/{trace.json,meta.json,dag.gml}`` timed by a roofline
(:mod:`~echo_trace.graph_mode.workload`), and a Chakra execution trace
``<path>/chakra/et.<rank>.et`` (:mod:`~echo_trace.graph_mode.chakra`) for ASTRA-sim.
"""

from __future__ import annotations

import os
import socket
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["GraphResult", "GraphSpec", "write_graph_trace"]


@dataclass(frozen=True, kw_only=True)
class GraphSpec:
    """Where and how: ``path`` root, ``steps`` identical steps, roofline device figures
    (``peak_tflops`` TFLOP/s, ``mem_bw_gbs`` GB/s, ``efficiency``), ``data_parallel`` ranks
    in the Chakra export, with ZeRO ``zero_stage``'s collectives (0: DDP); ``device_name`` is written to meta.json (name the device the
    roofline figures describe, so echo_sim can rescale to another preset)."""

    path: str
    steps: int = 3
    peak_tflops: float = 312.0
    mem_bw_gbs: float = 2039.0
    efficiency: float = 0.5
    data_parallel: int = 1
    overwrite: bool = False
    framework: str = "pytorch"
    device_name: str = "a100"
    zero_stage: int = 0

    def __post_init__(self) -> None:
        if self.steps < 1:
            raise ValueError(f"steps={self.steps}: expected >= 1")
        if self.zero_stage not in (0, 1, 2, 3):
            raise ValueError(f"zero_stage={self.zero_stage}: expected 0, 1, 2 or 3")
        if self.data_parallel < 1:
            raise ValueError(f"data_parallel={self.data_parallel}: expected >= 1")
        if not str(self.path):
            raise ValueError("path='': expected a directory")


@dataclass
class GraphResult:
    """What was written and the roofline step estimate."""

    rank_dir: Path
    chakra_path: Path
    num_ops: int
    num_events: int
    step_time_us: float
    step_flops: float
    method: str


def write_graph_trace(bundle: Any, spec: GraphSpec) -> GraphResult:
    """Export ``bundle.model`` on one ``bundle.make_batch()`` and write the files."""
    import torch

    import echo_trace
    from echo_trace.dag import build_step_dag, dag_gml
    from echo_trace.graph_mode.ops import operator_graph
    from echo_trace.graph_mode.workload import (
        Roofline,
        group_ops,
        trace_events,
        write_chakra_step,
    )
    from echo_trace.profile.models import ProfileError
    from echo_trace.writer import dir_is_nonempty, write_rank_dir

    rank_dir = Path(spec.path) / "0_0"
    if dir_is_nonempty(rank_dir) and not spec.overwrite:
        raise ProfileError(f"--path {spec.path}: {rank_dir} is not empty (pass --overwrite)")
    roof = Roofline(peak_tflops=spec.peak_tflops, mem_bw_gbs=spec.mem_bw_gbs,
                    efficiency=spec.efficiency)
    model = bundle.model
    model.train()
    graph = operator_graph(model, bundle.make_batch(), bundle.loss_fn)
    groups = group_ops(graph)
    total_param_bytes = sum(p["bytes"] for p in graph.params)
    events, step_us = trace_events(groups, total_param_bytes, roof, spec.steps)
    last = spec.steps - 1
    gml = dag_gml(build_step_dag(events, last))
    base_ns = int(time.time()) * 1_000_000_000
    info = dict(getattr(bundle, "info", {}) or {})
    meta: dict[str, Any] = {
        "echo_version": echo_trace.__version__, "torch_version": torch.__version__, "rank": 0,
        "local_rank": 0, "node_rank": 0, "world_size": 1, "local_world_size": 1,
        "rank_source": "single", "backend": None, "device": "cuda", "device_name": spec.device_name,
        "host": socket.gethostname(), "pid": os.getpid(), "steps": list(range(spec.steps)),
        "partial_steps": [], "step_source": "graph", "start_step": 0, "end_step": spec.steps,
        "clock_offset_us": 0.0, "clock_sync": "none", "base_time_ns": base_ns,
        "timer": "roofline", "micro_batch_size": info.get("micro_batch_size"),
        "params": graph.params, "param_bytes": total_param_bytes, "buckets": [],
        "dropped_events": 0, "max_events": len(events), "disabled_reason": None,
        "memory_interval_ms": 0, "depth": None, "dag_step": last, "synthetic": True,
        "graph": {"method": graph.method, "operators": len(graph.real_ops),
                  "peak_tflops": spec.peak_tflops, "mem_bw_gbs": spec.mem_bw_gbs,
                  "efficiency": spec.efficiency, "framework": spec.framework,
                  "chakra_data_parallel": spec.data_parallel, "zero_stage": spec.zero_stage},
        "model": {k: v for k, v in info.items() if k not in ("source",)},
    }
    if info.get("micro_batch_size") is not None:
        meta["training"] = {"framework": spec.framework,
                            "micro_batch_size": info["micro_batch_size"],
                            "gradient_accumulation_steps": 1, "data_parallel_size": 1,
                            "global_batch_size": info["micro_batch_size"]}
    write_rank_dir(rank_dir, events=events, meta=meta, dag_gml=gml, offset_us=0.0,
                   base_time_ns=base_ns)
    chakra = write_chakra_step(Path(spec.path), graph, roof, total_param_bytes,
                               spec.data_parallel, spec.zero_stage)
    return GraphResult(rank_dir=rank_dir, chakra_path=chakra, num_ops=len(graph.real_ops),
                       num_events=len(events), step_time_us=step_us,
                       step_flops=3.0 * graph.flops, method=graph.method)
