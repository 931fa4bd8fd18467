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

__all__ = ["MAX_GLOBAL_BATCH", "MAX_GPUS", "MAX_RANK", "MAX_STEP", "float_in", "int_in",
           "parse_bytes_flag", "parse_ranks", "parse_steps", "select_ranks", "select_steps"]

MAX_STEP = 2**62
"""Largest step number a --step list may name (int64 headroom)."""
MAX_GPUS = 2**20
"""Most devices a layout flag may name (1,048,576: several times the largest clusters)."""
MAX_RANK = MAX_GPUS - 1
"""Largest rank number a rank list may name."""
MAX_GLOBAL_BATCH = 2**40
"""Most samples per iteration (about 10^12)."""


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


def parse_ranks(text: str | None, flag: str) -> list[tuple[int, int]] | None:
    """``"0,2-4"`` → ``[(0, 0), (2, 4)]`` (inclusive ranges, never expanded; each within
    0..:data:`MAX_RANK`); None → all ranks."""
    if text is None:
        return None
    out: list[tuple[int, int]] = []
    for part in (p.strip() for p in text.split(",") if p.strip()):
        a, sep, b = part.partition("-")
        try:
            lo = int(a, 10)
            hi = int(b, 10) if sep else lo
        except ValueError:
            raise ConfigError(f"{flag}: bad rank list {text!r}; use numbers and ranges, "
                              "e.g. 0,2-5") from None
        if not 0 <= lo <= hi <= MAX_RANK:
            raise ConfigError(f"{flag} {text!r} is out of range; valid: ranks and ranges "
                              f"first-last with 0 <= first <= last <= {MAX_RANK:,}")
        out.append((lo, hi))
    if not out:
        raise ConfigError(f"{flag}: empty rank list {text!r}; e.g. 0,2-5")
    return out


def select_ranks(text: str | None, have: Sequence[int], flag: str) -> list[int] | None:
    """The ranks ``text`` names, every one of which must be in ``have`` (the trace's ranks;
    a range reaching past them is out of range); None: all."""
    ranges = parse_ranks(text, flag)
    if ranges is None:
        return None
    ranks = sorted(set(have))
    inside = {r for r in ranks if any(lo <= r <= hi for lo, hi in ranges)}
    for lo, hi in ranges:
        n = sum(1 for r in ranks if lo <= r <= hi)
        if n != hi - lo + 1:
            missing = next(r for r in range(lo, hi + 1) if r not in inside)
            raise ConfigError(f"{flag} {text!r}: rank {missing} is not in the trace; valid: "
                              f"its ranks {_spans(ranks) or '(none)'}")
    return sorted(inside)


def _spans(values: Sequence[int]) -> str:
    """``[0, 1, 2, 5]`` → ``"0-2, 5"`` (at most 10 spans shown)."""
    spans: list[list[int]] = []
    for v in values:
        if spans and v == spans[-1][1] + 1:
            spans[-1][1] = v
        else:
            spans.append([v, v])
    text = ", ".join(f"{a}-{b}" if b > a else str(a) for a, b in spans[:10])
    return text + (" ..." if len(spans) > 10 else "")
