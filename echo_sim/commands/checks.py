"""Range checks for CLI flags: one line naming the flag and the valid range.

Integer and float flags use :func:`int_in` / :func:`float_in` as their argparse ``type``, so a
value out of range (``--dp 1000000000``) stops before any work with
``argument --dp: 1000000000 is out of range; valid: 1..65536``. Step lists
(``--step 2,4-6``) are parsed by :func:`parse_steps` without building the ranges they name,
so ``--step 0-100000000000`` costs nothing.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable, Sequence

from echo_sim.errors import ConfigError

__all__ = ["MAX_STEP", "float_in", "int_in", "parse_bytes_flag", "parse_steps", "select_steps"]

MAX_STEP = 2**62
"""Largest step number a --step list may name (int64 headroom)."""


def int_in(lo: int, hi: int) -> Callable[[str], int]:
    """argparse ``type``: an integer in ``lo..hi`` (both included)."""

    def parse(text: str) -> int:
        try:
            value = int(text, 10)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"{text!r} is not an integer; valid: {lo}..{hi}") from None
        if not lo <= value <= hi:
            raise argparse.ArgumentTypeError(f"{value} is out of range; valid: {lo}..{hi}")
        return value

    parse.__name__ = "integer"
    return parse


def float_in(lo: float, hi: float, *, lo_open: bool = False) -> Callable[[str], float]:
    """argparse ``type``: a finite float in ``[lo, hi]`` (``(lo, hi]`` with ``lo_open``)."""
    bracket = "(" if lo_open else "["

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            value = math.nan
        ok = math.isfinite(value) and (lo < value if lo_open else lo <= value) and value <= hi
        if not ok:
            raise argparse.ArgumentTypeError(
                f"{text!r} is out of range; valid: a number in {bracket}{lo:g}, {hi:g}]")
        return value

    parse.__name__ = "number"
    return parse


def parse_bytes_flag(flag: str, text: str, *, max_bytes: int) -> int:
    """A byte count such as ``80GB`` / ``80GiB`` / ``1e9`` for ``flag``, at most ``max_bytes``."""
    from echo_sim.cost.memory_model import parse_bytes

    try:
        value = parse_bytes(text)
    except (OverflowError, ValueError):  # 1e400GB: the number itself is not finite
        value = -1
    except ConfigError as e:
        raise ConfigError(f"{flag} {text!r}: {e}") from None
    if not 1 <= value <= max_bytes:
        raise ConfigError(f"{flag} {text!r} is out of range; valid: 1 byte to "
                          f"{max_bytes / 2**50:g} PiB, e.g. 80GB or 80GiB")
    return value


def _intervals(flag: str, text: str) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for part in text.split(","):
        a, sep, b = part.strip().partition("-")
        try:
            lo = int(a, 10)
            hi = int(b, 10) if sep else lo
        except ValueError:
            raise ConfigError(f"{flag} {text!r}: expected step numbers like 3 or 2,4-6") from None
        if not 0 <= lo <= hi <= MAX_STEP:
            raise ConfigError(f"{flag} {text!r}: each range needs 0 <= first <= last <= "
                              f"{MAX_STEP}")
        out.append((lo, hi))
    return out


def parse_steps(text: str | None, flag: str = "--step") -> list[tuple[int, int]] | None:
    """``"2,4-6"`` → ``[(2, 2), (4, 6)]`` (inclusive ranges, never expanded); None → all."""
    if text is None or text.strip() == "":
        return None
    return _intervals(flag, text)


def select_steps(text: str | None, captured: Sequence[int],
                 flag: str = "--step") -> list[int] | None:
    """The captured steps that ``text`` names (None: all). A single step that was not
    captured is an error; a range keeps the captured steps inside it (at least one)."""
    ranges = parse_steps(text, flag)
    if ranges is None:
        return None
    have = set(captured)
    missing = [lo for lo, hi in ranges if lo == hi and lo not in have]
    chosen = [s for s in captured if any(lo <= s <= hi for lo, hi in ranges)]
    if missing or not chosen:
        shown = ", ".join(map(str, list(captured)[:20])) + (" ..." if len(captured) > 20 else "")
        what = f"step {missing[0]} is not captured" if missing else "names no captured step"
        raise ConfigError(f"{flag} {text!r}: {what}; captured: {shown or 'none'}")
    return chosen
