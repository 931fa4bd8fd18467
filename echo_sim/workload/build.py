"""Compose the parallelisms into an engine :class:`~echo_sim.sim.engine.TaskGraph`.

:func:`make_plan` decides *what* runs: per (virtual) pipeline stage, the forward and
backward ops with their target-device times, and the communication hooks each parallelism
attaches, in this order (as torchtitan's ``parallelize`` applies TP, then activation
checkpointing, then FSDP/DDP):

1. **pipeline split** first — it decides which ops (and so which parameters and
   activations) a rank owns at all;
2. **tensor parallel** next — it shrinks the stage's compute and parameter bytes, which
   the data-parallel hooks below must see (a DP bucket holds the TP shard);
3. **activation recomputation** — ``full``: backward re-runs each module's forward (and its
   TP all-reduces); ``selective`` (Korthikanti et al. 2022, §4.2): only the attention core
   (scores, softmax, dropout, weighted sum) is re-run; ``none``;
4. **FSDP, DeepSpeed ZeRO-1/2 or DDP / parameter server** last — gradient
   synchronisation of the (TP-sharded) stage parameters, overlapping backward (ZeRO-1/2
   also all-gather the updated parameters after the optimizer step: hooks of phase
   ``"U"``).

:func:`build_graph` decides *when*: it walks each simulated rank's pipeline schedule
(micro-batch actions), emits one compute task per op on ``rank<r>/compute``, and turns
hooks into communication tasks on ``rank<r>/comm_tp``, ``comm_dp`` (``comm_ag``,
``comm_rs``, ``comm_push``, ``comm_pull``) and ``p2p`` channels. A collective is **one**
task holding every simulated member's channel, so it starts when the last member issues it.

Per-stage tensor parallelism (``Layout.stage_tp``, Aceso's per-stage ``num_gpus`` /
``model_parallel_size_of_each_op``): every stage keeps ``dp`` replicas of its own TP group,
so stage ``s`` holds ``dp · tp_s`` GPUs and every stage sees the same micro-batches (no
re-sharding of the batch between stages). Each stage gets its op times at its own degree
(the ``1/tp`` model, or the times an Aceso database measured at that degree), its own TP
all-reduces, its gradient all-reduce of its own shard over its ``dp`` replicas; the split
balances each unit at the degree of the stage it lands on. At a boundary between degrees
each receiving TP rank gets the whole activation from the sender of index ``t mod tp_from``
(a sender's copies go back to back, one transfer).

Symmetry: with ``full=False`` only one rank per pipeline stage is simulated — data-parallel
replicas and tensor-parallel peers run the same ops at the same times, so a collective over
their group is priced for the whole group but scheduled on the representative alone.
``full=True`` simulates every rank (tests check both agree).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from echo_sim.cost.zero3 import fetch_us
from echo_sim.sim.engine import TaskGraph
from echo_sim.workload.data_parallel import apply_data_parallel, ddp_buffer_hooks
from echo_sim.workload.fsdp import apply_fsdp
from echo_sim.workload.ops import CommHook, Op, Workload
from echo_sim.workload.pipeline import split_units, stage_actions
from echo_sim.workload.tensor_parallel import (
    SHARDED_ROLES,
    tp_factors,
    tp_hooks,
    tp_param_bytes,
)
from echo_sim.workload.zero import ZeroSpec, apply_zero

__all__ = ["RECOMPUTE_MODES", "Built", "CommPricer", "Layout", "Plan", "StagePlan",
           "build_graph", "make_plan", "recompute_mode", "unit_stages"]

RECOMPUTE_MODES: tuple[str, ...] = ("none", "selective", "full")


def recompute_mode(recompute: bool | str) -> str:
    """``True``/``False`` (full / none) or one of :data:`RECOMPUTE_MODES`."""
    if isinstance(recompute, bool):
        return "full" if recompute else "none"
    if recompute not in RECOMPUTE_MODES:
        from echo_sim.errors import ConfigError

        raise ConfigError(f"recompute={recompute!r}; valid: {', '.join(RECOMPUTE_MODES)}")
    return recompute


class CommPricer:
    """What the builder needs of a communication model (duck-typed :class:`CommModel`)."""

    def time_us(self, op: str, nbytes: int, ranks: Sequence[int], *,
                concurrent: int = 1) -> float:  # pragma: no cover - interface
        raise NotImplementedError

    def links(self, ranks: Sequence[int]) -> list[str]:  # pragma: no cover - interface
        raise NotImplementedError


@dataclass(frozen=True, kw_only=True)
class Layout:
    """Parallel layout. Global rank = ``offset_s + d·tp_s + t`` (TP innermost, then DP, then
    PP: Megatron's and torchtitan's order, so TP groups share a node), ``offset_s`` the GPUs
    of the stages before ``s``.

    ``stage_tp``: one tensor-parallel degree per pipeline stage (Aceso's per-stage
    ``model_parallel_size_of_each_op``); ``()`` = ``tp`` on every stage. Every stage has the
    same ``dp``, so stage ``s`` holds ``dp · tp_s`` GPUs (Aceso's ``num_gpus[s]``) and every
    stage sees the same micro-batches; with a uniform ``tp``, ``offset_s = s·dp·tp``.
    """

    dp: int = 1
    tp: int = 1
    pp: int = 1
    virtual: int = 1
    micro_batches: int = 1
    schedule: str = "1f1b"
    full: bool = False
    stage_tp: tuple[int, ...] = ()

    def tp_of(self, s: int) -> int:
        """Tensor-parallel degree of pipeline stage ``s``."""
        return self.stage_tp[s] if self.stage_tp else self.tp

    @property
    def tps(self) -> tuple[int, ...]:
        """Tensor-parallel degree of every pipeline stage."""
        return self.stage_tp or (self.tp,) * self.pp

    def rank(self, d: int, t: int, s: int) -> int:
        if not self.stage_tp:
            return s * self.dp * self.tp + d * self.tp + t
        return self.dp * sum(self.stage_tp[:s]) + d * self.stage_tp[s] + t

    @property
    def world(self) -> int:
        return self.dp * sum(self.tps)

    def simulated(self) -> list[tuple[int, int, int]]:
        """(d, t, s) of the ranks simulated: all, or one per stage (d = t = 0)."""
        if self.full:
            return [(d, t, s) for s in range(self.pp) for d in range(self.dp)
                    for t in range(self.tp_of(s))]
        return [(0, 0, s) for s in range(self.pp)]


@dataclass
class StagePlan:
    """One virtual stage: forward ops (forward order), backward ops (backward order), the
    communication hooks on them and the bytes of the activation it passes on."""

    fw: list[Op]
    bw: list[Op]
    hooks: list[CommHook] = field(default_factory=list)
    p2p_bytes: int = 0
    param_bytes: float = 0.0


@dataclass
class Plan:
    """Everything :func:`build_graph` needs: op times (by op index), stages, step overheads."""

    time_us: np.ndarray
    stages: list[StagePlan]
    update_us: list[float]
    pre_us: float
    post_us: float
    stage_of_unit: dict[str, int]
    fsdp_impl: str = "fsdp2"
    recompute: str = "none"


def unit_stages(fw_all: Sequence[Op], bw_all: Sequence[Op], time_us: np.ndarray,
                stages: int, *, how: str = "time",
                stage_time_us: Sequence[np.ndarray] | None = None) -> dict[str, int]:
    """Virtual stage of every unit: units in forward order, each weighted by the forward and
    backward time of its ops (a backward op without its forward module counts to the last
    unit), cut by :func:`~echo_sim.workload.pipeline.split_units`. ``make_plan`` and
    ``search``'s bounds both split with this, so they always agree.

    ``stage_time_us``: per virtual stage, the op times on that stage (stages of different
    tensor-parallel degrees); a unit then weighs what it would take on the stage it lands on.
    """
    units: list[str] = []
    unit_block: dict[str, bool] = {}
    fw_of = {o.module: o for o in fw_all}
    for o in fw_all:
        if o.unit not in unit_block:
            units.append(o.unit)
            unit_block[o.unit] = o.block >= 0
    rows = [time_us] if stage_time_us is None else list(stage_time_us)
    weights: list[list[float]] = []
    for row in rows:
        unit_time = dict.fromkeys(units, 0.0)
        for o in fw_all:
            unit_time[o.unit] += float(row[o.index])
        for o in bw_all:
            f = fw_of.get(o.module)
            unit_time[f.unit if f else units[-1]] += float(row[o.index])
        weights.append([unit_time[u] for u in units])
    blocks = [unit_block[u] for u in units]
    if stages <= 1:
        cut = [0] * len(units)
    elif stage_time_us is None:
        cut = split_units(units, weights[0], blocks, stages, how=how)
    else:
        cut = split_units(units, weights[0], blocks, stages, how=how, stage_time_us=weights)
    return dict(zip(units, cut, strict=True))


def make_plan(workload: Workload, layout: Layout, base_time_us: np.ndarray, *,
              mb_scale: float = 1.0, fsdp: bool = False, fsdp_overlap: bool = True,
              recompute: bool | str | tuple[str, ...] = False, dp_mode: str = "ddp",
              bucket_cap_bytes: int = 25 * 1024 * 1024, stage_split: str = "time",
              sequence_parallel: bool = False, fsdp_impl: str = "fsdp2",
              zero: ZeroSpec | None = None) -> Plan:
    """Op times and hooks per virtual stage for ``layout`` (see the module docstring).

    ``base_time_us``: per op index, the time on the target device at the target
    micro-batch before any parallelism (batch model x compute scaling).
    ``sequence_parallel`` (Korthikanti et al. 2022, §4.2.2): the ops tensor parallelism
    replicates inside blocks (layer norms, dropout-adds) run on ``1/tp`` of the sequence;
    the all-reduces become reduce-scatter + all-gather of the same total bytes.
    ``fsdp_impl``: ``fsdp2`` or ``deepspeed-2021`` (:mod:`echo_sim.cost.zero3`).
    ``recompute``: one mode for every stage, or one per pipeline stage (Aceso's per-stage
    ``checkpoint_activations``; ``virtual == 1``). Per-stage modes that differ split the
    pipeline on the times without recomputation, then recompute on the stages that ask for
    it; a per-stage tuple of one mode is that uniform mode.
    ``zero``: DeepSpeed ZeRO-1/2 (:mod:`echo_sim.workload.zero`) instead of DDP: its
    gradient buckets and parameter all-gather, and the optimizer step on ``1/dp`` of the
    parameters (``UPDATE / dp``, as under FSDP).
    """
    stage_modes: tuple[str, ...] | None = None
    if isinstance(recompute, tuple):
        stage_modes = tuple(recompute_mode(r) for r in recompute)
        if len(stage_modes) != layout.pp * layout.virtual:
            from echo_sim.errors import ConfigError

            raise ConfigError(f"recompute: {len(stage_modes)} per-stage modes for "
                              f"{layout.pp * layout.virtual} pipeline stages")
        if len(set(stage_modes)) == 1:
            recompute, stage_modes = stage_modes[0], None
        else:
            recompute = "none"
    mode = recompute_mode(recompute)
    fetch_us(0.0, 1, fsdp_impl)  # validates the name
    ops = list(workload.ops)
    fw_all = [o for o in ops if o.phase == "F"]
    bw_all = [o for o in ops if o.phase == "B"]
    nvs = layout.pp * layout.virtual
    tps = [layout.tp_of(vs % layout.pp) for vs in range(nvs)]  # per virtual stage
    # (2) tensor parallel, per degree a stage runs at (3) then uniform recomputation
    by_tp = {tp: _tp_times(workload, ops, base_time_us, tp, sequence_parallel=sequence_parallel,
                           recompute=mode) for tp in dict.fromkeys(tps)}
    # (1) pipeline split over units in forward order; stages of different tensor-parallel
    # degrees balance each unit's time at the degree of the stage it would land on
    fw_of = {o.module: o for o in fw_all}
    t = by_tp[tps[0]]
    if workload.traced_stages and len(workload.traced_stages) == nvs:
        # a pipeline trace simulated at its own number of stages: cut where the job cut
        stage_of_unit = {o.unit: nvs - 1 for o in fw_all}
        stage_of_unit.update({u: s for s, us in enumerate(workload.traced_stages) for u in us})
    else:
        stage_of_unit = unit_stages(fw_all, bw_all, t, nvs, how=stage_split,
                                    stage_time_us=[by_tp[x] for x in tps]
                                    if len(by_tp) > 1 else None)

    def vs_of(o: Op) -> int:
        f = fw_of.get(o.module) if o.phase == "B" else o
        return stage_of_unit[f.unit] if f is not None else nvs - 1

    if len(by_tp) > 1:  # each op at its own stage's degree
        t = t.copy()
        for o in ops:
            if o.phase != "U":
                t[o.index] = by_tp[tps[vs_of(o)]][o.index]
    if stage_modes is not None:  # (3) per stage, on the split made without it
        by_index = {o.index: o for o in ops}
        for o in bw_all:
            m = stage_modes[vs_of(o)]
            if o.fw >= 0 and m != "none" and (m == "full" or by_index[o.fw].kind == "Attention"):
                t[o.index] += t[o.fw]

    stages = [StagePlan(fw=[], bw=[]) for _ in range(nvs)]
    for o in fw_all:
        stages[vs_of(o)].fw.append(o)
    for o in bw_all:
        stages[vs_of(o)].bw.append(o)
    for k, sp in enumerate(stages):
        tp = tps[k]
        pbytes: Callable[[Op], float] = functools.partial(_held_bytes, tp=tp)
        if sp.fw:
            sp.p2p_bytes = int(round(sp.fw[-1].out_bytes * mb_scale))
        sp.param_bytes = sum(pbytes(o) for o in sp.fw)
        # (2) tensor-parallel all-reduces
        if tp > 1:
            full = (stage_modes[k] if stage_modes is not None else mode) == "full"
            sp.hooks += tp_hooks(sp.fw, sp.bw, mb_scale=mb_scale, recompute=full)
        # (4) gradient synchronisation
        if layout.dp > 1 or fsdp:
            if zero is not None and not fsdp:
                from echo_sim.cost.memory_model import dtype_bytes  # memory_model imports ops

                sp.hooks += _offset(apply_zero(
                    sp.bw, _stage_params(sp, workload, fw_of, tp, k == 0), zero,
                    elem_bytes=dtype_bytes(workload.dtype)), len(sp.hooks))
            elif fsdp:
                sp.hooks += apply_fsdp(sp.fw, sp.bw, has_blocks=workload.has_blocks,
                                       param_bytes=pbytes, overlap=fsdp_overlap,
                                       reshard_after_forward=layout.pp == 1)
            else:
                if dp_mode == "ddp" and k < layout.pp:  # once per forward, first chunk
                    sp.hooks += ddp_buffer_hooks(sp.fw, _stage_buffers(workload, stages, k,
                                                                       layout.pp))
                sp.hooks += _offset(apply_data_parallel(
                    sp.bw, _stage_params(sp, workload, fw_of, tp, k == 0),
                    mode=dp_mode, cap_bytes=bucket_cap_bytes,
                    traced_buckets=workload.buckets), len(sp.hooks))
    total_params = float(sum(o.param_bytes for o in fw_all)) or 1.0
    update_us = []
    for s in range(layout.pp):
        # the optimizer step of the stage's share of the parameters, timed at its degree
        upd = float(sum(by_tp[layout.tp_of(s)][o.index] for o in ops if o.phase == "U"))
        held = sum(stages[c * layout.pp + s].param_bytes for c in range(layout.virtual))
        frac = held / total_params / (layout.dp if fsdp or zero is not None else 1)
        update_us.append(upd * frac)
    return Plan(time_us=t, stages=stages, update_us=update_us, pre_us=workload.pre_us,
                post_us=workload.post_us, stage_of_unit=stage_of_unit, fsdp_impl=fsdp_impl,
                recompute=mode if stage_modes is None else max(
                    stage_modes, key=RECOMPUTE_MODES.index))


def _held_bytes(o: Op, *, tp: int) -> float:
    return tp_param_bytes(o, tp)


def _tp_times(workload: Workload, ops: Sequence[Op], base_time_us: np.ndarray, tp: int, *,
              sequence_parallel: bool, recompute: str) -> np.ndarray:
    """Every op's time on a rank of ``tp``-way tensor parallelism (steps 2 and 3 of
    :func:`make_plan`): the sharded parts of each op's duration and host gap over ``tp``
    (:func:`~echo_sim.workload.tensor_parallel.tp_factors`), or the time measured at this
    ``tp`` (an Aceso op database profiles every tp), then sequence parallelism, then uniform
    recomputation (backward re-runs its module's forward)."""
    dur_f, gap_f = tp_factors(ops, tp)
    t = np.array(base_time_us, dtype=float)
    measured = workload.tp_time_us.get(tp) if tp > 1 else None
    for o in ops:
        if measured is not None:
            if o.time_us > 0:
                t[o.index] *= measured[o.index] / o.time_us
        elif o.time_us > 0 and (dur_f[o.index] != 1.0 or gap_f[o.index] != 1.0):
            t[o.index] *= (o.dur_us * dur_f[o.index] + o.gap_us * gap_f[o.index]) / o.time_us
    if sequence_parallel and tp > 1:
        for o in ops:
            if o.block >= 0 and o.role not in SHARDED_ROLES and o.phase != "U":
                t[o.index] /= tp
    if recompute != "none":
        by_index = {o.index: o for o in ops}
        for o in ops:
            if o.phase == "B" and o.fw >= 0 and (recompute == "full"
                                                 or by_index[o.fw].kind == "Attention"):
                t[o.index] += t[o.fw]
    return t


def _offset(hooks: list[CommHook], base: int) -> list[CommHook]:
    """Shift ``after`` references of hooks appended behind ``base`` earlier hooks."""
    return [replace(h, after=h.after + base) if h.after >= 0 else h for h in hooks]


def _param_owner(name: str, modules: dict[str, Op]) -> Op | None:
    """The leaf op whose module owns parameter ``name`` (longest module-path prefix)."""
    mod = name.rsplit(".", 1)[0] if "." in name else ""
    while mod:
        o = modules.get(mod)
        if o is not None:
            return o
        mod = mod.rsplit(".", 1)[0] if "." in mod else ""
    return None


def _stage_buffers(workload: Workload, stages: Sequence[Any], k: int, pp: int
                   ) -> list[int] | None:
    """The bytes of each buffer (``workload.buffers``) owned by pipeline stage ``k``'s
    modules, over all its chunks (``stages[c * pp + k]``): a buffer's owner (its name less the
    last part) is a traced op's module or an ancestor of one; a buffer owned by no stage's
    module (the root's) goes to stage 0. None for traces without the list."""
    if workload.buffers is None:
        return None
    mods = [{o.module for c in range(st, len(stages), pp) for o in stages[c].fw}
            for st in range(pp)]

    def owns(ms: set[str], owner: str) -> bool:
        return any(m == owner or not owner or m.startswith(owner + ".") for m in ms)

    out = []
    for name, nbytes in workload.buffers:
        owner = name.rpartition(".")[0]
        home = next((st for st in range(pp) if owns(mods[st], owner)), 0)
        if home == k % pp:
            out.append(nbytes)
    return out


def _stage_params(sp: StagePlan, workload: Workload, modules: dict[str, Op], tp: int,
                  first: bool) -> list[tuple[str, float]]:
    """(name, bytes this rank holds) of the stage's parameters, in registration order.

    Parameters of no traced leaf module (a bare ``nn.Parameter``) belong to the first stage.
    """
    own = {o.module for o in sp.fw}
    out: list[tuple[str, float]] = []
    for name, nbytes, _ in workload.params:
        o = _param_owner(name, modules)
        if o is None:
            if first:
                out.append((name, float(nbytes)))
        elif o.module in own:
            out.append((name, float(nbytes) * tp_param_bytes(o, tp) / max(o.param_bytes, 1)
                        if o.param_bytes else float(nbytes)))
    return out


# ----------------------------------------------------------------------------- graph
@dataclass
class Built:
    """The task graph and what is needed to read its schedule back per rank."""

    graph: TaskGraph
    layout: Layout
    plan: Plan
    ranks: list[int]
    stage_of: dict[int, int]
    compute_tasks: dict[int, list[int]]
    comm_tasks: dict[int, list[int]]
    last_bw: dict[int, int]
    comm_info: dict[int, tuple[str, str, int, tuple[int, ...]]]  # task -> name, coll, bytes, grp


@dataclass
class _Prepared:
    ops: list[tuple[int, float]]
    at_start: list[int]
    after: dict[int, list[int]]
    waits: dict[int, list[int]]
    hooks: list[CommHook]


def _prepare(sp: StagePlan, phase: str, t: np.ndarray) -> _Prepared:
    seq = sp.fw if phase == "F" else sp.bw
    hooks = sp.hooks
    prep = _Prepared([(o.index, float(t[o.index])) for o in seq], [], {}, {}, hooks)
    for i, h in enumerate(hooks):
        if h.phase != phase:
            continue
        if h.issue < 0:
            prep.at_start.append(i)
        else:
            prep.after.setdefault(h.issue, []).append(i)
        if h.wait >= 0:
            prep.waits.setdefault(h.wait, []).append(i)
    return prep


@dataclass
class _RankCtx:
    """Per simulated rank state while its schedule is emitted."""

    d: int
    t: int
    s: int
    chan_last: dict[str, int] = field(default_factory=dict)
    update_waits: list[int] = field(default_factory=list)


def _active(h: CommHook, mb: int, m: int) -> bool:
    return h.when == "all" or (h.when == "first" and mb == 0) or (h.when == "last" and mb == m - 1)


def build_graph(plan: Plan, layout: Layout, comm: Any, *,
                link_contention: bool = False) -> Built:
    """Emit the task graph of one iteration for the simulated ranks of ``layout``.

    ``comm``: a :class:`~echo_sim.cost.collectives.CommModel` (or anything with its ``time_us``
    and ``links``); ``link_contention``: collectives also hold the shared links
    ``comm.links(group)`` (exclusive, so flows on one link serialise).

    Steps, in the order they run: prepare each virtual stage's ops and hooks per phase; then
    for every simulated rank its program (:meth:`_Emitter.rank_program`: the pre-step host
    time, the schedule's forward/backward actions with their collectives and pipeline
    transfers, the optimizer update, the post-step time); collectives and transfers shared
    by several simulated ranks are emitted once (:meth:`_Emitter.collective`,
    :meth:`_Emitter.p2p`).
    """
    em = _Emitter(plan, layout, comm, link_contention=link_contention)
    for d, t, s in em.sim:
        em.rank_program(d, t, s)
    return em.built()


class _Emitter:
    """The task graph of one iteration while it is emitted (see :func:`build_graph`)."""

    def __init__(self, plan: Plan, layout: Layout, comm: Any, *,
                 link_contention: bool) -> None:
        self.g = TaskGraph()
        self.plan, self.L, self.comm = plan, layout, comm
        self.link_contention = link_contention
        P, V = layout.pp, layout.virtual
        self.nvs = P * V
        self.sim = layout.simulated()
        self.sim_set = {layout.rank(d, t, s) for d, t, s in self.sim}
        self.prepared = [{ph: _prepare(sp, ph, plan.time_us) for ph in ("F", "B")}
                         for sp in plan.stages]
        self.acts = {s: stage_actions(layout.schedule, P, layout.micro_batches, s, V)
                     for s in range(P)}
        self._res: dict[tuple[int, str], int] = {}
        self._groups: dict[tuple[str, int, int], tuple[int, ...]] = {}
        self.pending: dict[tuple[Any, ...], int] = {}
        self.comm_info: dict[int, tuple[str, str, int, tuple[int, ...]]] = {}
        self.compute_tasks: dict[int, list[int]] = {}
        self.comm_tasks: dict[int, list[int]] = {r: [] for r in self.sim_set}
        self.last_bw: dict[int, int] = {}
        self.stage_of: dict[int, int] = {}

    def res(self, r: int, ch: str) -> int:
        """Resource ``rank<r>/<ch>`` (compute, a comm channel, p2p), made once."""
        i = self._res.get((r, ch))
        if i is None:
            i = self._res[(r, ch)] = self.g.resource(f"rank{r}/{ch}")
        return i

    def group(self, kind: str, d: int, t: int, s: int) -> tuple[int, ...]:
        """Ranks of the ``tp`` group (fixed d, s) or the data-parallel group (fixed t, s)."""
        L = self.L
        key = (kind, d if kind == "tp" else t, s)
        grp = self._groups.get(key)
        if grp is None:
            grp = self._groups[key] = (tuple(L.rank(d, x, s) for x in range(L.tp_of(s)))
                                       if kind == "tp" else
                                       tuple(L.rank(x, t, s) for x in range(L.dp)))
        return grp

    def p2p(self, vs_from: int, vs_to: int, mb: int, d: int, t: int) -> int | None:
        """The pipeline transfer of micro-batch ``mb`` from virtual stage ``vs_from``'s rank
        of tensor-parallel index ``t`` to ``vs_to`` (None: that rank sends nothing).

        Every rank of the receiving stage gets the whole activation, as Megatron sends it
        from every tensor-parallel rank: receiver ``t'`` from sender ``t' mod tp_from``.
        With equal degrees that is one send to the rank of the same index; a sender facing
        ``k`` times its stage's degree sends its ``k`` copies back to back, one task holding
        every receiver (so one rank per stage stands for its tensor-parallel peers)."""
        key = ("p2p", vs_from, vs_to, mb, d, t)
        if key in self.pending:
            return self.pending[key]
        L, P = self.L, self.L.pp
        tp_from, tp_to = L.tp_of(vs_from % P), L.tp_of(vs_to % P)
        if t >= tp_to:  # a receiving stage of fewer ranks: peer t' < tp_to sends instead
            return None
        src = L.rank(d, t, vs_from % P)
        dsts = [L.rank(d, x, vs_to % P) for x in range(t, tp_to, tp_from)]
        nbytes = self.plan.stages[min(vs_from, vs_to)].p2p_bytes
        members = [x for x in (src, *dsts) if x in self.sim_set]
        rs = tuple(dict.fromkeys(self.res(x, "p2p") for x in members))
        dur = sum(self.comm.time_us("send", nbytes, [src, dst]) for dst in dsts
                  if src != dst)
        tk = self.pending[key] = self.g.task(dur, rs, label=("p2p", src, dsts[0], mb))
        self.comm_info[tk] = ("pp.fw" if vs_to > vs_from else "pp.bw", "send",
                              nbytes * len(dsts), (src, *dsts))
        for x in members:
            self.comm_tasks[x].append(tk)
        return tk

    def collective(self, ctx: _RankCtx, hooks: list[CommHook], hi: int, issuer: int, vs: int,
                   phase: str, mb: int, created: dict[int, int]) -> int:
        """Hook ``hi``'s collective, issued after task ``issuer``, with its ordering edges."""
        g, plan = self.g, self.plan
        h = hooks[hi]
        grp = self.group(h.group, ctx.d, ctx.t, ctx.s)
        key = (vs, phase, hi, mb, grp[0])
        ct = self.pending.get(key)
        if ct is None:
            members = [x for x in grp if x in self.sim_set]
            zero3 = plan.fsdp_impl != "fsdp2" and h.name.startswith("fsdp.")
            # deepspeed-2021: every ZeRO-3 collective goes through the one per-GPU fetch path
            ch = "comm_ag" if zero3 else h.channel
            rs = [self.res(x, ch) for x in members]
            if self.link_contention:
                rs += [g.resource(name) for name in self.comm.links(list(grp))]
            dur = self.comm.time_us(h.collective, h.nbytes, list(grp))
            if zero3:
                passes = 2 if (h.name.startswith("fsdp.ag.bw.") and
                               plan.recompute == "full") else 1
                dur = max(dur, passes * fetch_us(h.nbytes, len(grp), plan.fsdp_impl))
            ct = self.pending[key] = g.task(dur, tuple(rs), label=("comm", vs, hi, mb))
            self.comm_info[ct] = (h.name, h.collective, h.nbytes, grp)
            for x in members:
                self.comm_tasks[x].append(ct)
        g.edge(issuer, ct)
        if h.after >= 0 and h.after in created:
            g.edge(created[h.after], ct)
        if h.chain:
            last = ctx.chan_last.get(h.channel)
            if last is not None:
                g.edge(last, ct)
            ctx.chan_last[h.channel] = ct
        if h.wait == -1:
            ctx.update_waits.append(ct)
        created[hi] = ct
        return ct

    def rank_program(self, d: int, t: int, s: int) -> None:
        """Rank (d, t, s)'s iteration on its compute stream, in program order."""
        g, L, plan = self.g, self.L, self.plan
        task, edge = g.task, g.edge
        P, m, nvs = L.pp, L.micro_batches, self.nvs
        r = L.rank(d, t, s)
        self.stage_of[r] = s
        comp = self.res(r, "compute")
        ctasks: list[int] = []
        self.compute_tasks[r] = ctasks
        prev = task(plan.pre_us, (comp,), label=("pre", r))
        ctasks.append(prev)
        ctx = _RankCtx(d, t, s)
        for phase, c, mb in self.acts[s]:
            vs = c * P + s
            prep = self.prepared[vs][phase]
            hooks = prep.hooks
            created: dict[int, int] = {}
            for hi in prep.at_start:
                if _active(hooks[hi], mb, m):
                    blk = self.collective(ctx, hooks, hi, prev, vs, phase, mb, created)
                    if hooks[hi].wait == -2:
                        prev = blk
            entry: int | None = None
            if phase == "F" and vs > 0:
                entry = self.p2p(vs - 1, vs, mb, d, t % L.tp_of((vs - 1) % P))
            elif phase == "B" and vs < nvs - 1:
                entry = self.p2p(vs + 1, vs, mb, d, t % L.tp_of((vs + 1) % P))
            for oi, dur in prep.ops:
                tk = task(dur, (comp,), label=("op", r, oi, mb))
                ctasks.append(tk)
                edge(prev, tk)
                if entry is not None:
                    edge(entry, tk)
                    entry = None
                for hi in prep.waits.get(oi, ()):
                    ct = created.get(hi)
                    if ct is not None:
                        edge(ct, tk)
                prev = tk
                for hi in prep.after.get(oi, ()):
                    if _active(hooks[hi], mb, m):
                        ct = self.collective(ctx, hooks, hi, tk, vs, phase, mb, created)
                        if hooks[hi].wait == -2:
                            prev = ct
            if phase == "B":
                self.last_bw[r] = prev
            out = self.p2p(vs, vs + 1, mb, d, t) if phase == "F" and vs < nvs - 1 else \
                self.p2p(vs, vs - 1, mb, d, t) if phase == "B" and vs > 0 else None
            if out is not None:
                edge(prev, out)
        upd = task(plan.update_us[s], (comp,), label=("update", r))
        ctasks.append(upd)
        edge(prev, upd)
        for w in ctx.update_waits:
            edge(w, upd)
        prev = upd
        for c in range(L.virtual):  # phase "U": after the step (ZeRO-1/2's all-gather)
            hooks = plan.stages[c * P + s].hooks
            for hi, h in enumerate(hooks):
                if h.phase == "U" and _active(h, m - 1, m):
                    prev = self.collective(ctx, hooks, hi, prev, c * P + s, "U", 0, {})
        post = task(plan.post_us, (comp,), label=("post", r))
        ctasks.append(post)
        edge(prev, post)

    def built(self) -> Built:
        return Built(graph=self.g, layout=self.L, plan=self.plan,
                     ranks=sorted(self.compute_tasks), stage_of=self.stage_of,
                     compute_tasks=self.compute_tasks, comm_tasks=self.comm_tasks,
                     last_bw=self.last_bw, comm_info=self.comm_info)
