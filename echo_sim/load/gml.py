"""Reading ``dag.gml`` dependency graphs (the trace contract's, or any networkx GML).

Inputs are bounded: the file is read through :func:`echo_sim.load.files.read_regular_file`
and brackets nested deeper than :data:`MAX_GML_DEPTH` are refused before any parser
recurses into them (networkx's parser would hit Python's recursion limit).
"""

from __future__ import annotations

import html
import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import networkx as nx

from echo_sim.errors import TraceFormatError
from echo_sim.load.files import read_regular_file

__all__ = ["MAX_GML_DEPTH", "LazyDags", "check_dag", "read_dag"]

MAX_GML_DEPTH = 16
"""Deepest bracket nesting accepted in a dag.gml (the contract uses 2: graph, node/edge)."""


def _depth(text: str) -> int:
    """Deepest ``[`` nesting in the text (brackets inside quoted strings are skipped)."""
    deepest = depth = 0
    for m in re.finditer(r'"[^"]*"|\[|\]', text):
        tok = m.group()
        if tok == "[":
            depth += 1
            deepest = max(deepest, depth)
        elif tok == "]":
            depth -= 1
    return deepest


def read_dag(path: Path) -> nx.DiGraph:
    """Read a ``dag.gml`` as a DiGraph keyed by node label; reject unreadable or cyclic ones.

    Three parsers, fastest first: one regex pass for the exact layout of the trace contract
    (``networkx.write_gml`` of nodes with ``cat``/``dur_us``/``step``: ~10x faster than
    networkx, which matters at 64 ranks x 4,000 nodes), a line parser for any flat
    networkx layout, and ``networkx.parse_gml`` for everything else.
    """
    raw = read_regular_file(path)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise TraceFormatError(f"{path}: unreadable dag.gml ({e})") from None
    del raw
    g = _contract_gml(text)
    if g is not None:
        return g
    g = _fast_gml(text)
    if g is None:
        if _depth(text) > MAX_GML_DEPTH:  # networkx's parser recurses per level
            raise TraceFormatError(f"{path}: dag.gml nests brackets deeper than "
                                   f"{MAX_GML_DEPTH} levels (expected graph [ node [ ... ] "
                                   "edge [ ... ] ])")
        try:
            parsed = nx.parse_gml(text, label="label")
        except (nx.NetworkXError, ValueError, KeyError, IndexError, TypeError,
                RecursionError, OverflowError) as e:
            msg = " ".join(str(e).split())[:160]
            raise TraceFormatError(f"{path}: unreadable dag.gml ({msg})") from None
        if not parsed.is_directed():
            raise TraceFormatError(f"{path}: dag.gml is not a directed graph (add 'directed 1')")
        g = nx.DiGraph(parsed)
    if not nx.is_directed_acyclic_graph(g):
        _raise_cycle(path, g)
    return g


def check_dag(path: Path) -> None:
    """Raise what :func:`read_dag` would, without keeping a graph (the contract's layout is
    checked on integer ids only: a 250,000-node graph costs ~350 MB as networkx objects)."""
    raw = read_regular_file(path)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise TraceFormatError(f"{path}: unreadable dag.gml ({e})") from None
    del raw
    if _contract_gml(text, build=False) is None:
        del text
        read_dag(path)


class LazyDags(Mapping[int, nx.DiGraph]):
    """rank -> dependency graph, each read from its (already checked) dag.gml on first use.

    Analyses that never look at the graphs (``statistic``, ``stragglers``) never pay for
    them; graphs read once are kept.
    """

    def __init__(self, files: Mapping[int, Path] | None = None,
                 graphs: Mapping[int, nx.DiGraph] | None = None) -> None:
        self._files = dict(files or {})
        self._graphs: dict[int, nx.DiGraph] = dict(graphs or {})

    def __getitem__(self, rank: int) -> nx.DiGraph:
        g = self._graphs.get(rank)
        if g is None:
            g = self._graphs[rank] = read_dag(self._files[rank])
        return g

    def __iter__(self) -> Iterator[int]:
        return iter(sorted(set(self._files) | set(self._graphs)))

    def __len__(self) -> int:
        return len(set(self._files) | set(self._graphs))

    def __contains__(self, rank: object) -> bool:
        return rank in self._files or rank in self._graphs


def _raise_cycle(path: Path, g: nx.DiGraph) -> None:
    cycle = nx.find_cycle(g)
    path_s = " -> ".join(str(u) for u, _ in cycle[:4])
    raise TraceFormatError(f"{path}: dag.gml has a cycle ({path_s} -> ...), expected a DAG")


_NODE_RE = re.compile(
    r'node \[\s+id (\d+)\s+label "([^"&\n]*)"\s+cat "([^"&\n]*)"\s+dur_us (\S+)\s+'
    r"step (-?\d+)\s+\]")
_EDGE_RE = re.compile(r"edge \[\s+source (\d+)\s+target (\d+)\s+\]")


def _contract_gml(text: str, build: bool = True) -> nx.DiGraph | None:
    """The contract's own layout in one regex pass; None when the text holds anything else
    (or has a cycle). ``build=False`` checks only and returns an empty graph on success."""
    if "directed 1" not in text:
        return None
    nodes = _NODE_RE.findall(text)
    edges = _EDGE_RE.findall(text)
    if (len(nodes) != text.count("node [") or len(edges) != text.count("edge [")
            or text.count("[") != 1 + len(nodes) + len(edges)):
        return None
    try:
        labels = {int(i): label for i, label, _, _, _ in nodes}
        attrs = [(label, {"cat": cat, "dur_us": float(dur), "step": int(step)})
                 for _, label, cat, dur, step in nodes]
        pairs = [(int(u), int(v)) for u, v in edges]
        named = [(labels[u], labels[v]) for u, v in pairs]
    except (ValueError, KeyError):
        return None
    if len(labels) != len(nodes) or len({a[0] for a in attrs}) != len(nodes):
        return None
    if not _acyclic(len(nodes), [(u, v) for u, v in pairs], list(labels)):
        return None  # let the general path name the cycle
    g = nx.DiGraph()
    if not build:
        return g
    g.add_nodes_from(attrs)
    g.add_edges_from(named)
    return g


def _acyclic(n: int, edges: list[tuple[int, int]], ids: list[int]) -> bool:
    """Kahn's algorithm over integer ids (a DAG check without building a networkx graph)."""
    pos = {i: k for k, i in enumerate(ids)}
    indeg = [0] * n
    out: list[list[int]] = [[] for _ in range(n)]
    for u, v in edges:
        a, b = pos[u], pos[v]
        out[a].append(b)
        indeg[b] += 1
    ready = [k for k in range(n) if indeg[k] == 0]
    seen = 0
    while ready:
        k = ready.pop()
        seen += 1
        for b in out[k]:
            indeg[b] -= 1
            if indeg[b] == 0:
                ready.append(b)
    return seen == n


def _gml_value(v: str) -> Any:
    if v.startswith('"'):
        if len(v) < 2 or not v.endswith('"'):
            raise ValueError(v)
        s = v[1:-1]
        return html.unescape(s) if "&" in s else s
    try:
        return int(v)
    except ValueError:
        return float(v)


def _fast_gml(text: str) -> nx.DiGraph | None:
    """Parse networkx's own flat GML layout; None when the text is anything else."""
    lines = text.split("\n")
    g = nx.DiGraph()
    ids: dict[int, Any] = {}
    edges: list[tuple[int, int, dict[str, Any]]] = []
    block: dict[str, Any] | None = None
    kind = ""
    depth = 0
    directed = False
    try:
        for raw in lines:
            s = raw.strip()
            if not s:
                continue
            if block is not None:
                if s == "]":
                    if kind == "node":
                        nid = block.pop("id")
                        label = block.pop("label", nid)
                        if nid in ids or label in g:
                            return None
                        ids[nid] = label
                        g.add_node(label, **block)
                    else:
                        edges.append((block.pop("source"), block.pop("target"), block))
                    block = None
                    continue
                key, _, val = s.partition(" ")
                if not val or val.endswith("[") or key in block:
                    return None
                block[key] = _gml_value(val)
            elif s in ("node [", "edge ["):
                block, kind = {}, s[:4]
            elif s == "graph [":
                depth += 1
            elif s == "]":
                depth -= 1
            elif s == "directed 1":
                directed = True
            else:
                key, _, val = s.partition(" ")
                if not val or val.endswith("["):
                    return None
                g.graph[key] = _gml_value(val)
    except (ValueError, KeyError):
        return None
    if block is not None or depth != 0 or not directed:
        return None
    try:
        g.add_edges_from((ids[u], ids[v], a) for u, v, a in edges)
    except KeyError:
        return None
    g.graph.pop("directed", None)
    return g
