"""``critical PATH``: the critical path of one iteration across all ranks."""

from __future__ import annotations

from typing import Any

from echo_sim.commands.checks import MAX_STEP, int_in
from echo_sim.commands.outputs import check_output, flag_errors
from echo_sim.commands.spec import Command, Result, arg

__all__ = ["COMMAND"]

DESCRIPTION = """\
Critical path of one iteration through the global multi-rank dependency graph.

The step is replayed with the measured durations (see `replay`) and the path is read
back from the task that ends last: each task links to the dependency that made it ready
or, when it waited for a busy stream or channel, to the task holding it. A collective is
one task across its members, so the path crosses ranks where a straggler delays the
others.

Printed: the time (ms) and share of each category on the path — FW, BW, Comm, UPDATE and
host delay (measured gaps before ops that dependencies do not explain) — then the path as
runs of consecutive segments. --json lists every segment (microseconds from path start).
--output writes the replayed timeline as a Chrome trace for Perfetto: the path on its own
"critical path" track (first), flow arrows through its slices on the rank tracks, and those
slices marked (args.critical; red in chrome://tracing).
"""


def _load(path: str, step: int | None) -> Any:
    """The trace; of a columnar store only the step whose path is wanted (default the last
    captured), so memory is bounded by one step of every rank whatever the store's size."""
    from echo_sim.load import load_trace
    from echo_sim.store import is_store, load_store, read_store_info

    if is_store(path):
        steps = read_store_info(path).steps
        if steps:
            return load_store(path, steps=[step if step is not None else max(steps)])
    return load_trace(path)


def run(opts: Any) -> Result:
    from echo_sim.analysis.critical import critical_path, perfetto_events
    from echo_sim.trace.export import chrome_events, write_chrome

    if opts.output:
        check_output("--output", opts.output, force=opts.force)  # before the work
    trace = _load(opts.paths[0], opts.step)
    cp = critical_path(trace, step=opts.step, scale=opts.scale or ())
    data = cp.to_dict()
    data["source"] = opts.paths[0]
    text = cp.text()
    if opts.output:
        replayed = cp.replay.replayed_trace()
        mapping = cp.replay.replayed_row_map()
        highlight = {int(mapping[r]) for r in cp.rows if mapping[r] >= 0}
        events = perfetto_events(cp, chrome_events(replayed, highlight=highlight), replayed,
                                 mapping)
        with flag_errors("--output", opts.output):
            p = write_chrome(opts.output, events, overwrite=opts.force,
                             other_data={"critical_path_of": opts.paths[0], "step": cp.step,
                                         "total_us": data["total_us"],
                                         "shares": data["shares"]})
        data["output"] = str(p)
        text += f"\nwrote timeline with the critical path highlighted to {p}"
    return Result(text, data)


COMMAND = Command(
    name="critical",
    help="critical path of one iteration across ranks, with each category's share",
    description=DESCRIPTION,
    run=run,
    args=(
        arg("--step", type=int_in(0, MAX_STEP), metavar="STEP",
            help="captured step to analyse (default: the last captured step)"),
        arg("--scale", action="append", metavar="GLOB=FACTOR",
            help="what-if duration factors, as in `replay` (e.g. 'Comm.*=0.5')"),
        arg("--output", "-o", metavar="FILE.json",
            help="write the replayed timeline with the path highlighted (Chrome trace)"),
        arg("--force", action="store_true", help="replace the output file if it exists"),
    ),
    epilog="example: python -m echo_sim critical traces/ --step 3 -o critical.json",
)
