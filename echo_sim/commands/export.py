"""``export PATH --to byteprofile --output DIR``: any trace echo reads, as another tool's files."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from echo_sim.commands.checks import parse_steps, select_steps
from echo_sim.commands.outputs import check_output_dir, flag_errors
from echo_sim.commands.spec import Command, Result, arg
from echo_sim.errors import ConfigError

__all__ = ["COMMAND", "EXPORT_FORMATS", "run"]

EXPORT_FORMATS: tuple[str, ...] = ("byteprofile", "echo", "op-stats")
"""Valid ``--to`` values."""

DESCRIPTION = """\
Write a trace (any format echo reads: echo, ByteProfile/dPRO, Kineto, TrioSim) as the rank
directories of another tool.

--to byteprofile: what ByteProfile (the BytePS fork) writes and dPRO reads, one
<node_rank>_<local_rank>/ directory per rank holding bps_trace_local_rank<L>_<N>step.json
(Chrome X events named FW./BW./UPDATE./Comm., cat operator or Comm, ts/dur in us, each
event's dependencies inline as args.arg0..argN with args.name the event itself), dag.gml
(the static operator graph of the last step), arg_namesINpara_names.txt (the synchronised
parameters' names, one a line) and gradient_name_list.txt (the communicated tensors, in
first-issue order). Only leaf operators and Comm events of captured steps are written; an
operator repeated within a step is written NAME#k (ByteProfile names each op once a step).
At capture time, TRACE_FORMAT=byteprofile writes the same files into each echo rank
directory (there dag.gml is echo's: this graph plus the NEXT_STEP sink).

--to echo: echo's own rank directories (trace.json, meta.json, dag.gml), e.g. to turn a
ByteProfile or Kineto trace into one echo_trace would have written.

--to op-stats (dPRO's --option collect --sub_option operator, "update operator traces based
on the source files"): every operator's statistics re-derived from the ranks' source files,
in dPRO's name2sta form (cnt, time, avg, var, min, max; us and us^2) over the captured
steps: <rank dir>/name2sta.json per rank and name2sta.json for the job. Without --output
they go to op_stats/ in the trace's directory; --force updates them.
"""


def run(opts: Any) -> Result:
    from echo_sim.load import load_trace

    parse_steps(opts.step)  # before the work
    if opts.output is None:
        if opts.to != "op-stats":
            raise ConfigError(f"--to {opts.to} needs --output DIR")
        src = Path(opts.paths[0])
        opts.output = str((src if src.is_dir() else src.parent) / "op_stats")
    check_output_dir("--output", opts.output)
    trace = load_trace(opts.paths[0])
    steps = select_steps(opts.step, trace.steps)
    with flag_errors("--output", opts.output):
        if opts.to == "op-stats":
            from echo_sim.analysis.op_stats import write_op_stats

            if steps is not None:
                trace.keep_steps(steps)
            dirs = [f.parent for f in write_op_stats(trace, opts.output, overwrite=opts.force)]
        elif opts.to == "byteprofile":
            from echo_sim.trace.byteprofile_out import write_byteprofile_dirs

            dirs = write_byteprofile_dirs(trace, opts.output, overwrite=opts.force, steps=steps)
        else:
            from echo_sim.trace.export import write_echo_dirs

            if steps is not None:
                trace.keep_steps(steps)
            dirs = write_echo_dirs(trace, opts.output, overwrite=opts.force)
    files = sorted(p.name for p in dirs[0].iterdir()) if dirs else []
    text = (f"wrote {len(dirs)} {opts.to} rank director{'y' if len(dirs) == 1 else 'ies'} "
            f"under {opts.output} ({', '.join(d.name for d in dirs)}), each with "
            f"{', '.join(files)}")
    return Result(text, {"to": opts.to, "output": str(opts.output),
                         "rank_dirs": [str(d) for d in dirs], "files": files,
                         "steps": steps if steps is not None else trace.steps})


COMMAND = Command(
    name="export",
    help="write a trace as another tool's files (ByteProfile/dPRO rank dirs, echo dirs, "
         "dPRO operator statistics)",
    description=DESCRIPTION,
    run=run,
    args=(
        arg("--to", choices=EXPORT_FORMATS, required=True,
            help="target: byteprofile (ByteProfile/dPRO rank directories), echo, or "
                 "op-stats (dPRO's per-operator name2sta statistics)"),
        arg("--output", "-o", metavar="DIR",
            help="directory to write (made when absent; its parent must exist); required "
                 "but for op-stats (default: op_stats/ in the trace's directory)"),
        arg("--step", metavar="STEPS",
            help="write only these captured steps, e.g. 3 or 2,4-6 (default: all)"),
        arg("--force", action="store_true", help="replace files that exist in --output"),
    ),
    epilog="example: python -m echo_sim export traces/ --to byteprofile --output bps_traces/",
)
