"""Out-of-core analysis of a trace store: ``statistic``, ``collect``, ``stragglers`` and
``compare`` with memory bounded by one rank group and DuckDB's queries, not by the trace
(:mod:`echo_sim.outofcore.engine`). Needs the optional pyarrow and duckdb (extra ``store``);
importing this package does not."""

from echo_sim.outofcore.engine import (
    ENGINES,
    choose_engine,
    collect_store,
    compare_store,
    statistic_store,
    stragglers_store,
)

__all__ = ["ENGINES", "choose_engine", "collect_store", "compare_store", "statistic_store",
           "stragglers_store"]
