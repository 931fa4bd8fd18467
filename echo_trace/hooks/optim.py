"""Optimizer steps: ``UPDATE.<optimizer class>`` events and the step count.

Global hooks ``torch.optim.optimizer.register_optimizer_step_pre_hook`` /
``register_optimizer_step_post_hook`` see every ``optimizer.step()`` with no user code.
They stay installed for the whole capture (they cost nothing between steps) because they
also count steps; once the window is over they are inert until :meth:`remove`, which must
not run from inside an optimizer hook (PyTorch iterates the hook dict while calling them).
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import Any

from echo_trace.recorder import Recorder

__all__ = ["OptimizerTracer"]


def _param_bytes(opt: Any) -> int:
    total = 0
    for group in opt.param_groups:
        for p in group["params"]:
            total += p.numel() * p.element_size()
    return total


class OptimizerTracer:
    """Records UPDATE slices while the window is open and reports every completed step.

    ``on_step(opt)`` runs after each ``optimizer.step()`` (inside or outside the window);
    ``on_compute_start(point)`` runs when an UPDATE starts (closes open BW slices);
    ``timer`` is the capture's current timer, read through ``get_timer()``.
    """

    def __init__(self, rec: Recorder, *, get_timer: Callable[[], Any],
                 on_step: Callable[[Any], None],
                 on_compute_start: Callable[[Any], None] | None = None) -> None:
        self.rec = rec
        self.get_timer = get_timer
        self.on_step = on_step
        self.on_compute_start = on_compute_start
        self._handles: list[Any] = []
        self._starts: dict[int, tuple[Any, Any]] = {}
        self._bytes: weakref.WeakKeyDictionary[Any, int] = weakref.WeakKeyDictionary()

    def install(self) -> None:
        """Register the global optimizer hooks (idempotent)."""
        if self._handles:
            return
        from torch.optim.optimizer import (
            register_optimizer_step_post_hook,
            register_optimizer_step_pre_hook,
        )

        self._handles = [register_optimizer_step_pre_hook(self._pre),
                         register_optimizer_step_post_hook(self._post)]

    def remove(self) -> None:
        """Remove the hooks (idempotent; never call from inside an optimizer hook)."""
        for h in self._handles:
            h.remove()
        self._handles = []
        self._starts.clear()

    def _pre(self, opt: Any, args: Any, kwargs: Any) -> tuple[Any, Any] | None:
        rec = self.rec
        if not (rec.enabled and rec.recording):
            return None
        with rec.guard("optimizer pre-hook"):
            timer = self.get_timer()
            self._start(opt, timer)
            closure = kwargs.get("closure") if kwargs else None
            if closure is None and args:
                closure = args[0]
            if callable(closure):
                return self._after_closure(opt, timer, closure, args, kwargs)
        return None

    def _start(self, opt: Any, timer: Any) -> None:
        t = timer.now()
        if self.on_compute_start is not None:
            self.on_compute_start(t)
        self._starts[id(opt)] = (t, timer)

    def _after_closure(self, opt: Any, timer: Any, closure: Callable[[], Any], args: Any,
                       kwargs: Any) -> tuple[Any, Any]:
        """``step(closure)`` (Lightning, LBFGS) runs the forward and backward inside the step:
        the UPDATE starts when the closure returns, so it holds the optimizer only."""

        def closure_then_update() -> Any:
            out = closure()
            with self.rec.guard("optimizer closure"):
                if self.rec.enabled and self.rec.recording and timer is self.get_timer():
                    self._start(opt, timer)
            return out

        if kwargs and "closure" in kwargs:
            return args, {**kwargs, "closure": closure_then_update}
        return (closure_then_update, *args[1:]), kwargs

    def _post(self, opt: Any, args: Any, kwargs: Any) -> None:
        rec = self.rec
        with rec.guard("optimizer post-hook"):
            started = self._starts.pop(id(opt), None)
            if started is not None and rec.enabled and rec.recording:
                t0, timer = started
                if timer is self.get_timer():
                    nbytes = self._bytes.get(opt)
                    if nbytes is None:
                        nbytes = self._bytes[opt] = _param_bytes(opt)
                    timer.emit("UPDATE." + type(opt).__name__, "UPDATE", t0, timer.now(),
                               {"param_bytes": nbytes})
        # step counting runs even when recording is off (the capture decides what to do)
        self.on_step(opt)
