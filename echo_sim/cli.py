"""``python -m echo_sim <command> PATH [options]`` — the only place argv is parsed.

Each command is a :class:`~echo_sim.commands.spec.Command` spec in
``echo_sim/commands/<name>.py``. This module builds the parser from the specs, accepts the
dPRO spelling (``--option statistic --path PATH``), prints a command's text or, with
``--json``, one JSON object, and turns every :class:`~echo_sim.errors.EchoError` into one
line on stderr and exit status 2.
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
from collections.abc import Sequence
from typing import Any

from echo_sim.commands import COMMAND_MODULES
from echo_sim.commands.spec import Command
from echo_sim.errors import EchoError

__all__ = ["build_parser", "load_commands", "main", "translate_dpro_argv"]

PROG = "python -m echo_sim"

DESCRIPTION = """\
Merge, analyse, replay and simulate traces of distributed PyTorch training.

PATH is a rank directory written by echo_trace (trace.json[.gz], meta.json, dag.gml), a root
holding many rank directories, a single trace file, a ByteProfile/dPRO directory or a
PyTorch profiler (Kineto) JSON trace. Every command prints a table; --json prints one JSON
object instead. dPRO's spelling also works: --option statistic --path PATH.
"""


def load_commands() -> list[Command]:
    """The command specs, in help order."""
    return [
        importlib.import_module(f"echo_sim.commands.{m}").COMMAND for m in COMMAND_MODULES
    ]


def build_parser(commands: Sequence[Command]) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROG, description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--version", action="version", version=_version())
    sub = parser.add_subparsers(dest="command", metavar="<command>", required=True)
    for cmd in commands:
        p = sub.add_parser(
            cmd.name,
            help=cmd.help,
            description=cmd.description,
            epilog=cmd.epilog or None,
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        if cmd.paths == 1:
            p.add_argument("paths", nargs=1, metavar="PATH", help="trace directory or file")
        elif cmd.paths == 2:
            p.add_argument("paths", nargs=2, metavar="PATH", help="two traces to compare: A B")
        for a in cmd.args:
            p.add_argument(*a.flags, **a.kwargs)
        p.add_argument("--json", action="store_true", help="print one JSON object to stdout")
        p.set_defaults(_command=cmd)
    return parser


def _version() -> str:
    from echo_sim import __version__

    return f"echo_sim {__version__}"


def translate_dpro_argv(argv: Sequence[str]) -> list[str]:
    """Rewrite dPRO's ``--option CMD --path P [P ...]`` into ``CMD P [P ...]``.

    dPRO takes ``--path`` as one comma-separated string or several words; both work.
    """
    argv = list(argv)
    if "--option" not in argv:
        return argv
    i = argv.index("--option")
    if i + 1 >= len(argv):
        raise EchoError("--option needs a command name, e.g. --option statistic")
    command = argv[i + 1]
    rest = argv[:i] + argv[i + 2 :]
    paths: list[str] = []
    if "--path" in rest:
        j = rest.index("--path")
        k = j + 1
        while k < len(rest) and not rest[k].startswith("--"):
            paths.extend(p for p in rest[k].split(",") if p)
            k += 1
        rest = rest[:j] + rest[k:]
    return [command.replace("_", "-") if command == "profile_comm" else command, *paths, *rest]


def _print_json(data: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(data, indent=2, default=_json_default) + "\n")


def _json_default(o: Any) -> Any:
    try:
        import numpy as np

        if isinstance(o, np.integer):
            return int(o)
        if isinstance(o, np.floating):
            return float(o)
        if isinstance(o, np.ndarray):
            return o.tolist()
    except ImportError:  # pragma: no cover - numpy is a dependency
        pass
    if isinstance(o, (set, tuple)):
        return list(o)
    return str(o)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the exit status (0 ok, 2 bad input)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        parser = build_parser(load_commands())
        opts = parser.parse_args(translate_dpro_argv(argv))
        cmd: Command = opts._command
        if not hasattr(opts, "paths"):
            opts.paths = []
        result = cmd.run(opts)
    except EchoError as e:
        sys.stderr.write(f"echo_sim: error: {e}\n")
        return 2
    except KeyboardInterrupt:
        sys.stderr.write("echo_sim: interrupted\n")
        return 130
    except BrokenPipeError:
        return 0
    if opts.json:
        _print_json(result.data)
    else:
        sys.stdout.write(result.text.rstrip("\n") + "\n")
    return 0
