"""What users open: the critical path in Perfetto, graph drawings they can read."""

from __future__ import annotations

import json

import networkx as nx
import pytest
from matplotlib.image import imread

from echo_sim import cli
from echo_sim.analysis.critical import CRITICAL_PID
from echo_sim.render.draw import MAX_PIXELS, MIN_DPI, draw_graph, figure_geometry
from echo_sim.trace.export import write_echo_dirs
from tests.test_statistic import two_rank_trace


@pytest.fixture
def trace_dir(tmp_path):
    d = tmp_path / "run"
    write_echo_dirs(two_rank_trace(), d)
    return d


def test_critical_output_has_a_track_and_flows_perfetto_shows(capsys, trace_dir, tmp_path):
    out = tmp_path / "crit.json"
    assert cli.main(["critical", str(trace_dir), "-o", str(out), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    events = json.loads(out.read_text())["traceEvents"]
    track = [e for e in events if e["pid"] == CRITICAL_PID and e["ph"] == "X"]
    meta = {e["name"]: e["args"] for e in events if e["pid"] == CRITICAL_PID and e["ph"] == "M"}
    assert meta["process_name"]["name"] == f"critical path (step {summary['step']})"
    assert meta["process_sort_index"]["sort_index"] < 0  # listed before the ranks
    assert [e["name"] for e in track] == [s["name"] for s in summary["segments"]]
    assert sum(e["dur"] for e in track) == pytest.approx(summary["total_us"], abs=1e-2)
    # the track lies on the replayed timeline: each op slice matches its rank's slice
    on_path = {(e["name"], e["ts"]) for e in events
               if e["ph"] == "X" and e["pid"] != CRITICAL_PID and e["args"].get("critical")}
    ops = [e for e in track if e["cat"] in ("FW", "BW", "UPDATE")]
    assert ops and all((e["name"], e["ts"]) in on_path for e in ops)
    starts = [e for e in events if e["ph"] == "s"]
    ends = [e for e in events if e["ph"] == "f"]
    assert len(starts) == len(ends) == len(on_path) - 1
    assert all(e["bp"] == "e" for e in ends)
    assert {e["pid"] for e in starts + ends} <= {0, 1}


def test_figure_geometry_grows_and_stays_openable():
    small = figure_geometry(10, 2, labels=True)
    big = figure_geometry(1500, 8, labels=True)
    assert big[0] > small[0] and small[2] == 150
    assert big[0] * big[2] <= MAX_PIXELS + 1 and big[2] >= MIN_DPI


def test_graph_png_labels_are_readable(tmp_path):
    g = nx.DiGraph()
    for i in range(250):
        g.add_node(i, name=f"FW.blocks.{i}.attention.query_key_value_projection", cat="FW",
                   rank=0, ranks=[0], ts_us=float(i), dur_us=float(i % 50))
        if i:
            g.add_edge(i - 1, i)
    png = draw_graph(g, tmp_path / "g.png")
    img = imread(png)
    h, w = img.shape[:2]
    assert w <= MAX_PIXELS and h <= MAX_PIXELS
    assert w / 250 >= 0.45 * MIN_DPI  # >= 45 px per column: labels do not pile up
    svg = draw_graph(g, tmp_path / "g.svg").read_text()
    assert svg.count("…") >= 200 and "labels on the 200 longest" in svg
