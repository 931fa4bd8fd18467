"""Drawing the dependency graph to files, filtering, and the size guard."""

from __future__ import annotations

import networkx as nx
import pytest

from echo_sim.errors import ConfigError
from echo_sim.render.draw import draw_graph, filter_graph, layered_layout
from echo_sim.trace.graph import global_graph
from tests.test_replay import ddp_trace


def test_svg_and_png_are_written(tmp_path):
    g = global_graph(ddp_trace(steps=1))
    svg = draw_graph(g, tmp_path / "g.svg")
    text = svg.read_text()
    assert text.lstrip().startswith("<?xml") and "<svg" in text and "UPDATE.SGD" in text
    png = draw_graph(g, tmp_path / "g.png")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_bad_suffix_and_too_many_nodes_are_refused(tmp_path):
    g = global_graph(ddp_trace(steps=1))
    with pytest.raises(ConfigError, match=r"\.svg or \.png"):
        draw_graph(g, tmp_path / "g.bmp")
    big = nx.DiGraph()
    big.add_nodes_from((i, {"name": f"FW.{i}", "cat": "FW", "rank": 0, "ranks": [0]})
                       for i in range(2001))
    with pytest.raises(ConfigError, match="max_nodes=2000") as e:
        draw_graph(big, tmp_path / "big.svg")
    assert "\n" not in str(e.value)
    assert not (tmp_path / "big.svg").exists()


def test_filter_keeps_implied_order():
    g = global_graph(ddp_trace(steps=2))
    comm = filter_graph(g, name_glob="Comm.*")
    assert sorted(comm.nodes) == ["r0,1/s1/Comm.b0", "r0,1/s1/Comm.b1", "r0,1/s2/Comm.b0",
                                  "r0,1/s2/Comm.b1"]
    # step 1's buckets come before step 2's through the (removed) compute chain
    assert comm.has_edge("r0,1/s1/Comm.b1", "r0,1/s2/Comm.b0")
    assert not comm.has_edge("r0,1/s1/Comm.b0", "r0,1/s1/Comm.b1")
    assert nx.is_directed_acyclic_graph(comm)


def test_rank_view_is_induced():
    g = global_graph(ddp_trace(steps=1))
    r1 = filter_graph(g, rank=1)
    assert r1.number_of_nodes() == 7
    assert all(1 in r1.nodes[n]["ranks"] for n in r1.nodes)


def test_layout_orders_by_time_and_rows_by_rank():
    g = global_graph(ddp_trace(steps=1))
    pos = layered_layout(g)
    assert pos["r0/s1/FW.l1"][0] < pos["r0/s1/FW.l2"][0] < pos["r0/s1/UPDATE.SGD"][0]
    assert pos["r0/s1/FW.l1"][1] == 0.0 and pos["r1/s1/FW.l1"][1] == -1.0
    assert pos["r0,1/s1/Comm.b0"][1] == -0.5


def test_cli_graph_summary_and_drawing(tmp_path, capsys):
    import json

    from echo_sim.cli import main
    from echo_sim.trace.export import write_echo_dirs

    write_echo_dirs(ddp_trace(steps=2), tmp_path / "t")
    assert main(["graph", str(tmp_path / "t"), "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert (d["nodes"], d["edges"], d["cross_rank_edges"], d["acyclic"]) == (24, 34, 16, True)
    out = tmp_path / "r0.svg"
    assert main(["graph", str(tmp_path / "t"), "--rank", "0", "--step", "1", "-o",
                 str(out)]) == 0
    assert "<svg" in out.read_text()
    assert main(["graph", str(tmp_path / "t"), "--step", "1", "-o", str(out)]) == 2
    assert "--force" in capsys.readouterr().err
    gml = tmp_path / "g.gml"
    assert main(["graph", str(tmp_path / "t"), "--filter", "Comm.*", "-o", str(gml)]) == 0
    assert nx.read_gml(gml).number_of_nodes() == 4
