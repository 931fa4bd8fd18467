"""What a user states about the network, laid over a cluster preset (a preset is named defaults).

TrioSim (Li et al. 2024; its ``main.go`` flags) describes a multi-GPU machine by two link
rates and an interconnect: ``-ptp-bandwidth`` (GPU to GPU, GB/s), ``-bandwidth`` (GPU to
remote memory, GB/s) and ``-interconnects 1`` (an optical 2-D mesh of ``-numRows`` ×
``-numCols`` GPUs, one GPU per mesh position). echo's cluster model
(:class:`~echo_sim.cost.hardware.Cluster`, priced by :mod:`echo_sim.cost.collectives` on the
topology of :mod:`echo_sim.cost.topology`) holds the same facts in its own fields, so a
:class:`NetworkSpec` only replaces fields of the preset and every collective keeps the one
model:

===========================  =======================================================
stated                        Cluster field it replaces
===========================  =======================================================
``ptp_bw_gbps``              ``intra_bw_gbps`` — every GPU-to-GPU link (NVLink inside
                             a node; each mesh link with ``gpu_mesh``)
``remote_bw_gbps``           ``inter_bw_gbps`` — each GPU's path off its node (NIC);
                             echo has no remote-memory device, so this is the link
                             every transfer that leaves a node takes
``topology``, mesh rows/cols ``topology``, ``mesh_dims`` — the inter-node network
``gpu_mesh``                 one GPU per node of a ``mesh2d`` (TrioSim's optical mesh):
                             ``inter_*`` become the GPU-to-GPU link's rate, latency
                             and efficiency
===========================  =======================================================

Rates are GB/s = 10^9 bytes/s per direction, as the presets' (1 GB/s = 1e3 bytes/µs); a
stated rate is a link rate like a preset's, so collectives reach the preset's efficiency
of it (``intra_efficiency`` / ``inter_efficiency``). A mesh of R × C positions must hold
exactly the layout's nodes (TrioSim: ``numRows·numCols = GPUnumber``); with ``gpu_mesh``
and no dimensions the mesh is one row of every GPU (TrioSim's defaults ``numRows 1``,
``numCols GPUnumber``).
"""

from __future__ import annotations

import dataclasses
import math
import re
from dataclasses import dataclass

from echo_sim.cost.hardware import TOPOLOGIES, Cluster
from echo_sim.errors import ConfigError

__all__ = ["MAX_BANDWIDTH_GBPS", "NetworkSpec", "apply_network", "describe_network",
           "parse_bandwidth_gbps"]

MAX_BANDWIDTH_GBPS = 1e6
"""Largest link rate accepted (1 PB/s), far above any link built."""

# unit -> GB/s per unit; bits are divided by 8 (Gb/s is the NIC vendors' unit)
_UNITS = {"": 1.0, "GB/s": 1.0, "GBps": 1.0, "GB": 1.0, "TB/s": 1e3, "TBps": 1e3,
          "MB/s": 1e-3, "MBps": 1e-3, "Gb/s": 1 / 8, "Gbps": 1 / 8, "Gbit/s": 1 / 8,
          "Tb/s": 1e3 / 8, "Tbps": 1e3 / 8}
_RATE = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)\s*([A-Za-z/]*)\s*$")


def parse_bandwidth_gbps(text: str, *, name: str = "bandwidth") -> float:
    """A link rate in GB/s from ``300``, ``300GB/s``, ``300GBps``, ``1.2TB/s`` or ``400Gb/s``.

    A bare number is GB/s (TrioSim's unit); ``b`` is bits (``400Gb/s`` = 50 GB/s). Raises
    :class:`ConfigError` naming ``name`` for anything else or a rate outside
    (0, :data:`MAX_BANDWIDTH_GBPS`].
    """
    m = _RATE.match(str(text))
    unit = m.group(2) if m else ""
    if m is None or unit not in _UNITS:
        raise ConfigError(f"{name}={text!r} is not a rate; valid: a number of GB/s, or with "
                          f"a unit: {', '.join(u for u in _UNITS if u)}")
    value = float(m.group(1)) * _UNITS[unit]
    if not (math.isfinite(value) and 0 < value <= MAX_BANDWIDTH_GBPS):
        raise ConfigError(f"{name}={text!r} is out of range; valid: above 0 and at most "
                          f"{MAX_BANDWIDTH_GBPS:g} GB/s")
    return value


@dataclass(frozen=True, kw_only=True)
class NetworkSpec:
    """The network as stated; ``None`` fields keep the preset's (see the module docstring).

    ``ptp_bw_gbps``: GPU-to-GPU link rate, GB/s per direction. ``remote_bw_gbps``: each
    GPU's rate off its node, GB/s per direction. ``topology``: one of
    :data:`~echo_sim.cost.hardware.TOPOLOGIES`. ``mesh_rows`` / ``mesh_cols``: the grid of
    a ``mesh2d`` / ``torus2d`` (either alone: the other is nodes ÷ it; both unset: the
    preset's most square grid, or one row with ``gpu_mesh``). ``gpu_mesh``: TrioSim's
    optical mesh, one GPU per mesh position (needs one GPU per node).
    """

    ptp_bw_gbps: float | None = None
    remote_bw_gbps: float | None = None
    topology: str | None = None
    mesh_rows: int | None = None
    mesh_cols: int | None = None
    gpu_mesh: bool = False

    def __post_init__(self) -> None:
        for f in ("ptp_bw_gbps", "remote_bw_gbps"):
            v = getattr(self, f)
            if v is not None and not (math.isfinite(v) and 0 < v <= MAX_BANDWIDTH_GBPS):
                raise ConfigError(f"{f}={v} must be above 0 and at most "
                                  f"{MAX_BANDWIDTH_GBPS:g} GB/s")
        for f in ("mesh_rows", "mesh_cols"):
            v = getattr(self, f)
            if v is not None and (not isinstance(v, int) or v < 1):
                raise ConfigError(f"{f}={v!r} must be an integer >= 1")
        if self.topology is not None and self.topology not in TOPOLOGIES:
            raise ConfigError(f"topology={self.topology!r} is unknown; valid: "
                              f"{', '.join(TOPOLOGIES)}")
        gridded = self.mesh_rows is not None or self.mesh_cols is not None or self.gpu_mesh
        if gridded and self.topology in ("switch", "ring"):
            raise ConfigError(f"topology={self.topology!r} has no rows and columns; mesh_rows, "
                              "mesh_cols and gpu_mesh need mesh2d or torus2d")

    @property
    def resolved_topology(self) -> str | None:
        """The topology asked for (a mesh when only its rows/columns are), else None."""
        if self.topology is not None:
            return self.topology
        if self.mesh_rows is not None or self.mesh_cols is not None or self.gpu_mesh:
            return "mesh2d"
        return None

    def mesh_dims(self, nodes: int) -> tuple[int, int] | None:
        """(rows, cols) of the grid over ``nodes`` (None: the preset's default)."""
        rows, cols = self.mesh_rows, self.mesh_cols
        if rows is None and cols is None:
            return (1, nodes) if self.gpu_mesh else None
        if rows is None:
            rows = nodes // cols if cols and nodes % cols == 0 else 0
        if cols is None:
            cols = nodes // rows if rows and nodes % rows == 0 else 0
        if rows * cols != nodes:
            shown = f"{self.mesh_rows or '?'}x{self.mesh_cols or '?'}"
            raise ConfigError(f"mesh_dims={shown} does not hold the layout's {nodes} "
                              f"{'GPUs' if self.gpu_mesh else 'nodes'}; valid: rows x "
                              f"columns = {nodes}")
        return rows, cols


def apply_network(cluster: Cluster, spec: NetworkSpec | None) -> Cluster:
    """``cluster`` with the fields ``spec`` states replaced (the module docstring's table).

    Raises :class:`ConfigError` when ``gpu_mesh`` meets a cluster of several GPUs per node,
    or the mesh does not hold the cluster's nodes.
    """
    if spec is None:
        return cluster
    changes: dict[str, object] = {}
    if spec.ptp_bw_gbps is not None:
        changes["intra_bw_gbps"] = spec.ptp_bw_gbps
    if spec.remote_bw_gbps is not None:
        changes["inter_bw_gbps"] = spec.remote_bw_gbps
    topology = spec.resolved_topology
    if topology is not None:
        changes["topology"] = topology
        changes["mesh_dims"] = spec.mesh_dims(cluster.nodes) if topology != "switch" and \
            topology != "ring" else None
    if spec.gpu_mesh:
        if cluster.gpus_per_node != 1:
            raise ConfigError(f"gpu_mesh puts one GPU at each mesh position, but "
                              f"gpus_per_node={cluster.gpus_per_node}; valid: 1")
        # every mesh link joins two GPUs: the GPU-to-GPU link's rate, latency, efficiency
        changes["inter_bw_gbps"] = spec.ptp_bw_gbps or cluster.intra_bw_gbps
        changes["inter_latency_us"] = cluster.intra_latency_us
        changes["inter_efficiency"] = cluster.intra_efficiency
    return dataclasses.replace(cluster, **changes) if changes else cluster  # type: ignore[arg-type]


def describe_network(cluster: Cluster, spec: NetworkSpec | None) -> str:
    """One line: the link rates and topology collectives are priced on, and what set them."""
    said = []
    if spec is not None:
        if spec.ptp_bw_gbps is not None:
            said.append("GPU-to-GPU rate stated")
        if spec.remote_bw_gbps is not None and not spec.gpu_mesh:
            said.append("off-node rate stated")
        if spec.gpu_mesh:
            said.append("optical mesh: one GPU per mesh position, mesh links at the "
                        "GPU-to-GPU rate")
    topo = cluster.topology
    if topo in ("mesh2d", "torus2d"):
        rows, cols = cluster.grid
        topo = f"{topo} {rows}x{cols}"
    return (f"network: GPU-to-GPU {cluster.intra_bw_gbps:g} GB/s x "
            f"{cluster.intra_efficiency:g} achieved, off-node {cluster.inter_bw_gbps:g} GB/s x "
            f"{cluster.inter_efficiency:g} per GPU, {topo} between "
            f"{cluster.nodes} node(s) of {cluster.gpus_per_node}"
            + (f" ({'; '.join(said)})" if said else ""))
