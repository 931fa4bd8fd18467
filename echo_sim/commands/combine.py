"""``combine PATH [PATH ...]``: every rank in one Perfetto-loadable trace (dPRO's combine)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from echo_sim.analysis.combine import (
    combine,
    default_output,
    parse_filter,
    perfetto_subset,
    select_rows,
    take_ranks,
)
from echo_sim.commands.checks import select_ranks, select_steps
from echo_sim.commands.outputs import check_output, flag_errors
from echo_sim.commands.spec import Command, Result, arg

__all__ = ["COMMAND"]

DESCRIPTION = """\
Merge the ranks of a trace into one Chrome Trace Event file that Perfetto
(ui.perfetto.dev) and chrome://tracing open: one process per rank ("rank N (host)"),
threads compute / steps / comm k, timestamps in microseconds on the clock aligned across
ranks at capture.

Several PATHs (dPRO's `--path a,b`) put several runs side by side in one file: run i's
rank r is process i*1000000 + r, named "<PATH>: rank r".

--filter keeps only the named communication operations (compute and step slices are
always kept): comma-separated event names (Comm.bucket0), names without the Comm. prefix,
or collective types (all_reduce); shell globs work (Comm.layer*).

A trace whose file would pass ~500 MB of JSON (Perfetto's UI fails near 1 GB) is cut to
what opens, and the command says so: its first captured step, then as many of its lowest
ranks as fit; --step and --ranks choose the subset, --all writes everything.

The output defaults to combined.json inside the trace directory (beside a trace file;
combined_N_runs.json beside the first of N runs); a name ending in .gz is gzipped. An
existing file is replaced only with --force, and never when it is not a regular file.
"""


def _several(opts: Any, out: Path) -> Result:
    from echo_sim.load import load_trace
    from echo_sim.trace.export import chrome_events, side_by_side, write_chrome

    patterns = parse_filter(opts.filter)
    runs: list[tuple[str, list[dict]]] = []
    total = 0
    for path in opts.paths:
        trace = load_trace(path)
        rows = select_rows(trace, patterns)
        total += int(rows.size)
        runs.append((path, chrome_events(trace, rows=rows if patterns else None)))
    with flag_errors("--output", out):
        p = write_chrome(out, side_by_side(runs), overwrite=opts.force,
                         other_data={"format": "echo-combined/1", "runs": list(opts.paths),
                                     "filter": patterns})
    text = (f"wrote {p}: {total:,} slices from {len(runs)} runs side by side\n"
            "open it at https://ui.perfetto.dev")
    return Result(text, {"output": str(p), "num_events": total, "runs": list(opts.paths)})


def run(opts: Any) -> Result:
    from echo_sim.load import load_trace

    path = opts.paths[0]
    many = len(opts.paths) > 1
    out = Path(opts.output) if opts.output else default_output(path)
    if many and not opts.output:
        out = out.with_name(f"combined_{len(opts.paths)}_runs.json")
    check_output("--output", out, force=opts.force)  # before the (slow) load
    if many:
        return _several(opts, out)
    trace = load_trace(path)
    steps = select_steps(opts.step, trace.steps)
    ranks = select_ranks(opts.ranks, sorted(trace.ranks) or
                         np.unique(trace.events.rank).tolist(), "--ranks")
    if steps is not None:
        trace.keep_steps(steps)
    if ranks is not None:
        trace = take_ranks(trace, ranks)
    note = ""
    if steps is None and ranks is None and not opts.all:
        trace, note = perfetto_subset(trace)
    with flag_errors("--output", out):
        res = combine(trace, out, filter=parse_filter(opts.filter), overwrite=opts.force)
    text = ((note + "\n" if note else "")
            + f"wrote {res.path}: {res.num_events:,} slices from {res.num_ranks} rank(s)"
            + (f"; communication kept {res.num_comm_kept:,}, dropped {res.num_comm_dropped:,}"
               if opts.filter else "")
            + "\nopen it at https://ui.perfetto.dev")
    data = res.to_dict()
    data["source"] = path
    if note:
        data["subset"] = note
    return Result(text, data)


COMMAND = Command(
    name="combine",
    help="merge all ranks (of one or several runs) into one trace for Perfetto",
    description=DESCRIPTION,
    run=run,
    paths=-1,
    args=(
        arg("--filter", metavar="NAMES",
            help="keep only these communication ops: comma-separated names, collective "
                 "types or globs"),
        arg("--output", "-o", metavar="FILE",
            help="output file (default: combined.json next to the input; .gz compresses)"),
        arg("--force", action="store_true", help="replace the output file if it exists"),
        arg("--step", metavar="STEPS",
            help="write only these captured steps, e.g. 3 or 2,4-6 (one run)"),
        arg("--ranks", metavar="RANKS", help="write only these ranks, e.g. 0-7,64 (one run)"),
        arg("--all", action="store_true",
            help="write every rank and step even past what Perfetto opens (~500 MB)"),
    ),
    epilog="example: python -m echo_sim combine traces/ --filter all_reduce -o all.json.gz",
)
