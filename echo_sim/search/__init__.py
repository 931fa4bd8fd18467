"""Search the parallel layouts of a traced model under a memory limit.

``echo_sim.search(trace, SearchSpace(...))`` is :func:`search` (this module is callable).

``search(trace, SearchSpace(gpus=1024, global_batch=1536))`` enumerates every valid
layout (:mod:`~echo_sim.search.space`), prunes exactly by memory and time lower bounds
(:mod:`~echo_sim.search.bounds`), times the rest with :func:`echo_sim.sim.simulate.simulate`
(:mod:`~echo_sim.search.driver`) and returns ranked :class:`Candidate` s;
:func:`train_config` turns one into a config ``examples/train.py --config`` runs.
"""

import sys
import types
from typing import Any

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


class _CallableModule(types.ModuleType):
    """Lets ``echo_sim.search(trace, space)`` call :func:`search` (the issue's spelling)."""

    def __call__(self, *args: Any, **kwargs: Any) -> SearchResult:
        return search(*args, **kwargs)


sys.modules[__name__].__class__ = _CallableModule
