"""Which captured steps a multi-rank trace can analyse: those every rank completed.

A run that crashed leaves ranks that stopped at different steps, and the step each was in
when it stopped is incomplete. Rather than refusing such a trace, the loaders keep the
steps complete on every rank and say so in a warning. A rank's incomplete steps are, in
order of preference:

1. ``partial_steps`` of its meta.json (echo_trace writes it when the job ended inside the
   capture window), or the steps it holds events of that meta.json's ``steps`` does not list;
2. without meta (Kineto, ByteProfile): when the ranks' step sets differ, the last step of a
   rank that stopped before the others (it was inside that step when it died).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from echo_sim.errors import TraceMismatchError

__all__ = ["complete_steps", "ranges"]


def ranges(values: Sequence[int]) -> str:
    """``[0,1,2,5]`` -> ``"0-2,5"``."""
    parts: list[str] = []
    i = 0
    while i < len(values):
        j = i
        while j + 1 < len(values) and values[j + 1] == values[j] + 1:
            j += 1
        parts.append(str(values[i]) if i == j else f"{values[i]}-{values[j]}")
        i = j + 1
    return ",".join(parts)


def _describe(sets: Mapping[int, frozenset[int]]) -> str:
    distinct = sorted(set(sets.values()),
                      key=lambda s: min(r for r, v in sets.items() if v == s))
    groups = []
    for s in distinct:
        ranks = sorted(r for r, v in sets.items() if v == s)
        groups.append(f"ranks {ranges(ranks)} have steps {ranges(sorted(s)) or 'none'}")
    return "; ".join(groups)


def complete_steps(step_sets: Mapping[int, Iterable[int]], *,
                   partial: Mapping[int, Iterable[int]] | None = None,
                   complete: Mapping[int, Iterable[int]] | None = None,
                   source: str = "") -> tuple[list[int], list[str]]:
    """``(steps complete on every rank, warnings)`` (see the module docstring).

    ``step_sets``: the steps each rank holds events of. ``partial`` / ``complete``: per rank,
    the steps its metadata calls incomplete / complete (ranks absent: no metadata). Raises
    :class:`TraceMismatchError` when no step is complete on every rank.
    """
    sets = {r: frozenset(s) for r, s in step_sets.items()}
    if not sets:
        return [], []
    partial = partial or {}
    complete = complete or {}
    differ = len(set(sets.values())) > 1
    top = max((max(s) for s in sets.values() if s), default=-1)
    incomplete: dict[int, set[int]] = {}
    for r, seen in sets.items():
        bad = set(partial.get(r, ())) & seen
        if r in complete:
            bad |= seen - set(complete[r])
        elif r not in partial and differ and seen and max(seen) < top:
            bad.add(max(seen))
        incomplete[r] = bad
    done = {r: sets[r] - incomplete[r] for r in sets}
    common = frozenset.intersection(*done.values())
    where = f"{source}: " if source else ""
    if not differ and not any(incomplete.values()):
        return sorted(common), []
    if not common:
        raise TraceMismatchError(f"{where}ranks captured different steps and none is complete "
                                 f"on every rank: {_describe(sets)}")
    dropped = sorted(frozenset.union(*sets.values()) - common)
    cut = sorted({s for v in incomplete.values() for s in v})
    why = _describe(sets) if differ else "every rank holds the same steps"
    partial_s = f"; incomplete: step {ranges(cut)}" if cut else ""
    note = (f"{where}partial trace ({why}{partial_s}): analysing the {len(common)} steps "
            f"complete on every rank ({ranges(sorted(common))}), dropping step "
            f"{ranges(dropped)}")
    return sorted(common), [note]
