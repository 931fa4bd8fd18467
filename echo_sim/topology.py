"""Where a group of ranks sits on a :class:`~echo_sim.hardware.Cluster`, and what it uses.

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

A logical ring visits the group's nodes in ascending order (``switch``/``ring``) or in
snake order (``mesh2d``/``torus2d``: left-to-right on even rows, right-to-left on odd),
the order that keeps consecutive nodes adjacent on a full grid.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from echo_sim.errors import ConfigError
from echo_sim.hardware import Cluster

__all__ = ["Placement", "group_links", "place", "ring_embedding", "route", "ring_order"]


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


def ring_order(nodes: Sequence[int], cluster: Cluster) -> list[int]:
    """The order a logical ring visits ``nodes`` (see the module docstring)."""
    if cluster.topology in ("mesh2d", "torus2d"):
        def key(n: int) -> tuple[int, int]:
            r, c = _coords(n, cluster)
            return (r, c if r % 2 == 0 else -c)

        return sorted(nodes, key=key)
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
