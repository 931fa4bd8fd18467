"""One error family for everything echo_sim reports to a user.

The CLI turns any :class:`EchoError` into one line on stderr and exit status 2. Messages
name the file or value at fault and, where there is a fixed set, the valid choices.
"""

from __future__ import annotations

__all__ = [
    "EchoError",
    "TraceFormatError",
    "TraceNotFoundError",
    "TraceMismatchError",
    "ConfigError",
    "ProfileError",
]


class EchoError(Exception):
    """Base of every error echo_sim raises on bad input."""


class TraceNotFoundError(EchoError):
    """A path does not exist, or holds no trace of a known format."""


class TraceFormatError(EchoError):
    """A trace file is truncated, not JSON, or breaks the format's rules."""


class TraceMismatchError(EchoError):
    """Ranks or runs that must agree do not (different step sets, missing ranks)."""


class ConfigError(EchoError):
    """An impossible option or layout (dp·tp·pp ≠ GPUs, unknown preset, bad --scale)."""


class ProfileError(EchoError):
    """A communication profile is malformed or cannot be measured."""
