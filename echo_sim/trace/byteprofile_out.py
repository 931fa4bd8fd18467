"""A :class:`Trace` written as ByteProfile (BytePS fork) rank directories, for dPRO and the
tools built on ByteProfile's files.

Layout (ByteProfile's README and ``/work/shared/reference/formats.md``; the file names and the
event shape are :mod:`echo_trace.contract`'s, which ``TRACE_FORMAT=byteprofile`` writes at
capture time too, from the same rules), one directory per rank, ``<node_rank>_<local_rank>/`` (``0_<rank>`` for every rank when those collide):

* ``bps_trace_local_rank<local_rank>_<N>step.json`` — Chrome ``X`` events, object form; ``N``
  is the number of steps written;
* ``dag.gml`` — the static operator graph of the rank's last step (node labels are event
  names);
* ``arg_namesINpara_names.txt`` — the names of the parameters whose gradients are
  synchronised, one a line (ByteProfile writes MXNet's ``arg_names`` that are parameters);
* ``gradient_name_list.txt`` — the communicated tensors, one a line, in first-issue order.

Each event: ``name`` (``FW.<op>``, ``BW.<op>``, ``UPDATE.<opt>``, ``Comm.<tensor>``), ``cat``
``operator`` or ``Comm``, ``ph`` ``X``, ``ts`` / ``dur`` in µs (3 decimals), ``pid`` the global
rank, ``tid`` 0 for operators and ``"total"`` for a tensor's whole synchronisation (the tid
BytePS gives it), and the dependencies inline: ``args.name`` is the event itself and
``args.arg0 .. args.argN`` the events it depends on within its step and rank (the edges
:func:`echo_sim.trace.graph.build_deps` finds: ``dag.gml`` when the trace has one, else the
contract's rules; cross-step edges are left out, as ByteProfile's static graph has none).

What the format cannot say, and what is done instead:

* ByteProfile names an operator once per step. An event that is the ``k``-th (``k`` >= 1)
  with its name in its (rank, step) is written under echo's DAG node id ``NAME#k``, so each
  name in a step is one event and its dependencies can name it.
* ByteProfile holds operators, not nested modules: only *leaf* compute events (those the
  dependency rules use), ``Comm`` events and other events (``I/O.*``) of captured steps are
  written; ``STEP`` markers, parent-module spans and memory counters are not (a ByteProfile
  reader finds steps by dPRO's category rule). Other events depend on nothing; an event
  depends on one when the trace's own ``dag.gml`` says so (``I/O.data`` → ``FW.conv``).
* Byte counts, collective types and process groups have no place in the format.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import networkx as nx
import numpy as np

from echo_sim.errors import ConfigError
from echo_sim.trace.graph import EDGE_STEP, build_deps
from echo_sim.trace.model import Cat, Trace
from echo_sim.trace.outfiles import output_tree
from echo_trace.contract import (
    BPS_ARG_NAMES_FILE,
    BPS_GRADIENT_LIST_FILE,
    bps_event,
    bps_gradient_name,
    bps_trace_file,
    node_id,
)

__all__ = ["ARG_NAMES_FILE", "GRADIENT_LIST_FILE", "ByteProfileRank", "byteprofile_ranks",
           "write_byteprofile_dirs"]

ARG_NAMES_FILE = BPS_ARG_NAMES_FILE  # the names echo_trace writes too (TRACE_FORMAT)
GRADIENT_LIST_FILE = BPS_GRADIENT_LIST_FILE
_TIME_DECIMALS = 3


@dataclass(frozen=True)
class ByteProfileRank:
    """One rank's ByteProfile files, in memory (see the module doc)."""

    dirname: str
    trace_file: str
    events: list[dict[str, Any]]
    dag: nx.DiGraph
    param_names: list[str]
    gradient_names: list[str]


def _dirnames(trace: Trace, ranks: list[int]) -> dict[int, str]:
    names = {}
    for r in ranks:
        info = trace.ranks.get(r)
        names[r] = f"{info.node_rank}_{info.local_rank}" if info is not None else f"0_{r}"
    if len(set(names.values())) != len(names):
        names = {r: f"0_{r}" for r in ranks}
    return names


def _param_names(trace: Trace, rank: int, rows: np.ndarray) -> list[str]:
    """meta.json's ``params`` names, else the DDP buckets' parameters, else the tensors."""
    info = trace.ranks.get(rank)
    meta = info.meta if info is not None else {}
    params = [str(p["name"]) for p in meta.get("params") or [] if "name" in p]
    if params:
        return params
    seen: dict[str, None] = {}
    for r in rows.tolist():
        for p in (trace.comm_args.get(r) or {}).get("params") or []:
            seen.setdefault(str(p), None)
    return list(seen)


def _other_preds(dag: Any, name: str, others: set[str], have: list[str]) -> list[str]:
    """Predecessors of ``name`` in the rank's ``dag.gml`` that are OTHER events (``I/O``) of
    its step (``others``): the dependency rules know only FW/BW/UPDATE/Comm."""
    if dag is None or not others or name not in dag:
        return []
    return [str(p) for p in dag.predecessors(name) if p in others and p not in have]


def byteprofile_ranks(trace: Trace, *, steps: list[int] | None = None) -> list[ByteProfileRank]:
    """Every rank's ByteProfile events, static graph and name lists (no files written).

    ``steps``: the captured steps to write (all by default).
    """
    deps = build_deps(trace, steps)
    ev = trace.events
    other = np.flatnonzero((ev.cat == Cat.OTHER) & np.isin(ev.step, deps.steps))
    rows = np.concatenate([deps.compute, deps.comm, other])
    if rows.size == 0:
        raise ConfigError(f"trace {trace.source or '(in memory)'} has no FW/BW/UPDATE/Comm "
                          f"events in steps {deps.steps}; nothing to write")
    rows = rows[np.lexsort((ev.ts_us[rows], ev.rank[rows]))]
    # ByteProfile names an op once per step: the k-th repeat is written as echo's node id
    label = {int(r): node_id(trace.names[int(ev.name[r])], int(ev.occ[r])) for r in rows}
    preds: dict[int, list[int]] = {}
    within = deps.kind != EDGE_STEP
    for u, v in zip(deps.src[within].tolist(), deps.dst[within].tolist(), strict=True):
        if ev.rank[u] == ev.rank[v] and ev.step[u] == ev.step[v] and u in label:
            preds.setdefault(v, []).append(u)
    ranks = sorted(int(x) for x in np.unique(ev.rank[rows]))
    dirs = _dirnames(trace, ranks)
    nsteps = len(deps.steps)
    out = []
    for rank in ranks:
        mine = rows[ev.rank[rows] == rank]
        last_step = int(ev.step[mine].max())
        events: list[dict[str, Any]] = []
        dag = nx.DiGraph()
        grads: dict[str, None] = {}
        rank_dag = trace.dags.get(rank) if trace.dags else None
        others: dict[int, set[str]] = {}
        for r in mine[ev.cat[mine] == Cat.OTHER].tolist():
            others.setdefault(int(ev.step[r]), set()).add(label[r])
        for r in mine.tolist():
            name = label[r]
            is_comm = int(ev.cat[r]) == Cat.COMM
            dep_names = list(dict.fromkeys(label[u] for u in sorted(
                preds.get(r, []), key=lambda u: (ev.ts_us[u], u))))
            dep_names += _other_preds(rank_dag, name, others.get(int(ev.step[r]), set()),
                                      dep_names)
            # durations as measured: ts + dur of Unix-epoch µs (~1.8e15) in float64 is
            # only exact to 0.25 µs
            events.append(bps_event(name, comm=is_comm,
                                    ts_us=round(float(ev.ts_us[r]), _TIME_DECIMALS),
                                    dur_us=round(float(ev.dur_us[r]), _TIME_DECIMALS),
                                    pid=rank, deps=dep_names))
            if is_comm:
                grads.setdefault(bps_gradient_name(name), None)
            if int(ev.step[r]) == last_step:
                dag.add_node(name)
                dag.add_edges_from((d, name) for d in dep_names)
        local = trace.ranks[rank].local_rank if rank in trace.ranks else rank
        out.append(ByteProfileRank(
            dirname=dirs[rank], trace_file=bps_trace_file(local, nsteps),
            events=events, dag=dag, param_names=_param_names(trace, rank, mine),
            gradient_names=list(grads)))
    return out


def _lines(names: list[str]) -> bytes:
    return "".join(f"{n}\n" for n in names).encode()


def write_byteprofile_dirs(trace: Trace, out_dir: str | Path, *, overwrite: bool = False,
                           steps: list[int] | None = None) -> list[Path]:
    """One ByteProfile rank directory per rank under ``out_dir`` (see the module doc);
    returns them. Written through :func:`~echo_sim.trace.outfiles.output_tree`: ``out_dir``
    is made when absent (its parent must exist), nothing is replaced unless ``overwrite``,
    and every file is put in place only once all are written."""
    ranks = byteprofile_ranks(trace, steps=steps)
    with output_tree(Path(out_dir), overwrite=overwrite) as tree:
        for rk in ranks:
            for f in (rk.trace_file, "dag.gml", ARG_NAMES_FILE, GRADIENT_LIST_FILE):
                tree.check(f"{rk.dirname}/{f}")
        for rk in ranks:
            doc = {"traceEvents": rk.events, "displayTimeUnit": "ms"}
            tree.write(f"{rk.dirname}/{rk.trace_file}", json.dumps(doc, indent=1).encode())
            gml = "\n".join(nx.generate_gml(rk.dag, stringizer=str)) + "\n"
            tree.write(f"{rk.dirname}/dag.gml", gml.encode())
            tree.write(f"{rk.dirname}/{ARG_NAMES_FILE}", _lines(rk.param_names))
            tree.write(f"{rk.dirname}/{GRADIENT_LIST_FILE}", _lines(rk.gradient_names))
    return [Path(out_dir) / rk.dirname for rk in ranks]
