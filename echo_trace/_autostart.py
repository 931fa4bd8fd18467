"""Zero-code activation: ``maybe_start()`` runs from ``echo_trace.pth`` when ``TRACE_ON=1``.

It must be cheap and must never raise: it only reads the environment and, if ``torch`` is
not imported yet, puts a one-shot finder on ``sys.meta_path`` that starts a capture (from
the ``TRACE_*`` variables) right after ``import torch`` finishes. Processes that never
import torch pay nothing; processes that import torch but never step an optimizer (the
torchrun agent, data workers) write nothing.

The process-wide record of the running capture lives here (set on first use, never at
import): an explicit ``echo_trace.capture(...)`` takes over from an automatic one.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import logging
import sys
from collections.abc import Sequence
from types import ModuleType
from typing import Any

__all__ = ["current", "forget", "maybe_start", "remember", "yield_to_explicit"]

log = logging.getLogger("echo_trace")

_state: dict[str, Any] = {}  # "capture": the running Capture, "armed": maybe_start ran


def current() -> Any:
    """The capture this process is running, or None."""
    return _state.get("capture")


def remember(cap: Any) -> None:
    _state["capture"] = cap


def forget(cap: Any) -> None:
    if _state.get("capture") is cap:
        del _state["capture"]


def yield_to_explicit() -> None:
    """An explicit capture is starting: stop an automatic one that has not recorded yet."""
    cap = _state.get("capture")
    if cap is not None and cap.autostart:
        if cap._window or cap._steps:
            log.warning("echo_trace: explicit capture started while TRACE_ON capture is "
                        "recording; the automatic one stops now")
        cap.stop()


def _start_now() -> None:
    try:
        from echo_trace.capture import Capture
        from echo_trace.config import CaptureConfig

        if _state.get("capture") is not None:
            return
        cfg = CaptureConfig.from_env()
        Capture(cfg, autostart=True).start()
    except Exception as e:  # noqa: BLE001 - activation must never break the job
        log.warning("echo_trace: TRACE_ON=1 but capture could not start (%s: %s)",
                    type(e).__name__, e)


class _TorchImportWatcher(importlib.abc.MetaPathFinder):
    """Finds nothing itself; wraps the real loader of ``torch`` to start after it runs."""

    def find_spec(self, fullname: str, path: Sequence[str] | None,
                  target: ModuleType | None = None) -> importlib.machinery.ModuleSpec | None:
        if fullname != "torch":
            return None
        try:
            sys.meta_path.remove(self)
        except ValueError:
            pass
        try:
            spec = importlib.machinery.PathFinder.find_spec(fullname, path)
            loader = None if spec is None else spec.loader
            exec_module = getattr(loader, "exec_module", None)
            if spec is None or exec_module is None:
                return spec

            def exec_then_start(module: ModuleType) -> None:
                exec_module(module)
                _start_now()

            loader.exec_module = exec_then_start  # type: ignore[method-assign,union-attr]
            return spec
        except Exception as e:  # noqa: BLE001
            log.warning("echo_trace: could not watch for torch (%s); capture off", e)
            return None


def maybe_start() -> None:
    """Start capture from the environment when ``TRACE_ON=1`` (cheap; never raises)."""
    try:
        from echo_trace.config import CaptureConfig

        if not CaptureConfig.trace_on() or _state.get("armed"):
            return
        _state["armed"] = True
        torch = sys.modules.get("torch")
        if torch is not None and getattr(torch, "optim", None) is not None:
            _start_now()
        else:
            sys.meta_path.insert(0, _TorchImportWatcher())
    except Exception as e:  # noqa: BLE001
        log.warning("echo_trace: TRACE_ON=1 activation failed (%s)", e)
