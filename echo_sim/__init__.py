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
    "EchoError",
    "ProfileError",
    "TraceFormatError",
    "TraceMismatchError",
    "TraceNotFoundError",
    "__version__",
]
