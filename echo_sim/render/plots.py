"""Charts written to image files with matplotlib's Agg canvas (never a window, no pyplot).

:func:`plot_step_breakdown` draws, per rank, one stacked bar of the mean step time split into
the parts of :data:`echo_sim.analysis.statistic.PARTS` (compute alone by kind, communication
overlapped with compute, exposed communication, idle); the bar's height is the rank's mean
iteration time.

:func:`plot_search` draws a search's timed layouts as predicted iteration time against peak
memory, one colour per sharding (DDP, ZeRO-1, ZeRO-2, FSDP), hollow where the layout is
over the memory limit (a dashed line), the best layout starred and labelled: where the
time–memory trade-off of the space lies, which a ranked table hides.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from echo_sim.analysis.statistic import PARTS, Statistics
from echo_sim.errors import EchoError
from echo_sim.render import require_matplotlib

__all__ = ["BREAKDOWN_PARTS", "PLOT_TYPES", "SHARDING_COLORS", "plot_search",
           "plot_step_breakdown", "search_points", "step_breakdown"]

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

    p = _path(path)
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
    return _finish(fig, ax, p, "rank", "mean time per step (ms)", title)


SHARDING_COLORS: dict[str, str] = {"ddp": "#4c72b0", "zero1": "#55a868", "zero2": "#8172b3",
                                   "fsdp": "#dd8452"}


def search_points(candidates: Sequence[Any]) -> dict[str, list[tuple[float, float, bool]]]:
    """sharding → [(peak memory GiB, iteration ms, fits)] of a search's timed
    :class:`~echo_sim.search.result.Candidate` rows (the plotted data)."""
    out: dict[str, list[tuple[float, float, bool]]] = {}
    for c in candidates:
        out.setdefault(c.layout.sharding, []).append(
            (c.peak_memory_bytes / 2**30, c.iteration_time_us / 1000.0, bool(c.fits)))
    return out


def _finish(fig: Any, ax: Any, p: Path, xlabel: str, ylabel: str, title: str) -> Path:
    """Labels, title and the legend beside the axes; the figure saved to ``p``."""
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize="small")
    fig.savefig(p, dpi=120)  # OSError: the caller's atomic writer reports it
    return p


def _path(path: str | Path) -> Path:
    p = Path(path)
    if p.suffix.lower() not in PLOT_TYPES:
        raise EchoError(f"path {p}: unknown image type {p.suffix!r}; use .png, .svg or .pdf")
    return p


def plot_search(candidates: Sequence[Any], best: Any, path: str | Path, *,
                title: str = "Searched layouts") -> Path:
    """Iteration time (ms) against peak memory (GiB) of ``candidates`` into ``path`` (.png,
    .svg, .pdf; module docstring); ``best``: the chosen candidate, or None."""
    require_matplotlib("the search plot")
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    p = _path(path)
    if not candidates:
        raise EchoError("the search timed no layout: nothing to plot")
    fig = Figure(figsize=(7.0, 4.5), layout="constrained")
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    points = search_points(candidates)
    for name in sorted(points, key=lambda n: list(SHARDING_COLORS).index(n)
                       if n in SHARDING_COLORS else len(SHARDING_COLORS)):
        pts = points[name]
        color = SHARDING_COLORS.get(name, "#bbbbbb")
        for fits, face in ((True, color), (False, "none")):
            sel = [(m, t) for m, t, f in pts if f == fits]
            if sel:
                ax.scatter([m for m, _ in sel], [t for _, t in sel], s=28, facecolors=face,
                           edgecolors=color, linewidths=1.0,
                           label=name if fits else f"{name} (over the limit)")
    limit = candidates[0].memory_limit_bytes / 2**30
    ax.axvline(limit, color="#c44e52", linestyle="--", linewidth=1.0,
               label=f"memory limit {limit:.3g} GiB")
    if best is not None:
        bm, bt = best.peak_memory_bytes / 2**30, best.iteration_time_us / 1000.0
        ax.scatter([bm], [bt], marker="*", s=220, color="gold", edgecolors="black",
                   linewidths=0.8, zorder=3, label="best")
        ax.annotate(best.layout.label, (bm, bt), textcoords="offset points", xytext=(8, 8),
                    fontsize="small")
    return _finish(fig, ax, p, "peak memory per device (GiB)",
                   "predicted iteration time (ms)", title)
