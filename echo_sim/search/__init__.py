"""Search the parallel layouts of a traced model under a memory limit.

``search(trace, SearchSpace(gpus=1024, global_batch=1536))`` enumerates every valid
layout (:mod:`~echo_sim.search.space`), prunes exactly by memory and time lower bounds
(:mod:`~echo_sim.search.bounds`), times the rest with :func:`echo_sim.sim.simulate.simulate`
(:mod:`~echo_sim.search.driver`) and returns ranked :class:`Candidate` s;
:func:`train_config` turns one into a config ``examples/train.py --config`` runs.
"""

from echo_sim.search.driver import default_workers, search
from echo_sim.search.export import train_config, write_train_config
from echo_sim.search.result import Candidate, SearchResult
from echo_sim.search.space import (
    DIMENSIONS,
    RECOMPUTE,
    SCHEDULES,
    ParallelLayout,
    SearchSpace,
    enumerate_layouts,
)

__all__ = [
    "DIMENSIONS",
    "RECOMPUTE",
    "SCHEDULES",
    "Candidate",
    "ParallelLayout",
    "SearchResult",
    "SearchSpace",
    "default_workers",
    "enumerate_layouts",
    "search",
    "train_config",
    "write_train_config",
]
