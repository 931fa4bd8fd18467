"""Rendering to image files (matplotlib Agg, never a window): graphs and charts.

matplotlib is an optional extra (``pip install "echo-sim[plot]"``): analysis-only installs
work without it, and asking for an image without it is one clear error.
"""

from __future__ import annotations

from types import ModuleType

from echo_sim.errors import ConfigError

__all__ = ["require_matplotlib"]


def require_matplotlib(what: str) -> ModuleType:
    """The ``matplotlib`` module, or a :class:`ConfigError` naming ``what`` needed it."""
    try:
        import matplotlib
    except ImportError:
        raise ConfigError(f"{what} needs matplotlib, which is not installed: "
                          "pip install 'echo-sim[plot]'") from None
    return matplotlib
