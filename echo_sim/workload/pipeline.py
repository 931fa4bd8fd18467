"""Pipeline parallelism: stage split, micro-batch schedules and stage-boundary transfers.

* :func:`split_units` cuts the model's units (transformer blocks; for models without
  blocks, the top-level children) into contiguous stages. ``"time"`` balances the measured
  forward+backward time (minimise the slowest stage: binary search on the bottleneck, the
  classic linear-partition problem); ``"even"`` gives every stage the same number of
  blocks, the first ``blocks % stages`` stages one more (Megatron's / torchtitan's default
  split, and ``examples.models.stage_bounds``). Units before the first block (embeddings)
  always go to the first stage, units after the last block (final norm, head) to the last.
* :func:`stage_actions` lists, per stage, the order of (phase, chunk, micro-batch) actions:

  - ``gpipe`` (Huang et al. 2019): all forwards, then all backwards.
  - ``1f1b`` (PipeDream-Flush, Narayanan et al. 2021): ``pp - s - 1`` warm-up forwards on
    stage ``s``, then one forward / one backward, then the remaining backwards.
  - ``interleaved`` (Narayanan et al. 2021, §2.2; Megatron-LM
    ``forward_backward_pipelining_with_interleaving``): each rank holds ``v`` chunks;
    virtual stage ``c·pp + s`` lives on rank ``s``; forwards run in groups of ``pp``
    micro-batches per chunk, warm-up ``(pp - s - 1)·2 + (v - 1)·pp``.

  With equal stages and free transfers GPipe and 1F1B both idle a fraction
  ``(pp - 1) / (m + pp - 1)`` of the iteration (the bubble); interleaving divides the
  bubble time by ``v``.
* :func:`max_in_flight` counts the most micro-batch activations a stage holds at once
  (1F1B: ``min(pp - s, m)``; GPipe: ``m``), for the memory model.
"""

from __future__ import annotations

from collections.abc import Sequence

from echo_sim.errors import ConfigError

__all__ = ["SCHEDULES", "STAGE_SPLITS", "max_in_flight", "split_units", "stage_actions"]

SCHEDULES: tuple[str, ...] = ("gpipe", "1f1b", "interleaved")
STAGE_SPLITS: tuple[str, ...] = ("time", "even")


def split_units(units: Sequence[str], time_us: Sequence[float], is_block: Sequence[bool],
                stages: int, *, how: str = "time",
                stage_time_us: Sequence[Sequence[float]] | None = None) -> list[int]:
    """Stage index of every unit (units in forward order); contiguous, none empty.

    ``stage_time_us``: per stage, every unit's time on that stage (stages of different
    tensor-parallel degrees, :class:`~echo_sim.workload.build.Layout`); ``"time"`` then
    minimises the slowest stage with each unit weighed on the stage it lands on (the greedy
    packing stays exact: filling a stage as far as the limit allows leaves the shortest
    suffix for the rest). Raises :class:`ConfigError` if there are fewer splittable units
    than stages.
    """
    if how not in STAGE_SPLITS:
        raise ConfigError(f"unknown stage split {how!r}; valid: {', '.join(STAGE_SPLITS)}")
    n = len(units)
    blocks = [i for i in range(n) if is_block[i]]
    if not blocks:  # no transformer blocks: every unit is splittable
        blocks = list(range(n))
    lo, hi = blocks[0], blocks[-1]
    free = list(range(lo, hi + 1))  # units between the first and last block split freely
    if len([i for i in free if is_block[i]] or free) < stages:
        raise ConfigError(f"{stages} pipeline stages but the model has only "
                          f"{len([i for i in free if is_block[i]] or free)} blocks to split")

    def weights(row: Sequence[float]) -> list[float]:
        w = [float(row[i]) for i in free]
        w[0] += sum(float(row[i]) for i in range(lo))
        w[-1] += sum(float(row[i]) for i in range(hi + 1, n))
        return w

    if how == "even":
        cuts = _even_cuts(len(free), stages)
    elif stage_time_us is None:
        cuts = _balanced_cuts([weights(time_us)], stages)
    else:
        cuts = _balanced_cuts([weights(r) for r in stage_time_us], stages)
    stage_of = [0] * n
    for k, i in enumerate(free):
        stage_of[i] = cuts[k]
    for i in range(hi + 1, n):
        stage_of[i] = stages - 1
    return stage_of


def _even_cuts(n: int, k: int) -> list[int]:
    base, extra = divmod(n, k)
    out: list[int] = []
    for s in range(k):
        out.extend([s] * (base + (1 if s < extra else 0)))
    return out


def _balanced_cuts(rows: list[list[float]], k: int) -> list[int]:
    """Contiguous partition of the units into ``k`` non-empty parts minimising the largest
    part's sum, unit ``i`` weighing ``rows[s][i]`` on part ``s`` (one row: the same on all)."""

    w = rows[0]
    n = len(w)

    def row(s: int) -> list[float]:
        return rows[s] if len(rows) > 1 else w

    def pack(limit: float) -> list[int] | None:
        # Greedy: open a new stage when the next unit would pass ``limit``, or when only
        # as many units are left as stages still to open (every stage needs one).
        out: list[int] = []
        s, acc = 0, 0.0
        cur = row(0)
        for i in range(n):
            if out and s + 1 < k and (acc + cur[i] > limit or n - i == k - 1 - s):
                s, acc = s + 1, 0.0
                cur = row(s)
            acc += cur[i]
            out.append(s)
        return out if s == k - 1 and max(_sums(rows, out, k)) <= limit * (1 + 1e-12) else None

    lo = max(min(r[i] for r in rows) for i in range(n))
    hi = max(sum(r) for r in rows)
    best = pack(hi) or _even_cuts(n, k)
    for _ in range(60):
        mid = (lo + hi) / 2
        got = pack(mid)
        if got is not None:
            best, hi = got, mid
        else:
            lo = mid
        if hi - lo <= 1e-9 * max(hi, 1.0):
            break
    return best


def _sums(rows: list[list[float]], cuts: list[int], k: int) -> list[float]:
    out = [0.0] * k
    for i, s in enumerate(cuts):
        out[s] += (rows[s] if len(rows) > 1 else rows[0])[i]
    return out


def stage_actions(schedule: str, pp: int, m: int, stage: int,
                  v: int = 1) -> list[tuple[str, int, int]]:
    """(phase "F"/"B", local chunk, micro-batch) in execution order on pipeline rank ``stage``."""
    if schedule == "gpipe":
        return [("F", 0, i) for i in range(m)] + [("B", 0, i) for i in range(m)]
    if schedule == "1f1b" or (schedule == "interleaved" and v == 1):
        warm = min(pp - stage - 1, m)
        acts = [("F", 0, i) for i in range(warm)]
        for i in range(m - warm):
            acts += [("F", 0, warm + i), ("B", 0, i)]
        acts += [("B", 0, i) for i in range(m - warm, m)]
        return acts
    if schedule != "interleaved":
        raise ConfigError(f"unknown schedule {schedule!r}; valid: {', '.join(SCHEDULES)}")
    if m % pp:
        raise ConfigError(f"interleaved schedule needs micro-batches ({m}) divisible by "
                          f"pp={pp}")
    total = m * v
    group = pp * v

    def chunk(k: int, forward: bool) -> int:
        c = (k % group) // pp
        return c if forward else v - 1 - c

    def micro(k: int) -> int:
        return (k // group) * pp + k % pp

    warm = min((pp - stage - 1) * 2 + (v - 1) * pp, total)
    acts = [("F", chunk(k, True), micro(k)) for k in range(warm)]
    for k in range(total - warm):
        acts.append(("F", chunk(warm + k, True), micro(warm + k)))
        acts.append(("B", chunk(k, False), micro(k)))
    acts += [("B", chunk(k, False), micro(k)) for k in range(total - warm, total)]
    return acts


def max_in_flight(actions: Sequence[tuple[str, int, int]], v: int = 1) -> float:
    """Most forwarded-but-not-backwarded (chunk, micro-batch) pairs at once, in stages (÷ v)."""
    cur = best = 0
    for phase, _, _ in actions:
        cur += 1 if phase == "F" else -1
        best = max(best, cur)
    return best / v
