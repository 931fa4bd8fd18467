"""Charts written to image files with matplotlib's Agg canvas (never a window, no pyplot).

:func:`plot_step_breakdown` draws, per rank, one stacked bar of the mean step time split into
the parts of :data:`echo_sim.analysis.statistic.PARTS` (compute alone by kind, communication
overlapped with compute, exposed communication, idle); the bar's height is the rank's mean
iteration time.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from echo_sim.analysis.statistic import PARTS, Statistics
from echo_sim.errors import EchoError
from echo_sim.render import require_matplotlib

__all__ = ["BREAKDOWN_PARTS", "PLOT_TYPES", "plot_step_breakdown", "step_breakdown"]

PLOT_TYPES: tuple[str, ...] = (".png", ".svg", ".pdf")

BREAKDOWN_PARTS: tuple[str, ...] = PARTS
_COLORS = ("#4c72b0", "#dd8452", "#55a868", "#8172b3", "#64b5cd", "#c44e52", "#bbbbbb")
_RANK_FIELD = ("fw_us", "bw_us", "update_us", "other_us", "comm_overlapped_us",
               "comm_exposed_us", "idle_us")


def step_breakdown(stats: Statistics) -> dict[int, dict[str, float]]:
    """rank → {part: mean µs per step} for :data:`BREAKDOWN_PARTS`; the parts sum to the
    rank's mean step time (:class:`~echo_sim.analysis.statistic.RankStat`)."""
    return {r.rank: {p: float(getattr(r, f)) for p, f in zip(PARTS, _RANK_FIELD, strict=True)}
            for r in stats.ranks}


def plot_step_breakdown(breakdown: dict[int, dict[str, float]], path: str | Path, *,
                        title: str = "Step time breakdown") -> Path:
    """Stacked bars (one per rank, ms per step) into ``path`` (.png, .svg, .pdf)."""
    require_matplotlib("the step-breakdown plot")
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    p = Path(path)
    if p.suffix.lower() not in PLOT_TYPES:
        raise EchoError(f"path {p}: unknown image type {p.suffix!r}; use .png, .svg or .pdf")
    ranks: Sequence[int] = sorted(breakdown)
    fig = Figure(figsize=(max(4.0, 0.5 * len(ranks) + 2.5), 4.0), layout="constrained")
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    x = list(range(len(ranks)))
    bottom = [0.0] * len(ranks)
    for part, color in zip(BREAKDOWN_PARTS, _COLORS, strict=True):
        h = [breakdown[r].get(part, 0.0) / 1000.0 for r in ranks]
        if not any(h):
            continue
        ax.bar(x, h, bottom=bottom, color=color, label=part, width=0.7)
        bottom = [b + v for b, v in zip(bottom, h, strict=True)]
    ax.set_xticks(x, [str(r) for r in ranks])
    ax.set_xlabel("rank")
    ax.set_ylabel("mean time per step (ms)")
    ax.set_title(title)
    ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize="small")
    fig.savefig(p, dpi=120)  # OSError: the caller's atomic writer reports it
    return p
