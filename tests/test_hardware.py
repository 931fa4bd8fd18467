"""Hardware presets: datasheet figures, validation and scaling of cluster presets."""

from __future__ import annotations

import dataclasses

import pytest

from echo_sim.cost.hardware import CLUSTERS, DTYPES, GPU, GPUS, Cluster, get_cluster, get_gpu
from echo_sim.errors import ConfigError


def test_presets_exist_with_datasheet_figures() -> None:
    for name in ("v100", "a100", "h100", "h200", "cpu"):
        assert set(DTYPES) <= set(GPUS[name].peak_tflops)
    a100 = get_gpu("A100")
    assert a100.peak_tflops["bf16"] == 312.0
    assert a100.peak_flops("bfloat16") == 312e12
    assert a100.mem_bw_gbps == 2039.0
    assert a100.mem_bw_bytes_per_us == pytest.approx(2.039e6)
    assert a100.memory_bytes == 80 * 2**30
    assert get_gpu("h100").peak_tflops["bf16"] == pytest.approx(989.4)
    assert get_gpu("h200").mem_bw_gbps == 4800.0
    assert get_gpu("v100").peak_tflops["fp16"] == 125.0


def test_cluster_presets() -> None:
    for name in ("dgx-a100", "dgx-h100", "cpu-gloo"):
        assert name in CLUSTERS
    c = get_cluster("dgx-a100")
    assert (c.gpus_per_node, c.nodes, c.world_size) == (8, 1, 8)
    assert c.intra_bw_gbps == 300.0 and c.inter_bw_gbps == 25.0
    assert get_cluster("dgx-h100").inter_bw_gbps == 50.0
    big = get_cluster("dgx-h100", nodes=16)
    assert big.world_size == 128 and big.node_of(127) == 15 and big.node_of(8) == 1
    assert get_cluster("cpu-gloo", gpus_per_node=4).world_size == 4
    assert get_cluster("dgx-a100", nodes=12, topology="torus2d").grid == (3, 4)


def test_gpu_is_hashable_and_frozen() -> None:
    c = get_cluster("dgx-a100", nodes=2)
    assert hash(c) == hash(get_cluster("dgx-a100", nodes=2))
    with pytest.raises(dataclasses.FrozenInstanceError):
        c.nodes = 3  # type: ignore[misc]


@pytest.mark.parametrize(
    "call, needle",
    [
        (lambda: get_gpu("tpu"), "valid: v100, a100, h100, h200, cpu"),
        (lambda: get_cluster("dgx-z"), "valid: dgx-a100"),
        (lambda: get_cluster("dgx-a100", nodes=0), "nodes=0"),
        (lambda: get_cluster("dgx-a100", topology="hypercube"), "valid: switch, ring"),
        (lambda: get_gpu("a100").peak_flops("int4"), "valid: fp32, tf32, bf16, fp16"),
        (lambda: GPU(name="x", peak_tflops={"fp32": 1.0}, mem_bw_gbps=1.0, memory_bytes=1),
         "lacks tf32"),
        (lambda: dataclasses.replace(get_cluster("dgx-a100"), inter_bw_gbps=0.0), "inter_bw"),
        (lambda: dataclasses.replace(get_cluster("dgx-a100", nodes=4), mesh_dims=(3, 2)),
         "mesh_dims"),
    ],
)
def test_bad_input_is_one_line_config_error(call, needle: str) -> None:
    with pytest.raises(ConfigError) as e:
        call()
    msg = str(e.value)
    assert needle in msg and "\n" not in msg


def test_cluster_keyword_only() -> None:
    with pytest.raises(TypeError):
        Cluster("x", get_gpu("a100"), 8)  # type: ignore[misc]
