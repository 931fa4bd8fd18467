"""``TRACE_FORMAT=byteprofile``: ByteProfile's files, written next to echo's in the rank directory.

What ByteProfile (the BytePS fork) writes per rank and dPRO reads, built by the writer thread
from the events it is writing anyway (``/work/shared/reference/formats.md``; the names and the
event shape are :mod:`echo_trace.contract`'s, shared with ``echo_sim export --to
byteprofile``):

* ``bps_trace_local_rank<local_rank>_<N>step.json`` — Chrome ``X`` events, object form, ``N``
  the number of steps written: ``cat`` ``operator`` (tid 0) or ``Comm`` (tid ``"total"``),
  ``ts``/``dur`` in µs exactly as in ``trace.json`` (µs since its ``baseTimeNanoseconds``),
  ``pid`` the global rank, and the dependencies inline: ``args.name`` the event itself,
  ``args.arg0 .. argN`` the events it depends on in its step;
* ``arg_namesINpara_names.txt`` — meta.json's parameter names, one a line (without meta.json:
  the parameters of the DDP buckets);
* ``gradient_name_list.txt`` — the communicated tensors (``Comm.<tensor>`` less ``Comm.``),
  one a line, in first-issue order;
* ``dag.gml`` — echo's own (one file name, one graph): the static graph of the last complete
  step, whose edges are the ``args.argN`` of that step's events, plus echo's sink node
  ``NEXT_STEP`` (as ByteProfile's graph has its ``OUTPUT`` / ``Sync`` nodes) and node
  attributes ``cat``, ``dur_us``, ``step``.

Which events, under which names (the rules of ``echo_sim export --to byteprofile``, which a
test pins to these files for one real run):

* the complete (``STEP``-marked) steps of the window (when none is complete, every step
  recorded); of each, the *leaf* ``FW``/``BW``/``UPDATE`` events and every ``Comm``
  (parent-module spans, ``STEP`` markers and memory counters have no place in the format);
* ByteProfile names an operator once per step: the ``k``-th (``k`` >= 1) event of a name in
  its step is written as echo's DAG node id ``NAME#k``;
* the dependencies are the within-step edges of :func:`echo_trace.dag.step_dag` (the rules
  of ``docs/trace-format.md``), without the sink and without cross-step edges (the static
  graph of ByteProfile has none); they are listed by the start of the event they name.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from echo_trace.contract import (
    BPS_ARG_NAMES_FILE,
    BPS_GRADIENT_LIST_FILE,
    COMPUTE_CATS,
    NEXT_STEP,
    bps_event,
    bps_gradient_name,
    bps_trace_file,
    node_id,
)
from echo_trace.dag import step_dag
from echo_trace.writer import dump_trace_json

__all__ = ["ByteProfileFiles", "byteprofile_files", "byteprofile_steps"]

_TIME_DECIMALS = 3


@dataclass(frozen=True, kw_only=True)
class ByteProfileFiles:
    """One rank's ByteProfile files, in memory: ``trace_file`` (its name), ``events``
    (ByteProfile events, in time order; ``ts``/``dur`` µs), ``param_names``,
    ``gradient_names`` and ``steps`` (the captured steps written)."""

    trace_file: str
    events: list[dict[str, Any]]
    param_names: list[str]
    gradient_names: list[str]
    steps: list[int]

    def contents(self, *, yield_every: int = 0,
                 pause: Callable[[], None] | None = None) -> dict[str, bytes]:
        """File name → bytes, for the rank directory (``dag.gml`` is echo's, not here)."""
        body = dump_trace_json(self.events, {"displayTimeUnit": "ms"},
                               yield_every=yield_every, pause=pause)
        return {self.trace_file: body,
                BPS_ARG_NAMES_FILE: _lines(self.param_names),
                BPS_GRADIENT_LIST_FILE: _lines(self.gradient_names)}


def _lines(names: Iterable[str]) -> bytes:
    return "".join(f"{n}\n" for n in names).encode()


def byteprofile_steps(complete: Iterable[int], recorded: Iterable[int]) -> list[int]:
    """The steps written: the complete ones, else (none complete) every recorded one."""
    return sorted(set(complete)) or sorted(set(recorded))


def _param_names(params: list[dict[str, Any]] | None,
                 comm_events: Iterable[dict[str, Any]]) -> list[str]:
    """meta.json's ``params`` names, else the DDP buckets' parameters (first seen first)."""
    names = [str(p["name"]) for p in params or [] if isinstance(p, dict) and "name" in p]
    if names:
        return names
    seen: dict[str, None] = {}
    for e in comm_events:
        for p in e["args"].get("params") or []:
            seen.setdefault(str(p), None)
    return list(seen)


def byteprofile_files(events: list[dict[str, Any]], *, rank: int, local_rank: int,
                      steps: list[int], offset_us: float = 0.0,
                      params: list[dict[str, Any]] | None = None, yield_every: int = 0,
                      pause: Callable[[], None] | None = None) -> ByteProfileFiles:
    """One rank's ByteProfile files from the recorder's events (see the module doc).

    ``events``: :meth:`~echo_trace.recorder.Recorder.to_dicts` dicts (local µs, ``args``
    with ``step`` and ``occ``); ``offset_us``: the local → trace clock shift the writer
    applies to ``trace.json`` (the same rounding is applied here, so ``ts``/``dur`` equal
    trace.json's); ``steps``: the captured steps to write (:func:`byteprofile_steps`);
    ``params``: meta.json's ``params``. ``yield_every`` > 0 calls ``pause`` every that many
    events (the writer thread's pacing).
    """
    wanted = set(steps)
    by_step: dict[int, list[tuple[int, dict[str, Any]]]] = {s: [] for s in steps}
    for i, e in enumerate(events):
        if yield_every and pause is not None and i % yield_every == 0:
            pause()
        if e.get("ph") != "X" or (e.get("cat") not in COMPUTE_CATS and e.get("cat") != "Comm"):
            continue
        step = e["args"].get("step")
        if step in wanted:
            by_step[step].append((i, e))
    # node -> (ts, kind, record index, event), kind 0 compute / 1 Comm (ties: compute first)
    nodes: list[tuple[float, int, int, str, dict[str, Any]]] = []
    preds: dict[tuple[int, str], list[str]] = {}
    key_of: dict[tuple[int, str], tuple[float, int, int]] = {}
    for step in steps:
        mine = by_step[step]
        g = step_dag([e for _, e in mine], step)
        index = {node_id(e["name"], int(e["args"].get("occ", 0))): (i, e) for i, e in mine}
        for n in g.nodes:
            if n == NEXT_STEP or n not in index:
                continue
            i, e = index[n]
            ts = round(float(e["ts"]) + offset_us, _TIME_DECIMALS)
            kind = 1 if e["cat"] == "Comm" else 0
            key_of[(step, n)] = (ts, kind, i)
            nodes.append((ts, kind, i, n, e))
        for a, b in g.edges:
            if b != NEXT_STEP and a != NEXT_STEP:
                preds.setdefault((step, b), []).append(a)
        if pause is not None and yield_every:
            pause()
    nodes.sort(key=lambda x: x[:3])
    out: list[dict[str, Any]] = []
    grads: dict[str, None] = {}
    for k, (ts, kind, _, n, e) in enumerate(nodes):
        if yield_every and pause is not None and k % yield_every == 0:
            pause()
        step = e["args"]["step"]
        deps = sorted(preds.get((step, n), []), key=lambda d: key_of[(step, d)])
        # dur from the rounded end, as trace.json's (so touching slices still touch)
        end = round(float(e["ts"]) + float(e.get("dur", 0.0)) + offset_us, _TIME_DECIMALS)
        out.append(bps_event(n, comm=bool(kind), ts_us=ts,
                             dur_us=round(end - ts, _TIME_DECIMALS), pid=rank,
                             deps=list(dict.fromkeys(deps))))
        if kind:
            grads.setdefault(bps_gradient_name(n), None)
    comm = (e for _, kind, _, _, e in nodes if kind)
    return ByteProfileFiles(trace_file=bps_trace_file(local_rank, len(steps)), events=out,
                            param_names=_param_names(params, comm),
                            gradient_names=list(grads), steps=list(steps))
