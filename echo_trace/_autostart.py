"""Zero-code activation: ``TRACE_ON=1`` starts a capture right after ``import torch``.

``echo_trace.pth`` (installed at the root of site-packages) runs at interpreter start-up.
It imports nothing of echo_trace: when ``TRACE_ON`` is one of :data:`TRUE_SPELLINGS`
(case-insensitive, the spellings :func:`echo_trace.config.env_flag` accepts), it puts a
tiny finder on ``sys.meta_path`` that calls :func:`watch` when ``torch`` is imported, and
nothing else. So a process that never imports torch pays nothing (no echo_trace module is
imported); one that does pays one import of this module, then :func:`watch` wraps
torch's loader so that a capture (from the ``TRACE_*`` variables) starts right after
``import torch`` finishes. Processes that import torch but never step an optimizer (the
torchrun agent, data workers) write nothing.

:func:`maybe_start` does the same from Python (``python -m echo_trace.run``, tests). This
module never raises and imports :mod:`echo_trace.capture` only when a capture starts (the
capture never imports this module back).
"""

from __future__ import annotations

import importlib.machinery
import logging
import sys
from collections.abc import Sequence
from types import ModuleType
from typing import Any

from echo_trace.config import TRUE_SPELLINGS

__all__ = ["TRUE_SPELLINGS", "maybe_start", "watch"]

log = logging.getLogger("echo_trace")


_ARMED: dict[str, bool] = {}  # "armed": this process already armed (set on first use)


def _start_now() -> None:
    try:
        from echo_trace.capture import Capture, current
        from echo_trace.config import CaptureConfig

        if current() is not None:
            return
        cfg = CaptureConfig.from_env()
        Capture(cfg, autostart=True).start()
    except Exception as e:  # noqa: BLE001 - activation must never break the job
        log.warning("echo_trace: TRACE_ON=1 but capture could not start (%s: %s)",
                    type(e).__name__, e)


def _is_watcher(finder: Any) -> bool:
    return bool(getattr(finder, "echo_trace_watcher", False))


def watch(fullname: str, path: Sequence[str] | None = None) -> importlib.machinery.ModuleSpec | None:
    """``torch`` is being imported: remove every echo_trace finder from ``sys.meta_path``
    and return torch's spec with a loader that starts capture once torch has loaded."""
    sys.meta_path[:] = [f for f in sys.meta_path if not _is_watcher(f)]
    if fullname != "torch" or _ARMED.get("started"):
        return None
    try:
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        loader = None if spec is None else spec.loader
        exec_module = getattr(loader, "exec_module", None)
        if spec is None or exec_module is None:
            return spec
        _ARMED["started"] = True

        def exec_then_start(module: ModuleType) -> None:
            exec_module(module)
            _start_now()

        loader.exec_module = exec_then_start  # type: ignore[method-assign,union-attr]
        return spec
    except Exception as e:  # noqa: BLE001
        log.warning("echo_trace: could not watch for torch (%s); capture off", e)
        return None


class _TorchImportWatcher:
    """Finds nothing itself; hands ``import torch`` to :func:`watch`."""

    echo_trace_watcher = True

    def find_spec(self, fullname: str, path: Sequence[str] | None,
                  target: ModuleType | None = None) -> importlib.machinery.ModuleSpec | None:
        return watch(fullname, path) if fullname == "torch" else None


def maybe_start() -> None:
    """Start capture from the environment when ``TRACE_ON`` is on (cheap; never raises):
    at once when torch is already imported, else right after ``import torch``."""
    try:
        from echo_trace.config import CaptureConfig

        if not CaptureConfig.trace_on() or _ARMED.get("armed"):
            return
        _ARMED["armed"] = True
        torch = sys.modules.get("torch")
        if torch is not None and getattr(torch, "optim", None) is not None:
            _start_now()
        elif not any(_is_watcher(f) for f in sys.meta_path):
            sys.meta_path.insert(0, _TorchImportWatcher())
    except Exception as e:  # noqa: BLE001
        log.warning("echo_trace: TRACE_ON=1 activation failed (%s)", e)
