"""The trace contract's shared constants: thread ids, DAG node names, the DAG rules' inputs.

One definition for the writer (:mod:`echo_trace.recorder`, :mod:`echo_trace.writer`,
:mod:`echo_trace.dag`) and the reader (:mod:`echo_sim.trace.graph`), see
``docs/trace-format.md``. This module imports nothing, so echo_sim can import it without
pulling torch (importing the ``echo_trace`` package imports no torch either; a test pins
both).
"""

from __future__ import annotations

__all__ = ["COMM_TID_BASE", "COMPUTE_CATS", "COMPUTE_TID", "FORMAT", "NEXT_STEP",
           "SINK_CAT", "STEP_TID", "node_id", "parse_node_id", "thread_name"]

#: ``format`` written in trace.json's ``otherData`` and in meta.json.
FORMAT = "echo-trace/1"

#: Track of ``FW``/``BW``/``UPDATE`` events.
COMPUTE_TID = 0
#: Track of the ``STEP`` markers (one per complete step).
STEP_TID = 1
#: Communication lane ``k`` is track ``COMM_TID_BASE + k``.
COMM_TID_BASE = 100

#: Categories ordered by rule 1 (compute order) of the per-step DAG.
COMPUTE_CATS: tuple[str, ...] = ("FW", "BW", "UPDATE")
#: The sink node of every ``dag.gml``: follows the last UPDATE and every dangling node.
NEXT_STEP = "NEXT_STEP"
#: ``cat`` attribute of :data:`NEXT_STEP`.
SINK_CAT = "sink"


def node_id(name: str, occ: int) -> str:
    """DAG node id of the ``occ``-th event named ``name`` in its step: ``name`` or
    ``name#occ``."""
    return name if occ == 0 else f"{name}#{occ}"


def parse_node_id(node: str) -> tuple[str, int]:
    """Inverse of :func:`node_id`: ``(name, occ)``."""
    name, sep, occ = str(node).rpartition("#")
    if sep and occ.isdigit():
        return name, int(occ)
    return str(node), 0


def thread_name(tid: int) -> str:
    """Perfetto track name of ``tid``."""
    if tid == COMPUTE_TID:
        return "compute"
    if tid == STEP_TID:
        return "steps"
    if tid >= COMM_TID_BASE:
        return f"comm {tid - COMM_TID_BASE}"
    return f"thread {tid}"
