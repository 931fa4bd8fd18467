"""Cost of collectives on a :class:`~echo_sim.cost.hardware.Cluster`: the alpha-beta model.

A message of S bytes over a link costs ``alpha + S / B`` (Hockney 1994). For a group of n
ranks, with ``S`` the **whole** buffer (nccl-tests convention, docs/trace-format.md) and
``B`` in bytes/us (1 GB/s = 1e3 bytes/us):

ring (Patarasuk & Yuan 2009, "Bandwidth optimal all-reduce algorithms for clusters of
workstations"; the NCCL ring; nccl-tests doc/PERFORMANCE.md "bus bandwidth")::

    all_reduce                  2(n-1)·α + 2(n-1)/n · S/B
    all_gather, reduce_scatter   (n-1)·α +  (n-1)/n · S/B
    broadcast, reduce            (n-1)·α +           S/B      (pipelined chain)
    gather, scatter              (n-1)·α +  (n-1)/n · S/B     (root link is the bottleneck)

tree (NCCL double binary tree, pipelined — Sanders et al. 2009 "Two-tree algorithms for
full bandwidth broadcast, reduction and scan"; Jeaugey 2019, "Massively scale your deep
learning training with NCCL 2.4")::

    all_reduce          2·⌈log2 n⌉·α + 2·S/B
    broadcast, reduce     ⌈log2 n⌉·α +   S/B

hierarchical (Jia et al. 2018 "Highly scalable deep learning training system with
mixed-precision", Horovod's hierarchical all-reduce), k ranks per node on N nodes::

    all_reduce    intra reduce-scatter(S, k) + inter all-reduce(S/k, N) + intra all-gather(S, k)
    all_gather    inter all-gather(S/k, N) + intra all-gather(S, k)   (reduce_scatter: mirror)
    broadcast     inter chain(S, N) + intra chain(S, k)               (reduce: mirror)

direct (all_to_all, pairwise exchange; send/recv)::

    all_to_all    (n-1)·α + max(on-node bytes / B_intra, off-node bytes / B_nic) per rank
    send / recv   α + S/B

Which α and B: a group on one node uses ``intra_latency_us`` / ``intra_bw_gbps``. A group
spanning nodes is bound by the network: α = ``inter_latency_us`` × the longest hop count of
a ring step on the topology, and B = min(intra_bw, m · inter_bw / load), where m is the
fewest group ranks on one node (NCCL runs one ring channel per NIC, and DGX nodes have one
NIC per GPU) and ``load`` is the most ring edges routed over one physical inter-node link
(:func:`echo_sim.cost.topology.ring_embedding`). ``concurrent`` flows sharing the same links
divide B. ``algorithm="auto"`` takes the fastest applicable algorithm, as NCCL's tuner does.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

from echo_sim.cost.hardware import Cluster
from echo_sim.cost.topology import Placement, group_links, max_hops, place, ring_embedding, route
from echo_sim.errors import ConfigError

if TYPE_CHECKING:
    import numpy as np

    from echo_sim.cost.comm_profile import CommProfile

__all__ = [
    "ALGORITHMS",
    "COLLECTIVE_OPS",
    "EXTRA_OPS",
    "CommModel",
    "achieved_cluster",
    "algorithms_for",
    "calibrate_cluster",
    "collective_time_us",
    "links_used",
]

COLLECTIVE_OPS: tuple[str, ...] = (
    "all_reduce", "all_gather", "reduce_scatter", "all_to_all", "broadcast", "reduce",
    "send", "recv", "p2p",
)
"""Operations the model prices (``p2p`` = one send/recv pair)."""

EXTRA_OPS: tuple[str, ...] = ("gather", "scatter", "barrier")
"""Trace collectives also accepted (``barrier`` = a zero-byte all-reduce)."""

ALGORITHMS: tuple[str, ...] = ("auto", "ring", "tree", "hierarchical", "direct")

_BY_OP: dict[str, tuple[str, ...]] = {
    "all_reduce": ("ring", "tree", "hierarchical"),
    "barrier": ("ring", "tree", "hierarchical"),
    "all_gather": ("ring", "hierarchical"),
    "reduce_scatter": ("ring", "hierarchical"),
    "broadcast": ("ring", "tree", "hierarchical"),
    "reduce": ("ring", "tree", "hierarchical"),
    "gather": ("ring",),
    "scatter": ("ring",),
    "all_to_all": ("direct",),
    "send": ("direct",),
    "recv": ("direct",),
    "p2p": ("direct",),
}


def algorithms_for(op: str) -> tuple[str, ...]:
    """Algorithms that apply to ``op`` (besides ``auto``); :class:`ConfigError` if unknown."""
    algs = _BY_OP.get(op)
    if algs is None:
        raise ConfigError(f"unknown collective {op!r}; valid: "
                          f"{', '.join(COLLECTIVE_OPS + EXTRA_OPS)}")
    return algs


# ------------------------------------------------------------------------ link parameters
def _flat_link(p: Placement, c: Cluster, concurrent: int) -> tuple[float, float]:
    """(alpha_us, bandwidth bytes/us) of one step of a flat algorithm over the group."""
    if p.single_node:
        return c.intra_latency_us, c.intra_bw_gbps * 1e3 / concurrent
    hops, load, _ = ring_embedding(p.nodes, c)
    bw = min(c.intra_bw_gbps, p.min_per_node * c.inter_bw_gbps / max(load, 1))
    return c.inter_latency_us * max(hops, 1), bw * 1e3 / concurrent


def _ring(op: str, s: float, n: int, a: float, b: float) -> float:
    if n < 2:
        return 0.0
    if op in ("all_reduce", "barrier"):
        return 2 * (n - 1) * a + 2 * (n - 1) / n * s / b
    if op in ("all_gather", "reduce_scatter", "gather", "scatter"):
        return (n - 1) * a + (n - 1) / n * s / b
    if op in ("broadcast", "reduce"):
        return (n - 1) * a + s / b
    raise ConfigError(f"ring has no formula for {op!r}")  # unreachable via _BY_OP


def _tree(op: str, s: float, n: int, a: float, b: float) -> float:
    if n < 2:
        return 0.0
    depth = math.ceil(math.log2(n))
    if op in ("all_reduce", "barrier"):
        return 2 * depth * a + 2 * s / b
    return depth * a + s / b  # broadcast, reduce


def _hierarchical(op: str, s: float, p: Placement, c: Cluster, conc: int) -> float:
    if p.single_node:
        a, b = _flat_link(p, c, conc)
        return _ring(op, s, p.size, a, b)
    k, m, nn = p.max_per_node, p.min_per_node, p.num_nodes
    ai, bi = c.intra_latency_us, c.intra_bw_gbps * 1e3 / conc
    hops, load, _ = ring_embedding(p.nodes, c)
    # one inter-node sub-group per local index, each over its own NIC
    ae, be = c.inter_latency_us * max(hops, 1), c.inter_bw_gbps * 1e3 / max(load, 1) / conc
    if op in ("all_reduce", "barrier"):
        inter = min(_ring("all_reduce", s / m, nn, ae, be), _tree("all_reduce", s / m, nn, ae, be))
        return 2 * _ring("all_gather", s, k, ai, bi) + inter
    if op in ("all_gather", "reduce_scatter"):
        return _ring("all_gather", s / m, nn, ae, be) + _ring("all_gather", s, k, ai, bi)
    # broadcast / reduce: across nodes (split over m NICs), then inside each node
    inter = min(_ring("broadcast", s, nn, ae, be * m), _tree("broadcast", s, nn, ae, be * m))
    return inter + _ring("broadcast", s, k, ai, bi)


def _direct(op: str, s: float, p: Placement, c: Cluster, conc: int) -> float:
    n = p.size
    if n < 2:
        return 0.0
    if op in ("send", "recv", "p2p"):
        if n != 2:
            raise ConfigError(f"{op} takes 2 ranks (src, dst), got {list(p.ranks)}")
        a, b = _flat_link(p, c, conc)
        if not p.single_node:  # one NIC each side: no channel striping for one pair
            x, y = p.nodes
            a = c.inter_latency_us * max(len(route(x, y, c)), 1)
            b = c.inter_bw_gbps * 1e3 / conc
        return a + s / b
    # all_to_all: each rank sends S/n to every other member
    if p.single_node:
        a, b = _flat_link(p, c, conc)
        return (n - 1) * a + (n - 1) / n * s / b
    bi, be = c.intra_bw_gbps * 1e3 / conc, c.inter_bw_gbps * 1e3 / conc
    hops = max_hops(p.nodes, c)
    worst = 0.0
    for locs in p.per_node.values():
        k = len(locs)
        worst = max(worst, (k - 1) / n * s / bi, (n - k) / n * s / be)
    return (n - 1) * c.inter_latency_us * max(hops, 1) + worst


def _time(alg: str, op: str, s: float, p: Placement, c: Cluster, conc: int) -> float:
    if alg == "ring" or alg == "tree":
        a, b = _flat_link(p, c, conc)
        return (_ring if alg == "ring" else _tree)(op, s, p.size, a, b)
    if alg == "hierarchical":
        return _hierarchical(op, s, p, c, conc)
    return _direct(op, s, p, c, conc)


def collective_time_us(op: str, nbytes: int, ranks: Sequence[int], cluster: Cluster, *,
                       algorithm: str = "auto", concurrent: int = 1) -> float:
    """Predicted time (us) of ``op`` on ``nbytes`` (whole buffer) over global ``ranks``.

    ``algorithm``: one of :data:`ALGORITHMS` that applies to ``op`` (``auto``: the fastest);
    ``concurrent``: flows sharing the same links at once (bandwidth divided by it).
    A group of one rank costs 0. Raises :class:`ConfigError` on an unknown op/algorithm,
    negative size, ``concurrent < 1`` or ranks outside the cluster.
    """
    algs = algorithms_for(op)
    if algorithm != "auto" and algorithm not in algs:
        raise ConfigError(f"algorithm {algorithm!r} does not apply to {op}; valid: "
                          f"auto, {', '.join(algs)}")
    if nbytes < 0:
        raise ConfigError(f"nbytes={nbytes} must be >= 0")
    if concurrent < 1:
        raise ConfigError(f"concurrent={concurrent} must be >= 1")
    p = place(ranks, cluster)
    s = 0.0 if op == "barrier" else float(nbytes)
    if p.size < 2:
        return 0.0
    if algorithm != "auto":
        return _time(algorithm, op, s, p, cluster, concurrent)
    return min(_time(a, op, s, p, cluster, concurrent) for a in algs)


def links_used(ranks: Sequence[int], cluster: Cluster) -> list[str]:
    """Names of the shared link resources a collective over ``ranks`` occupies.

    See :func:`echo_sim.cost.topology.group_links` (``node3/nvlink5``, ``node3/nic5``,
    ``net/3->4``); the engine serialises flows that share a name.
    """
    return group_links(ranks, cluster)


_PROFILE_OP = {"p2p": "send", "recv": "send"}


def achieved_cluster(cluster: Cluster) -> Cluster:
    """``cluster`` with its link rates scaled to what NCCL achieves on them
    (``intra_efficiency`` / ``inter_efficiency``, :mod:`echo_sim.cost.hardware`); the
    simulator's :class:`CommModel` prices with it, :func:`collective_time_us` takes rates as
    given."""
    if cluster.intra_efficiency == 1.0 and cluster.inter_efficiency == 1.0:
        return cluster
    return dataclasses.replace(
        cluster, intra_bw_gbps=cluster.intra_bw_gbps * cluster.intra_efficiency,
        inter_bw_gbps=cluster.inter_bw_gbps * cluster.inter_efficiency,
        intra_efficiency=1.0, inter_efficiency=1.0)


def calibrate_cluster(cluster: Cluster, profile: CommProfile) -> Cluster:
    """``cluster`` with its intra-node alpha and bandwidth fitted to a one-host ``profile``.

    Inverts the ring formulas on the measured fit (t = alpha + beta·S) of the largest group:
    all_reduce over n ranks gives alpha = 2(n-1)·α and beta = 2(n-1)/n / B, so
    α = alpha / (2(n-1)) and B = 2(n-1) / (n·beta); all_gather / reduce_scatter the same
    with (n-1). A profile spanning several hosts, or without these ops, changes nothing.
    """
    if profile.nodes != 1:
        return cluster
    for op, steps in (("all_reduce", 2), ("all_gather", 1), ("reduce_scatter", 1)):
        sizes = [n for o, n in profile.samples if o == op and n >= 2]
        if sizes:
            n = max(sizes)
            alpha, beta = profile.fits[(op, n)]
            bw_bytes_per_us = steps * (n - 1) / (n * beta)
            return dataclasses.replace(cluster, intra_latency_us=alpha / (steps * (n - 1)),
                                       intra_bw_gbps=bw_bytes_per_us / 1e3,
                                       intra_efficiency=1.0)  # measured: already achieved
    return cluster


class CommModel:
    """Collective times for the simulator: a measured profile where it applies, else analytic.

    The profile applies to (op, group size, placement) when it holds samples for that op and
    group size and the group spans as many nodes as the profiled run did (a one-host
    profile covers single-node groups). Between measured sizes it interpolates linearly in
    log-size; outside them it extrapolates with the fitted alpha-beta slope
    (:meth:`CommProfile.time_us`). ``concurrent`` flows scale the bandwidth part of a
    measured time (time above the fitted alpha) by ``concurrent``.

    Groups the profile does not cover use the analytic model; with ``calibrate`` (default)
    and a one-host profile, on the cluster whose intra-node alpha and bandwidth are fitted
    to the profile (:func:`calibrate_cluster`), so sub-groups of a measured node size are
    priced from measured figures too.
    """

    def __init__(self, cluster: Cluster, profile: CommProfile | None = None, *,
                 calibrate: bool = True) -> None:
        self.cluster = cluster
        self.profile = profile
        self.analytic_cluster = achieved_cluster(calibrate_cluster(cluster, profile)
                                                 if profile is not None and calibrate
                                                 else cluster)
        self._cache: dict[tuple[str, int, tuple[int, ...], int], float] = {}
        self._links: dict[tuple[int, ...], list[str]] = {}

    def covered(self, op: str, ranks: Sequence[int]) -> bool:
        """True when the measured profile prices ``op`` over ``ranks``."""
        if self.profile is None:
            return False
        p = place(ranks, self.cluster)
        key = (_PROFILE_OP.get(op, op), p.size)
        return key in self.profile.samples and p.num_nodes == self.profile.nodes

    def spread(self, op: str, nbytes: int, ranks: Sequence[int]) -> np.ndarray | None:
        """The measured run-to-run spread of a call the profile prices (its kept runs at the
        nearest size over their mean, :meth:`CommProfile.run_factors`); None otherwise."""
        if self.profile is None or len(set(ranks)) < 2 or not self.covered(op, ranks):
            return None
        return self.profile.run_factors(_PROFILE_OP.get(op, op), len(set(ranks)), nbytes)

    def time_us(self, op: str, nbytes: int, ranks: Sequence[int], *,
                concurrent: int = 1) -> float:
        """Time (us) of ``op`` on ``nbytes`` (whole buffer) over global ``ranks``."""
        key = (op, int(nbytes), tuple(ranks), int(concurrent))
        t = self._cache.get(key)
        if t is None:
            t = self._compute(op, int(nbytes), ranks, int(concurrent))
            self._cache[key] = t
        return t

    def _compute(self, op: str, nbytes: int, ranks: Sequence[int], concurrent: int) -> float:
        algorithms_for(op)
        if self.profile is not None and len(set(ranks)) >= 2 and self.covered(op, ranks):
            if concurrent < 1:
                raise ConfigError(f"concurrent={concurrent} must be >= 1")
            pop, n = _PROFILE_OP.get(op, op), len(set(ranks))
            t = self.profile.time_us(pop, n, nbytes)
            alpha = self.profile.fits[(pop, n)][0]
            return t + (concurrent - 1) * max(t - alpha, 0.0)
        return collective_time_us(op, nbytes, ranks, self.analytic_cluster,
                                  concurrent=concurrent)

    def links(self, ranks: Sequence[int]) -> list[str]:
        """Link resources a collective over ``ranks`` occupies (see :func:`links_used`)."""
        key = tuple(ranks)
        out = self._links.get(key)
        if out is None:
            out = self._links[key] = links_used(ranks, self.cluster)
        return list(out)
