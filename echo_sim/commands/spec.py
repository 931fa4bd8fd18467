"""Declarative command specs: what each CLI command takes, without touching argv."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Arg", "Command", "Result", "arg"]


@dataclass(frozen=True)
class Arg:
    """One option: its flags and the keyword arguments ``add_argument`` takes."""

    flags: tuple[str, ...]
    kwargs: dict[str, Any]


def arg(*flags: str, **kwargs: Any) -> Arg:
    """``arg("--sort", choices=[...], default="total", help="...")``; ``help`` is required."""
    if "help" not in kwargs:
        raise TypeError(f"option {flags} needs a help text")
    return Arg(tuple(flags), kwargs)


@dataclass
class Result:
    """What a command returns: ``text`` for the terminal, ``data`` for ``--json``."""

    text: str
    data: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Command:
    """A CLI command.

    ``paths``: how many trace paths it takes as positionals (0, 1, 2 for compare, -1: one or
    more; ``paths_help`` says what several mean). ``param_flags``: library parameter names that differ from the flags' own names
    (``memory_limit_bytes`` → ``--memory-limit``), so the CLI's messages name flags.
    ``run`` receives the parsed options (attributes named after the long flags, plus
    ``paths`` as a list of str) and returns a :class:`Result`.
    """

    name: str
    help: str  # one line, for the command list
    description: str  # the full --help text
    run: Callable[[Any], Result]
    args: tuple[Arg, ...] = ()
    paths: int = 1
    epilog: str = ""
    param_flags: dict[str, str] = field(default_factory=dict)
    paths_help: str = "trace directory or file (several: one file, runs side by side)"

    def add_arguments(self, parser: Any) -> None:
        """Add this command's PATH positionals and options to an ``argparse`` parser."""
        if self.paths == 1:
            parser.add_argument("paths", nargs=1, metavar="PATH", help="trace directory or file")
        elif self.paths == -1:
            parser.add_argument("paths", nargs="+", metavar="PATH", help=self.paths_help)
        elif self.paths == 2:
            parser.add_argument("paths", nargs=2, metavar="PATH",
                                help="two traces to compare: A B")
        for a in self.args:
            parser.add_argument(*a.flags, **a.kwargs)
