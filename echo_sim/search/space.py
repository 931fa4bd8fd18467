"""The layouts a search may try: :class:`SearchSpace` and its enumeration.

A layout (:class:`ParallelLayout`) is one :class:`~echo_sim.sim.simulate.SimConfig` of the
traced model on ``gpus`` devices. Validity rules (Narayanan et al. 2021, "Efficient
Large-Scale Language Model Training on GPU Clusters Using Megatron-LM", §3 takeaways):

* ``dp · tp · pp = gpus`` (every device used);
* ``tp`` divides ``gpus_per_node`` (a tensor-parallel group never crosses a node: its
  all-reduces are on the critical path) and the model's attention heads and hidden size;
* ``pp · vpp`` divides the number of transformer blocks (equal stages; ``vpp`` virtual
  stages per rank only with the interleaved schedule, ``vpp >= 2``);
* ``micro_batch`` divides the per-replica batch ``global_batch / dp``; the interleaved
  schedule needs the micro-batch count divisible by ``pp`` (Megatron's rule);
* FSDP / ZeRO-3 only with ``dp >= 2``; DeepSpeed ZeRO-1/2 (``SearchSpace.zero_stages``,
  ``search --zero-stages 1,2``: the optimizer states, then also the gradients, sharded over
  ``dp``; Rajbhandari et al. 2020, "ZeRO", §5) in place of DDP, only with ``dp >= 2``, and
  ZeRO-2 only with ``pp = 1`` (DeepSpeed's pipeline engine takes stages 0 and 1); with
  ``pp = 1`` the schedule is plain gradient
  accumulation, so only ``1f1b`` is listed (GPipe and interleaving mean nothing there);
* recomputation none, selective (the attention core only, offered when the trace has the
  core as an op of its own) or full (every block), and
  sequence parallelism only with ``tp >= 2`` (Korthikanti et al. 2022, "Reducing
  Activation Recomputation in Large Transformer Models", §4.2 and §5).

Heterogeneous layouts (``SearchSpace(heterogeneous=True)``, ``search --heterogeneous``):

* per-stage recomputation (Aceso's ``checkpoint_activations`` / ``recompute_ops``): with
  ``pp >= 2`` and recomputation searched, full recomputation on the first ``k`` stages and
  none on the rest, ``1 <= k < pp``. Only prefixes are offered: under 1F1B stage ``s`` holds
  ``pp - s`` micro-batches of activations, so an earlier stage gains more memory from
  recomputing than a later one for the same time; the ``pp - 1`` prefixes keep the space
  linear in ``pp``;
* per-stage tensor parallelism (Aceso's ``num_gpus`` / ``model_parallel_size_of_each_op``):
  with ``tp`` and ``pp`` searched, degree ``a`` on the first ``k`` stages and ``b != a`` on
  the rest (``1 <= k < pp``, both orders: TP rising or falling along the pipeline), ``a``
  and ``b`` from the degrees uniform TP may take (dividing ``gpus_per_node``, the heads and
  the hidden size). Every stage keeps the same ``dp`` (simulate's rule), so the layout uses
  ``dp · (k·a + (pp - k)·b)`` GPUs, which must be the world size: Aceso's example config,
  ``num_gpus [1, 1, 2]`` with tp ``[1, 1, 2]`` on 4 GPUs. Two degrees and one switch keep
  the count at most ``|degrees|² · pp`` per ``pp`` (the stage split then balances each
  stage at its own degree); not with interleaved virtual stages.

What the simulator cannot express, and so the space does not offer: uneven pipeline
stages; stages of different data-parallel degrees (re-sharding the activations between
them).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from echo_sim.errors import ConfigError
from echo_sim.search.factor import divisors

__all__ = [
    "DIMENSIONS",
    "RECOMPUTE",
    "SCHEDULES",
    "ParallelLayout",
    "SearchSpace",
    "divisors",
    "enumerate_layouts",
]

DIMENSIONS: tuple[str, ...] = ("dp", "tp", "pp", "vpp", "micro-batch", "fsdp", "recompute",
                               "sp", "schedule")
RECOMPUTE: tuple[str, ...] = ("none", "selective", "full")
SCHEDULES: tuple[str, ...] = ("1f1b", "gpipe", "interleaved")
OBJECTIVES: tuple[str, ...] = ("time", "throughput", "cost")
# Bounds of the space (the CLI's, echo_sim.commands.checks): the degrees and micro-batches
# are divisors of these, so they also bound the enumeration.
MAX_GPUS = 2**20
MAX_GLOBAL_BATCH = 2**40


def _ints(name: str, values: tuple[int, ...] | None) -> None:
    if values is None:
        return
    if not values or any(not isinstance(v, int) or v < 1 for v in values):
        raise ConfigError(f"{name}={values!r} must be a non-empty tuple of integers >= 1")


@dataclass(frozen=True, kw_only=True)
class SearchSpace:
    """What to search: ``gpus`` devices of ``cluster``, ``global_batch`` samples per step.

    ``dims``: the dimensions searched (:data:`DIMENSIONS`); a dimension left out is held at
    its default (tp 1, pp 1, vpp 1, micro-batch = the traced one, DDP, no recomputation,
    no sequence parallelism, 1F1B); ``dp`` is always ``gpus / (tp · pp)``. ``tp`` / ``pp`` / ``vpp`` /
    ``micro_batch``: restrict a dimension to these values (``None``: every valid one).
    ``memory_limit_bytes``: device memory (default: the cluster GPU's). ``vary_gpus``: also
    try every divisor of ``gpus`` as the world size (the ``cost`` objective).
    ``heterogeneous``: also per-stage recomputation and tensor parallelism (module docstring).
    ``zero_stages``: DeepSpeed ZeRO stages (1, 2) also tried in place of DDP on each
    data-parallel layout (module docstring; ``()``: DDP and FSDP only).
    """

    gpus: int
    global_batch: int
    gpus_per_node: int = 8
    cluster: str = "dgx-h100"
    memory_limit_bytes: int | None = None
    dims: tuple[str, ...] = DIMENSIONS
    tp: tuple[int, ...] | None = None
    pp: tuple[int, ...] | None = None
    vpp: tuple[int, ...] | None = None
    micro_batch: tuple[int, ...] | None = None
    schedules: tuple[str, ...] = SCHEDULES
    recompute: tuple[str, ...] = RECOMPUTE
    fsdp: tuple[bool, ...] = (False, True)
    sequence_parallel: tuple[bool, ...] = (False, True)
    comm_profile: str | None = None
    vary_gpus: bool = False
    heterogeneous: bool = False
    # the trace ran a ZeRO stage of its own (DeepSpeed): pin each row to what its label says
    # (ddp = ZeRO-0, fsdp = ZeRO-3) instead of letting simulate default to the traced stage
    pin_zero: bool = False
    zero_stages: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        for name, cap in (("gpus", MAX_GPUS), ("global_batch", MAX_GLOBAL_BATCH),
                          ("gpus_per_node", MAX_GPUS)):
            v = getattr(self, name)
            if not isinstance(v, int) or v < 1:
                raise ConfigError(f"{name}={v!r} must be an integer >= 1")
            if v > cap:
                raise ConfigError(f"{name}={v!r} is out of range; valid: 1..{cap:,}")
        if self.memory_limit_bytes is not None and (
                not isinstance(self.memory_limit_bytes, int) or self.memory_limit_bytes < 1):
            raise ConfigError(f"memory_limit_bytes={self.memory_limit_bytes!r} must be an "
                              "integer >= 1")
        bad = [d for d in self.dims if d not in DIMENSIONS]
        if bad:
            raise ConfigError(f"unknown search dimension(s) {', '.join(bad)}; valid: "
                              f"{', '.join(DIMENSIONS)}")
        for name in ("tp", "pp", "vpp", "micro_batch"):
            _ints(name, getattr(self, name))
        bad = [s for s in self.schedules if s not in SCHEDULES]
        if bad or not self.schedules:
            raise ConfigError(f"schedules={self.schedules!r}; valid: {', '.join(SCHEDULES)}")
        bad = [r for r in self.recompute if r not in RECOMPUTE]
        if bad or not self.recompute:
            raise ConfigError(f"recompute={self.recompute!r}; valid: {', '.join(RECOMPUTE)}")
        if not isinstance(self.zero_stages, tuple) or any(
                isinstance(z, bool) or z not in (1, 2) for z in self.zero_stages):
            raise ConfigError(f"zero_stages={self.zero_stages!r}; valid: stages 1 and 2 "
                              "(ZeRO-3 is fsdp)")
        object.__setattr__(self, "zero_stages", tuple(sorted(set(self.zero_stages))))
        for name in ("fsdp", "sequence_parallel"):
            v = getattr(self, name)
            if not v or any(not isinstance(f, bool) for f in v):
                raise ConfigError(f"{name}={v!r} must be a non-empty tuple of booleans")
        from echo_sim.cost.hardware import CLUSTERS

        if self.cluster.strip().lower() not in CLUSTERS:
            raise ConfigError(f"unknown cluster {self.cluster!r}; valid: {', '.join(CLUSTERS)}")


@dataclass(frozen=True, kw_only=True, order=True)
class ParallelLayout:
    """One point of the space: degrees, micro-batch, sharding, recomputation, sequence
    parallelism (``sp``, with ``tp >= 2``), schedule; a heterogeneous layout's per-stage
    recomputation and tensor-parallel degrees (``tp`` then is the largest of them)."""

    dp: int
    tp: int
    pp: int
    vpp: int = 1
    micro_batch: int = 1
    fsdp: bool = False
    recompute: str = "none"
    schedule: str = "1f1b"
    sp: bool = False
    stage_recompute: tuple[str, ...] = ()  # per pipeline stage; () = recompute everywhere
    stage_tp: tuple[int, ...] = ()  # per pipeline stage (tp = the largest); () = tp everywhere
    zero: int = 0  # DeepSpeed ZeRO-1/2 in place of DDP (0: DDP, or FSDP with fsdp)

    @property
    def sharding(self) -> str:
        """How the data-parallel replicas hold the model states: ``ddp``, ``zero1``,
        ``zero2`` or ``fsdp`` (ZeRO-3)."""
        return "fsdp" if self.fsdp else f"zero{self.zero}" if self.zero else "ddp"

    @property
    def world(self) -> int:
        """GPUs: ``dp · Σ_s tp_s`` (every stage holds ``dp`` replicas of its TP group)."""
        return self.dp * (sum(self.stage_tp) if self.stage_tp else self.tp * self.pp)

    def micro_batches(self, global_batch: int) -> int:
        """Micro-batches per replica per step."""
        return global_batch // (self.dp * self.micro_batch)

    @property
    def label(self) -> str:
        """Short text: ``dp16 tp8 sp pp8 v2 mb1 fsdp rc-full 1f1b`` (``ddp`` / ``zero1`` /
        ``zero2`` / ``fsdp``: :attr:`sharding`)."""
        tp = "/".join(map(str, self.stage_tp)) if self.stage_tp else str(self.tp)
        parts = [f"dp{self.dp}", f"tp{tp}", *(["sp"] if self.sp else []), f"pp{self.pp}"]
        if self.vpp > 1:
            parts.append(f"v{self.vpp}")
        parts.append(f"mb{self.micro_batch}")
        parts.append(self.sharding)
        if self.stage_recompute:
            parts.append("rc-" + "/".join(self.stage_recompute))
        elif self.recompute != "none":
            parts.append(f"rc-{self.recompute}")
        if self.pp > 1:
            parts.append(self.schedule)
        return " ".join(parts)

    def to_dict(self) -> dict[str, Any]:
        return {"dp": self.dp, "tp": self.tp, "pp": self.pp, "vpp": self.vpp,
                "micro_batch": self.micro_batch, "fsdp": self.fsdp,
                "zero_stage": 3 if self.fsdp else self.zero,
                "recompute": self.recompute, "sequence_parallel": self.sp,
                "schedule": self.schedule, "stage_recompute": list(self.stage_recompute),
                "stage_tp": list(self.stage_tp)}

    def sim_config(self, space: SearchSpace, *, global_batch: int | None = None,
                   keep_schedule: bool = True) -> Any:
        """The :class:`~echo_sim.sim.simulate.SimConfig` that times this layout."""
        from echo_sim.sim.simulate import SimConfig

        gpn = min(space.gpus_per_node, self.world)
        return SimConfig(
            dp=self.dp, tp=self.tp, pp=self.pp, micro_batch=self.micro_batch,
            global_batch=global_batch or space.global_batch,
            schedule=self.schedule if keep_schedule else "1f1b",
            virtual_stages=self.vpp, gpus_per_node=gpn,
            nodes=self.world // gpn if self.world % gpn == 0 else None,
            cluster=space.cluster, fsdp=self.fsdp, recompute=self.recompute,
            sequence_parallel=self.sp, stage_recompute=self.stage_recompute or None,
            zero_stage=self.zero or ((3 if self.fsdp else 0) if space.pin_zero else None),
            stage_tp=self.stage_tp or None,
            comm_profile=space.comm_profile, memory_limit_bytes=space.memory_limit_bytes)


def _model_ints(model: dict[str, Any], key: str) -> int | None:
    v = model.get(key)
    try:
        return int(v) if v else None
    except (TypeError, ValueError):
        return None


def enumerate_layouts(workload: Any, space: SearchSpace) -> tuple[list[ParallelLayout],
                                                                   list[str]]:
    """Every valid layout of ``space`` for ``workload`` (a :class:`Workload`).

    Returns (layouts, notes): notes say which rules emptied which dimension, for the error
    raised by :func:`echo_sim.search.search` when nothing is left.
    """
    dims = set(space.dims)
    blocks = int(workload.num_blocks)
    heads = _model_ints(workload.model, "heads")
    hidden = _model_ints(workload.model, "hidden")
    roles = {o.role for o in workload.ops if o.phase == "F"}
    can_tp = "column" in roles and "row" in roles
    # selective recomputation re-runs the attention core: a trace without it as an op of
    # its own (e.g. attention written inline in a non-leaf module) gives it nothing to act on
    core = any(o.kind == "Attention" for o in workload.ops if o.phase == "F")
    recomputes = [rc for rc in (space.recompute if "recompute" in dims else ("none",))
                  if rc != "selective" or core] or ["none"]
    traced_mb = int(workload.micro_batch or 1)
    gb = space.global_batch
    notes: list[str] = []
    worlds = divisors(space.gpus) if space.vary_gpus else [space.gpus]
    out: list[ParallelLayout] = []

    def allowed_tp(t: int, world: int) -> bool:
        return ((space.tp is None or t in space.tp) and ("tp" in dims or t == 1)
                and (space.gpus_per_node % t == 0 or t == 1) and (can_tp or t == 1)
                and (not heads or heads % t == 0) and (not hidden or hidden % t == 0)
                and t <= world)

    def add(world: int, tp: int, pp: int, dp: int, stage_tp: tuple[int, ...]) -> None:
        """Every micro-batch, schedule, sharding, recomputation and sp of one degree set."""
        if gb % dp:
            return
        per_replica = gb // dp
        mbs = [b for b in divisors(per_replica)
               if (space.micro_batch is None or b in space.micro_batch)]
        if "micro-batch" not in dims:
            mbs = [b for b in mbs if b == min(traced_mb, per_replica)] or \
                [b for b in mbs if b == 1]
        low = min(stage_tp) if stage_tp else tp
        sps = space.sequence_parallel if "sp" in dims and low > 1 else (False,)
        # (fsdp, ZeRO stage): DDP, the ZeRO-1/2 stages asked for, FSDP (ZeRO-3)
        shardings = [(f, 0) for f in (space.fsdp if "fsdp" in dims else (False,))
                     if not f or dp >= 2]
        if dp >= 2:
            shardings += [(False, z) for z in space.zero_stages if z == 1 or pp == 1]
        for mb in mbs:
            m = per_replica // mb
            for sched, vpp in _schedules(space, dims, pp, blocks, m):
                if stage_tp and vpp > 1:
                    continue
                for fsdp, zero in shardings:
                    for rc, per_stage in _recomputes(space, recomputes, pp, vpp):
                        for sp in sps:
                            out.append(ParallelLayout(dp=dp, tp=tp, pp=pp, vpp=vpp,
                                                      micro_batch=mb, fsdp=fsdp,
                                                      recompute=rc, schedule=sched, sp=sp,
                                                      stage_recompute=per_stage,
                                                      stage_tp=stage_tp, zero=zero))

    for world in worlds:
        tps = [t for t in divisors(world) if allowed_tp(t, world)]
        for tp in tps:
            pps = [p for p in divisors(world // tp)
                   if (space.pp is None or p in space.pp) and ("pp" in dims or p == 1)
                   and (p == 1 or blocks % p == 0)]
            for pp in pps:
                add(world, tp, pp, world // (tp * pp), ())
        if space.heterogeneous and "tp" in dims and "pp" in dims:
            degrees = [t for t in divisors(space.gpus_per_node) if allowed_tp(t, world)]
            for pp, stage_tp in _stage_tps(degrees, world, blocks, space.pp):
                add(world, max(stage_tp), pp, world // sum(stage_tp), stage_tp)
    if not out:
        notes.append(_why_empty(space, blocks, heads, can_tp))
    return out, notes


def _stage_tps(degrees: list[int], world: int, blocks: int,
               pps: tuple[int, ...] | None) -> list[tuple[int, tuple[int, ...]]]:
    """(pp, per-stage degrees) of the heterogeneous layouts of ``world`` GPUs: two degrees
    ``a != b`` of ``degrees``, ``a`` on the first ``k`` stages and ``b`` on the rest
    (``1 <= k < pp``; both orders), with ``dp = world / (k·a + (pp - k)·b)`` whole. At most
    ``|degrees|² · pp`` per ``pp`` (module docstring)."""
    out: list[tuple[int, tuple[int, ...]]] = []
    for pp in divisors(blocks):
        if pp < 2 or (pps is not None and pp not in pps):
            continue
        for a in degrees:
            for b in degrees:
                if a == b:
                    continue
                for k in range(1, pp):
                    st = (a,) * k + (b,) * (pp - k)
                    if world % sum(st) == 0:
                        out.append((pp, st))
    return out


def _recomputes(space: SearchSpace, uniform: list[str], pp: int, vpp: int
                ) -> list[tuple[str, tuple[str, ...]]]:
    """(recompute, per-stage modes) to try: each uniform mode, then with ``heterogeneous``
    full recomputation on the first ``k`` of ``pp`` stages (module docstring). A per-stage
    layout's ``recompute`` is ``none``: the probe its time bound starts from."""
    out: list[tuple[str, tuple[str, ...]]] = [(rc, ()) for rc in uniform]
    if space.heterogeneous and pp >= 2 and vpp == 1 and {"none", "full"} <= set(uniform):
        out += [("none", ("full",) * k + ("none",) * (pp - k)) for k in range(1, pp)]
    return out


def _schedules(space: SearchSpace, dims: set[str], pp: int, blocks: int,
               m: int) -> list[tuple[str, int]]:
    if pp == 1:
        return [("1f1b", 1)]
    scheds = space.schedules if "schedule" in dims else ("1f1b",)
    out: list[tuple[str, int]] = []
    for s in scheds:
        if s != "interleaved":
            out.append((s, 1))
            continue
        if "vpp" not in dims or m % pp:
            continue
        for v in divisors(blocks // pp):
            if v >= 2 and (space.vpp is None or v in space.vpp):
                out.append((s, v))
    return out


def _why_empty(space: SearchSpace, blocks: int, heads: int | None, can_tp: bool) -> str:
    gb = space.global_batch
    dps = [space.gpus // (t * p) for t in divisors(space.gpus) for p in divisors(space.gpus // t)]
    if not any(gb % d == 0 for d in dps):
        return (f"no factorisation dp·tp·pp = {space.gpus} GPUs has a data-parallel degree "
                f"dividing global batch {gb}")
    return (f"no layout of {space.gpus} GPUs satisfies the rules: tp divides gpus-per-node "
            f"{space.gpus_per_node}{f' and heads {heads}' if heads else ''}"
            f"{'' if can_tp else ' (the model has no tensor-parallel pattern: tp=1)'}, pp "
            f"divides the {blocks} blocks, dp divides global batch {gb}"
            f"{'' if space.tp is None and space.pp is None else ' within the given tp/pp'}")
