"""The job to predict: :class:`SimConfig`, every field typed, defaulted and checked.

``None`` fields are derived by :func:`echo_sim.sim.simulate.simulate` from the trace (the
traced hardware, micro-batch, ZeRO stage...). The checks here need nothing but the config;
the ones that need the workload (heads dividing tp, layers dividing stages) run in
``simulate``.
"""

from __future__ import annotations

from dataclasses import dataclass

from echo_sim.cost.network import NetworkSpec
from echo_sim.errors import ConfigError
from echo_sim.workload.data_parallel import DP_MODES
from echo_sim.workload.pipeline import SCHEDULES, STAGE_SPLITS
from echo_sim.workload.tp_plan import TpPlan
from echo_sim.workload.zero import ZERO_STAGES

__all__ = ["MODES", "SimConfig"]

MODES: tuple[str, ...] = ("symmetric", "full")


@dataclass(frozen=True, kw_only=True)
class SimConfig:
    """The job to predict. ``None`` fields are derived (see each)."""

    dp: int = 1
    tp: int = 1
    pp: int = 1
    micro_batch: int | None = None  # default: the traced micro-batch
    global_batch: int | None = None  # default: dp · micro_batch · pp micro-batches (pp > 1)
    schedule: str = "1f1b"
    virtual_stages: int = 1
    nodes: int | None = None  # default: ceil(world / gpus_per_node)
    gpus_per_node: int | None = None  # default: min(world, the preset's)
    cluster: str | None = None  # default: the traced hardware's (echo_sim.sim.target)
    gpu: str | None = None  # default: the cluster's GPU, or the traced one
    optimizer_foreach: bool | None = None  # default: torch's (foreach on GPUs, loop on CPU)
    fsdp: bool = False  # ZeRO-3 (zero_stage 3 means the same)
    # ZeRO stage 0 (DDP) | 1 | 2 | 3 (= fsdp); default: a DeepSpeed trace's own
    # (meta.json training.zero_stage, echo_sim.sim.zero_choice), else 0, or 3 with fsdp
    zero_stage: int | None = None
    recompute: bool | str = False  # False/True or "none" | "selective" | "full"
    sequence_parallel: bool = False
    fsdp_impl: str = "fsdp2"  # or "deepspeed-2021" (echo_sim.cost.zero3)
    comm_profile: str | None = None
    memory_limit_bytes: int | None = None  # default: the GPU's memory
    compute_factor: float | None = None
    data_parallel: str = "ddp"
    bucket_cap_bytes: int = 25 * 1024 * 1024
    stage_split: str = "time"
    mode: str = "symmetric"
    link_contention: bool = False
    vocab_parallel: bool = True  # tp: shard the token embedding and head by vocabulary
    # one recompute mode per pipeline stage (Aceso's checkpoint_activations), over recompute
    stage_recompute: tuple[str, ...] | None = None
    # one tensor-parallel degree per pipeline stage (Aceso's model_parallel_size_of_each_op),
    # over tp; every stage has dp replicas, so stage s holds dp·stage_tp[s] GPUs
    stage_tp: tuple[int, ...] | None = None
    network: NetworkSpec | None = None  # link rates / topology over the preset's
    traced_micro_batch: int | None = None  # default: meta.json's (TrioSim traces have none)
    # tensor-parallel roles by module-name pattern (--tp-plan), over the ones extraction found
    # (the model's structure, or the transformers tp_plan meta.json records)
    tp_plan: TpPlan | None = None

    def __post_init__(self) -> None:
        if self.stage_recompute is not None:
            from echo_sim.workload.build import RECOMPUTE_MODES

            if len(self.stage_recompute) != self.pp or self.virtual_stages != 1 or any(
                    r not in RECOMPUTE_MODES for r in self.stage_recompute):
                raise ConfigError(f"stage_recompute={self.stage_recompute!r}: give one of "
                                  f"{', '.join(RECOMPUTE_MODES)} per pipeline stage (pp="
                                  f"{self.pp}, no virtual stages)")
        for name in ("dp", "tp", "pp", "virtual_stages"):
            v = getattr(self, name)
            if not isinstance(v, int) or v < 1:
                raise ConfigError(f"{name}={v!r} must be an integer >= 1")
        if self.stage_tp is not None:
            st = self.stage_tp
            if not isinstance(st, tuple) or len(st) != self.pp or any(
                    not isinstance(x, int) or x < 1 for x in st):
                raise ConfigError(f"stage_tp={st!r}: give one tensor-parallel degree >= 1 "
                                  f"per pipeline stage (pp={self.pp})")
            if len(set(st)) > 1 and self.virtual_stages != 1:
                raise ConfigError(f"stage_tp={st!r}: one degree per pipeline rank needs "
                                  f"virtual_stages=1, not {self.virtual_stages}")
            if self.tp not in (1, max(st)):
                raise ConfigError(f"tp={self.tp} with stage_tp={st!r}: leave tp at 1 or give "
                                  f"the largest per-stage degree, {max(st)}")
        for name in ("micro_batch", "global_batch", "nodes", "gpus_per_node",
                     "memory_limit_bytes", "traced_micro_batch"):
            v = getattr(self, name)
            if v is not None and (not isinstance(v, int) or v < 1):
                raise ConfigError(f"{name}={v!r} must be an integer >= 1")
        if self.schedule not in SCHEDULES:
            raise ConfigError(f"unknown schedule {self.schedule!r}; valid: {', '.join(SCHEDULES)}")
        if self.virtual_stages > 1 and self.schedule != "interleaved":
            raise ConfigError(f"virtual_stages={self.virtual_stages} needs schedule "
                              "'interleaved'")
        if self.schedule == "interleaved" and self.virtual_stages > 1 and self.pp < 2:
            raise ConfigError("the interleaved schedule needs pp >= 2")
        if self.data_parallel not in DP_MODES:
            raise ConfigError(f"unknown data-parallel mode {self.data_parallel!r}; valid: "
                              f"{', '.join(DP_MODES)}")
        if self.stage_split not in STAGE_SPLITS:
            raise ConfigError(f"unknown stage split {self.stage_split!r}; valid: "
                              f"{', '.join(STAGE_SPLITS)}")
        if self.mode not in MODES:
            raise ConfigError(f"unknown mode {self.mode!r}; valid: {', '.join(MODES)}")
        if self.fsdp and self.data_parallel != "ddp":
            raise ConfigError("fsdp replaces data_parallel='ps'; pick one")
        self._check_zero_stage()
        if self.compute_factor is not None and not self.compute_factor > 0:
            raise ConfigError(f"compute_factor={self.compute_factor} must be > 0")
        from echo_sim.cost.hardware import CLUSTERS, GPUS

        if self.cluster is not None and self.cluster.strip().lower() not in CLUSTERS:
            raise ConfigError(f"unknown cluster {self.cluster!r}; valid: {', '.join(CLUSTERS)}")
        if self.gpu is not None and self.gpu.strip().lower() not in GPUS:
            raise ConfigError(f"unknown GPU {self.gpu!r}; valid: {', '.join(GPUS)}")
        world = self.world
        if self.nodes is not None and self.gpus_per_node is not None and \
                self.nodes * self.gpus_per_node != world:
            raise ConfigError(f"{self._world_text} = {world} but nodes·"
                              f"gpus_per_node = {self.nodes}·{self.gpus_per_node} = "
                              f"{self.nodes * self.gpus_per_node}")
        if self.nodes is not None and self.gpus_per_node is None and world % self.nodes:
            raise ConfigError(f"dp·tp·pp = {world} GPUs do not split over nodes={self.nodes}")
        if self.global_batch is not None and self.micro_batch is not None and \
                self.global_batch % (self.dp * self.micro_batch):
            raise ConfigError(f"global batch {self.global_batch} is not divisible by dp·"
                              f"micro_batch = {self.dp}·{self.micro_batch} = "
                              f"{self.dp * self.micro_batch}")

    def _check_zero_stage(self) -> None:
        z = self.zero_stage
        if z is None:
            return
        if isinstance(z, bool) or z not in ZERO_STAGES:
            raise ConfigError(f"zero_stage={z!r}; valid: {', '.join(map(str, ZERO_STAGES))}")
        if self.fsdp and z != 3:
            raise ConfigError(f"zero_stage={z} with fsdp=True (ZeRO-3); pick one")
        if z > 0 and self.data_parallel != "ddp":
            raise ConfigError(f"zero_stage={z} replaces data_parallel="
                              f"{self.data_parallel!r}; pick one")
        if z == 2 and self.pp > 1:
            raise ConfigError(f"zero_stage=2 with pp={self.pp}: DeepSpeed's pipeline engine "
                              "takes ZeRO stage 0 or 1")

    @property
    def stage_tps(self) -> tuple[int, ...]:
        """Tensor-parallel degree of every pipeline stage: ``stage_tp``, else ``tp``."""
        return self.stage_tp or (self.tp,) * self.pp

    @property
    def heterogeneous_tp(self) -> bool:
        """True when the pipeline stages run different tensor-parallel degrees."""
        return len(set(self.stage_tps)) > 1

    @property
    def world(self) -> int:
        """GPUs: ``dp · Σ_s tp_s`` (``dp·tp·pp`` with one degree on every stage)."""
        return self.dp * sum(self.stage_tps)

    @property
    def _world_text(self) -> str:
        if self.stage_tp is None:
            return f"dp·tp·pp = {self.dp}·{self.tp}·{self.pp}"
        return f"dp·sum(stage_tp) = {self.dp}·({'+'.join(map(str, self.stage_tp))})"
