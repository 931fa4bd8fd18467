"""``combine PATH``: every rank in one Perfetto-loadable trace (dPRO's combine)."""

from __future__ import annotations

from typing import Any

from echo_sim.analysis.combine import combine, default_output, parse_filter
from echo_sim.commands.spec import Command, Result, arg

__all__ = ["COMMAND"]

DESCRIPTION = """\
Merge the ranks of a trace into one Chrome Trace Event file that Perfetto
(ui.perfetto.dev) and chrome://tracing open: one process per rank ("rank N (host)"),
threads compute / steps / comm k, timestamps in microseconds on the clock aligned across
ranks at capture.

--filter keeps only the named communication operations (compute and step slices are
always kept): comma-separated event names (Comm.bucket0), names without the Comm. prefix,
or collective types (all_reduce); shell globs work (Comm.layer*).

The output defaults to combined.json inside the trace directory (beside a trace file);
a name ending in .gz is gzipped. An existing file is never replaced without --force.
"""


def run(opts: Any) -> Result:
    from echo_sim.load import load_trace

    path = opts.paths[0]
    trace = load_trace(path)
    out = opts.output or default_output(path)
    res = combine(trace, out, filter=parse_filter(opts.filter), overwrite=opts.force)
    text = (f"wrote {res.path}: {res.num_events:,} slices from {res.num_ranks} rank(s)"
            + (f"; communication kept {res.num_comm_kept:,}, dropped {res.num_comm_dropped:,}"
               if opts.filter else "")
            + "\nopen it at https://ui.perfetto.dev")
    data = res.to_dict()
    data["source"] = path
    return Result(text, data)


COMMAND = Command(
    name="combine",
    help="merge all ranks into one trace for Perfetto / chrome://tracing",
    description=DESCRIPTION,
    run=run,
    args=(
        arg("--filter", metavar="NAMES",
            help="keep only these communication ops: comma-separated names, collective "
                 "types or globs"),
        arg("--output", "-o", metavar="FILE",
            help="output file (default: combined.json next to the input; .gz compresses)"),
        arg("--force", action="store_true", help="replace the output file if it exists"),
    ),
    epilog="example: python -m echo_sim combine traces/ --filter all_reduce -o all.json.gz",
)
