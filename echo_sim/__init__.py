"""echo_sim: merge, analyse, replay and simulate distributed training traces.

Works without torch and without a GPU; ``profile-comm`` is the one command that needs torch.
"""

from echo_sim.errors import (
    ConfigError,
    EchoError,
    ProfileError,
    TraceFormatError,
    TraceMismatchError,
    TraceNotFoundError,
)

__version__ = "0.1.0"

__all__ = [
    "ConfigError",
    "SearchSpace",
    "EchoError",
    "ProfileError",
    "TraceFormatError",
    "TraceMismatchError",
    "TraceNotFoundError",
    "__version__",
    "search",
]


def __getattr__(name: str) -> object:
    # Lazy: ``echo_sim.search(trace, SearchSpace(...))`` without importing the search (and
    # the simulator) whenever echo_sim is imported.
    if name in ("search", "SearchSpace"):
        import importlib

        mod = importlib.import_module("echo_sim.search")
        return mod if name == "search" else mod.SearchSpace
    raise AttributeError(f"module 'echo_sim' has no attribute {name!r}")
