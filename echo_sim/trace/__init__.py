"""The trace layer: the one in-memory model every analysis reads, its rules (validate), its DAG rebuild (graph) and its export to files."""

from echo_sim.trace.model import (
    CAT_NAMES,
    COLLECTIVES,
    Cat,
    Counters,
    Events,
    RankInfo,
    Trace,
    TraceBuilder,
)

__all__ = [
    "CAT_NAMES",
    "COLLECTIVES",
    "Cat",
    "Counters",
    "Events",
    "RankInfo",
    "Trace",
    "TraceBuilder",
]
