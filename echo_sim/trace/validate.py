"""Trace validation as a list of rules, shared by the loaders and ``echo_sim validate``.

Each rule is ``check_*(trace) -> list[Violation]``. ``check_meta`` cross-checks meta.json
against trace.json (an interrupted overwrite leaves a new trace next to the old meta: rank,
world size, clock base and steps then disagree); ``check_notes`` reports the loader's notes. Errors make a trace unusable (the
loader raises on them); warnings describe traces every analysis can still read (a rank
missing from a partial copy, Perfetto-hostile overlapping slices, Comm events a foreign
format leaves without sizes). Rules are vectorised over the event columns, so validating
10^6 events takes well under a second; each rule reports at most ``MAX_EXAMPLES``
individual violations and then one summary line.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from echo_sim.errors import TraceFormatError, TraceMismatchError
from echo_sim.trace.model import COLLECTIVES, Cat, Trace
from echo_sim.trace.steps import ranges

__all__ = [
    "ALL_RULES",
    "FATAL_RULES",
    "MAX_EXAMPLES",
    "MAX_TIME_US",
    "Rule",
    "Violation",
    "check_collective_matching",
    "check_comm_fields",
    "check_dags",
    "check_events",
    "check_gradient_comm_order",
    "check_meta",
    "check_notes",
    "check_overlaps",
    "check_ranks",
    "check_steps",
    "check_times",
    "common_steps",
    "raise_fatal",
    "validate",
]

MAX_EXAMPLES = 5
MAX_TIME_US = float(1 << 53)
"""Largest |timestamp| and duration accepted (2^53 µs, ~285 years): past it float64 cannot
hold a microsecond, and the sums replay makes overflow (``ts: 1e308`` printed -1,531 ms)."""


def _tolerance_us(ts: np.ndarray) -> float:
    """Slack (us) for "touching" slices: files carry 3 decimals, but Unix-epoch microseconds
    (~1.8e15) in float64 are exact only to 0.25 us, so allow 4 ulps of the largest time
    (the same rule as :func:`echo_sim.trace.graph.time_tolerance_us`)."""
    finite = ts[np.isfinite(ts)]
    big = float(np.abs(finite).max()) if finite.size else 0.0
    return 0.01 + 4.0 * float(np.spacing(big))


@dataclass(frozen=True)
class Violation:
    """One broken rule. ``severity`` is ``"error"`` (unusable trace) or ``"warning"``."""

    rule: str
    severity: str
    message: str
    rank: int | None = None
    row: int | None = None

    @property
    def fatal(self) -> bool:
        return self.severity == "error"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


Rule = Callable[[Trace], list[Violation]]


def _capped(rule: str, severity: str, items: Sequence[tuple[str, int | None, int | None]],
            ) -> list[Violation]:
    out = [Violation(rule, severity, m, r, row) for m, r, row in items[:MAX_EXAMPLES]]
    if len(items) > MAX_EXAMPLES:
        out.append(Violation(rule, severity, f"... and {len(items) - MAX_EXAMPLES} more"))
    return out


def _label(trace: Trace, row: int) -> str:
    ev = trace.events
    return (f"rank {int(ev.rank[row])} {trace.name_of(row)} "
            f"(step {int(ev.step[row])}, ts {float(ev.ts_us[row]):.3f} us)")


# ---------------------------------------------------------------------------- rules
def check_times(trace: Trace) -> list[Violation]:
    """Every event has a finite start and a finite, non-negative duration, both within
    :data:`MAX_TIME_US` (error)."""
    ev = trace.events
    bad_ts = (~np.isfinite(ev.ts_us) | ~np.isfinite(ev.dur_us)
              | (np.abs(ev.ts_us) > MAX_TIME_US) | (ev.dur_us > MAX_TIME_US))
    neg = np.isfinite(ev.dur_us) & (ev.dur_us < 0)
    finite = np.isfinite(ev.ts_us) & np.isfinite(ev.dur_us)
    items = [(f"{_label(trace, int(r))}: " + (
        f"time out of range (ts {float(ev.ts_us[r])!r}, dur {float(ev.dur_us[r])!r} us; "
        f"limit {MAX_TIME_US:.0f})" if finite[r] else "non-finite time"), int(ev.rank[r]), int(r))
             for r in np.flatnonzero(bad_ts)[: MAX_EXAMPLES + 1]]
    items += [(f"{_label(trace, int(r))}: negative duration {float(ev.dur_us[r]):.3f} us",
               int(ev.rank[r]), int(r)) for r in np.flatnonzero(neg & ~bad_ts)[: MAX_EXAMPLES + 1]]
    total = int((bad_ts | neg).sum())
    out = _capped("times", "error", items[:MAX_EXAMPLES])
    if total > MAX_EXAMPLES:
        out.append(Violation("times", "error", f"... and {total - MAX_EXAMPLES} more"))
    return out


def check_overlaps(trace: Trace) -> list[Violation]:
    """Slices on one (rank, tid) track nest or follow each other; no partial overlap (warning).

    An event partially overlaps an earlier one when it starts before the latest end seen so
    far on its track and ends after it (Perfetto drops such slices).
    """
    ev = trace.events
    n = len(ev)
    if n < 2:
        return []
    order = np.lexsort((-ev.dur_us, ev.ts_us, ev.tid, ev.rank))
    rank, tid = ev.rank[order], ev.tid[order]
    t0 = float(np.nanmin(ev.ts_us[order]))
    ts, end = ev.ts_us[order] - t0, ev.end_us[order] - t0  # relative: keeps precision
    new_track = np.ones(order.size, dtype=bool)
    new_track[1:] = (rank[1:] != rank[:-1]) | (tid[1:] != tid[:-1])
    # running max of end within each track: lift each track above the previous one so
    # one cumulative max over all rows never crosses a track boundary
    lift = (np.cumsum(new_track) - 1) * (float(np.nanmax(np.abs(end))) * 2 + 1.0)
    prev = np.empty(order.size)
    prev[1:] = (np.maximum.accumulate(end + lift) - lift)[:-1]
    prev[new_track] = -np.inf
    eps = _tolerance_us(ev.ts_us)
    bad = (ts < prev - eps) & (end > prev + eps)
    rows = order[np.flatnonzero(bad)]
    items = [(f"{_label(trace, int(r))} partially overlaps an earlier slice on track "
              f"tid {int(ev.tid[r])}", int(ev.rank[r]), int(r)) for r in rows[:MAX_EXAMPLES]]
    out = _capped("overlaps", "warning", items)
    if rows.size > MAX_EXAMPLES:
        out.append(Violation("overlaps", "warning", f"... and {rows.size - MAX_EXAMPLES} more"))
    return out


def common_steps(step_sets: Mapping[int, Iterable[int]], source: str = "") -> list[int]:
    """The steps every rank captured; TraceMismatchError naming the ranks when they differ."""
    sets = {r: frozenset(s) for r, s in step_sets.items()}
    if not sets:
        return []
    distinct = sorted(set(sets.values()), key=lambda s: min(r for r, v in sets.items() if v == s))
    if len(distinct) > 1:
        groups = []
        for s in distinct:
            ranks = sorted(r for r, v in sets.items() if v == s)
            groups.append(f"ranks {ranges(ranks)} have steps {ranges(sorted(s)) or 'none'}")
        where = f"{source}: " if source else ""
        raise TraceMismatchError(f"{where}ranks captured different steps: {'; '.join(groups)}")
    return sorted(distinct[0])


def check_events(trace: Trace) -> list[Violation]:
    """Every rank holds events (error): a rank with none loads, and is then refused by every
    analysis."""
    ev = trace.events
    counts = np.bincount(ev.rank[ev.rank >= 0], minlength=max(trace.ranks, default=-1) + 1) \
        if ev.rank.size else np.zeros(0, np.int64)
    empty = sorted(r for r in trace.ranks if r >= counts.size or counts[r] == 0)
    if empty:
        return [Violation("events", "error", f"rank(s) {ranges(empty)} hold no events: "
                          "nothing to analyse (the capture window never opened there, or "
                          "the trace was cut before its first step)")]
    return []


def check_steps(trace: Trace) -> list[Violation]:
    """Every rank holds events of the same steps (error)."""
    ev = trace.events
    sets = {r: set() for r in trace.ranks}  # type: dict[int, set[int]]
    keep = ev.step >= 0
    # one int64 key per (rank, step): np.unique on 1-D keys is ~10x faster than axis=1
    keys = np.unique((ev.rank[keep].astype(np.int64) << 32) | ev.step[keep].astype(np.int64))
    for r, s in zip((keys >> 32).tolist(), (keys & 0xFFFFFFFF).tolist(), strict=True):
        sets.setdefault(int(r), set()).add(int(s))
    try:
        common_steps(sets)
    except TraceMismatchError as e:
        return [Violation("steps", "error", str(e))]
    return []


def check_ranks(trace: Trace) -> list[Violation]:
    """Ranks 0..world_size-1 are all present (warning: a partial copy is still readable).

    Works on the gaps between present ranks, never on ``range(world_size)``: a corrupt
    world size costs nothing.
    """
    world = trace.world_size
    present = sorted(r for r in trace.ranks if 0 <= r < world)
    extra = sorted(r for r in trace.ranks if r >= world)
    gaps: list[str] = []
    n_missing = world - len(present)
    prev = -1
    for r in present + [world]:
        if r > prev + 1 and len(gaps) < 8:
            gaps.append(str(prev + 1) if r == prev + 2 else f"{prev + 1}-{r - 1}")
        prev = r
    out = []
    if n_missing > 0:
        more = f",... ({n_missing} in all)" if len(gaps) == 8 else ""
        out.append(Violation("ranks", "warning", f"world size {world} but ranks "
                             f"{','.join(gaps)}{more} are missing"))
    if extra:
        out.append(Violation("ranks", "warning", f"ranks {ranges(extra)} >= world size {world}"))
    return out


def check_comm_fields(trace: Trace) -> list[Violation]:
    """Comm events carry a collective type, a byte count and a group (warning), per name."""
    ev = trace.events
    comm = trace.comm_rows()
    out: list[tuple[str, int | None, int | None]] = []
    for field, bad in (
        ("collective", ev.coll[comm] < 0),
        ("bytes", (ev.nbytes[comm] <= 0) & (ev.coll[comm] != COLLECTIVES.index("barrier"))),
        ("group", ev.group[comm] < 0),
    ):
        rows = comm[bad]
        if rows.size == 0:
            continue
        names = sorted({trace.names[i] for i in np.unique(ev.name[rows])})
        shown = ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")
        out.append((f"{rows.size} Comm events lack '{field}' ({shown})", None, int(rows[0])))
    return [Violation("comm_fields", "warning", m, r, row) for m, r, row in out]


def check_collective_matching(trace: Trace) -> list[Violation]:
    """Each collective (group, seq) exists on every member rank; send meets recv (warning).

    Members absent from the trace are not required (``check_ranks`` reports them).
    """
    ev = trace.events
    comm = trace.comm_rows()
    comm = comm[(ev.seq[comm] >= 0) & (ev.group[comm] >= 0)]
    present = set(trace.ranks)
    send, recv = COLLECTIVES.index("send"), COLLECTIVES.index("recv")
    seen: dict[tuple[int, int], set[int]] = defaultdict(set)
    first_row: dict[tuple[int, int], int] = {}
    p2p: dict[tuple[int, int, int], list[int]] = defaultdict(list)
    for row, r, g, s, c, p in zip(comm.tolist(), ev.rank[comm].tolist(),
                                  ev.group[comm].tolist(), ev.seq[comm].tolist(),
                                  ev.coll[comm].tolist(), ev.peer[comm].tolist(), strict=True):
        if c in (send, recv):
            src, dst = (r, p) if c == send else (p, r)
            p2p[(src, dst, s)].append(c)
            first_row.setdefault((-1 - src * 65536 - dst, s), row)
            continue
        seen[(g, s)].add(r)
        first_row.setdefault((g, s), row)
    items: list[tuple[str, int | None, int | None]] = []
    for (g, s), ranks in seen.items():
        members = set(trace.groups[g]) & present
        lacking = sorted(members - ranks)
        if lacking:
            row = first_row[(g, s)]
            items.append((f"{trace.name_of(row)} (group {list(trace.groups[g])}, seq {s}) "
                          f"is missing on ranks {ranges(lacking)}", None, row))
    for (src, dst, s), kinds in p2p.items():
        if {src, dst} <= present and (kinds.count(send) != kinds.count(recv)):
            items.append((f"send/recv {src}->{dst} seq {s} has no matching "
                          f"{'recv' if kinds.count(send) > kinds.count(recv) else 'send'}",
                          None, first_row.get((-1 - src * 65536 - dst, s))))
    return _capped("collectives", "warning", items)


def check_dags(trace: Trace) -> list[Violation]:
    """Every per-rank dependency graph is acyclic (error)."""
    import networkx as nx

    out = []
    for rank, g in trace.dags.items():
        if not nx.is_directed_acyclic_graph(g):
            out.append(Violation("dag", "error", f"rank {rank}: dag has a cycle", rank))
    return out


def check_gradient_comm_order(trace: Trace) -> list[Violation]:
    """A gradient collective does not start before the backward producing its first
    gradient (error): a DDP bucket (Comm args ``params``) is checked against the earliest
    ``BW.<module>`` of its parameters' modules in that step, other bucket collectives
    (``bucket`` without ``params``) against the step's first ``BW``. A violation means the
    Comm carries a different clock than the compute (e.g. CPU enqueue times on a GPU trace).
    """
    ev = trace.events
    rows = [r for r in trace.comm_rows().tolist()
            if "params" in trace.comm_args.get(r, {}) or "bucket" in trace.comm_args.get(r, {})]
    if not rows:
        return []
    eps = _tolerance_us(ev.ts_us)
    bw_first: dict[tuple[int, int], dict[str, float]] = {}
    by_step: dict[int, dict[int, np.ndarray]] = {}  # rank -> step -> rows, indexed once
    items: list[tuple[str, int | None, int | None]] = []
    for row in rows:
        key = (int(ev.rank[row]), int(ev.step[row]))
        mods = bw_first.get(key)
        if mods is None:
            mods = bw_first[key] = {}
            if key[0] not in by_step:
                by_step[key[0]] = trace.rows_by_step(key[0])
            for r in by_step[key[0]].get(key[1], np.zeros(0, np.int64)).tolist():
                name = trace.name_of(r)
                if name.startswith("BW."):
                    m = name[3:]
                    mods[m] = min(mods.get(m, float("inf")), float(ev.ts_us[r]))
        if not mods:
            continue
        params = trace.comm_args[row].get("params") or []
        owners = [str(p).rsplit(".", 1)[0] for p in params]
        found = [(mods[o], o) for o in owners if o in mods]
        start, producer = min(found) if found else min((t, m) for m, t in mods.items())
        ts = float(ev.ts_us[row])
        if ts < start - eps:
            items.append((f"{_label(trace, row)} starts {start - ts:.3f} us before BW.{producer}, "
                          f"the backward producing its first gradient", key[0], row))
    return _capped("gradient_comm_order", "error", items)


# ------------------------------------------------------------- meta.json vs trace
_HINT = "meta.json and trace.json come from different runs (an interrupted overwrite?)"


def _markers(trace: Trace) -> dict[int, set[int]]:
    ev = trace.events
    rows = np.flatnonzero((ev.cat == Cat.STEP) & (ev.step >= 0))
    out: dict[int, set[int]] = {}
    for r, s in zip(ev.rank[rows].tolist(), ev.step[rows].tolist(), strict=True):
        out.setdefault(int(r), set()).add(int(s))
    return out


def check_meta(trace: Trace) -> list[Violation]:
    """meta.json agrees with trace.json on rank, world size, clock base and steps (error)."""
    out: list[Violation] = []
    markers = _markers(trace)
    worlds: dict[int, list[int]] = {}
    for rank, info in sorted(trace.ranks.items()):
        meta, file = info.meta, info.file_meta
        if not meta or meta.get("format") not in (None, "echo-trace/1"):
            continue
        for key_meta, key_file in (("rank", "rank"), ("world_size", "world_size"),
                                   ("base_time_ns", "baseTimeNanoseconds")):
            if key_meta in meta and key_file in file and meta[key_meta] != file[key_file]:
                out.append(Violation(
                    "meta", "error", f"rank {rank}: meta.json {key_meta} {meta[key_meta]!r} "
                    f"!= trace.json {key_file} {file[key_file]!r}: {_HINT}", rank))
        if type(meta.get("world_size")) is int:
            worlds.setdefault(meta["world_size"], []).append(rank)
        claimed = meta.get("steps")
        # the file's own STEP markers as read (before a crash trace's steps were cut)
        seen = set(file.get("step_markers", markers.get(rank, ())))
        if isinstance(claimed, list) and seen:
            extra = sorted(seen - set(claimed) - set(meta.get("partial_steps") or ()))
            missing = sorted(set(claimed) - seen)
            if extra or missing:
                what = "; ".join(
                    ([f"trace.json has steps {ranges(extra)} meta.json does not list"]
                     if extra else [])
                    + ([f"meta.json lists steps {ranges(missing)} trace.json lacks"]
                       if missing else []))
                out.append(Violation("meta", "error", f"rank {rank}: {what}: {_HINT}", rank))
    if len(worlds) > 1:
        shown = "; ".join(f"{w} on ranks {ranges(sorted(r))}" for w, r in sorted(worlds.items()))
        out.append(Violation("meta", "error", f"meta.json world_size differs across ranks: "
                                              f"{shown}"))
    return out


def check_notes(trace: Trace) -> list[Violation]:
    """What the loader warned about while reading (warning)."""
    return [Violation("load", "warning", note) for note in trace.notes]


ALL_RULES: tuple[Rule, ...] = (
    check_times, check_steps, check_dags, check_events, check_meta, check_ranks, check_overlaps,
    check_comm_fields, check_collective_matching, check_gradient_comm_order, check_notes,
)
FATAL_RULES: tuple[Rule, ...] = (check_times, check_steps, check_dags)
"""The rules whose errors the loader raises on (cheap, vectorised)."""


def validate(trace: Trace, rules: Sequence[Rule] = ALL_RULES) -> list[Violation]:
    """All violations of ``rules`` in ``trace``, errors first."""
    out: list[Violation] = []
    for rule in rules:
        out.extend(rule(trace))
    return sorted(out, key=lambda v: not v.fatal)


def raise_fatal(violations: Sequence[Violation], source: str) -> None:
    """Raise the EchoError for the first fatal violation (one line naming ``source``)."""
    fatal = [v for v in violations if v.fatal]
    if not fatal:
        return
    v = fatal[0]
    more = f" (+{len(fatal) - 1} more errors)" if len(fatal) > 1 else ""
    msg = v.message if v.message.startswith(source) else f"{source}: {v.message}"
    if v.rule == "steps":
        raise TraceMismatchError(msg + more)
    raise TraceFormatError(msg + more)
