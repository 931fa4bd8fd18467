"""Per-rank operator statistics re-derived from a trace's source files, in dPRO's ``name2sta``
form (what ``--option collect --sub_option operator``, "update operator traces based on the
source files", refreshes).

For every rank and every operator (event name, ``STEP`` markers left out) over the captured
steps, durations in µs: ``cnt`` occurrences, ``time`` = Σ dur, ``avg`` = time / cnt,
``var`` = Σ (dur − avg)² / cnt (population variance, µs²), ``min``, ``max``; and the
operator's category. Files, one directory per rank (``<node_rank>_<local_rank>/``, as the
trace's own) plus the whole job:

* ``<rank dir>/name2sta.json``: ``{"rank": r, "steps": [...], "name2sta": {op: {...}}}``;
* ``name2sta.json``: the same over every rank (``"ranks": [...]``).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from echo_sim.errors import ConfigError
from echo_sim.trace.model import CAT_NAMES, Cat, Trace
from echo_sim.trace.outfiles import output_tree

__all__ = ["NAME2STA_FILE", "OpStat", "op_stats", "write_op_stats"]

NAME2STA_FILE = "name2sta.json"


@dataclass(frozen=True)
class OpStat:
    """One operator's durations (µs; ``var`` in µs²), dPRO's ``name2sta`` entry."""

    cat: str
    cnt: int
    time: float
    avg: float
    var: float
    min: float
    max: float


def op_stats(trace: Trace, ranks: list[int] | None = None) -> dict[str, OpStat]:
    """``name2sta`` of ``ranks`` (all by default) over the captured steps."""
    ev = trace.events
    keep = np.isin(ev.step, np.asarray(trace.steps, dtype=np.int64)) & (ev.cat != Cat.STEP)
    if ranks is not None:
        keep &= np.isin(ev.rank, np.asarray(ranks, dtype=np.int64))
    rows = np.flatnonzero(keep)
    names = ev.name[rows].astype(np.int64)
    dur = ev.dur_us[rows]
    out: dict[str, OpStat] = {}
    order = np.argsort(names, kind="stable")
    ids, starts = np.unique(names[order], return_index=True)
    for i, part in zip(ids.tolist(), np.split(order, starts[1:]), strict=True):
        d = dur[part]
        avg = float(d.mean())
        out[trace.names[i]] = OpStat(cat=CAT_NAMES[int(ev.cat[rows[part[0]]])], cnt=int(d.size),
                                     time=float(d.sum()), avg=avg,
                                     var=float(((d - avg) ** 2).mean()), min=float(d.min()),
                                     max=float(d.max()))
    return dict(sorted(out.items()))


def _doc(stats: dict[str, OpStat], head: dict[str, Any]) -> bytes:
    body = {**head, "units": "us (var: us^2)",
            "name2sta": {k: asdict(v) for k, v in stats.items()}}
    return json.dumps(body, indent=1).encode()


def write_op_stats(trace: Trace, out_dir: str | Path, *, overwrite: bool = False) -> list[Path]:
    """Write the files of the module doc under ``out_dir`` (made when absent; nothing
    replaced unless ``overwrite``); returns the per-rank files."""
    ranks = sorted(int(r) for r in np.unique(trace.events.rank))
    if not ranks or not trace.steps:
        raise ConfigError(f"trace {trace.source or '(in memory)'} has no captured steps; "
                          "no operator statistics to write")
    dirs = {r: (f"{trace.ranks[r].node_rank}_{trace.ranks[r].local_rank}"
                if r in trace.ranks else f"0_{r}") for r in ranks}
    if len(set(dirs.values())) != len(dirs):
        dirs = {r: f"0_{r}" for r in ranks}
    files = [f"{dirs[r]}/{NAME2STA_FILE}" for r in ranks]
    with output_tree(Path(out_dir), overwrite=overwrite) as tree:
        for f in [*files, NAME2STA_FILE]:
            tree.check(f)
        for r, f in zip(ranks, files, strict=True):
            tree.write(f, _doc(op_stats(trace, [r]), {"rank": r, "steps": trace.steps,
                                                      "source": trace.source}))
        tree.write(NAME2STA_FILE, _doc(op_stats(trace), {"ranks": ranks, "steps": trace.steps,
                                                         "source": trace.source}))
    return [Path(out_dir) / f for f in files]
