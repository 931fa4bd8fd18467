"""``convert PATH --to DIR``: any trace echo reads, written once as the columnar store."""

from __future__ import annotations

from typing import Any

from echo_sim.commands.checks import int_in
from echo_sim.commands.engine_args import workers_arg
from echo_sim.commands.outputs import check_output_dir, flag_errors
from echo_sim.commands.spec import Command, Result, arg

__all__ = ["COMMAND", "run"]

DESCRIPTION = """\
Write a trace (echo, Kineto, ByteProfile/dPRO, TrioSim, Aceso) once as a columnar store: a
directory of Parquet files (events with typed columns and interned names, counters, comm
args, DAG nodes and edges, one file per rank group) and store.json. Every command takes the
store as PATH and reads it in a fraction of the JSON's time; statistic, collect and
stragglers run on a big store out of core (--engine duckdb: memory bounded by a rank group,
not the trace).

echo rank directories are converted streaming: one rank at a time per worker process
(--workers N, or ray), a part file written every --rows-per-part events, so memory stays
bounded whatever the number of ranks. Other formats are loaded whole first. Progress goes
to stderr (a bar on a terminal, a line every few seconds otherwise). Needs pyarrow
(pip install 'echo-sim[store]').
"""


def run(opts: Any) -> Result:
    from echo_sim.store.convert import convert

    check_output_dir("--to", opts.to)  # before the work
    with flag_errors("--to", opts.to):
        s = convert(opts.paths[0], opts.to, overwrite=opts.force, workers=opts.workers,
                    rows_per_part=opts.rows_per_part)
    text = (f"wrote a store of {s.events:,} events, {s.ranks} rank(s) in {s.parts} part(s) "
            f"under {opts.to} (from {s.store.source_format} {opts.paths[0]}; steps "
            f"{s.store.steps})")
    text = "\n".join([text, *s.store.notes])
    return Result(text, s.to_dict())


COMMAND = Command(
    name="convert",
    help="write a trace once as a columnar Parquet store (fast repeated and out-of-core "
         "analysis)",
    description=DESCRIPTION,
    run=run,
    args=(
        arg("--to", metavar="DIR", required=True,
            help="store directory to write (made when absent; its parent must exist)"),
        arg("--workers", type=workers_arg, default=None, metavar="N|ray",
            help="processes parsing echo ranks (default: one per core, at most 8, for 8 "
                 "ranks or more), or 'ray' for Ray tasks"),
        arg("--rows-per-part", type=int_in(1, 2**40), default=1_000_000, metavar="N",
            help="events per part file, the unit out-of-core analysis holds in memory "
                 "(default 1000000)"),
        arg("--force", action="store_true", help="replace files that exist in --to"),
    ),
    epilog="example: python -m echo_sim convert traces/ --to traces.store && "
           "python -m echo_sim collect traces.store",
)
