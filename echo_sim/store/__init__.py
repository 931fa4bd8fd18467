"""The columnar trace store: a trace of any size written once as Parquet, read fast.

``convert(path, out)`` writes any trace echo reads as a store (:mod:`echo_sim.store.schema`
describes the files); ``load_trace(store_dir)`` reads one back into the same in-memory
:class:`~echo_sim.trace.model.Trace`; :func:`read_part` reads one rank group, the unit of
out-of-core analysis (:mod:`echo_sim.outofcore`). Needs the optional pyarrow (extra
``store``); importing this package does not.
"""

from echo_sim.store.parallel import Workers, cpu_count, ordered_map, parse_workers
from echo_sim.store.read import StoreDags, load_store, read_names, read_part, read_ranks
from echo_sim.store.schema import (
    STORE_FORMAT,
    PartInfo,
    StoreInfo,
    is_store,
    read_store_info,
    require_pyarrow,
)

__all__ = [
    "STORE_FORMAT",
    "PartInfo",
    "StoreDags",
    "StoreInfo",
    "Workers",
    "cpu_count",
    "is_store",
    "load_store",
    "ordered_map",
    "parse_workers",
    "read_names",
    "read_part",
    "read_ranks",
    "read_store_info",
    "require_pyarrow",
]
