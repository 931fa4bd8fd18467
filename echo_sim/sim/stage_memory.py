"""Peak memory of one pipeline rank, from the same stage split the time plan uses.

``simulate`` and ``search`` both price memory here, so the layouts search prunes by memory
are exactly the ones simulate would call out of memory.

Per pipeline rank ``s`` holding chunks ``c = 0..V-1`` (virtual stages):

* model states (:func:`~echo_sim.cost.memory_model.zero_state_bytes`, ZeRO §3.1 and §5):
  parameters, gradients and optimizer state of the rank's TP-sharded parameters, sharded
  ``dp`` ways under FSDP (ZeRO-3); the optimizer state under ZeRO-1, it and the gradients
  under ZeRO-2;
* activations: the largest sum, over the rank's schedule (:func:`stage_actions`), of the
  chunks' per-micro-batch activations in flight (a forward adds its chunk's, a backward
  frees it), plus the largest recomputation working set of one chunk (held once);
* buffers: DDP keeps a gradient-bucket copy of the parameters; FSDP2
  (``torch/distributed/fsdp/_fully_shard/_fsdp_collectives.py``) keeps the root's parameters
  unsharded from forward through backward, a block unit unsharded while it runs (and the
  next prefetched, on GPUs), and stages ``S`` bytes of all-gather output plus the ``S/dp``
  copy-in for its biggest unit; DeepSpeed ZeRO-1/2 its ipg gradient buffer(s)
  (:meth:`~echo_sim.workload.zero.ZeroSpec.ipg_buffer_bytes`), at any ``dp``.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from echo_sim.cost.memory_model import (
    MemoryEstimate,
    activation_bytes,
    recompute_working_bytes,
    zero_state_bytes,
)
from echo_sim.workload.fsdp import ROOT, fsdp_units
from echo_sim.workload.pipeline import stage_actions
from echo_sim.workload.tensor_parallel import tp_param_bytes
from echo_sim.workload.zero import ZeroSpec

__all__ = ["ChunkMemory", "chunk_memory", "stage_memory"]


@dataclass(frozen=True)
class ChunkMemory:
    """What one virtual stage (chunk) contributes to memory (bytes).

    ``activations_bytes``: one micro-batch's saved activations; ``working_bytes``: the
    recomputation working set; ``root_unit_bytes`` / ``biggest_unit_bytes``: the FSDP root
    unit and the largest other unit (TP-sharded parameter bytes)."""

    param_bytes: float
    activations_bytes: float
    working_bytes: float
    root_unit_bytes: float
    biggest_unit_bytes: float


def chunk_memory(fw: Sequence[Any], *, tp: int, mb_scale: float, recompute: bool | str,
                 sequence_parallel: bool, has_blocks: bool) -> ChunkMemory:
    """:class:`ChunkMemory` of the forward ops ``fw`` of one chunk."""
    units = {u: float(sum(tp_param_bytes(o, tp) for o in ops))
             for u, ops in fsdp_units(fw, has_blocks).items()}
    root = units.pop(ROOT, 0.0)
    return ChunkMemory(
        param_bytes=float(sum(tp_param_bytes(o, tp) for o in fw)),
        activations_bytes=activation_bytes(fw, tp=tp, mb_scale=mb_scale, recompute=recompute,
                                           include_working=False,
                                           sequence_parallel=sequence_parallel),
        working_bytes=recompute_working_bytes(fw, tp=tp, mb_scale=mb_scale,
                                              recompute=recompute),
        root_unit_bytes=root, biggest_unit_bytes=max(units.values(), default=0.0))


@functools.lru_cache(maxsize=4096)
def _actions(schedule: str, pp: int, m: int, stage: int, v: int) -> tuple[tuple[bool, int], ...]:
    """(is forward, chunk) in execution order, memoised: search asks for the same ranks
    of many layouts."""
    return tuple((ph == "F", c) for ph, c, _ in stage_actions(schedule, pp, m, stage, v))


@functools.lru_cache(maxsize=4096)
def _in_flight(schedule: str, pp: int, m: int, stage: int) -> int:
    """Most micro-batches whose activations one single-chunk rank holds at once."""
    cur = best = 0
    for fw, _ in _actions(schedule, pp, m, stage, 1):
        cur += 1 if fw else -1
        best = max(best, cur)
    return best


def _peak_activations(chunks: Sequence[ChunkMemory], schedule: str, pp: int, m: int,
                      stage: int) -> float:
    if len(chunks) == 1:  # the common case, and the walk's result times one constant
        return chunks[0].activations_bytes * _in_flight(schedule, pp, m, stage)
    cur = best = 0.0
    for fw, c in _actions(schedule, pp, m, stage, len(chunks)):
        cur += chunks[c].activations_bytes if fw else -chunks[c].activations_bytes
        best = max(best, cur)
    return best


def stage_memory(chunks: Sequence[ChunkMemory], *, schedule: str, pp: int,
                 micro_batches: int, stage: int, dp: int, fsdp: bool, elem_bytes: int,
                 states: int, mixed: bool, is_cpu: bool,
                 zero: ZeroSpec | None = None) -> MemoryEstimate:
    """Peak memory of pipeline rank ``stage`` holding ``chunks`` (module docstring);
    ``zero``: DeepSpeed ZeRO-1/2 instead of DDP (ignored with ``fsdp``)."""
    pbytes = sum(c.param_bytes for c in chunks)
    zero = None if fsdp else zero
    params, grads, opt = zero_state_bytes(pbytes, elem_bytes=elem_bytes, states=states,
                                          mixed=mixed, dp=dp,
                                          stage=3 if fsdp else zero.stage if zero else 0)
    acts = _peak_activations(chunks, schedule, pp, micro_batches, stage) \
        + max((c.working_bytes for c in chunks), default=0.0)
    buffers = 0.0
    if fsdp:
        root = sum(c.root_unit_bytes for c in chunks)
        biggest = max((c.biggest_unit_bytes for c in chunks), default=0.0) or root
        gathered = pbytes if pp > 1 else root + biggest * (1 if is_cpu else 2)
        buffers = gathered + biggest * (1 + 1 / dp)
    elif zero is not None:
        buffers = zero.ipg_buffer_bytes(elem_bytes, pbytes, is_cpu=is_cpu)
    elif dp > 1:
        buffers = pbytes
    return MemoryEstimate(params_bytes=params, grads_bytes=grads, optimizer_bytes=opt,
                          activations_bytes=acts, buffers_bytes=buffers)
