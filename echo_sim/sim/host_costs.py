"""Add the calibrated CPU-host costs (:mod:`echo_sim.cost.cpu_overheads`) to a plan.

A one-process trace runs plain tensors; the predicted job may run DTensor parameters
(tensor parallel, FSDP2) whose per-call host costs the trace never saw. Given a
communication profile with host calibration samples, this adds, on the compute stream:

* tensor parallel: DTensor dispatch per forward and backward call of every sharded Linear
  (column/row, and vocab-parallel embedding/head when those are sharded) at its
  replicated activation's bytes (a column op's input, a row op's output), and the
  optimizer's extra cost per DTensor parameter — per-parameter loop when the rank holds a
  mix of DTensor and plain parameters (foreach kernels take no mix), else the configured
  implementation; the loop priced as measured right after the MLP block's backward where
  the profile has it;
* FSDP2: the per-unit hook cost (forward and backward of every unit, each micro-batch) by
  its parameters and unsharded bytes (plus its copy-in/copy-out bytes at memcpy bandwidth
  for older profiles, whose hook cost did not hold them), and the optimizer's extra cost per (DTensor) parameter;
* DDP (``torch.nn.parallel.DistributedDataParallel``, each micro-batch): its forward's
  pre-processing on the stage's first forward op (by the stage's parameters and bytes), and
  its reducer's per-parameter part on every backward op by the op's own parameters (the
  autograd hook fires as each gradient is ready, beside the bucket all-reduces in flight),
  the per-call part on the stage's last backward op.

Each model appends the line it used to the returned descriptions; all are scaled by the
host's compute contention factor, as the traced ops are.
"""

from __future__ import annotations

import numpy as np

from echo_sim.cost.comm_profile import CommProfile
from echo_sim.cost.cpu_overheads import (
    DdpCost,
    FsdpUnitCost,
    ddp_hooks,
    dtensor_dispatch,
    fsdp_copy_us,
    fsdp_unit,
    optimizer_per_param,
    tp_optimizer_per_param,
)
from echo_sim.workload.build import Layout, Plan, StagePlan
from echo_sim.workload.fsdp import fsdp_units
from echo_sim.workload.ops import Op, Workload, param_owner
from echo_sim.workload.tensor_parallel import tp_param_bytes

__all__ = ["apply_host_costs", "params_per_module"]


def params_per_module(workload: Workload) -> dict[str, int]:
    """Parameter tensors owned by each traced leaf module (longest module-path prefix);
    parameters of no traced module are left out."""
    modules = {o.module for o in workload.ops if o.phase == "F"}
    out: dict[str, int] = {}
    for name, _, _ in workload.params:
        mod = param_owner(name, modules)
        if mod:
            out[mod] = out.get(mod, 0) + 1
    return out


def apply_host_costs(plan: Plan, workload: Workload, layout: Layout, *,
                     profile: CommProfile | None, fsdp: bool, vocab_parallel: bool,
                     foreach: bool, slowdown: float = 1.0,
                     mb_scale: float = 1.0, ddp: bool = False) -> list[str]:
    """Add the costs of the module docstring to ``plan`` in place; returns descriptions.

    ``slowdown``: the compute contention factor the other ops got; the calibrated per-call
    costs are intrinsic (CPU times or fastest samples) and are scaled by it alike.
    ``mb_scale``: target micro-batch ÷ traced micro-batch (activation bytes scale).
    ``ddp``: the data-parallel replicas are ``DistributedDataParallel`` models.
    """
    if profile is None or (layout.tp == 1 and not fsdp and not ddp):
        return []
    from echo_sim.measure.host_overheads import OPTIM_PARAMS

    notes: list[str] = []
    owned = params_per_module(workload)
    sharded_roles = {"column", "row"} | ({"vocab"} if vocab_parallel else set())
    t = plan.time_us
    disp = dtensor_dispatch(profile) if layout.tp > 1 else None
    if disp is not None:
        fw_ops = {o.index: o for o in workload.ops if o.phase == "F"}
        for k, sp in enumerate(plan.stages):
            for o in (*sp.fw, *sp.bw):
                if o.role not in sharded_roles or layout.tp_of(k % layout.pp) == 1:
                    continue
                f = o if o.phase == "F" else fw_ops.get(o.fw, o)
                nbytes = (f.in_bytes if o.role == "column" else f.out_bytes) * mb_scale
                t[o.index] += (disp.fw_us(nbytes) if o.phase == "F"
                               else disp.bw_us(nbytes)) * slowdown
        notes += list(disp.notes)
    unit_cost = fsdp_unit(profile) if fsdp else None
    if unit_cost is not None:
        for k, sp in enumerate(plan.stages):
            _fsdp_units(sp.fw, sp.bw, workload, owned, layout, unit_cost, t, slowdown,
                        tp=layout.tp_of(k % layout.pp))
        notes.append(unit_cost.note)
    ddp_cost = ddp_hooks(profile) if ddp and layout.dp > 1 and not fsdp else None
    if ddp_cost is not None:
        for s in range(layout.pp):
            chunks = [plan.stages[c * layout.pp + s] for c in range(layout.virtual)]
            _ddp_hooks(chunks, owned, layout.tp_of(s), ddp_cost, t, slowdown)
        notes.append(ddp_cost.note)
    for s in range(layout.pp):
        if not fsdp and layout.tp_of(s) == 1:  # a stage without TP holds plain tensors
            continue
        chunks = [plan.stages[c * layout.pp + s] for c in range(layout.virtual)]
        ops = [o for c in chunks for o in c.fw]
        n_all = sum(owned.get(o.module, 0) for o in ops)
        n_dt = n_all if fsdp else sum(owned.get(o.module, 0) for o in ops
                                      if o.role in sharded_roles)
        if not n_dt:
            continue
        mixed = n_dt < n_all
        loop = not foreach or mixed
        # a tensor-parallel stage's loop as measured after a backward; else back to back
        per = ((tp_optimizer_per_param(profile) if loop and not fsdp else None)
               or optimizer_per_param(profile, foreach=not loop, params=OPTIM_PARAMS))
        if per is None:
            continue
        plan.update_us[s] += n_dt * per.value * slowdown
        if s == 0:
            notes.append(per.note + (f"; {n_dt} DTensor parameter(s) on stage 0"
                                     + (" among plain ones: per-parameter loop" if mixed
                                        else "")))
    return notes


def _fsdp_units(fw: list[Op], bw: list[Op], workload: Workload, owned: dict[str, int],
                layout: Layout, cost: FsdpUnitCost, times: np.ndarray, slowdown: float, *,
                tp: int) -> None:
    """Per FSDP unit: hook + copy cost on its first forward and first backward op."""
    bw_units = fsdp_units(bw, workload.has_blocks)
    for unit, ops in fsdp_units(fw, workload.has_blocks).items():
        n = sum(owned.get(o.module, 0) for o in ops)
        if not n:
            continue
        nbytes = sum(tp_param_bytes(o, tp) for o in ops)
        c_fw, c_bw = fsdp_copy_us(nbytes, layout.dp, cost.copy_bytes_per_us)
        times[ops[0].index] += (cost.fw_us(n, nbytes) + c_fw) * slowdown
        first_bw = bw_units.get(unit)
        if first_bw:
            times[first_bw[0].index] += (cost.bw_us(n, nbytes) + c_bw) * slowdown


def _ddp_hooks(chunks: list[StagePlan], owned: dict[str, int], tp: int, cost: DdpCost,
               times: np.ndarray, slowdown: float) -> None:
    """One pipeline stage's DDP model (its chunks in order): the forward part on its first
    forward op, the per-parameter/per-byte backward part on each backward op by its own
    parameters, the per-call backward part on its last backward op."""
    fw = [o for c in chunks for o in c.fw]
    bw = [o for c in chunks for o in c.bw]
    if not fw or not bw:
        return
    n = sum(owned.get(o.module, 0) for o in fw)
    nbytes = sum(tp_param_bytes(o, tp) for o in fw)
    times[fw[0].index] += cost.fw_us(n, nbytes) * slowdown
    _, b, c = cost.bw
    fw_of = {o.module: o for o in fw}
    for o in bw:
        f = fw_of.get(o.module)
        if f is not None and owned.get(o.module, 0):
            times[o.index] += (b * owned[o.module] + c * tp_param_bytes(f, tp)) * slowdown
    times[bw[-1].index] += cost.bw[0] * slowdown
