"""``python -m echo_sim <command> PATH [options]`` — the only place argv is parsed.

Each command is a :class:`~echo_sim.commands.spec.Command` spec in
``echo_sim/commands/<name>.py``. This module builds the parser from the specs, accepts the
dPRO spelling (``--option statistic --path PATH``), prints a command's text or, with
``--json``, one JSON object, and turns every :class:`~echo_sim.errors.EchoError` into one
line on stderr and exit status 2.
"""

from __future__ import annotations

import argparse
import errno
import importlib
import json
import logging
import os
import re
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NoReturn

from echo_sim.commands import COMMAND_MODULES
from echo_sim.commands.dpro import translate_dpro_argv
from echo_sim.commands.spec import Command
from echo_sim.commands.triosim import translate_triosim_argv
from echo_sim.errors import ConfigError, EchoError
from echo_sim.textsafe import safe_text

__all__ = ["UsageError", "build_parser", "flag_names", "load_commands", "main",
           "translate_dpro_argv"]

PROG = "python -m echo_sim"

DESCRIPTION = """\
Merge, analyse, replay and simulate traces of distributed PyTorch training.

PATH is a rank directory written by echo_trace (trace.json[.gz], meta.json, dag.gml), a root
holding many rank directories, a single trace file, a ByteProfile/dPRO directory or a
PyTorch profiler (Kineto) JSON trace. Every command prints a table; --json prints one JSON
object instead. dPRO's spelling also works: --option statistic --path PATH[,PATH],
--sub_option, --step_num, bare --sort / --xlsx; what echo cannot run prints its echo
equivalent. Output files and directories are replaced only with --force, never written
through a link, FIFO or device nor into a missing directory. Errors (a stdout that cannot
be written too) are one line on stderr, exit status 2.
"""


def load_commands() -> list[Command]:
    """The command specs, in help order."""
    return [
        importlib.import_module(f"echo_sim.commands.{m}").COMMAND for m in COMMAND_MODULES
    ]


class UsageError(EchoError):
    """A command line argparse rejects (unknown flag, bad value, value out of range)."""


class _Parser(argparse.ArgumentParser):
    """argparse with its errors as one line (no usage block) through the EchoError path."""

    def error(self, message: str) -> NoReturn:
        command = self.prog.removeprefix(PROG).strip()
        raise UsageError(f"{command + ': ' if command else ''}{message} (see --help)")


def build_parser(commands: Sequence[Command]) -> argparse.ArgumentParser:
    parser = _Parser(
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
        cmd.add_arguments(p)
        p.add_argument("--json", action="store_true", help="print one JSON object to stdout")
        p.set_defaults(_command=cmd)
    return parser


def _version() -> str:
    from echo_sim import __version__

    return f"echo_sim {__version__}"


def _json_text(data: dict[str, Any]) -> str:
    return json.dumps(data, indent=2, default=_json_default) + "\n"


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


def flag_names(parser: argparse.ArgumentParser) -> dict[str, str]:
    """Library parameter name → CLI flag, from the parser's options (``global_batch`` →
    ``--global-batch``) and the command's own ``param_flags``."""
    out: dict[str, str] = {}
    for action in parser._actions:
        longs = [o for o in action.option_strings if o.startswith("--")]
        if longs and action.dest not in ("help", "json"):
            out[action.dest] = longs[0]
    return out


def flag_message(message: str, flags: dict[str, str]) -> str:
    """A library :class:`ConfigError` message with parameter names as the CLI's flags:
    ``dp=0 must be ...`` → ``--dp 0 must be ...``, ``memory_limit_bytes`` → ``--memory-limit``.

    Only ``name=value`` forms, factors of a ``dp·tp`` product and names with an underscore
    are rewritten (plain words such as "step" in a sentence stay), never inside ``--flag``."""
    if not flags:
        return message

    def sub(m: re.Match[str]) -> str:
        name, eq = m.group(2), m.group(3)
        flag = flags.get(name)
        in_product = m.group(1) == "·" or m.string.startswith("·", m.end())
        if flag is None or not (eq or in_product or "_" in name):
            return m.group(0)
        return m.group(1) + flag + (" " if eq else "")

    return re.sub(r"(^|[^-\w/.])([a-z][a-z0-9_]*)(=?)", sub, message)


def _subparser(parser: argparse.ArgumentParser, name: str) -> argparse.ArgumentParser | None:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            found = action.choices.get(name)
            return found if isinstance(found, argparse.ArgumentParser) else None
    return None


def _gml_paths(cmd: Command, paths: list[str]) -> list[str]:
    """A ``dag.gml`` given as PATH (dPRO habit) means the trace directory holding it;
    ``graph`` reads the GML file itself."""
    if cmd.name == "graph":
        return paths
    out = []
    for p in paths:
        if p.lower().endswith(".gml") and Path(p).is_file():
            parent = str(Path(p).parent)
            sys.stderr.write(f"echo_sim: {safe_text(p)} is a dependency graph; reading the "
                             f"trace in {safe_text(parent)}\n")
            p = parent
        out.append(p)
    return out


def _write(stream: Any, text: str) -> None:
    stream.write(safe_text(text, keep_newlines=True) + "\n")


class _StderrWarnings(logging.Handler):
    """Library warnings (``logging.getLogger("echo_sim")``) as one safe line each on stderr."""

    def emit(self, record: logging.LogRecord) -> None:
        _write(sys.stderr, f"echo_sim: warning: {record.getMessage()}")


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the exit status (0 ok, 2 bad input).

    Everything printed goes through :func:`~echo_sim.textsafe.safe_text`: names from traces
    never reach the terminal with their control characters raw.
    """
    argv = list(sys.argv[1:] if argv is None else argv)
    flags: dict[str, str] = {}
    log = logging.getLogger("echo_sim")
    if not any(isinstance(h, _StderrWarnings) for h in log.handlers):
        log.addHandler(_StderrWarnings(logging.WARNING))
        log.propagate = False
    try:
        parser = build_parser(load_commands())
        notes: list[str] = []
        translated = translate_dpro_argv(translate_triosim_argv(argv, notes), notes)
        for note in notes:
            _write(sys.stderr, f"echo_sim: {note}")
        opts = parser.parse_args(translated)
        cmd: Command = opts._command
        sub = _subparser(parser, cmd.name)
        flags = {**(flag_names(sub) if sub else {}), **cmd.param_flags}
        opts.paths = _gml_paths(cmd, list(getattr(opts, "paths", []) or []))
        result = cmd.run(opts)
    except ConfigError as e:
        _write(sys.stderr, f"echo_sim: error: {flag_message(str(e), flags)}")
        return 2
    except EchoError as e:
        _write(sys.stderr, f"echo_sim: error: {e}")
        return 2
    except KeyboardInterrupt:
        sys.stderr.write("echo_sim: interrupted\n")
        return 130
    except OSError as e:  # an unexpected file error still gets one line, never a traceback
        where = f"{e.filename}: " if e.filename else ""
        _write(sys.stderr, f"echo_sim: error: {where}{e.strerror or e}")
        return 2
    return _print_result(result, as_json=opts.json)


def _print_result(result: Any, *, as_json: bool) -> int:
    """Print the command's result; stdout that cannot take it (a full disk, a closed
    descriptor) is one line on stderr and exit status 2; a reader that went away (a broken
    pipe) ends the command quietly, as ``| head`` users expect."""
    if as_json:
        text = _json_text(result.data)
    else:
        text = safe_text(result.text.rstrip("\n"), keep_newlines=True) + "\n"
    try:
        if sys.stdout is None:  # started with descriptor 1 closed
            raise OSError(errno.EBADF, "it is closed")
        sys.stdout.write(text)
        sys.stdout.flush()  # here, not at exit: a full disk fails on the flush
    except BrokenPipeError:  # the reader went away (``| head``): as Unix tools, say nothing
        _silence_stdout()
        return 0
    except (OSError, ValueError) as e:  # ValueError: a stream closed by the caller
        _silence_stdout()
        reason = e.strerror if isinstance(e, OSError) and e.strerror else str(e)
        _write(sys.stderr, f"echo_sim: error: cannot write to stdout: {reason}")
        return 2
    return 0


def _silence_stdout() -> None:
    """Point stdout at /dev/null so the interpreter's flush at exit does not fail again
    (the SIGPIPE note of the ``signal`` module's documentation)."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
    except OSError:
        return
    try:
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):  # no descriptor (closed, or captured)
        pass
    finally:
        os.close(devnull)
