"""One module per CLI command, each exposing ``COMMAND`` (a :class:`Command` spec).

A command is a thin function over a library call: it takes the parsed options and returns
a :class:`Result` (text for the terminal, a JSON-able dict for ``--json``). Only
:mod:`echo_sim.cli` turns specs into an argument parser.
"""

from echo_sim.commands.spec import Arg, Command, Result, arg

# Command modules, in the order `--help` lists them.
COMMAND_MODULES: tuple[str, ...] = (
    "validate",
    "statistic",
    "collect",
    "combine",
    "compare",
    "critical",
    "graph",
    "replay",
    "stragglers",
    "collectives",
    "report",
    "simulate",
    "search",
    "synth",
    "profile_comm",
    "replay_comm",
    "export",
    "convert",
)

__all__ = ["Arg", "COMMAND_MODULES", "Command", "Result", "arg"]
