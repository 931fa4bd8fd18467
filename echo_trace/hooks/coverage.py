"""How much of each step the traced modules cover: the check behind ``TRACE_DEPTH``'s warning.

A depth that stops above the modules doing the work (a container that is never called, a
level with few modules) leaves the step's time in no FW/BW event. Coverage of a step is the
length of the union of its ``FW``/``BW``/``UPDATE`` slices (clipped to the step) ÷ the
``STEP`` slice's duration; :func:`module_coverage` gives its median over the window's steps.
Runs on the writer thread, over the event dicts the writer has already built.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Iterable, Mapping
from typing import Any

__all__ = ["COVERAGE_WARN_BELOW", "module_coverage"]

COVERAGE_WARN_BELOW = 0.5
"""Coverage under which a set ``TRACE_DEPTH`` draws a warning (fraction of the step)."""

_CATS = ("FW", "BW", "UPDATE")


def _union_us(spans: list[tuple[float, float]]) -> float:
    total, reach = 0.0, float("-inf")
    for a, b in sorted(spans):
        if b > reach:
            total += b - max(a, reach)
            reach = b
    return total


def module_coverage(events: Iterable[Mapping[str, Any]]) -> float | None:
    """Median over steps of the covered fraction (module docstring); None without a step."""
    steps: dict[int, tuple[float, float]] = {}
    spans: dict[int, list[tuple[float, float]]] = defaultdict(list)
    for e in events:
        if e.get("ph") != "X":
            continue
        step = (e.get("args") or {}).get("step")
        if not isinstance(step, int):
            continue
        t0, t1 = float(e["ts"]), float(e["ts"]) + float(e.get("dur", 0.0))
        if e.get("cat") == "step":
            steps[step] = (t0, t1)
        elif e.get("cat") in _CATS:
            spans[step].append((t0, t1))
    fractions = []
    for step, (s0, s1) in steps.items():
        if s1 <= s0:
            continue
        clipped = [(max(a, s0), min(b, s1)) for a, b in spans.get(step, ()) if b > s0 and a < s1]
        fractions.append(_union_us(clipped) / (s1 - s0))
    return statistics.median(fractions) if fractions else None
