"""The simulator's workload model: per-op workload of a trace, and one function per
parallelism (data, FSDP, tensor, pipeline) composed by :mod:`echo_sim.workload.build`."""

from echo_sim.workload.build import Built, Layout, Plan, StagePlan, build_graph, make_plan
from echo_sim.workload.data_parallel import apply_data_parallel, assign_buckets, ddp_buffer_hooks
from echo_sim.workload.fsdp import apply_fsdp, fsdp_units
from echo_sim.workload.ops import (
    CommHook,
    Op,
    Workload,
    block_index,
    extract_workload,
    structural_blocks,
    tp_role,
)
from echo_sim.workload.pipeline import max_in_flight, split_units, stage_actions
from echo_sim.workload.tensor_parallel import (
    apply_tp_plan,
    check_tensor_parallel,
    tp_factors,
    tp_hooks,
)
from echo_sim.workload.tp_plan import TpPlan, load_tp_plan, tp_placement
from echo_sim.workload.tp_structure import Placement, structural_roles

__all__ = [
    "Built",
    "CommHook",
    "Layout",
    "Op",
    "Plan",
    "Placement",
    "StagePlan",
    "TpPlan",
    "Workload",
    "apply_data_parallel",
    "ddp_buffer_hooks",
    "apply_fsdp",
    "apply_tp_plan",
    "assign_buckets",
    "block_index",
    "fsdp_units",
    "structural_blocks",
    "build_graph",
    "check_tensor_parallel",
    "extract_workload",
    "load_tp_plan",
    "make_plan",
    "max_in_flight",
    "split_units",
    "stage_actions",
    "structural_roles",
    "tp_factors",
    "tp_hooks",
    "tp_placement",
    "tp_role",
]
