"""Alpha-beta collective model: closed forms on hand-computable clusters."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from echo_sim.cost.collectives import (
    COLLECTIVE_OPS,
    CommModel,
    algorithms_for,
    collective_time_us,
    links_used,
)
from echo_sim.cost.hardware import Cluster, get_cluster, get_gpu
from echo_sim.errors import ConfigError

# 2 nodes × 4 GPUs; intra 100 GB/s = 1e5 B/us, alpha 2 us; NIC 10 GB/s = 1e4 B/us, alpha 10 us
TOY = Cluster(name="toy", gpu=get_gpu("a100"), gpus_per_node=4, nodes=2, intra_bw_gbps=100.0,
              intra_latency_us=2.0, inter_bw_gbps=10.0, inter_latency_us=10.0)
S = 1_000_000


def t(op: str, ranks, alg: str = "auto", cluster: Cluster = TOY, **kw) -> float:
    return collective_time_us(op, S, list(ranks), cluster, algorithm=alg, **kw)


def test_ring_intra_node_closed_forms() -> None:
    # all_reduce 2(n-1)a + 2(n-1)/n S/B = 2*3*2 + 1.5*10
    assert t("all_reduce", range(4), "ring") == pytest.approx(27.0)
    assert t("all_gather", range(4), "ring") == pytest.approx(13.5)  # 3*2 + 0.75*10
    assert t("reduce_scatter", range(4)) == pytest.approx(13.5)
    assert t("broadcast", range(4), "ring") == pytest.approx(16.0)  # 3*2 + 10
    assert t("all_to_all", range(4)) == pytest.approx(13.5)


def test_tree_closed_forms_and_auto_picks_min() -> None:
    assert t("all_reduce", range(4), "tree") == pytest.approx(28.0)  # 2*2*2 + 2*10
    assert t("all_reduce", range(4)) == pytest.approx(27.0)  # ring wins
    assert t("broadcast", range(4), "tree") == pytest.approx(14.0)  # 2*2 + 10
    assert t("broadcast", range(4)) == pytest.approx(14.0)
    # tiny messages: tree's log-depth latency wins over ring's 2(n-1) steps
    tiny = collective_time_us("all_reduce", 8, range(4), TOY)
    assert tiny == pytest.approx(collective_time_us("all_reduce", 8, range(4), TOY,
                                                    algorithm="tree"))


def test_inter_node_uses_nic() -> None:
    # one rank per node: 2*1*10 + 2*(1/2)*S/1e4
    assert t("all_reduce", [0, 4], "ring") == pytest.approx(120.0)
    assert t("all_reduce", [0, 4], "tree") == pytest.approx(220.0)
    assert t("all_reduce", [0, 4], "hierarchical") == pytest.approx(120.0)
    assert t("send", [0, 1]) == pytest.approx(12.0)  # 2 + S/1e5
    assert t("send", [0, 4]) == pytest.approx(110.0)  # 10 + S/1e4
    assert t("p2p", [1, 5]) == t("recv", [1, 5]) == t("send", [1, 5])
    assert t("all_reduce", [0, 1]) < t("all_reduce", [0, 4])


def test_spanning_group_ring_tree_hierarchical() -> None:
    every = range(8)
    # flat ring: alpha 10, B = min(100, 4 NICs * 10) = 40 GB/s: 2*7*10 + 2*7/8*S/4e4
    assert t("all_reduce", every, "ring") == pytest.approx(183.75)
    # flat tree: 2*3*10 + 2*S/4e4
    assert t("all_reduce", every, "tree") == pytest.approx(110.0)
    # intra RS + AG: 2*(3*2 + 0.75*10) = 27; inter all-reduce of S/4 over 2 nodes: 20 + 25
    assert t("all_reduce", every, "hierarchical") == pytest.approx(72.0)
    assert t("all_reduce", every) == pytest.approx(72.0)
    # all_gather hierarchical: inter (1*10 + 0.5*(S/4)/1e4) + intra (3*2 + 0.75*10)
    assert t("all_gather", every, "hierarchical") == pytest.approx(22.5 + 13.5)
    # all_to_all over 2+2 ranks: 3*10 + max(1/4*S/1e5, 2/4*S/1e4)
    assert t("all_to_all", [0, 1, 4, 5]) == pytest.approx(80.0)


def test_concurrent_divides_bandwidth() -> None:
    assert t("all_reduce", range(4), "ring", concurrent=2) == pytest.approx(12 + 30)
    assert t("send", [0, 4], concurrent=2) == pytest.approx(10 + 200)
    one = t("all_gather", range(8), "ring")
    two = t("all_gather", range(8), "ring", concurrent=2)
    lat = 7 * 10.0
    assert two - lat == pytest.approx(2 * (one - lat))


def test_topologies_change_hops() -> None:
    line = dataclasses.replace(TOY, gpus_per_node=1, nodes=4, topology="mesh2d", mesh_dims=(1, 4))
    torus = dataclasses.replace(line, topology="torus2d")
    ring = dataclasses.replace(line, topology="ring", mesh_dims=None)
    # ring all_gather over 4 nodes: (n-1)*alpha*hops + 0.75*S/1e4; the mesh closes the ring
    # with a 3-hop edge, the torus with a wrap-around link
    assert t("all_gather", range(4), "ring", line) == pytest.approx(3 * 30 + 75)
    assert t("all_gather", range(4), "ring", torus) == pytest.approx(3 * 10 + 75)
    assert t("all_gather", range(4), "ring", ring) == pytest.approx(3 * 10 + 75)
    # ranks 0 and 2 on a 4-node ring are 2 hops apart
    assert t("all_reduce", [0, 2], "ring", ring) == pytest.approx(2 * 20 + 100)
    assert links_used([0, 2], ring) == ["net/0->1", "net/1->2", "net/2->3", "net/3->0",
                                         "node0/nic0", "node2/nic0"]


def test_links_used() -> None:
    assert links_used([0, 1], TOY) == ["node0/nvlink0", "node0/nvlink1"]
    assert links_used([0, 4], TOY) == ["node0/nic0", "node1/nic0"]
    assert links_used([0, 1, 4], TOY) == ["node0/nic0", "node0/nic1", "node0/nvlink0",
                                          "node0/nvlink1", "node1/nic0"]
    assert links_used([3], TOY) == []
    # disjoint groups on one node share nothing (NVSwitch: a port per GPU)
    assert not set(links_used([0, 1], TOY)) & set(links_used([2, 3], TOY))


def test_single_rank_and_zero_bytes() -> None:
    assert collective_time_us("all_reduce", S, [5], TOY) == 0.0
    assert collective_time_us("all_reduce", 0, range(4), TOY, algorithm="ring") == 12.0
    assert collective_time_us("barrier", S, range(4), TOY) == pytest.approx(
        collective_time_us("all_reduce", 0, range(4), TOY))


@settings(max_examples=60, deadline=None)
@given(op=st.sampled_from(COLLECTIVE_OPS + ("gather", "scatter")),
       a=st.integers(0, 1 << 34), b=st.integers(0, 1 << 34),
       ranks=st.sampled_from([[0, 1], [0, 4], [0, 1, 2, 3], [0, 1, 4, 5], list(range(8))]))
def test_monotonic_in_size(op: str, a: int, b: int, ranks: list[int]) -> None:
    if op in ("send", "recv", "p2p"):
        ranks = ranks[:2]
    lo, hi = sorted((a, b))
    c = get_cluster("dgx-a100", nodes=2)
    for alg in ("auto", *algorithms_for(op)):
        assert (collective_time_us(op, lo, ranks, c, algorithm=alg)
                <= collective_time_us(op, hi, ranks, c, algorithm=alg))


def test_dgx_a100_bus_bandwidth() -> None:
    # nccl-tests bus bandwidth of a large all-reduce on 8 GPUs = the NVLink rate, 300 GB/s
    c = get_cluster("dgx-a100")
    nbytes = 8 << 30
    us = collective_time_us("all_reduce", nbytes, range(8), c)
    busbw_gbps = nbytes / us / 1e3 * 2 * 7 / 8
    assert busbw_gbps == pytest.approx(300.0, rel=0.01)


@pytest.mark.parametrize(
    "call, needle",
    [
        (lambda: collective_time_us("allreduce", 1, [0, 1], TOY), "valid: all_reduce"),
        (lambda: collective_time_us("all_to_all", 1, [0, 1], TOY, algorithm="ring"),
         "valid: auto, direct"),
        (lambda: collective_time_us("all_reduce", 1, [0, 8], TOY), "do not fit"),
        (lambda: collective_time_us("all_reduce", -1, [0, 1], TOY), "nbytes=-1"),
        (lambda: collective_time_us("all_reduce", 1, [0, 1], TOY, concurrent=0), "concurrent"),
        (lambda: collective_time_us("send", 1, [0, 1, 2], TOY), "2 ranks"),
        (lambda: CommModel(TOY).time_us("gossip", 1, [0, 1]), "valid:"),
    ],
)
def test_bad_input(call, needle: str) -> None:
    with pytest.raises(ConfigError) as e:
        call()
    assert needle in str(e.value) and "\n" not in str(e.value)


def test_comm_model_without_profile_is_analytic() -> None:
    m = CommModel(TOY)
    assert m.time_us("all_reduce", S, range(8)) == pytest.approx(72.0)
    assert m.time_us("all_reduce", S, range(8)) == pytest.approx(72.0)  # cached
    assert m.links([0, 4]) == ["node0/nic0", "node1/nic0"]
    assert not m.covered("all_reduce", [0, 1])


def test_max_hops_matches_routes() -> None:
    from echo_sim.cost.topology import max_hops, route

    for topo, dims in (("ring", None), ("mesh2d", (3, 4)), ("torus2d", (3, 4)), ("switch", None)):
        c = dataclasses.replace(TOY, nodes=12, topology=topo, mesh_dims=dims)
        nodes = [0, 2, 5, 7, 11]
        want = max(len(route(a, b, c)) for a in nodes for b in nodes if a != b)
        assert max_hops(nodes, c) == (1 if topo == "switch" else want)
    c = dataclasses.replace(TOY, nodes=12, topology="mesh2d", mesh_dims=(3, 4))
    assert max_hops([0, 11], c) == 5  # (0,0) -> (2,3)
    assert max_hops([0, 11], dataclasses.replace(c, topology="torus2d")) == 2


def test_full_grid_ring_is_one_hop() -> None:
    from echo_sim.cost.topology import ring_embedding

    for dims in ((4, 4), (2, 3), (3, 2), (4, 6)):
        n = dims[0] * dims[1]
        c = dataclasses.replace(TOY, nodes=n, topology="mesh2d", mesh_dims=dims)
        assert ring_embedding(range(n), c)[:2] == (1, 1), dims
    odd = dataclasses.replace(TOY, nodes=9, topology="mesh2d", mesh_dims=(3, 3))
    assert ring_embedding(range(9), odd)[0] == 4  # snake closes from (2,2) to (0,0)
    assert ring_embedding(range(9), dataclasses.replace(odd, topology="torus2d"))[0] == 2
