"""The one in-memory trace model every echo_sim analysis reads."""

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
