"""Charts written to image files with matplotlib's Agg canvas (never a window, no pyplot).

:func:`plot_step_breakdown` draws, per rank, one stacked bar of the mean step time split into
FW, BW, UPDATE, exposed communication (communication not hidden behind compute) and idle
(neither compute nor communication); the bar's height is the rank's mean iteration time.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from echo_sim.analysis.collect import Collected
from echo_sim.analysis.statistic import Statistics
from echo_sim.errors import EchoError
from echo_sim.render import require_matplotlib

__all__ = ["BREAKDOWN_PARTS", "PLOT_TYPES", "plot_step_breakdown", "step_breakdown"]

PLOT_TYPES: tuple[str, ...] = (".png", ".svg", ".pdf")

BREAKDOWN_PARTS: tuple[str, ...] = ("FW", "BW", "UPDATE", "Comm (exposed)", "idle")
_COLORS = ("#4c72b0", "#dd8452", "#55a868", "#c44e52", "#bbbbbb")


def step_breakdown(stats: Statistics, coll: Collected) -> dict[int, dict[str, float]]:
    """rank → {part: mean µs per step} for :data:`BREAKDOWN_PARTS`; parts sum to the step time.

    FW/BW/UPDATE are covered busy times (they never overlap each other on the compute track;
    GPU: kernel time, gaps inside a slice are idle); idle is the rest of the step minus
    exposed communication, floored at 0.
    """
    exposed = {r.rank: r.exposed_mean_us for r in coll.per_rank}
    out: dict[int, dict[str, float]] = {}
    for r in stats.ranks:
        e = exposed.get(r.rank, 0.0)
        e = 0.0 if e != e else e
        out[r.rank] = {"FW": r.fw_us, "BW": r.bw_us, "UPDATE": r.update_us,
                       "Comm (exposed)": e, "idle": max(r.idle_us - e, 0.0)}
    return out


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
        h = [breakdown[r][part] / 1000.0 for r in ranks]
        ax.bar(x, h, bottom=bottom, color=color, label=part, width=0.7)
        bottom = [b + v for b, v in zip(bottom, h, strict=True)]
    ax.set_xticks(x, [str(r) for r in ranks])
    ax.set_xlabel("rank")
    ax.set_ylabel("mean time per step (ms)")
    ax.set_title(title)
    ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize="small")
    fig.savefig(p, dpi=120)  # OSError: the caller's atomic writer reports it
    return p
