"""Dependency graphs rebuilt from a trace: per rank, per step, and across ranks.

The rules are the ones in ``docs/trace-format.md`` ("Dependencies"), applied to every
selected step of every rank:

1. compute order: consecutive ``FW``/``BW``/``UPDATE`` events of a rank in time order
   (within a step; only *leaf* events count: an event that contains another compute event,
   e.g. a parent module traced at a lower ``depth``, is left out, its own time becomes a gap);
2. forward→backward is rule 1;
3. backward→communication: each ``Comm`` depends on the last compute event that *started*
   at or before the ``Comm`` was issued;
4. communication→update: the first ``UPDATE`` of a step depends on every ``Comm`` of the
   step issued before it;
5. cross-step chaining: a step's first compute event depends on the previous selected
   step's last ``UPDATE`` (and on its last compute event, to keep program order).

Across ranks, collectives are matched by (group, seq) — one instance per operation — and
send/recv by (src, dst, seq). Instances that miss a member present in the trace are reported
as unmatched (they are still kept, with the members that exist).

Optional, for the replayer (:mod:`echo_sim.sim.replay`): *wait* edges (``wait_edges=True``).
A compute event that starts after the compute stream sat idle, where a ``Comm`` of the rank
ended inside that idle gap and explains at least half of it, depends on that ``Comm``
(a blocking collective, a ``wait()`` on an async one, a pipeline ``recv``). They are not
part of the contract and are left out of :func:`global_graph` by default.

A rank's ``dag.gml`` (``trace.dags[rank]``, one step) is preferred over the rebuilt edges
for every step of that rank whose events it names exactly and whose edges agree with the
measured order (source starts no later than destination).

Two forms: :class:`Deps` (numpy arrays of event rows; what the replayer reads) and a
``networkx.DiGraph`` (:func:`global_graph`, :func:`rank_dag`) for users and drawing.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import networkx as nx
import numpy as np

from echo_sim.errors import ConfigError
from echo_sim.trace.model import CAT_NAMES, COLLECTIVES, Cat, Trace
from echo_trace.contract import NEXT_STEP, SINK_CAT, node_id, parse_node_id

__all__ = [
    "EDGE_KINDS",
    "Deps",
    "build_deps",
    "global_graph",
    "issue_predecessor",
    "match_instances",
    "rank_dag",
    "select_steps",
    "time_tolerance_us",
]

EDGE_ORDER, EDGE_ISSUE, EDGE_UPDATE, EDGE_STEP, EDGE_WAIT, EDGE_DAG = range(6)
EDGE_KINDS: tuple[str, ...] = ("order", "issue", "update", "step", "wait", "dag")
"""Name of each edge kind code in :attr:`Deps.kind`."""

_SEND, _RECV = COLLECTIVES.index("send"), COLLECTIVES.index("recv")


def time_tolerance_us(trace: Trace) -> float:
    """Slack (µs) when comparing two event times of ``trace``.

    Files carry 3 decimals (two roundings: 0.002 µs), but Unix-epoch microseconds
    (~1.8e15) held in float64 are only exact to 0.25 µs, so end = ts + dur of one event
    and ts of the next can cross by that much: allow 4 ulps of the largest time.
    """
    ts = trace.events.ts_us
    big = float(np.abs(ts).max()) if ts.size else 0.0
    return 0.01 + 4.0 * float(np.spacing(big))

_MAX_REPORTED = 100  # unmatched instances listed in full; the rest only counted


@dataclass
class Deps:
    """Array form of the dependency graph over the selected steps.

    Edges join event rows of the trace (``src[i] -> dst[i]``, kind ``kind[i]``, see
    :data:`EDGE_KINDS`); an edge into or out of a ``Comm`` row means the collective
    instance that row belongs to (``comm_inst``).
    """

    steps: list[int]
    compute: np.ndarray  # rows of leaf FW/BW/UPDATE events, sorted by (rank, ts)
    comm: np.ndarray  # rows of Comm events, sorted by (rank, ts)
    src: np.ndarray
    dst: np.ndarray
    kind: np.ndarray
    comm_inst: np.ndarray  # aligned with ``comm``: instance id, 0..n_inst-1
    inst_p2p: np.ndarray  # per instance: a send/recv pair (else a collective)
    inst_complete: np.ndarray  # per instance: every member present in the trace was found
    unmatched: list[dict[str, Any]] = field(default_factory=list)  # first few, described
    dag_steps: list[tuple[int, int]] = field(default_factory=list)  # (rank, step) from dag.gml

    @property
    def n_inst(self) -> int:
        return int(self.inst_p2p.shape[0])

    @property
    def n_unmatched(self) -> int:
        return int((~self.inst_complete).sum())


def select_steps(trace: Trace, steps: Sequence[int] | None) -> list[int]:
    """The steps to analyse (all captured steps by default); unknown steps are an error."""
    if steps is None:
        return sorted(trace.steps)
    known = set(trace.steps)
    bad = [s for s in steps if s not in known]
    if bad:
        raise ConfigError(
            f"step {bad[0]} is not in the trace; captured steps: {sorted(known) or 'none'}"
        )
    return sorted(set(int(s) for s in steps))


# --------------------------------------------------------------------------- building
def build_deps(
    trace: Trace,
    steps: Sequence[int] | None = None,
    *,
    wait_edges: bool = False,
    use_dags: bool = True,
) -> Deps:
    """Rebuild the dependencies of every selected step on every rank (see module doc)."""
    sel = select_steps(trace, steps)
    ev = trace.events
    in_steps = np.isin(ev.step, np.asarray(sel, dtype=ev.step.dtype))
    is_compute = (ev.cat == Cat.FW) | (ev.cat == Cat.BW) | (ev.cat == Cat.UPDATE)
    compute = _leaves(trace, np.flatnonzero(in_steps & is_compute))
    comm = np.flatnonzero(in_steps & (ev.cat == Cat.COMM))
    step_index = np.full(int(max(sel, default=0)) + 2, -1, dtype=np.int64)
    step_index[np.asarray(sel, dtype=np.int64)] = np.arange(len(sel))

    parts: list[tuple[np.ndarray, np.ndarray, int]] = []
    parts += _order_edges(trace, compute, step_index)
    parts.append(_issue_edges(trace, compute, comm) + (EDGE_ISSUE,))
    parts.append(_update_edges(trace, compute, comm, step_index) + (EDGE_UPDATE,))
    if wait_edges:
        parts.append(_wait_edges(trace, compute, comm) + (EDGE_WAIT,))
    src = np.concatenate([p[0] for p in parts]).astype(np.int64)
    dst = np.concatenate([p[1] for p in parts]).astype(np.int64)
    kind = np.concatenate([np.full(p[0].shape[0], p[2], np.int8) for p in parts])

    dag_steps: list[tuple[int, int]] = []
    if use_dags and trace.dags:
        src, dst, kind, dag_steps = _apply_dags(trace, sel, compute, comm, src, dst, kind)
    src, dst, kind = _dedupe(src, dst, kind)
    comm_inst, inst_p2p, inst_complete, unmatched = _match(trace, comm)
    return Deps(sel, compute, comm, src, dst, kind, comm_inst, inst_p2p, inst_complete,
                unmatched, dag_steps)


def _leaves(trace: Trace, rows: np.ndarray) -> np.ndarray:
    """Drop compute events that contain another one (nesting); rows come back (rank, ts)."""
    ev = trace.events
    if rows.size == 0:
        return rows.astype(np.int64)
    rk, ts = ev.rank[rows], ev.ts_us[rows]
    # Trace rows are sorted by (rank, ts); only equal starts need the parent-first order.
    if bool(np.any((rk[1:] == rk[:-1]) & (ts[1:] <= ts[:-1]))):
        rows = rows[np.lexsort((-ev.dur_us[rows], ts, rk))]
    ts, end, rk = ev.ts_us[rows], ev.ts_us[rows] + ev.dur_us[rows], ev.rank[rows]
    # A zero-length event (the backward of a view, say) is an instant: it makes no parent,
    # so containment is decided among the timed events only (as echo_trace.dag does).
    timed = np.flatnonzero(end > ts)
    tts, tend, trk = ts[timed], end[timed], rk[timed]
    container = np.zeros(rows.shape[0], dtype=bool)
    # In (ts, -dur) order a parent is immediately followed by its first child.
    container[timed[:-1]] = (trk[1:] == trk[:-1]) & (tts[1:] < tend[:-1]
                                                     - time_tolerance_us(trace))
    return rows[~container].astype(np.int64)


def _order_edges(trace: Trace, compute: np.ndarray, step_index: np.ndarray,
                 ) -> list[tuple[np.ndarray, np.ndarray, int]]:
    """Rule 1 within steps, rule 5 between consecutive selected steps."""
    ev = trace.events
    rk = ev.rank[compute]
    si = step_index[ev.step[compute]]
    a, b = compute[:-1], compute[1:]
    same_rank = rk[1:] == rk[:-1]
    same_step = si[1:] == si[:-1]
    order = (a[same_rank & same_step], b[same_rank & same_step], EDGE_ORDER)
    # rule 5: last compute of step k-1 -> first compute of step k (program order) ...
    boundary = same_rank & (si[1:] == si[:-1] + 1)
    step_src, step_dst = [a[boundary]], [b[boundary]]
    # ... and last UPDATE of step k-1 -> first compute of step k.
    nsteps = int(step_index.max()) + 1
    key = rk.astype(np.int64) * nsteps + si
    is_upd = ev.cat[compute] == Cat.UPDATE
    upd_keys, upd_last = _last_per_key(key[is_upd], compute[is_upd])
    first_keys, first_rows = _first_per_key(key, compute)
    nxt = np.searchsorted(first_keys, upd_keys + 1)
    ok = nxt < first_keys.shape[0]
    ok[ok] = (first_keys[nxt[ok]] == upd_keys[ok] + 1) & ((upd_keys[ok] % nsteps) + 1 < nsteps)
    step_src.append(upd_last[ok])
    step_dst.append(first_rows[nxt[ok]])
    return [order, (np.concatenate(step_src), np.concatenate(step_dst), EDGE_STEP)]


def _first_per_key(key: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Sorted unique keys and the first row of each (``key`` is non-decreasing)."""
    if key.size == 0:
        return key, rows
    first = np.ones(key.shape[0], dtype=bool)
    first[1:] = key[1:] != key[:-1]
    return key[first], rows[first]


def _last_per_key(key: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    if key.size == 0:
        return key, rows
    last = np.ones(key.shape[0], dtype=bool)
    last[:-1] = key[1:] != key[:-1]
    return key[last], rows[last]


def _per_rank_search(trace: Trace, compute: np.ndarray, comm: np.ndarray,
                     times: np.ndarray, values: np.ndarray, side: str, *,
                     after: bool = False) -> np.ndarray:
    """For each comm row, index into ``compute`` of the last leaf on the same rank whose
    ``values`` (start or end, non-decreasing per rank) is <= ``times`` (``side="right"``)
    or < ``times`` (``"left"``); with ``after``, the leaf right after that one. -1: none."""
    ev = trace.events
    out = np.full(comm.shape[0], -1, dtype=np.int64)
    crk, mrk = ev.rank[compute], ev.rank[comm]
    for r in np.unique(mrk):
        lo, hi = np.searchsorted(crk, r, "left"), np.searchsorted(crk, r, "right")
        mlo, mhi = np.searchsorted(mrk, r, "left"), np.searchsorted(mrk, r, "right")
        k = np.searchsorted(values[lo:hi], times[mlo:mhi], side=side)  # type: ignore[call-overload]
        if after:
            out[mlo:mhi] = np.where(k < hi - lo, k + lo, -1)
        else:
            out[mlo:mhi] = np.where(k > 0, k - 1 + lo, -1)
    return out


def _issue_edges(trace: Trace, compute: np.ndarray, comm: np.ndarray,
                 ) -> tuple[np.ndarray, np.ndarray]:
    """Rule 3: comm <- last leaf compute (same rank) that started at or before its issue."""
    ev = trace.events
    k = _per_rank_search(trace, compute, comm, ev.ts_us[comm], ev.ts_us[compute], "right")
    ok = k >= 0
    return compute[k[ok]], comm[ok]


def _update_edges(trace: Trace, compute: np.ndarray, comm: np.ndarray,
                  step_index: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Rule 4: first UPDATE of a (rank, step) <- every Comm of it issued before."""
    ev = trace.events
    nsteps = int(step_index.max()) + 1
    is_upd = ev.cat[compute] == Cat.UPDATE
    ukey = ev.rank[compute[is_upd]].astype(np.int64) * nsteps + step_index[ev.step[compute[is_upd]]]
    ukeys, urows = _first_per_key(ukey, compute[is_upd])
    if ukeys.size == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    ckey = ev.rank[comm].astype(np.int64) * nsteps + step_index[ev.step[comm]]
    pos = np.minimum(np.searchsorted(ukeys, ckey), ukeys.shape[0] - 1)
    upd = urows[pos]
    ok = (ukeys[pos] == ckey) & (ev.ts_us[comm] < ev.ts_us[upd])
    return comm[ok], upd[ok]


def _wait_edges(trace: Trace, compute: np.ndarray, comm: np.ndarray,
                ) -> tuple[np.ndarray, np.ndarray]:
    """Comm -> the next leaf compute when the Comm ended in the idle gap before that leaf
    and explains at least half of the gap (see module doc)."""
    ev = trace.events
    cend = ev.ts_us[comm] + ev.dur_us[comm]
    k = _per_rank_search(trace, compute, comm, cend, ev.ts_us[compute], "left", after=True)
    ok = k >= 0
    if not ok.any():
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    k, c, cend = k[ok], comm[ok], cend[ok]
    nxt = compute[k]
    prev = compute[np.maximum(k - 1, 0)]
    has_prev = (k > 0) & (ev.rank[prev] == ev.rank[nxt])
    prev_end = np.where(has_prev, ev.ts_us[prev] + ev.dur_us[prev], -np.inf)
    nstart = ev.ts_us[nxt]
    keep = (prev_end <= cend + time_tolerance_us(trace)) & ((nstart - cend) <= 0.5 * (nstart - prev_end))
    return c[keep], nxt[keep]


def issue_predecessor(trace: Trace, deps: Deps) -> np.ndarray:
    """Per ``deps.comm`` row: the last leaf compute row of its rank that *ended* at or
    before the issue (-1 when none). The replayer uses it when the rule-3 predecessor was
    still running at issue time (a Comm launched from inside a module's backward)."""
    ev = trace.events
    comp = deps.compute
    k = _per_rank_search(trace, comp, deps.comm, ev.ts_us[deps.comm] + time_tolerance_us(trace),
                         ev.ts_us[comp] + ev.dur_us[comp], "right")
    return np.where(k >= 0, comp[np.maximum(k, 0)] if comp.size else -1, -1)


def _dedupe(src: np.ndarray, dst: np.ndarray, kind: np.ndarray,
            ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    if src.size == 0:
        return src, dst, kind
    keep = src != dst
    src, dst, kind = src[keep], dst[keep], kind[keep]
    order = np.lexsort((kind, dst, src))
    src, dst, kind = src[order], dst[order], kind[order]
    first = np.ones(src.shape[0], dtype=bool)
    first[1:] = (src[1:] != src[:-1]) | (dst[1:] != dst[:-1])
    return src[first], dst[first], kind[first]


# --------------------------------------------------------------------------- dag.gml
def _node_key(node: str) -> tuple[str, int]:
    return parse_node_id(node)


def _apply_dags(trace: Trace, sel: list[int], compute: np.ndarray, comm: np.ndarray,
                src: np.ndarray, dst: np.ndarray, kind: np.ndarray,
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[tuple[int, int]]]:
    """Replace the rebuilt intra-step edges by ``dag.gml``'s where it fits the events."""
    ev = trace.events
    rows = np.concatenate([compute, comm])
    used: list[tuple[int, int]] = []
    tol = time_tolerance_us(trace)
    drop = np.zeros(src.shape[0], dtype=bool)
    new_src: list[int] = []
    new_dst: list[int] = []
    for rank, dag in trace.dags.items():
        nodes = [n for n in dag.nodes if str(n) != NEXT_STEP]
        for step in sel:
            mine = rows[(ev.rank[rows] == rank) & (ev.step[rows] == step)]
            index = {(trace.names[int(ev.name[r])], int(ev.occ[r])): int(r) for r in mine}
            if len(index) != len(mine) or len(nodes) != len(mine):
                continue
            keys = [_node_key(n) for n in nodes]
            if any(k not in index for k in keys):
                continue
            to_row = {n: index[k] for n, k in zip(nodes, keys, strict=True)}
            pairs = [(to_row[u], to_row[v]) for u, v in dag.edges if u in to_row and v in to_row]
            if any(ev.ts_us[u] > ev.ts_us[v] + tol for u, v in pairs):
                continue
            used.append((int(rank), int(step)))
            rowset = np.zeros(len(ev), dtype=bool)
            rowset[mine] = True
            drop |= rowset[src] & rowset[dst] & (kind != EDGE_STEP) & (kind != EDGE_WAIT)
            new_src += [u for u, _ in pairs]
            new_dst += [v for _, v in pairs]
    if not used:
        return src, dst, kind, used
    src = np.concatenate([src[~drop], np.asarray(new_src, np.int64)])
    dst = np.concatenate([dst[~drop], np.asarray(new_dst, np.int64)])
    kind = np.concatenate([kind[~drop], np.full(len(new_src), EDGE_DAG, np.int8)])
    return src, dst, kind, used


# --------------------------------------------------------------------------- matching
def match_instances(trace: Trace, comm: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(instance of each row of ``comm``, instance is p2p, instance has every member) for
    the ``Comm`` rows ``comm``: collectives matched across ranks by (group, seq), send/recv
    by (src, dst, seq) (see the module doc)."""
    inst, p2p, complete, _ = _match(trace, comm)
    return inst, p2p, complete


def _match(trace: Trace, comm: np.ndarray,
           ) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[dict[str, Any]]]:
    """Group Comm rows into instances: collectives by (group, seq), p2p by (src, dst, seq).

    A missing ``seq`` (-1) falls back to the occurrence order of that rank's events of the
    same group (collectives) or peer (p2p).
    """
    ev = trace.events
    n = comm.shape[0]
    if n == 0:
        z = np.zeros(0, np.int64)
        return z, np.zeros(0, bool), np.zeros(0, bool), []
    rank = ev.rank[comm].astype(np.int64)
    coll = ev.coll[comm].astype(np.int64)
    p2p = (coll == _SEND) | (coll == _RECV)
    peer = ev.peer[comm].astype(np.int64)
    a = np.where(p2p, np.where(coll == _SEND, rank, peer), ev.group[comm].astype(np.int64))
    b = np.where(p2p, np.where(coll == _SEND, peer, rank), -1)
    seq = ev.seq[comm].astype(np.int64)
    no_seq = seq < 0
    if no_seq.any():  # occurrence number within (rank, p2p, a, b) in time order
        key = np.stack([rank, p2p.astype(np.int64), a, b], axis=1)[no_seq]
        _, inv = np.unique(key, axis=0, return_inverse=True)
        inv = inv.reshape(-1)
        order = np.argsort(inv, kind="stable")
        counts = np.bincount(inv)
        starts = np.repeat(np.cumsum(counts) - counts, counts)
        occ = np.empty_like(inv)
        occ[order] = np.arange(inv.shape[0]) - starts
        seq = seq.copy()
        seq[no_seq] = occ
    keys = np.stack([p2p.astype(np.int64), a, b, seq, no_seq.astype(np.int64)], axis=1)
    _, inst = np.unique(keys, axis=0, return_inverse=True)
    inst = inst.reshape(-1).astype(np.int64)
    # A rank appearing twice in one instance (a broken seq): later copies become their own.
    pair = inst * (int(rank.max()) + 1) + rank
    _, first_idx, pinv = np.unique(pair, return_index=True, return_inverse=True)
    dup = first_idx[pinv.reshape(-1)] != np.arange(n)
    if dup.any():
        inst = inst.copy()
        inst[dup] = inst.max() + 1 + np.arange(int(dup.sum()))
        _, inst = np.unique(inst, return_inverse=True)
        inst = inst.reshape(-1).astype(np.int64)
    n_inst = int(inst.max()) + 1
    inst_p2p = np.zeros(n_inst, dtype=bool)
    inst_p2p[inst] = p2p
    count = np.bincount(inst, minlength=n_inst)
    expected = np.zeros(n_inst, dtype=np.int64)
    traced = set(trace.ranks) | {int(r) for r in np.unique(ev.rank)}
    grp = ev.group[comm]
    exp_member = np.where(p2p, np.where(np.isin(peer, list(traced)), 2, 1), 0)
    group_size = np.asarray(
        [len(set(g) & traced) for g in trace.groups] + [1], dtype=np.int64)
    exp_member = np.where(p2p, exp_member, group_size[np.where(grp >= 0, grp, -1)])
    np.maximum.at(expected, inst, exp_member)
    complete = count >= expected
    unmatched = _describe_unmatched(trace, comm, inst, complete)
    return inst, inst_p2p, complete, unmatched


def _describe_unmatched(trace: Trace, comm: np.ndarray, inst: np.ndarray,
                        complete: np.ndarray) -> list[dict[str, Any]]:
    ev = trace.events
    traced = set(trace.ranks) | {int(r) for r in np.unique(ev.rank)}
    out: list[dict[str, Any]] = []
    for i in np.flatnonzero(~complete)[:_MAX_REPORTED]:
        members = comm[inst == i]
        r0 = int(members[0])
        present = sorted(int(ev.rank[m]) for m in members)
        coll = trace.collective_of(r0)
        if coll in ("send", "recv"):
            want = sorted({int(ev.rank[r0]), int(ev.peer[r0])})
        else:
            want = sorted(trace.group_of(r0) or present)
        out.append({
            "name": trace.name_of(r0), "collective": coll, "step": int(ev.step[r0]),
            "seq": int(ev.seq[r0]), "ranks_present": present,
            "ranks_missing": [r for r in want if r not in present and r in traced],
        })
    return out


# --------------------------------------------------------------------------- networkx
def _node_name(trace: Trace, row: int) -> str:
    ev = trace.events
    return node_id(trace.names[int(ev.name[row])], int(ev.occ[row]))


def rank_dag(trace: Trace, rank: int, step: int) -> nx.DiGraph:
    """One rank's step as ``dag.gml`` holds it (node ids ``name`` / ``name#occ``,
    attributes ``cat``, ``dur_us``, ``step``; the sink ``NEXT_STEP`` after the last UPDATE
    and after every node left without a successor): the writer's
    :func:`echo_trace.dag.step_dag` and this function apply the same rules."""
    if rank not in trace.ranks and not (trace.events.rank == rank).any():
        raise ConfigError(f"rank {rank} is not in the trace; ranks: {sorted(trace.ranks)}")
    deps = build_deps(trace, [step], use_dags=False)
    ev = trace.events
    g = nx.DiGraph()
    mine = [int(r) for r in np.concatenate([deps.compute, deps.comm]) if ev.rank[r] == rank]
    for r in sorted(mine, key=lambda r: ev.ts_us[r]):
        g.add_node(_node_name(trace, r), cat=CAT_NAMES[int(ev.cat[r])],
                   dur_us=float(ev.dur_us[r]), step=int(step))
    for u, v in zip(deps.src.tolist(), deps.dst.tolist(), strict=True):
        if ev.rank[u] == rank and ev.rank[v] == rank:
            g.add_edge(_node_name(trace, u), _node_name(trace, v))
    g.add_node(NEXT_STEP, cat=SINK_CAT, dur_us=0.0, step=int(step))
    upd = [r for r in mine if ev.cat[r] == Cat.UPDATE]
    if upd:
        g.add_edge(_node_name(trace, max(upd, key=lambda r: ev.ts_us[r])), NEXT_STEP)
    for n in list(g.nodes):
        if n != NEXT_STEP and g.out_degree(n) == 0:
            g.add_edge(n, NEXT_STEP)
    return g


def global_graph(trace: Trace, steps: Sequence[int] | None = None, *,
                 wait_edges: bool = False, deps: Deps | None = None) -> nx.DiGraph:
    """The multi-rank dependency graph: one node per leaf compute event and one per
    collective / send-recv instance (attributes ``rank`` (-1 for several), ``ranks``,
    ``name``, ``cat``, ``dur_us``, ``ts_us``, ``step``; an instance's ``dur_us`` is the
    shortest member duration, its ``ts_us`` the last member's issue time).
    Edges carry ``kind`` (:data:`EDGE_KINDS`) and ``cross_rank``."""
    if deps is None:
        deps = build_deps(trace, steps, wait_edges=wait_edges)
    ev = trace.events
    g = nx.DiGraph()
    row_node: dict[int, str] = {}
    for r in deps.compute.tolist():
        rank, step = int(ev.rank[r]), int(ev.step[r])
        nid = f"r{rank}/s{step}/{_node_name(trace, r)}"
        if nid in g:  # two events with one (rank, step, name, occ): a broken trace
            nid = f"{nid}~row{r}"
        row_node[r] = nid
        g.add_node(nid, rank=rank, ranks=[rank], name=trace.names[int(ev.name[r])],
                   cat=CAT_NAMES[int(ev.cat[r])], dur_us=float(ev.dur_us[r]),
                   ts_us=float(ev.ts_us[r]), step=step)
    members: dict[int, list[int]] = {}
    for r, i in zip(deps.comm.tolist(), deps.comm_inst.tolist(), strict=True):
        members.setdefault(i, []).append(r)
    for i, rows in members.items():
        ranks = sorted(int(ev.rank[r]) for r in rows)
        r0 = rows[0]
        step = int(ev.step[r0])
        nid = f"r{','.join(map(str, ranks))}/s{step}/{_node_name(trace, r0)}"
        if nid in g:
            nid = f"{nid}~{i}"
        for r in rows:
            row_node[r] = nid
        g.add_node(nid, rank=ranks[0] if len(ranks) == 1 else -1, ranks=ranks,
                   name=trace.names[int(ev.name[r0])], cat="Comm",
                   dur_us=float(min(ev.dur_us[r] for r in rows)),
                   ts_us=float(max(ev.ts_us[r] for r in rows)), step=step,
                   collective=trace.collective_of(r0) or "",
                   complete=bool(deps.inst_complete[i]))
    for u, v, k in zip(deps.src.tolist(), deps.dst.tolist(), deps.kind.tolist(), strict=True):
        a, b = row_node[u], row_node[v]
        if a == b:
            continue
        cross = set(g.nodes[a]["ranks"]) != set(g.nodes[b]["ranks"])
        g.add_edge(a, b, kind=EDGE_KINDS[k], cross_rank=cross)
    return g
