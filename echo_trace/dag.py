"""``dag.gml``: the dependency graph of one captured step of this rank.

Rules (the contract in docs/trace-format.md; :mod:`echo_sim.trace.graph` applies the same
ones to every step, and a test pins the two equal on a real traced run):

1. compute order: consecutive *leaf* ``FW``/``BW``/``UPDATE`` events of the step by start
   (ties: record order); a compute event that contains the start of another one (a parent
   module traced as well) is left out;
2. forward→backward is rule 1 (the last FW precedes the first BW);
3. each ``Comm`` depends on the last leaf compute event that started at or before its issue;
4. the first ``UPDATE`` depends on every ``Comm`` of the step issued (strictly) before it;
5. a sink ``NEXT_STEP`` (``cat`` ``"sink"``) follows the last ``UPDATE`` and every node left
   without a successor.

Every edge goes from an earlier (or equal) start to a later one, so the graph is acyclic.
Node ids: ``<name>`` for ``occ == 0``, else ``<name>#<occ>``; node attributes ``cat``,
``dur_us``, ``step``. The graph is built and written as GML in plain Python (the writer
thread must not import networkx: its import held the GIL for ~0.4 s on a busy machine);
:func:`build_step_dag` gives it as a ``networkx.DiGraph``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from echo_trace.contract import COMPUTE_CATS, NEXT_STEP, SINK_CAT, node_id

__all__ = ["CONTAIN_TOL_US", "NEXT_STEP", "StepDag", "build_step_dag", "dag_gml",
           "last_complete_step", "leaf_compute", "node_id", "step_dag"]

#: A child must start this much (µs) before its parent's end to count as nested (the
#: files carry 3 decimals; echo_sim uses the same slack plus float spacing).
CONTAIN_TOL_US = 0.01


@dataclass
class StepDag:
    """One step's DAG: ``nodes`` (id → ``{"cat", "dur_us", "step"}``, in insertion order)
    and ``edges`` (``(src, dst)`` pairs, no duplicates)."""

    step: int
    nodes: dict[str, dict[str, Any]] = field(default_factory=dict)
    edges: dict[tuple[str, str], None] = field(default_factory=dict)

    def add_edge(self, a: str, b: str) -> None:
        if a != b:
            self.edges[(a, b)] = None


def last_complete_step(events: Iterable[dict[str, Any]]) -> int | None:
    """The highest step with a ``STEP`` marker (markers are written for complete steps)."""
    steps = [e["args"]["step"] for e in events if e.get("cat") == "step" and e.get("ph") == "X"]
    return max(steps) if steps else None


def leaf_compute(compute: list[tuple[float, int, dict[str, Any]]],
                 ) -> list[tuple[float, int, dict[str, Any]]]:
    """Rule 1's leaves: ``(ts, index, event)`` sorted by start, containers dropped (an
    event is a container when an event of positive duration starts inside it)."""
    order = sorted(compute, key=lambda x: (x[0], -float(x[2].get("dur", 0.0)), x[1]))
    # a zero-length event (the backward of a view, say) is an instant: it makes no parent
    keep = [x for x in order if float(x[2].get("dur", 0.0)) <= 0.0]
    timed = [x for x in order if float(x[2].get("dur", 0.0)) > 0.0]
    for k, (ts, i, e) in enumerate(timed):
        end = ts + float(e.get("dur", 0.0))
        if k + 1 < len(timed) and timed[k + 1][0] < end - CONTAIN_TOL_US:
            continue  # the next event starts inside this one: a parent
        keep.append((ts, i, e))
    keep.sort(key=lambda x: (x[0], x[1]))
    return keep


def step_dag(events: Iterable[dict[str, Any]], step: int) -> StepDag:
    """The DAG of ``step`` from recorder events (``ts``/``dur`` in µs, any common clock)."""
    compute: list[tuple[float, int, dict[str, Any]]] = []
    comms: list[tuple[float, int, dict[str, Any]]] = []
    for i, e in enumerate(events):
        if e.get("ph") != "X" or e.get("args", {}).get("step") != step:
            continue
        cat = e.get("cat")
        if cat in COMPUTE_CATS:
            compute.append((float(e["ts"]), i, e))
        elif cat == "Comm":
            comms.append((float(e["ts"]), i, e))
    compute = leaf_compute(compute)
    comms.sort(key=lambda x: (x[0], x[1]))
    g = StepDag(step)

    def add(e: dict[str, Any]) -> str:
        nid = node_id(e["name"], int(e["args"].get("occ", 0)))
        g.nodes[nid] = {"cat": str(e["cat"]), "dur_us": round(float(e.get("dur", 0.0)), 3),
                        "step": step}
        return nid

    comp_ids = [add(e) for _, _, e in compute]
    for a, b in zip(comp_ids, comp_ids[1:], strict=False):  # rule 1 (and 2)
        g.add_edge(a, b)
    first_update = next((k for k, (_, _, e) in enumerate(compute) if e["cat"] == "UPDATE"), None)
    k = -1
    for ts, _, e in comms:
        cid = add(e)
        while k + 1 < len(compute) and compute[k + 1][0] <= ts:
            k += 1
        if k >= 0:  # rule 3
            g.add_edge(comp_ids[k], cid)
        if first_update is not None and ts < compute[first_update][0]:  # rule 4
            g.add_edge(cid, comp_ids[first_update])
    g.nodes[NEXT_STEP] = {"cat": SINK_CAT, "dur_us": 0.0, "step": step}
    last_update = next((comp_ids[k] for k in range(len(compute) - 1, -1, -1)
                        if compute[k][2]["cat"] == "UPDATE"), None)
    if last_update is not None:  # rule 5
        g.add_edge(last_update, NEXT_STEP)
    has_out = {a for a, _ in g.edges}
    for n in list(g.nodes):
        if n != NEXT_STEP and n not in has_out:
            g.add_edge(n, NEXT_STEP)
    return g


def build_step_dag(events: Iterable[dict[str, Any]], step: int) -> Any:
    """:func:`step_dag` as a ``networkx.DiGraph`` (graph attribute ``step``)."""
    import networkx as nx

    d = step_dag(events, step)
    g = nx.DiGraph(step=step)
    for n, attrs in d.nodes.items():
        g.add_node(n, **attrs)
    g.add_edges_from(d.edges)
    return g


def _gml_str(s: str) -> str:
    """A GML string literal, escaped as networkx writes it (``&#N;`` for ``"``, ``&``
    and characters outside printable ASCII)."""
    out = [c if (" " <= c <= "~" and c not in '"&') else f"&#{ord(c)};" for c in s]
    return '"' + "".join(out) + '"'


def _gml_value(v: Any) -> str:
    if isinstance(v, bool):
        return str(int(v))
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if math.isnan(v):
            return "NAN"
        if math.isinf(v):
            return "+INF" if v > 0 else "-INF"
        text = repr(v).upper()
        epos = text.rfind("E")
        if epos != -1 and text.find(".", 0, epos) == -1:
            text = text[:epos] + "." + text[epos:]
        return text
    return _gml_str(str(v))


def dag_gml(g: Any) -> str:
    """GML text of a :class:`StepDag` or a ``networkx.DiGraph`` (``nx.read_gml`` reads it
    back; for a DiGraph the text is what ``networkx.generate_gml`` writes)."""
    if not isinstance(g, StepDag):
        import networkx as nx

        return "\n".join(nx.generate_gml(g)) + "\n"
    lines = ["graph [", "  directed 1", f"  step {_gml_value(g.step)}"]
    ids = {}
    for k, (n, attrs) in enumerate(g.nodes.items()):
        ids[n] = k
        lines += ["  node [", f"    id {k}", f"    label {_gml_str(n)}"]
        lines += [f"    {key} {_gml_value(v)}" for key, v in attrs.items()]
        lines.append("  ]")
    for a, b in sorted(g.edges, key=lambda e: ids[e[0]]):  # networkx's adjacency order
        lines += ["  edge [", f"    source {ids[a]}", f"    target {ids[b]}", "  ]"]
    lines.append("]")
    return "\n".join(lines) + "\n"
