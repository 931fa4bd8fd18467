"""The trace contract's shared constants: thread ids, DAG node names, the DAG rules' inputs,
and the ByteProfile layout's names.

One definition for the writer (:mod:`echo_trace.recorder`, :mod:`echo_trace.writer`,
:mod:`echo_trace.dag`, :mod:`echo_trace.byteprofile`) and the reader
(:mod:`echo_sim.trace.graph`, :mod:`echo_sim.trace.byteprofile_out`), see
``docs/trace-format.md``. This module imports nothing, so echo_sim can import it without
pulling torch (importing the ``echo_trace`` package imports no torch either; a test pins
both).
"""

from __future__ import annotations

__all__ = ["BPS_ARG_NAMES_FILE", "BPS_COMM_TID", "BPS_GRADIENT_LIST_FILE", "COMM_TID_BASE",
           "COMPUTE_CATS", "COMPUTE_TID", "FORMAT", "NEXT_STEP", "SINK_CAT", "STEP_TID",
           "bps_event", "bps_gradient_name", "bps_trace_file", "node_id", "parse_node_id",
           "thread_name"]

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


# ------------------------------------------------------------------ the ByteProfile layout
# What ByteProfile (the BytePS fork) writes per rank and dPRO reads: written at capture time
# (TRACE_FORMAT=byteprofile, echo_trace.byteprofile) and offline (echo_sim export --to
# byteprofile, echo_sim.trace.byteprofile_out); one set of names for both.

#: The names of the parameters whose gradients are synchronised, one a line.
BPS_ARG_NAMES_FILE = "arg_namesINpara_names.txt"
#: The communicated tensors, one a line, in first-issue order.
BPS_GRADIENT_LIST_FILE = "gradient_name_list.txt"
#: ``tid`` of a tensor's whole synchronisation (BytePS's ``"total"``); operators are on 0.
BPS_COMM_TID = "total"


def bps_trace_file(local_rank: int, nsteps: int) -> str:
    """The trace file of a rank: ``bps_trace_local_rank<local_rank>_<nsteps>step.json``."""
    return f"bps_trace_local_rank{local_rank}_{nsteps}step.json"


def bps_event(name: str, *, comm: bool, ts_us: float, dur_us: float, pid: int,
              deps: list[str]) -> dict[str, object]:
    """One ByteProfile event: ``ph`` X, ``cat`` ``Comm`` (tid :data:`BPS_COMM_TID`) or
    ``operator`` (tid 0), ``ts``/``dur`` in µs, and the dependencies inline: ``args.name``
    the event itself, ``args.arg0 .. argN`` the events (names) it depends on."""
    args: dict[str, str] = {"name": name}
    for k, d in enumerate(deps):
        args[f"arg{k}"] = d
    return {"name": name, "cat": "Comm" if comm else "operator", "ph": "X", "ts": ts_us,
            "dur": dur_us, "pid": pid, "tid": BPS_COMM_TID if comm else 0, "args": args}


def bps_gradient_name(name: str) -> str:
    """The tensor a ``Comm.<tensor>`` event synchronises (its line in
    :data:`BPS_GRADIENT_LIST_FILE`)."""
    return name[5:] if name.startswith("Comm.") else name
