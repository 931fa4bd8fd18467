"""Hardware presets: accelerators (:class:`GPU`) and clusters of them (:class:`Cluster`).

Figures are the vendors' published datasheet numbers (dense, i.e. without 2:4 sparsity),
cited next to each preset. Units:

* ``peak_tflops``: 10^12 floating-point operations per second, per dtype.
* ``mem_bw_gbps``, ``intra_bw_gbps``, ``inter_bw_gbps``: GB/s = 10^9 bytes per second,
  **per direction** (NVIDIA quotes NVLink as bidirectional totals; we halve them).
* ``memory_bytes``: bytes of device memory.
* latencies: microseconds, the per-step start-up cost ``alpha`` of the alpha-beta model
  (see :mod:`echo_sim.cost.collectives`).

Nothing here reads the environment or touches a device; presets are plain constants and
:func:`get_cluster` returns modified copies.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field

from echo_sim.errors import ConfigError

__all__ = [
    "CLUSTERS",
    "DTYPES",
    "GPU",
    "GPUS",
    "TOPOLOGIES",
    "Cluster",
    "get_cluster",
    "get_gpu",
]

DTYPES: tuple[str, ...] = ("fp32", "tf32", "bf16", "fp16")
"""Dtype keys of :attr:`GPU.peak_tflops`."""

TOPOLOGIES: tuple[str, ...] = ("switch", "ring", "mesh2d", "torus2d")
"""Inter-node topologies :class:`Cluster` models (see :mod:`echo_sim.cost.topology`)."""

_GiB = 1 << 30


@dataclass(frozen=True, kw_only=True)
class GPU:
    """One accelerator: peak dense throughput per dtype, memory bandwidth and capacity."""

    name: str
    peak_tflops: dict[str, float] = field(hash=False)
    mem_bw_gbps: float
    memory_bytes: int
    sms: int = 1  # streaming multiprocessors (CPU: cores): the waves of a tiled GEMM

    def __post_init__(self) -> None:
        missing = [d for d in DTYPES if d not in self.peak_tflops]
        if missing:
            raise ConfigError(f"GPU {self.name!r}: peak_tflops lacks {', '.join(missing)} "
                              f"(needs {', '.join(DTYPES)})")
        bad = {k: v for k, v in self.peak_tflops.items() if not (v > 0 and math.isfinite(v))}
        if bad:
            raise ConfigError(f"GPU {self.name!r}: peak_tflops must be positive, got {bad}")
        if not self.mem_bw_gbps > 0:
            raise ConfigError(f"GPU {self.name!r}: mem_bw_gbps={self.mem_bw_gbps} must be > 0")
        if self.memory_bytes <= 0:
            raise ConfigError(f"GPU {self.name!r}: memory_bytes={self.memory_bytes} must be > 0")
        if self.sms < 1:
            raise ConfigError(f"GPU {self.name!r}: sms={self.sms} must be >= 1")

    def peak_flops(self, dtype: str) -> float:
        """Peak dense FLOP/s for ``dtype`` (one of :data:`DTYPES`; ``float32`` etc. accepted)."""
        key = _DTYPE_ALIASES.get(dtype, dtype)
        if key not in self.peak_tflops:
            raise ConfigError(f"unknown dtype {dtype!r} for GPU {self.name!r}; "
                              f"valid: {', '.join(DTYPES)}")
        return self.peak_tflops[key] * 1e12

    @property
    def mem_bw_bytes_per_us(self) -> float:
        """Memory bandwidth in bytes per microsecond (1 GB/s = 1e3 bytes/us)."""
        return self.mem_bw_gbps * 1e3


_DTYPE_ALIASES = {
    "float32": "fp32", "float": "fp32", "tensorfloat32": "tf32",
    "bfloat16": "bf16", "float16": "fp16", "half": "fp16",
}

# ----------------------------------------------------------------------------- GPU presets
# V100 SXM2 32 GB — NVIDIA Tesla V100 datasheet (2020): FP32 15.7 TFLOPS, tensor (FP16)
# 125 TFLOPS, HBM2 900 GB/s. No TF32 or BF16 hardware: those run at the FP32 rate.
_V100 = GPU(name="v100", peak_tflops={"fp32": 15.7, "tf32": 15.7, "bf16": 15.7, "fp16": 125.0},
            mem_bw_gbps=900.0, memory_bytes=32 * _GiB, sms=80)
# A100 SXM4 80 GB — NVIDIA A100 datasheet (2021): FP32 19.5, TF32 156, BF16/FP16 312 TFLOPS
# dense (624 with sparsity), HBM2e 2,039 GB/s; 108 SMs (NVIDIA A100 Tensor Core GPU
# Architecture whitepaper, 2020, Table 1).
_A100 = GPU(name="a100", peak_tflops={"fp32": 19.5, "tf32": 156.0, "bf16": 312.0, "fp16": 312.0},
            mem_bw_gbps=2039.0, memory_bytes=80 * _GiB, sms=108)
# H100 SXM5 80 GB — NVIDIA H100 datasheet (2023): FP32 67, TF32 494.7, BF16/FP16 989.4 TFLOPS
# dense (the datasheet's 989/1,979 figures are with sparsity for TF32/BF16), HBM3 3.35 TB/s.
_H100 = GPU(name="h100", peak_tflops={"fp32": 67.0, "tf32": 494.7, "bf16": 989.4, "fp16": 989.4},
            mem_bw_gbps=3350.0, memory_bytes=80 * _GiB, sms=132)  # H100 SXM5: 132 SMs
# H200 SXM 141 GB — NVIDIA H200 datasheet (2024): same Hopper compute as H100 SXM,
# HBM3e 4.8 TB/s, 141 GB.
_H200 = GPU(name="h200", peak_tflops={"fp32": 67.0, "tf32": 494.7, "bf16": 989.4, "fp16": 989.4},
            mem_bw_gbps=4800.0, memory_bytes=141 * 10**9, sms=132)
# A nominal CPU "device" (one training process on a CPU host, as gloo runs do): a 16-core
# AVX2 server at ~3 GHz does 16 cores × 2 FMA units × 8 fp32 lanes × 2 FLOP × 3e9 ≈ 1.5
# TFLOPS; no native bf16/fp16 math. Dual-channel DDR4-3200 = 2 × 25.6 = 51.2 GB/s.
# Deliberately rough: profile this machine (`profile-comm`, a real trace) for real figures.
_CPU = GPU(name="cpu", peak_tflops={"fp32": 1.5, "tf32": 1.5, "bf16": 1.5, "fp16": 1.5},
           mem_bw_gbps=51.2, memory_bytes=64 * _GiB, sms=16)

GPUS: dict[str, GPU] = {g.name: g for g in (_V100, _A100, _H100, _H200, _CPU)}
"""Accelerator presets by name."""


def get_gpu(name: str) -> GPU:
    """The preset called ``name`` (case-insensitive); :class:`ConfigError` lists the choices."""
    gpu = GPUS.get(name.strip().lower())
    if gpu is None:
        raise ConfigError(f"unknown GPU {name!r}; valid: {', '.join(GPUS)}")
    return gpu


# ----------------------------------------------------------------------------- clusters
@dataclass(frozen=True, kw_only=True)
class Cluster:
    """``nodes`` × ``gpus_per_node`` GPUs; global rank r sits on node ``r // gpus_per_node``.

    ``intra_bw_gbps``: per-GPU, per-direction bandwidth inside a node (NVLink through
    NVSwitch: every GPU pair at full rate). ``inter_bw_gbps``: per-GPU NIC bandwidth
    between nodes (one NIC per GPU, as on DGX). ``topology`` is the inter-node network:
    ``switch`` (non-blocking fat tree), ``ring``, ``mesh2d`` or ``torus2d`` of nodes with
    ``mesh_dims`` = (rows, cols) (default: the most square factorisation of ``nodes``).
    """

    name: str
    gpu: GPU
    gpus_per_node: int
    nodes: int = 1
    intra_bw_gbps: float
    intra_latency_us: float
    inter_bw_gbps: float
    inter_latency_us: float
    topology: str = "switch"
    mesh_dims: tuple[int, int] | None = None
    intra_efficiency: float = 1.0  # fraction of intra_bw_gbps NCCL's bus bandwidth reaches
    inter_efficiency: float = 1.0  # same for the NICs

    def __post_init__(self) -> None:
        if self.gpus_per_node < 1 or self.nodes < 1:
            raise ConfigError(f"cluster {self.name!r}: gpus_per_node={self.gpus_per_node} "
                              f"and nodes={self.nodes} must be >= 1")
        for f in ("intra_bw_gbps", "inter_bw_gbps"):
            v = getattr(self, f)
            if not (v > 0 and math.isfinite(v)):
                raise ConfigError(f"cluster {self.name!r}: {f}={v} must be > 0")
        for f in ("intra_efficiency", "inter_efficiency"):
            v = getattr(self, f)
            if not 0 < v <= 1:
                raise ConfigError(f"cluster {self.name!r}: {f}={v} must be in (0, 1]")
        for f in ("intra_latency_us", "inter_latency_us"):
            v = getattr(self, f)
            if not (v >= 0 and math.isfinite(v)):
                raise ConfigError(f"cluster {self.name!r}: {f}={v} must be >= 0")
        if self.topology not in TOPOLOGIES:
            raise ConfigError(f"cluster {self.name!r}: unknown topology {self.topology!r}; "
                              f"valid: {', '.join(TOPOLOGIES)}")
        if self.mesh_dims is not None:
            rows, cols = self.mesh_dims
            if rows < 1 or cols < 1 or rows * cols != self.nodes:
                raise ConfigError(f"cluster {self.name!r}: mesh_dims={self.mesh_dims} must "
                                  f"multiply to nodes={self.nodes}")

    @property
    def world_size(self) -> int:
        """Total GPUs."""
        return self.nodes * self.gpus_per_node

    def node_of(self, rank: int) -> int:
        """Node index of global ``rank``."""
        return int(rank) // self.gpus_per_node

    @property
    def grid(self) -> tuple[int, int]:
        """(rows, cols) of a mesh/torus of nodes: ``mesh_dims`` or the most square split."""
        if self.mesh_dims is not None:
            return self.mesh_dims
        rows = int(math.isqrt(self.nodes))
        while self.nodes % rows:
            rows -= 1
        return rows, self.nodes // rows


# Latencies: NCCL all-reduce of a few bytes takes ~10 us on 8 NVSwitch-connected GPUs
# (nccl-tests on DGX A100/H100), i.e. < 1 us per ring step over 2(n-1) = 14 steps; and
# ~20-30 us across two nodes over InfiniBand, whose hardware port-to-port latency is
# ~1 us (NVIDIA ConnectX-6/7 product briefs) plus the network stack: we take 5 us per step.
#
# Achieved fraction of the link rate (nccl-tests "bus bandwidth" of large all-reduces,
# NVIDIA/nccl-tests issues #149 and #178: 8 x A100-SXM4 NVLink nodes reach 200-208 GB/s of
# the 300 GB/s per direction -> 0.69; #119: 3 nodes x 4 HDR NICs reach 84.8-96 of 100 GB/s
# -> 0.9). Applied to every NVLink / InfiniBand preset (protocol overheads of NCCL's
# Simple protocol; no per-machine tuning).
_NVLINK_EFF, _NET_EFF = 0.69, 0.9

# DGX A100 — NVIDIA DGX A100 datasheet / user guide: 8 × A100 80 GB, 3rd-gen NVLink through
# 6 NVSwitches, 600 GB/s bidirectional per GPU (= 300 GB/s per direction); 8 × ConnectX-6
# HDR InfiniBand 200 Gb/s for compute (= 25 GB/s per GPU per direction).
_DGX_A100 = Cluster(name="dgx-a100", gpu=_A100, gpus_per_node=8, intra_bw_gbps=300.0,
                    intra_latency_us=1.0, inter_bw_gbps=25.0, inter_latency_us=5.0,
                    intra_efficiency=_NVLINK_EFF, inter_efficiency=_NET_EFF)
# DGX H100 — NVIDIA DGX H100 datasheet: 8 × H100 SXM, 4th-gen NVLink 900 GB/s bidirectional
# per GPU (450 per direction) through 4 NVSwitches; 8 × ConnectX-7 NDR 400 Gb/s (50 GB/s).
_DGX_H100 = Cluster(name="dgx-h100", gpu=_H100, gpus_per_node=8, intra_bw_gbps=450.0,
                    intra_latency_us=1.0, inter_bw_gbps=50.0, inter_latency_us=5.0,
                    intra_efficiency=_NVLINK_EFF, inter_efficiency=_NET_EFF)
# DGX H200 — NVIDIA DGX H200 datasheet: the DGX H100 fabric with H200 GPUs.
_DGX_H200 = dataclasses.replace(_DGX_H100, name="dgx-h200", gpu=_H200)
# DGX-2 (V100) — NVIDIA DGX-2 datasheet: 16 × V100 32 GB, 2nd-gen NVLink through 12
# NVSwitches, 300 GB/s bidirectional per GPU (150 per direction); 8 × 100 Gb/s EDR
# InfiniBand for 16 GPUs = 12.5 GB/s per NIC shared by 2 GPUs = 6.25 GB/s per GPU.
_DGX2_V100 = Cluster(name="dgx2-v100", gpu=_V100, gpus_per_node=16, intra_bw_gbps=150.0,
                     intra_latency_us=1.5, inter_bw_gbps=6.25, inter_latency_us=5.0,
                     intra_efficiency=_NVLINK_EFF, inter_efficiency=_NET_EFF)
# CPU hosts running gloo (this project's test machines): processes on one host talk over
# loopback TCP, a few GB/s with ~tens of us per message (measure yours with
# `python -m echo_sim profile-comm`); hosts talk over 10 GbE = 1.25 GB/s, ~50 us.
_CPU_GLOO = Cluster(name="cpu-gloo", gpu=_CPU, gpus_per_node=2, intra_bw_gbps=2.0,
                    intra_latency_us=30.0, inter_bw_gbps=1.25, inter_latency_us=50.0)

# Jean Zay A100 partition (BLOOM-176B; Le Scao et al. 2022 §3.4 / BigScience model page):
# 8 x A100-80GB SXM4 per node (NVLink 3: 12 links x 25 GB/s = 300 GB/s per direction) and
# 4 x 100 Gb/s Omni-Path per node = 50 GB/s per node = 6.25 GB/s per GPU per direction.
_JEANZAY_A100 = dataclasses.replace(_DGX_A100, name="jeanzay-a100", inter_bw_gbps=6.25)

CLUSTERS: dict[str, Cluster] = {
    c.name: c for c in (_DGX_A100, _DGX_H100, _DGX_H200, _DGX2_V100, _CPU_GLOO, _JEANZAY_A100)
}
"""Cluster presets by name (one node each; :func:`get_cluster` scales them)."""


def get_cluster(name: str, *, nodes: int | None = None, gpus_per_node: int | None = None,
                topology: str | None = None) -> Cluster:
    """The preset called ``name``, with ``nodes`` / ``gpus_per_node`` / ``topology`` replaced.

    Raises :class:`ConfigError` naming the valid presets, or the invalid value.
    """
    base = CLUSTERS.get(name.strip().lower())
    if base is None:
        raise ConfigError(f"unknown cluster {name!r}; valid: {', '.join(CLUSTERS)}")
    changes: dict[str, object] = {}
    if nodes is not None:
        changes["nodes"] = int(nodes)
    if gpus_per_node is not None:
        changes["gpus_per_node"] = int(gpus_per_node)
    if topology is not None:
        changes["topology"] = topology
    if nodes is not None and base.mesh_dims is not None:
        changes["mesh_dims"] = None
    return dataclasses.replace(base, **changes) if changes else base  # type: ignore[arg-type]
