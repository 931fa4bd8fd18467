"""Dependency rules, cross-rank matching and the networkx graph on hand-built traces."""

from __future__ import annotations

import networkx as nx
import numpy as np
import pytest

from echo_sim.errors import ConfigError
from echo_sim.trace.graph import EDGE_KINDS, build_deps, global_graph, rank_dag
from echo_sim.trace.model import Cat, TraceBuilder
from tests.test_replay import ddp_trace, pipeline_trace


def _named_edges(trace, deps, kind=None):
    out = set()
    for u, v, k in zip(deps.src.tolist(), deps.dst.tolist(), deps.kind.tolist(), strict=True):
        if kind is None or EDGE_KINDS[k] == kind:
            out.add((int(trace.events.rank[u]), trace.name_of(u), trace.name_of(v)))
    return out


def test_contract_rules_on_one_step():
    tr = ddp_trace(steps=1)
    deps = build_deps(tr)
    assert _named_edges(tr, deps, "order") == {
        (r, a, b) for r in (0, 1) for a, b in [("FW.l1", "FW.l2"), ("FW.l2", "BW.l2"),
                                               ("BW.l2", "BW.l1"), ("BW.l1", "UPDATE.SGD")]}
    # rule 3: each bucket depends on the last compute that started before its issue
    assert _named_edges(tr, deps, "issue") == {
        (r, a, b) for r in (0, 1) for a, b in [("BW.l2", "Comm.b0"), ("BW.l1", "Comm.b1")]}
    # rule 4: the UPDATE depends on every Comm of the step
    assert _named_edges(tr, deps, "update") == {
        (r, a, "UPDATE.SGD") for r in (0, 1) for a in ("Comm.b0", "Comm.b1")}
    assert deps.n_inst == 2 and deps.n_unmatched == 0


def test_cross_step_chaining_and_selection():
    tr = ddp_trace(steps=3)
    deps = build_deps(tr, [1, 2])
    assert deps.steps == [1, 2]
    step_edges = [(int(tr.events.step[u]), int(tr.events.step[v]), tr.name_of(u), tr.name_of(v))
                  for u, v, k in zip(deps.src, deps.dst, deps.kind, strict=True) if EDGE_KINDS[k] == "step"]
    assert sorted(step_edges) == [(1, 2, "UPDATE.SGD", "FW.l1")] * 2
    with pytest.raises(ConfigError, match="captured steps: \\[1, 2, 3\\]"):
        build_deps(tr, [7])


def test_global_graph_nodes_edges_and_cross_rank():
    tr = ddp_trace(steps=2)
    g = global_graph(tr)
    assert nx.is_directed_acyclic_graph(g)
    assert g.number_of_nodes() == 2 * (2 * 5 + 2)  # per step: 5 compute x 2 ranks + 2 buckets
    assert g.number_of_edges() == 34
    coll = g.nodes["r0,1/s1/Comm.b0"]
    assert coll["ranks"] == [0, 1] and coll["rank"] == -1 and coll["cat"] == "Comm"
    assert coll["dur_us"] == 8.0 and coll["collective"] == "all_reduce"
    node = g.nodes["r1/s2/BW.l2"]
    assert (node["rank"], node["name"], node["cat"], node["dur_us"], node["step"]) == (
        1, "BW.l2", "BW", 10.0, 2)
    # rank 0's UPDATE depends on a collective rank 1 issued: a cross-rank path
    assert nx.has_path(g, "r1/s1/BW.l1", "r0/s1/UPDATE.SGD")
    cross = [(u, v) for u, v, d in g.edges(data=True) if d["cross_rank"]]
    assert len(cross) == 16 and all("Comm" in u or "Comm" in v for u, v in cross)


def test_send_recv_matched_by_src_dst_seq():
    tr = pipeline_trace()
    deps = build_deps(tr)
    assert deps.n_inst == 1 and deps.inst_p2p.tolist() == [True] and deps.n_unmatched == 0
    g = global_graph(tr, wait_edges=True)
    # the receiving rank's forward waits on the pair
    assert nx.has_path(g, "r0/s1/FW.s0", "r1/s1/FW.s1")


def test_unmatched_collective_is_reported():
    b = TraceBuilder()
    for r in (0, 1):
        b.add(rank=r, name="FW.a", cat=Cat.FW, ts_us=0, dur_us=5, step=1)
        b.add(rank=r, name="Comm.x", cat=Cat.COMM, ts_us=5, dur_us=3, step=1, tid=100,
              collective="all_reduce", group_ranks=(0, 1), seq=0)
    b.add(rank=0, name="Comm.y", cat=Cat.COMM, ts_us=9, dur_us=3, step=1, tid=100,
          collective="all_reduce", group_ranks=(0, 1), seq=1)
    tr = b.build()
    deps = build_deps(tr)
    assert deps.n_inst == 2 and deps.n_unmatched == 1
    (u,) = deps.unmatched
    assert (u["name"], u["seq"], u["ranks_present"], u["ranks_missing"]) == (
        "Comm.y", 1, [0], [1])


def test_missing_seq_falls_back_to_occurrence_order():
    b = TraceBuilder()
    for r in (0, 1):
        for i in range(3):
            b.add(rank=r, name=f"Comm.c{i}", cat=Cat.COMM, ts_us=10 * i + r, dur_us=2,
                  step=1, tid=100, collective="all_reduce", group_ranks=(0, 1))
    tr = b.build()
    deps = build_deps(tr)
    assert deps.n_inst == 3 and deps.n_unmatched == 0
    names = {tuple(sorted({tr.name_of(r) for r in deps.comm[deps.comm_inst == i]}))
             for i in range(3)}
    assert names == {("Comm.c0",), ("Comm.c1",), ("Comm.c2",)}


def test_nested_compute_events_keep_only_leaves():
    b = TraceBuilder()
    b.add(rank=0, name="FW.block", cat=Cat.FW, ts_us=0, dur_us=30, step=1)
    b.add(rank=0, name="FW.block.a", cat=Cat.FW, ts_us=1, dur_us=10, step=1)
    b.add(rank=0, name="FW.block.b", cat=Cat.FW, ts_us=12, dur_us=10, step=1)
    b.add(rank=0, name="UPDATE.SGD", cat=Cat.UPDATE, ts_us=31, dur_us=4, step=1)
    tr = b.build()
    deps = build_deps(tr)
    assert [tr.name_of(r) for r in deps.compute] == ["FW.block.a", "FW.block.b", "UPDATE.SGD"]


def test_rank_dag_uses_the_dag_gml_convention():
    tr = ddp_trace(steps=1)
    g = rank_dag(tr, 1, 1)
    assert set(g.nodes) == {"FW.l1", "FW.l2", "BW.l2", "BW.l1", "Comm.b0", "Comm.b1",
                            "UPDATE.SGD", "NEXT_STEP"}
    assert g.has_edge("UPDATE.SGD", "NEXT_STEP") and g.has_edge("Comm.b1", "UPDATE.SGD")
    assert g.nodes["BW.l2"]["dur_us"] == 10.0 and g.nodes["BW.l2"]["cat"] == "BW"


def test_dag_gml_edges_are_preferred_when_consistent():
    tr = ddp_trace(steps=2)
    dag = rank_dag(tr, 0, 2)
    dag.remove_edge("Comm.b0", "UPDATE.SGD")  # the dag says UPDATE waits only for b1
    tr.dags[0] = dag
    deps = build_deps(tr)
    assert deps.dag_steps == [(0, 1), (0, 2)]
    upd = _named_edges(tr, deps, "dag")
    assert (0, "Comm.b1", "UPDATE.SGD") in upd and (0, "Comm.b0", "UPDATE.SGD") not in upd
    assert (1, "Comm.b0", "UPDATE.SGD") in _named_edges(tr, deps, "update")  # rank 1 rebuilt
    # a dag whose edge runs backwards in time is ignored
    bad = rank_dag(tr, 0, 2)
    bad.add_edge("UPDATE.SGD", "FW.l1")
    tr.dags[0] = bad
    assert build_deps(tr).dag_steps == []


def test_vectorised_build_scales():
    """A 2-rank trace of 40 steps x 100 layers builds without per-event Python work."""
    b = TraceBuilder()
    n = 0
    for r in (0, 1):
        t = 0.0
        for step in range(40):
            for i in range(100):
                b.add(rank=r, name=f"FW.l{i}", cat=Cat.FW, ts_us=t, dur_us=1, step=step)
                t += 1.5
            b.add(rank=r, name="Comm.g", cat=Cat.COMM, ts_us=t, dur_us=1, step=step, tid=100,
                  collective="all_reduce", group_ranks=(0, 1), seq=step)
            b.add(rank=r, name="UPDATE.SGD", cat=Cat.UPDATE, ts_us=t + 2, dur_us=1, step=step)
            t += 4
            n += 102
    tr = b.build()
    deps = build_deps(tr)
    assert deps.compute.size == 2 * 40 * 101 and deps.n_inst == 40
    assert np.all(tr.events.step[deps.src] <= tr.events.step[deps.dst])


def test_duplicate_event_identity_gets_distinct_nodes():
    b = TraceBuilder()
    for ts in (0.0, 20.0):  # a broken trace: one (rank, step, name, occ) twice
        b.add(rank=0, name="BW.x", cat=Cat.BW, ts_us=ts, dur_us=5, step=1, occ=0)
    b.add(rank=0, name="UPDATE.SGD", cat=Cat.UPDATE, ts_us=30, dur_us=5, step=1)
    g = global_graph(b.build())
    assert g.number_of_nodes() == 3 and nx.is_directed_acyclic_graph(g)
