"""Draw a dependency graph to an image file (SVG or PNG), matplotlib Agg, no window.

Layout is layered by time: nodes sit in columns ordered by their measured start time
(``ts_us``; column = rank of the start among distinct starts, so dense regions do not pile
up) and in rows by rank — compute on the rank's row, communication just below it; a
collective spanning several ranks sits between its members' rows. Colours follow the
category (FW, BW, Comm, UPDATE); cross-rank edges are dashed.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Sequence
from pathlib import Path

import networkx as nx
import numpy as np

from echo_sim.errors import ConfigError

__all__ = ["MAX_NODES", "draw_graph", "filter_graph", "layered_layout"]

MAX_NODES = 2000
"""Largest graph drawn without a filter: beyond it a picture is unreadable and slow."""

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


def draw_graph(g: nx.DiGraph, path: str | Path, *, title: str = "",
               max_nodes: int = MAX_NODES, labels: bool | None = None) -> Path:
    """Draw ``g`` into ``path`` (.svg or .png); refuses graphs over ``max_nodes`` nodes."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.patches import Patch

    p = Path(path)
    if p.suffix.lower() not in _FORMATS:
        raise ConfigError(f"--output {p}: unknown image type {p.suffix!r}; use .svg or .png "
                          f"(or .gml for the graph itself)")
    n = g.number_of_nodes()
    if n > max_nodes:
        raise ConfigError(f"graph has {n} nodes (> {max_nodes}): narrow it with --step, "
                          f"--rank or --filter 'Comm.*'")
    if n == 0:
        raise ConfigError("nothing to draw: no node matches the selection (check --filter, "
                          "--rank and --step)")
    pos = layered_layout(g)
    cols = max(x for x, _ in pos.values()) + 1
    rows = max(-y for _, y in pos.values()) + 1
    if labels is None:
        labels = n <= 150
    fig = Figure(figsize=(min(5 + 0.35 * cols, 200.0), 2.0 + 1.4 * rows), layout="constrained")
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    nodes = list(g.nodes)
    colors = [_COLORS.get(str(g.nodes[v].get("cat")), "#bbbbbb") for v in nodes]
    size = 260 if n <= 300 else 60
    nx.draw_networkx_nodes(g, pos, nodelist=nodes, node_color=colors, node_size=size, ax=ax)
    local = [(u, v) for u, v, d in g.edges(data=True) if not d.get("cross_rank")]
    cross = [(u, v) for u, v, d in g.edges(data=True) if d.get("cross_rank")]
    for edges, style in ((local, "solid"), (cross, "dashed")):
        if edges:
            nx.draw_networkx_edges(g, pos, edgelist=edges, style=style, ax=ax, arrows=True,
                                   arrowsize=8, width=0.7, node_size=size, edge_color="#555555")
    if labels:
        short = {v: _short(str(g.nodes[v].get("name", v))) for v in nodes}
        nx.draw_networkx_labels(g, pos, labels=short, font_size=6, ax=ax,
                                verticalalignment="bottom")
    ranks = _rows(g)
    ax.set_yticks([-i for i in range(len(ranks))], [f"rank {r}" for r in ranks])
    ax.tick_params(left=True, labelleft=True)
    ax.set_xlabel("events in order of measured start time")
    ax.legend(handles=[Patch(color=c, label=k) for k, c in _COLORS.items() if k != "STEP"],
              loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=7)
    ax.margins(x=0.04, y=0.2)
    ax.set_title(title or f"dependency graph: {n} nodes, {g.number_of_edges()} edges",
                 fontsize=9)
    p.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(p, format=p.suffix.lower().lstrip("."), dpi=120)
    return p


def _short(name: str, parts: Sequence[int] = (2,)) -> str:
    """``BW.blocks.0.attn.qkv`` → ``BW…attn.qkv``: keep the category and the last parts."""
    bits = name.split(".")
    keep = parts[0]
    if len(bits) <= keep + 1:
        return name
    return f"{bits[0]}…{'.'.join(bits[-keep:])}"
