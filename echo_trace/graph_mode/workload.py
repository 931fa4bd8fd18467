"""The workload graph as an echo trace (``dag.gml`` + trace.json + meta.json) and a Chakra ET.

Operators (:mod:`echo_trace.graph_mode.ops`) are grouped into events the way echo_trace
records a run: consecutive operators of one module make one ``FW.<module path>`` event
(``occ`` counts repeats: a parent module's own operators before and after its children),
with ``type``, ``param_bytes``, ``in_bytes``, ``out_bytes`` and ``flops``. Backward events
follow in reverse order, then ``UPDATE.AdamW`` and a ``STEP`` slice; ``steps`` identical
steps are written back to back. ``dag.gml`` is built by :mod:`echo_trace.dag` (the contract's
rules), so ``echo_sim validate/simulate/replay`` read the directory like a captured one.

Times come from a roofline (Williams et al. 2009, "Roofline"), as ``echo_sim synth`` does,
applied to each operator (in eager mode each is a kernel of its own, reading its inputs and
writing its outputs), an event lasting the sum of its operators::

    op_us = max(flops / (peak_flops · efficiency), bytes / memory_bandwidth)

forward bytes = inputs + outputs + parameters; backward: 2x the FLOPs (input and weight
gradients, Narayanan et al. 2021 eq. 2) and 2·inputs + outputs + 2·parameters bytes;
AdamW update: 28 bytes per fp32 parameter (read p, g, m, v; write p, m, v), memory-bound.
The Chakra nodes are the same operators at the same times (whole µs, rounded so that their
running sum stays within 0.5 µs of the exact one): the ET and the echo trace of one graph
add up to the same compute time.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from echo_trace.graph_mode.chakra import COLLECTIVE_TYPES, ChakraNode, write_chakra
from echo_trace.graph_mode.ops import OpGraph, OpNode

__all__ = ["ADAM_BYTES_PER_PARAM_BYTE", "Group", "Roofline", "bw_us", "chakra_nodes", "fw_us",
           "group_ops", "trace_events"]

ADAM_BYTES_PER_PARAM_BYTE = 7  # 28 bytes per 4-byte parameter (module docstring)


@dataclass(frozen=True, kw_only=True)
class Roofline:
    """``peak_tflops`` (dense matmul TFLOP/s), ``mem_bw_gbs`` (GB/s), ``efficiency`` (0, 1]."""

    peak_tflops: float
    mem_bw_gbs: float
    efficiency: float

    def __post_init__(self) -> None:
        if self.peak_tflops <= 0 or self.mem_bw_gbs <= 0:
            raise ValueError(f"peak_tflops={self.peak_tflops}, mem_bw_gbs={self.mem_bw_gbs}: "
                             f"expected > 0")
        if not 0 < self.efficiency <= 1:
            raise ValueError(f"efficiency={self.efficiency}: expected a number in (0, 1]")

    def dur_us(self, flops: float, nbytes: float) -> float:
        return max(flops / (self.peak_tflops * 1e12 * self.efficiency) * 1e6,
                   nbytes / (self.mem_bw_gbs * 1e9) * 1e6)


def fw_us(o: OpNode, roof: Roofline) -> float:
    """Forward time of one operator (module docstring)."""
    return roof.dur_us(o.flops, o.in_bytes + o.out_bytes + o.param_bytes)


def bw_us(o: OpNode, roof: Roofline) -> float:
    """Backward time of one operator: 2x its FLOPs, 2·in + out + 2·param bytes."""
    return roof.dur_us(2.0 * o.flops, 2 * o.in_bytes + o.out_bytes + 2 * o.param_bytes)


class _WholeMicros:
    """Whole-µs durations whose running sum stays within 0.5 µs of the exact running sum
    (each rounded alone, 550 sub-µs operators would drift by hundreds of µs)."""

    def __init__(self) -> None:
        self.exact = 0.0
        self.given = 0

    def __call__(self, us: float) -> int:
        self.exact += us
        d = max(round(self.exact) - self.given, 0)
        self.given += d
        return d


@dataclass
class Group:
    """Consecutive operators of one module: one FW (and one BW) event."""

    name: str
    module: str
    type: str
    ops: list[OpNode]
    flops: float = 0.0
    in_bytes: int = 0
    out_bytes: int = 0
    param_bytes: int = 0


def _resolve(ops: list[OpNode], i: int) -> int:
    """The real operator that produced ``ops[i]``'s data (views pass through), or -1."""
    seen = 0
    while i >= 0 and ops[i].trivial and seen < len(ops):
        i = ops[i].deps[0] if ops[i].deps else -1
        seen += 1
    return i


def group_ops(graph: OpGraph) -> list[Group]:
    """Events of one forward pass (module docstring); bytes counted at group boundaries."""
    ops = graph.ops
    groups: list[Group] = []
    owner: dict[int, int] = {}
    for o in ops:
        if o.trivial:
            continue
        name = o.module or ("loss" if o.module_type == "loss" else graph.root_type)
        if not groups or groups[-1].name != name:
            groups.append(Group(name=name, module=name, type=o.module_type, ops=[]))
        groups[-1].ops.append(o)
        owner[o.index] = len(groups) - 1
    consumed_outside: set[int] = set()
    has_consumer: set[int] = set()
    for gi, g in enumerate(groups):
        seen: set[int | str] = set()  # each outside tensor counted once per group
        for o in g.ops:
            g.flops += o.flops
            g.param_bytes += o.param_bytes
            for source, producer, nbytes in o.inputs:
                src = _resolve(ops, producer) if producer >= 0 else -1
                if src >= 0:
                    has_consumer.add(src)
                    if owner.get(src) == gi:
                        continue
                    consumed_outside.add(src)
                key: int | str = src if src >= 0 else source
                if key in seen:
                    continue
                seen.add(key)
                g.in_bytes += nbytes
    for g in groups:
        g.out_bytes = sum(o.out_bytes for o in g.ops
                          if o.index in consumed_outside or o.index not in has_consumer)
    return groups


def trace_events(groups: list[Group], total_param_bytes: int, roof: Roofline, steps: int,
                 ) -> tuple[list[dict[str, Any]], float]:
    """Recorder-style events (local µs from 0) of ``steps`` identical steps; (events, step µs)."""
    events: list[dict[str, Any]] = []
    fw = [sum(fw_us(o, roof) for o in g.ops) for g in groups]
    bw = [sum(bw_us(o, roof) for o in g.ops) for g in groups]
    update_us = roof.dur_us(0.0, ADAM_BYTES_PER_PARAM_BYTE * total_param_bytes)
    t = 0.0
    step_us = 0.0
    for step in range(steps):
        start = t
        occ: dict[str, int] = {}
        for g, d in zip(groups, fw, strict=True):
            name = "FW." + g.name
            k = occ.get(name, 0)
            occ[name] = k + 1
            args = {"module": g.module, "type": g.type, "param_bytes": g.param_bytes,
                    "in_bytes": g.in_bytes, "out_bytes": g.out_bytes, "flops": g.flops,
                    "step": step, "occ": k}
            events.append({"name": name, "cat": "FW", "ph": "X", "tid": 0, "ts": t, "dur": d,
                           "args": args})
            t += d
        for g, d in zip(reversed(groups), reversed(bw), strict=True):
            name = "BW." + g.name
            k = occ.get(name, 0)
            occ[name] = k + 1
            events.append({"name": name, "cat": "BW", "ph": "X", "tid": 0, "ts": t, "dur": d,
                           "args": {"module": g.module, "type": g.type,
                                    "param_bytes": g.param_bytes, "step": step, "occ": k}})
            t += d
        events.append({"name": "UPDATE.AdamW", "cat": "UPDATE", "ph": "X", "tid": 0, "ts": t,
                       "dur": update_us, "args": {"param_bytes": total_param_bytes,
                                                  "step": step, "occ": 0}})
        t += update_us
        step_us = t - start
        events.append({"name": "STEP", "cat": "step", "ph": "X", "tid": 1, "ts": start,
                       "dur": step_us, "args": {"step": step, "occ": 0}})
    return events, step_us


def _comm(nodes: list[ChakraNode], name: str, collective: str, nbytes: int,
          deps: list[int]) -> int:
    node = ChakraNode(id=len(nodes), name=name, type="COMM_COLL_NODE", data_deps=deps,
                      attrs={"is_cpu_op": False, "comm_type": COLLECTIVE_TYPES[collective],
                             "comm_size": int(nbytes)})
    nodes.append(node)
    return node.id


def chakra_nodes(graph: OpGraph, roof: Roofline, total_param_bytes: int,
                 data_parallel: int, zero_stage: int = 0) -> list[ChakraNode]:
    """One training step of one rank as Chakra nodes: forward operators, their backward
    mirror (an operator's gradient waits for its consumers' gradients), the data-parallel
    collectives when ``data_parallel`` > 1, and the optimizer update.

    Collectives by ``zero_stage`` (Rajbhandari et al. 2020, "ZeRO", §5; sizes are whole
    buffers, nccl-tests convention): 0 (DDP): one gradient all-reduce; 1 and 2: gradient
    reduce-scatter, update of the rank's 1/N partition, all-gather of the updated
    parameters; 3: parameters all-gathered before each operator's forward and backward,
    its gradients reduce-scattered right after its backward, update of the partition.
    """
    if zero_stage not in (0, 1, 2, 3):
        raise ValueError(f"zero_stage={zero_stage}: expected 0, 1, 2 or 3")
    sharded = data_parallel > 1 and zero_stage == 3
    ops = [o for o in graph.ops if not o.trivial]
    whole = _WholeMicros()
    fw_id: dict[int, int] = {}
    nodes: list[ChakraNode] = []
    consumers: dict[int, list[int]] = {o.index: [] for o in ops}
    for o in ops:
        deps: list[int] = []
        for _, producer, _ in o.inputs:
            src = _resolve(graph.ops, producer) if producer >= 0 else -1
            if src in fw_id and fw_id[src] not in deps:
                deps.append(fw_id[src])
                consumers[src].append(o.index)
        label = f"{o.module or graph.root_type}/{o.op}"
        if sharded and o.param_bytes > 0:
            deps.append(_comm(nodes, f"Comm.gather_fw.{label}", "all_gather", o.param_bytes, []))
        nbytes = o.in_bytes + o.out_bytes + o.param_bytes
        node = ChakraNode(id=len(nodes), name=f"FW.{label}",
                          type="COMP_NODE", data_deps=deps,
                          duration_micros=whole(fw_us(o, roof)),
                          attrs={"is_cpu_op": False, "num_ops": int(o.flops),
                                 "tensor_size": ("u", nbytes), "op_type": o.op})
        fw_id[o.index] = node.id
        nodes.append(node)
    last_fw = nodes[-1].id if nodes else None
    bw_id: dict[int, int] = {}
    grad_deps: list[int] = []
    for o in reversed(ops):
        deps = [bw_id[c] for c in consumers[o.index] if c in bw_id]
        if not deps and last_fw is not None:
            deps = [last_fw]
        label = f"{o.module or graph.root_type}/{o.op}"
        if sharded and o.param_bytes > 0:
            deps.append(_comm(nodes, f"Comm.gather_bw.{label}", "all_gather", o.param_bytes, []))
        nbytes = 2 * o.in_bytes + o.out_bytes + 2 * o.param_bytes
        node = ChakraNode(id=len(nodes), name=f"BW.{label}",
                          type="COMP_NODE", data_deps=deps,
                          duration_micros=whole(bw_us(o, roof)),
                          attrs={"is_cpu_op": False, "num_ops": int(2 * o.flops),
                                 "tensor_size": ("u", nbytes), "op_type": o.op})
        bw_id[o.index] = node.id
        nodes.append(node)
        if o.param_bytes > 0:
            grad_deps.append(_comm(nodes, f"Comm.grad.{label}", "reduce_scatter",
                                   o.param_bytes, [node.id]) if sharded else node.id)
    grad_deps = grad_deps or ([nodes[-1].id] if nodes else [])
    update_deps = grad_deps
    if data_parallel > 1 and zero_stage == 0:
        update_deps = [_comm(nodes, "Comm.gradients", "all_reduce", total_param_bytes,
                             grad_deps)]
    elif data_parallel > 1 and zero_stage in (1, 2):
        update_deps = [_comm(nodes, "Comm.gradients", "reduce_scatter", total_param_bytes,
                             grad_deps)]
    shard = data_parallel if data_parallel > 1 and zero_stage > 0 else 1
    update_bytes = ADAM_BYTES_PER_PARAM_BYTE * total_param_bytes // shard
    nodes.append(ChakraNode(
        id=len(nodes), name="UPDATE.AdamW", type="COMP_NODE", data_deps=update_deps,
        duration_micros=whole(roof.dur_us(0.0, update_bytes)),
        attrs={"is_cpu_op": False, "num_ops": 0, "tensor_size": ("u", update_bytes)}))
    if data_parallel > 1 and zero_stage in (1, 2):
        _comm(nodes, "Comm.parameters", "all_gather", total_param_bytes, [nodes[-1].id])
    return nodes


def write_chakra_step(out_dir: Path, graph: OpGraph, roof: Roofline, total_param_bytes: int,
                      data_parallel: int, zero_stage: int = 0) -> Path:
    """``out_dir/chakra/et.<rank>.et`` for every data-parallel rank; returns rank 0's."""
    nodes = chakra_nodes(graph, roof, total_param_bytes, data_parallel, zero_stage)
    meta = {"source": "echo_trace.graph_mode", "export": graph.method,
            "created_unix_s": int(time.time()), "data_parallel": data_parallel,
            "zero_stage": zero_stage}
    paths = write_chakra(out_dir / "chakra", {r: nodes for r in range(data_parallel)},
                         prefix="et", metadata=meta)
    return paths[0]
