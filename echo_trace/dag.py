"""``dag.gml``: the dependency graph of one captured step of this rank.

Rules (the contract in docs/trace-format.md, the same ones echo_sim applies to every step):

1. compute order: consecutive ``FW``/``BW``/``UPDATE`` events of the compute track, by start;
2. forward→backward is rule 1 (the last FW precedes the first BW);
3. each ``Comm`` depends on the last compute event that started before it was issued;
4. the first ``UPDATE`` depends on every ``Comm`` of the step issued before it;
5. a sink ``NEXT_STEP`` follows the last ``UPDATE`` (and every node left without a successor).

Every edge goes from an earlier start to a later one (ties broken by event order), so the
graph is acyclic. Node ids: ``<name>`` for ``occ == 0``, else ``<name>#<occ>``; node
attributes ``cat``, ``dur_us``, ``step``.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import networkx as nx

__all__ = ["NEXT_STEP", "build_step_dag", "dag_gml", "last_complete_step", "node_id"]

NEXT_STEP = "NEXT_STEP"
_COMPUTE = ("FW", "BW", "UPDATE")


def node_id(name: str, occ: int) -> str:
    return name if occ == 0 else f"{name}#{occ}"


def last_complete_step(events: Iterable[dict[str, Any]]) -> int | None:
    """The highest step with a ``STEP`` marker (markers are written for complete steps)."""
    steps = [e["args"]["step"] for e in events if e.get("cat") == "step" and e.get("ph") == "X"]
    return max(steps) if steps else None


def build_step_dag(events: Iterable[dict[str, Any]], step: int) -> nx.DiGraph:
    """The DAG of ``step`` from recorder events (``ts``/``dur`` in µs, any common clock)."""
    compute: list[tuple[float, int, dict[str, Any]]] = []
    comms: list[tuple[float, int, dict[str, Any]]] = []
    for i, e in enumerate(events):
        if e.get("ph") != "X" or e.get("args", {}).get("step") != step:
            continue
        cat = e.get("cat")
        if cat in _COMPUTE:
            compute.append((e["ts"], i, e))
        elif cat == "Comm":
            comms.append((e["ts"], i, e))
    compute.sort(key=lambda x: (x[0], x[1]))
    comms.sort(key=lambda x: (x[0], x[1]))

    g = nx.DiGraph(step=step)

    def add(e: dict[str, Any]) -> str:
        nid = node_id(e["name"], int(e["args"].get("occ", 0)))
        g.add_node(nid, cat=str(e["cat"]), dur_us=round(float(e.get("dur", 0.0)), 3), step=step)
        return nid

    comp_ids = [add(e) for _, _, e in compute]
    for a, b in zip(comp_ids, comp_ids[1:], strict=False):  # rule 1 (and 2)
        if a != b:
            g.add_edge(a, b)
    first_update = next((k for k, (_, _, e) in enumerate(compute) if e["cat"] == "UPDATE"), None)
    k = -1
    for ts, i, e in comms:
        cid = add(e)
        while k + 1 < len(compute) and (compute[k + 1][0], compute[k + 1][1]) < (ts, i):
            k += 1
        if k >= 0:  # rule 3
            g.add_edge(comp_ids[k], cid)
        if first_update is not None:  # rule 4
            u_ts, u_i, _ = compute[first_update]
            if (ts, i) < (u_ts, u_i):
                g.add_edge(cid, comp_ids[first_update])
    g.add_node(NEXT_STEP, cat="sink", dur_us=0.0, step=step)
    last_update = next((comp_ids[k] for k in range(len(compute) - 1, -1, -1)
                        if compute[k][2]["cat"] == "UPDATE"), None)
    if last_update is not None:  # rule 5
        g.add_edge(last_update, NEXT_STEP)
    for n in list(g.nodes):
        if n != NEXT_STEP and g.out_degree(n) == 0:
            g.add_edge(n, NEXT_STEP)
    return g


def dag_gml(g: nx.DiGraph) -> str:
    """GML text of ``g`` (``nx.read_gml`` reads it back)."""
    return "\n".join(nx.generate_gml(g)) + "\n"
