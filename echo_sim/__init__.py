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


def _installed_version() -> str:
    """The one version source is setup.cfg; an installed package reads it from its metadata."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("echo-sim")
    except PackageNotFoundError:  # a source tree that was never installed
        return "0+unknown"


__version__ = _installed_version()

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
