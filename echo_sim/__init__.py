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
    "EchoError",
    "ProfileError",
    "TraceFormatError",
    "TraceMismatchError",
    "TraceNotFoundError",
    "__version__",
]
