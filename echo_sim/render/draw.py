"""Draw a dependency graph to an image file (SVG or PNG), matplotlib Agg, no window.

Layout is layered by time: nodes sit in columns ordered by their measured start time
(``ts_us``; column = rank of the start among distinct starts, so dense regions do not pile
up) and in rows by rank — compute on the rank's row, communication just below it; a
collective spanning several ranks sits between its members' rows. Colours follow the
category (FW, BW, Comm, UPDATE); cross-rank edges are dashed.
"""

from __future__ import annotations

import fnmatch
from pathlib import Path

import networkx as nx
import numpy as np

from echo_sim.errors import ConfigError
from echo_sim.render import require_matplotlib
from echo_sim.textsafe import safe_text

__all__ = ["LABEL_CHARS", "MAX_LABELS", "MAX_NODES", "MAX_PIXELS", "MIN_DPI", "check_image_type",
           "draw_graph", "figure_geometry", "filter_graph", "layered_layout"]

MAX_NODES = 2000
"""Largest graph drawn without a filter: beyond it a picture is unreadable and slow."""
MAX_LABELS = 200
"""Most node labels drawn; past it only the longest-running nodes are labelled."""
LABEL_CHARS = 28
"""Longest label drawn (characters)."""
MAX_PIXELS = 20000
"""Largest image side in pixels (Agg allows 2^16; viewers struggle well before)."""
MIN_DPI = 100
"""Lowest dpi used: below it 8 pt labels are under 11 pixels tall and hard to read."""

_COLORS = {"FW": "#4c72b0", "BW": "#dd8452", "Comm": "#c44e52", "UPDATE": "#55a868",
           "STEP": "#999999"}
_FORMATS = (".svg", ".png")


def filter_graph(g: nx.DiGraph, *, name_glob: str | None = None,
                 rank: int | None = None) -> nx.DiGraph:
    """The part of ``g`` involving ``rank`` (induced subgraph: a rank's own view) whose node
    ``name`` matches ``name_glob`` (fnmatch). For the glob, an edge u→v is kept when v is
    reachable from u through removed nodes only, so the order the graph implies survives."""
    if rank is not None:
        g = g.subgraph([n for n in g.nodes if rank in _ranks(g.nodes[n])]).copy()
    if name_glob is None:
        return g
    kept = {n for n in g.nodes
            if fnmatch.fnmatchcase(str(g.nodes[n].get("name", n)), name_glob)}
    if len(kept) == g.number_of_nodes():
        return g
    out = nx.DiGraph()
    out.add_nodes_from((n, g.nodes[n]) for n in g.nodes if n in kept)
    # frontier[n]: the kept nodes first reached from n through removed nodes.
    frontier: dict[object, set[object]] = {}
    for n in reversed(list(nx.topological_sort(g))):
        reach: set[object] = set()
        for s in g.successors(n):
            if s in kept:
                reach.add(s)
            else:
                reach |= frontier[s]
        if n in kept:
            for s in reach:
                direct = g.get_edge_data(n, s)
                out.add_edge(n, s, **(direct or {"kind": "implied", "cross_rank": False}))
            frontier[n] = set()
        else:
            frontier[n] = reach
    return out


def layered_layout(g: nx.DiGraph) -> dict[object, tuple[float, float]]:
    """Positions: x = order of measured start time, y = rank row (comm half a row below)."""
    nodes = list(g.nodes)
    if not nodes:
        return {}
    ts = np.asarray([float(g.nodes[n].get("ts_us", 0.0)) for n in nodes])
    _, col = np.unique(ts, return_inverse=True)
    row = {r: i for i, r in enumerate(_rows(g))}
    pos: dict[object, tuple[float, float]] = {}
    for n, c in zip(nodes, col.reshape(-1).tolist(), strict=True):
        a = g.nodes[n]
        rs = [r for r in _ranks(a) if r in row]
        y = -float(np.mean([row[r] for r in rs])) if rs else 0.0
        if a.get("cat") == "Comm" and len(rs) < 2:
            y -= 0.35
        pos[n] = (float(c), y)
    return pos


def _ranks(attrs: dict) -> list[int]:
    return list(attrs.get("ranks", [attrs.get("rank", 0)]))


def _rows(g: nx.DiGraph) -> list[int]:
    """Ranks that get a row: those of single-rank nodes (all ranks if there are none)."""
    single = {r for n in g.nodes for r in _ranks(g.nodes[n]) if len(_ranks(g.nodes[n])) == 1}
    return sorted(single or {r for n in g.nodes for r in _ranks(g.nodes[n])})


def check_image_type(path: str | Path) -> Path:
    """``path`` when its extension is one :func:`draw_graph` writes; ConfigError otherwise."""
    p = Path(path)
    if p.suffix.lower() not in _FORMATS:
        raise ConfigError(f"path {p}: unknown image type {p.suffix!r}; use .svg or .png "
                          f"(or .gml for the graph itself)")
    return p


def figure_geometry(cols: int, rows: int, *, labels: bool) -> tuple[float, float, int]:
    """Figure width and height (inches) and dpi for a ``cols`` x ``rows`` layout.

    Each column gets room for a rotated label (0.45 in; 0.18 in without labels), each rank
    row 1.6 in (1.0 without labels); dpi is 150 while the image stays under
    :data:`MAX_PIXELS` per side, then lowered (not below :data:`MIN_DPI`, so text stays
    readable) and finally the size capped, so a big graph stays a file a viewer opens.
    """
    width = 3.0 + (0.45 if labels else 0.18) * cols
    height = 2.2 + (1.6 if labels else 1.0) * rows
    dpi = 150
    longest = max(width, height)
    if longest * dpi > MAX_PIXELS:
        dpi = max(MIN_DPI, int(MAX_PIXELS / longest))
    cap = MAX_PIXELS / dpi
    return min(width, cap), min(height, cap), dpi


def _labelled(g: nx.DiGraph, nodes: list[object], max_labels: int) -> list[object]:
    """The nodes that get a label: all, or the ``max_labels`` longest (by ``dur_us``)."""
    if len(nodes) <= max_labels:
        return nodes
    by_dur = sorted(nodes, key=lambda v: -float(g.nodes[v].get("dur_us", 0.0) or 0.0))
    return by_dur[:max_labels]


def draw_graph(g: nx.DiGraph, path: str | Path, *, title: str = "",
               max_nodes: int = MAX_NODES, max_labels: int = MAX_LABELS) -> Path:
    """Draw ``g`` into ``path`` (.svg or .png); refuses graphs over ``max_nodes`` nodes.

    Labels (category and the last two parts of the name, at most :data:`LABEL_CHARS`
    characters, rotated) go on every node up to ``max_labels`` nodes, else on the
    ``max_labels`` longest; the figure grows with the layout (:func:`figure_geometry`).
    """
    require_matplotlib("drawing a graph image")
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.patches import Patch

    p = check_image_type(path)
    n = g.number_of_nodes()
    if n > max_nodes:
        raise ConfigError(f"graph has {n} nodes (> max_nodes={max_nodes}): select fewer "
                          f"steps, one rank or a name filter")
    if n == 0:
        raise ConfigError("nothing to draw: the graph has no node (check the step, rank and "
                          "name filter)")
    pos = layered_layout(g)
    cols = int(max(x for x, _ in pos.values())) + 1
    rows = int(max(-y for _, y in pos.values())) + 1
    nodes = list(g.nodes)
    width, height, dpi = figure_geometry(cols, rows, labels=max_labels > 0)
    # at most one label per 40 pixels of width, so rotated labels do not overprint
    labelled = _labelled(g, nodes, min(max_labels, int(width * dpi / 40)))
    fig = Figure(figsize=(width, height), layout="constrained")
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    colors = [_COLORS.get(str(g.nodes[v].get("cat")), "#bbbbbb") for v in nodes]
    size = 220 if n <= 300 else 80
    nx.draw_networkx_nodes(g, pos, nodelist=nodes, node_color=colors, node_size=size, ax=ax,
                           edgecolors="#333333", linewidths=0.5)
    local = [(u, v) for u, v, d in g.edges(data=True) if not d.get("cross_rank")]
    cross = [(u, v) for u, v, d in g.edges(data=True) if d.get("cross_rank")]
    for edges, style in ((local, "solid"), (cross, "dashed")):
        if edges:
            nx.draw_networkx_edges(g, pos, edgelist=edges, style=style, ax=ax, arrows=True,
                                   arrowsize=9, width=0.8, node_size=size, edge_color="#555555")
    font = 8 if len(labelled) <= 120 else 7
    texts = nx.draw_networkx_labels(
        g, {v: (pos[v][0], pos[v][1] + 0.12) for v in labelled}, ax=ax, font_size=font,
        labels={v: _short(str(g.nodes[v].get("name", v))) for v in labelled},
        horizontalalignment="left", verticalalignment="bottom")
    for t in texts.values():
        t.set_rotation(35)
        t.set_rotation_mode("anchor")
    ranks = _rows(g)
    ax.set_yticks([-i for i in range(len(ranks))], [f"rank {r}" for r in ranks], fontsize=10)
    ax.tick_params(left=True, labelleft=True, labelsize=10)
    ax.set_xlabel("events in order of measured start time", fontsize=10)
    ax.legend(handles=[Patch(color=c, label=k) for k, c in _COLORS.items() if k != "STEP"],
              loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=9)
    ax.margins(x=0.03, y=0.35 if labelled else 0.15)
    shown = "" if len(labelled) == n else f"; labels on the {len(labelled)} longest"
    ax.set_title(title or f"dependency graph: {n} nodes, {g.number_of_edges()} edges{shown}",
                 fontsize=12)
    fig.savefig(p, format=p.suffix.lower().lstrip("."), dpi=dpi)
    return p


def _short(name: str, keep: int = 2) -> str:
    """``BW.blocks.0.attn.qkv`` → ``BW…attn.qkv``: the category and the last ``keep`` parts,
    at most :data:`LABEL_CHARS` characters, control characters escaped."""
    bits = name.split(".")
    short = name if len(bits) <= keep + 1 else f"{bits[0]}…{'.'.join(bits[-keep:])}"
    if len(short) > LABEL_CHARS:
        short = short[:LABEL_CHARS - 1] + "…"
    return safe_text(short)
