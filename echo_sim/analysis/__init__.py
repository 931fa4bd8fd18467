"""Analyses of a :class:`~echo_sim.trace.model.Trace`: each a function returning data.

``statistic`` (per-operator / category / rank times), ``collect`` (iteration time, exposed
and overlapped communication), ``compare`` (two traces operator by operator), ``combine``
(all ranks into one Perfetto trace) and ``stragglers`` (late ranks per step).
"""

from echo_sim.analysis.collect import Collected, RankSummary, StepSummary, collect
from echo_sim.analysis.combine import Combined, combine, default_output, parse_filter
from echo_sim.analysis.compare import Comparison, OpDiff, compare, subset_ranks, write_xlsx
from echo_sim.analysis.statistic import (
    CategoryStat,
    OpStat,
    RankStat,
    Statistics,
    covered_us,
    statistic,
    step_grid,
)
from echo_sim.analysis.stragglers import (
    CellLateness,
    CollectiveSpread,
    RankLateness,
    StragglerReport,
    stragglers,
)

__all__ = [
    "CategoryStat",
    "CellLateness",
    "Collected",
    "CollectiveSpread",
    "Combined",
    "Comparison",
    "OpDiff",
    "OpStat",
    "RankLateness",
    "RankStat",
    "RankSummary",
    "Statistics",
    "StepSummary",
    "StragglerReport",
    "collect",
    "combine",
    "compare",
    "covered_us",
    "default_output",
    "parse_filter",
    "statistic",
    "step_grid",
    "stragglers",
    "subset_ranks",
    "write_xlsx",
]
