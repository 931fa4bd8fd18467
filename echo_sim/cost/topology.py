"""Where a group of ranks sits on a :class:`~echo_sim.cost.hardware.Cluster`, and what it uses.

* :func:`place` — which nodes a group spans and how many of its ranks each node holds.
* :func:`ring_embedding` — how a logical ring over the group's nodes maps onto the
  inter-node network: the longest hop count of a ring step and the most ring edges routed
  over one physical link (the factor a link's bandwidth is shared by).
* :func:`group_links` — names of the link resources a collective occupies.

Inter-node networks:

``switch``  non-blocking fat tree: every node pair one hop apart, no shared links beyond the
            NICs (the assumption of DGX SuperPOD designs).
``ring``    node i linked to i±1 (mod nodes); shortest-direction routing, ties forward.
``mesh2d``  rows × cols grid, dimension-order (X then Y) routing, no wrap-around.
``torus2d`` the grid with wrap-around links, shortest direction per dimension.

A logical ring visits the group's nodes in ascending order (``switch``/``ring``) or, on a
grid, in the order of a Hamiltonian cycle of the full grid (one exists when a side is even
and both exceed 1; else a snake path), so a ring over every node takes one hop per step.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from echo_sim.cost.hardware import Cluster
from echo_sim.errors import ConfigError

__all__ = [
    "Placement",
    "group_links",
    "max_hops",
    "place",
    "ring_embedding",
    "ring_order",
    "route",
]


@dataclass(frozen=True)
class Placement:
    """A group's layout: ``per_node[node]`` = local GPU indices of its ranks there."""

    ranks: tuple[int, ...]
    per_node: dict[int, tuple[int, ...]]

    @property
    def nodes(self) -> tuple[int, ...]:
        return tuple(self.per_node)

    @property
    def size(self) -> int:
        return len(self.ranks)

    @property
    def num_nodes(self) -> int:
        return len(self.per_node)

    @property
    def single_node(self) -> bool:
        return len(self.per_node) <= 1

    @property
    def min_per_node(self) -> int:
        return min((len(v) for v in self.per_node.values()), default=0)

    @property
    def max_per_node(self) -> int:
        return max((len(v) for v in self.per_node.values()), default=0)


def place(ranks: Sequence[int], cluster: Cluster) -> Placement:
    """Group ``ranks`` (global, duplicates ignored) by node; :class:`ConfigError` if out of range."""
    uniq = tuple(sorted({int(r) for r in ranks}))
    if uniq and (uniq[0] < 0 or uniq[-1] >= cluster.world_size):
        raise ConfigError(f"ranks {uniq[0]}..{uniq[-1]} do not fit cluster {cluster.name!r} "
                          f"of {cluster.world_size} GPUs ({cluster.nodes} nodes × "
                          f"{cluster.gpus_per_node})")
    per: dict[int, list[int]] = {}
    g = cluster.gpus_per_node
    for r in uniq:
        per.setdefault(r // g, []).append(r % g)
    return Placement(ranks=uniq, per_node={n: tuple(v) for n, v in per.items()})


def _coords(node: int, cluster: Cluster) -> tuple[int, int]:
    _, cols = cluster.grid
    return divmod(node, cols)


def _grid_cycle(rows: int, cols: int) -> list[tuple[int, int]]:
    """Grid coordinates in the order of a Hamiltonian cycle when one exists (a dimension even
    and both > 1): along row 0, snake back and forth over columns 1.. of the other rows,
    return up column 0. Otherwise the snake path (its closing edge is long)."""
    if rows > 1 and cols > 1 and rows % 2 == 0:
        out = [(0, c) for c in range(cols)]
        for r in range(1, rows):
            span = range(cols - 1, 0, -1) if r % 2 else range(1, cols)
            out += [(r, c) for c in span]
        return out + [(r, 0) for r in range(rows - 1, 0, -1)]
    if rows > 1 and cols > 1 and cols % 2 == 0:
        return [(r, c) for c, r in _grid_cycle(cols, rows)]
    return [(r, c if r % 2 == 0 else cols - 1 - c) for r in range(rows) for c in range(cols)]


def ring_order(nodes: Sequence[int], cluster: Cluster) -> list[int]:
    """The order a logical ring visits ``nodes`` (see the module docstring)."""
    if cluster.topology in ("mesh2d", "torus2d"):
        rows, cols = cluster.grid
        pos = {r * cols + c: i for i, (r, c) in enumerate(_grid_cycle(rows, cols))}
        return sorted(nodes, key=pos.__getitem__)
    return sorted(nodes)


def _steps(a: int, b: int, size: int, wrap: bool) -> list[int]:
    """Unit steps (+1/-1) from a to b along one dimension of length ``size``."""
    if a == b:
        return []
    if not wrap:
        return [1 if b > a else -1] * abs(b - a)
    fwd = (b - a) % size
    back = size - fwd
    return [1] * fwd if fwd <= back else [-1] * back


def route(a: int, b: int, cluster: Cluster) -> list[tuple[int, int]]:
    """Directed physical links (node → node) a message from node ``a`` to ``b`` crosses.

    ``switch`` returns [] (only the two NICs are involved; see :func:`group_links`).
    """
    topo = cluster.topology
    if topo == "switch" or a == b:
        return []
    if topo == "ring":
        path, cur = [], a
        for s in _steps(a, b, cluster.nodes, wrap=True):
            nxt = (cur + s) % cluster.nodes
            path.append((cur, nxt))
            cur = nxt
        return path
    rows, cols = cluster.grid
    wrap = topo == "torus2d"
    (ra, ca), (rb, cb) = _coords(a, cluster), _coords(b, cluster)
    path = []
    r, c = ra, ca
    for s in _steps(ca, cb, cols, wrap):  # X first (dimension-order routing)
        nc = (c + s) % cols
        path.append((r * cols + c, r * cols + nc))
        c = nc
    for s in _steps(ra, rb, rows, wrap):
        nr = (r + s) % rows
        path.append((r * cols + c, nr * cols + c))
        r = nr
    return path


def max_hops(nodes: Sequence[int], cluster: Cluster) -> int:
    """Longest route (in links) between any two of ``nodes``: 1 on a ``switch``, 0 for one node.

    Routes are shortest paths, so this is the largest pairwise distance, computed with numpy
    (an all-to-all over 1,024 nodes checks a million pairs).
    """
    if len(nodes) < 2:
        return 0
    if cluster.topology == "switch":
        return 1
    n = np.asarray(sorted(nodes), dtype=np.int64)
    if cluster.topology == "ring":
        d = np.abs(n[:, None] - n[None, :])
        return int(np.minimum(d, cluster.nodes - d).max())
    rows, cols = cluster.grid
    r, c = np.divmod(n, cols)
    dr = np.abs(r[:, None] - r[None, :])
    dc = np.abs(c[:, None] - c[None, :])
    if cluster.topology == "torus2d":
        dr, dc = np.minimum(dr, rows - dr), np.minimum(dc, cols - dc)
    return int((dr + dc).max())


def ring_embedding(nodes: Sequence[int], cluster: Cluster) -> tuple[int, int, list[str]]:
    """(max hops per ring step, max ring edges on one directed link, physical link names).

    For a ring over 0 or 1 node: (0, 0, []). On a ``switch`` every step is one hop and no
    physical link is shared: (1, 1, []).
    """
    order = ring_order(nodes, cluster)
    if len(order) < 2:
        return 0, 0, []
    if cluster.topology == "switch":
        return 1, 1, []
    load: Counter[tuple[int, int]] = Counter()
    hops = 0
    for i, a in enumerate(order):
        b = order[(i + 1) % len(order)]
        path = route(a, b, cluster)
        hops = max(hops, len(path))
        load.update(path)
    links = [f"net/{a}->{b}" for a, b in sorted(load)]
    return hops, max(load.values()), links


def group_links(ranks: Sequence[int], cluster: Cluster) -> list[str]:
    """Link resources a collective over ``ranks`` occupies, sorted.

    * ``node<n>/nvlink<l>``: the NVLink port of local GPU l (a group with 2+ ranks on node n);
      NVSwitch gives each GPU its own full-rate port, so disjoint groups do not share.
    * ``node<n>/nic<l>``: the NIC of local GPU l (a group spanning 2+ nodes; one NIC per GPU,
      and a ring over several nodes uses the NIC of every member: one channel per NIC).
    * ``net/<a>-><b>``: physical inter-node links of a ``ring``/``mesh2d``/``torus2d`` network.
    """
    p = place(ranks, cluster)
    if p.size < 2:
        return []
    out: list[str] = []
    for node, locs in p.per_node.items():
        if len(locs) > 1:
            out.extend(f"node{node}/nvlink{loc}" for loc in locs)
        if not p.single_node:
            out.extend(f"node{node}/nic{loc}" for loc in locs)
    if not p.single_node:
        out.extend(ring_embedding(p.nodes, cluster)[2])
    return sorted(out)
