"""``validate PATH``: check a trace against every rule in :mod:`echo_sim.trace.validate`."""

from __future__ import annotations

from typing import Any

from echo_sim.commands.spec import Command, Result
from echo_sim.errors import EchoError, TraceFormatError

__all__ = ["COMMAND", "run_validate"]

DESCRIPTION = """\
Load a trace and check it against every validation rule.

Errors (the trace is unusable): non-finite or negative times, ranks with different step
sets, a cyclic dag.gml, and anything that stops the trace from loading (truncated or
non-JSON files, unknown format). Warnings: ranks missing from 0..world_size-1, partially
overlapping slices on one track, Comm events without collective / bytes / group, and
collectives (group, seq) that are not found on every member rank.

Prints one line per violation; --json prints {"ok": bool, "violations": [...]}. Exits with
status 2 when there is an error.
"""


def run_validate(opts: Any) -> Result:
    from echo_sim.load import load_trace
    from echo_sim.trace.validate import ALL_RULES, FATAL_RULES, Violation, validate

    path = opts.paths[0]
    loaded: list[Violation] = []
    try:
        trace = load_trace(path)
    except EchoError as e:
        if not getattr(opts, "json", False):
            raise
        loaded = [Violation("load", "error", str(e))]
        trace = None
    rules = [r for r in ALL_RULES if r not in FATAL_RULES]
    violations = loaded if trace is None else validate(trace, rules)
    errors = [v for v in violations if v.fatal]
    summary = (f"{path}: {len(violations)} violation(s)" if violations else f"{path}: ok") + (
        "" if trace is None else f" ({len(trace.ranks)} rank(s), steps {trace.steps}, "
        f"{len(trace.events)} events, {trace.source_format} format)")
    lines = [summary] + [f"  {v.severity}: [{v.rule}] {v.message}" for v in violations]
    data: dict[str, Any] = {"ok": not errors, "violations": [v.to_dict() for v in violations]}
    if errors and not getattr(opts, "json", False):
        raise TraceFormatError(errors[0].message)
    if errors:
        # --json: print the object, then still exit non-zero via the CLI's error path
        import json
        import sys

        sys.stdout.write(json.dumps(data, indent=2) + "\n")
        raise TraceFormatError(errors[0].message)
    return Result(text="\n".join(lines), data=data)


COMMAND = Command(
    name="validate",
    help="check a trace against the format's rules",
    description=DESCRIPTION,
    run=run_validate,
)
