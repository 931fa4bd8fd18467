"""Run one function over many items in this process, a local process pool, or on Ray.

``workers``: 1 runs in this process; N > 1 in N spawned processes; ``"ray"`` as Ray tasks
(the optional ``ray`` package: ``ray.init()`` joins the cluster ``RAY_ADDRESS`` names, else
starts a local one). Results come back in item order, and at most ``window`` items are in
flight at once (default: twice the workers), so a slow consumer never holds more than that
many results: memory stays bounded whatever the number of items. The function and its
items must be picklable (module-level functions, plain data); on Ray every worker must see
the same paths (a shared store).
"""

from __future__ import annotations

import logging
import multiprocessing as mp
import os
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from typing import Any, TypeVar

from echo_sim.errors import ConfigError

__all__ = ["Workers", "cpu_count", "ordered_map", "parse_workers"]

T = TypeVar("T")
R = TypeVar("R")

Workers = int | str
"""A process count, or ``"ray"``."""


def cpu_count() -> int:
    """Cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def parse_workers(value: Workers | None, *, default: int = 1) -> Workers:
    """``workers`` checked: an int >= 1, ``"ray"``, or None (``default``)."""
    if value is None:
        return max(1, default)
    if isinstance(value, str):
        if value == "ray":
            return value
        if value.isdigit():
            value = int(value)
        else:
            raise ConfigError(f"workers={value!r}: give a number of processes or 'ray'")
    if value < 1:
        raise ConfigError(f"workers={value} must be >= 1 or 'ray'")
    return int(value)


def _ray() -> Any:
    try:
        import ray
    except ImportError:
        raise ConfigError("workers='ray' needs the ray package (pip install 'ray[default]'); "
                          "or give a number of processes") from None
    if not ray.is_initialized():
        ray.init(address=os.environ.get("RAY_ADDRESS") or None, log_to_driver=False,
                 include_dashboard=False, ignore_reinit_error=True,
                 logging_level=logging.ERROR)
    return ray


def ordered_map(fn: Callable[[T], R], items: Iterable[T], workers: Workers = 1, *,
                window: int | None = None) -> Iterator[R]:
    """``fn(item)`` for every item, in order (see the module docstring)."""
    w = parse_workers(workers)
    if w == 1:
        for item in items:
            yield fn(item)
        return
    if w == "ray":
        ray = _ray()
        remote = ray.remote(fn)
        n = max(1, int(ray.cluster_resources().get("CPU", 1)))
        refs: deque[Any] = deque()
        for item in items:
            refs.append(remote.remote(item))
            if len(refs) >= (window or 2 * n):
                yield ray.get(refs.popleft())
        while refs:
            yield ray.get(refs.popleft())
        return
    assert isinstance(w, int)
    # spawn, not fork: the caller may hold threads (tqdm, DuckDB) that fork would copy
    with ProcessPoolExecutor(w, mp_context=mp.get_context("spawn")) as pool:
        futs: deque[Future[R]] = deque()
        try:
            for item in items:
                futs.append(pool.submit(fn, item))
                if len(futs) >= (window or 2 * w):
                    yield futs.popleft().result()
            while futs:
                yield futs.popleft().result()
        finally:
            for f in futs:
                f.cancel()
