"""Say what capture cannot see: steps that GradScaler skips.

``GradScaler.step`` leaves ``optimizer.step()`` out when the scaled gradients hold inf/NaN,
so the optimizer hooks that count steps never fire and two iterations would merge into one
step. :class:`ScalerWatch` wraps ``GradScaler._maybe_opt_step`` (the call that decides) for
the whole capture session: a skipped step still counts (``on_skip(optimizer)``), its STEP
event gets ``grad_scaler_skipped: true``, and one warning says so. The decision reads the
``found_inf`` values GradScaler itself just read with ``.item()``: no extra GPU sync.
The other two blind spots are reported by :class:`~echo_trace.hooks.modules.ModuleTracer`
(a ``torch.compile``'d model; eval / no_grad forwards inside the window).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from echo_trace.recorder import Recorder

__all__ = ["ScalerWatch"]

log = logging.getLogger("echo_trace")


class ScalerWatch:
    """Counts and marks steps skipped by ``torch.amp.GradScaler`` (see module docstring)."""

    def __init__(self, rec: Recorder, on_skip: Callable[[Any], None]) -> None:
        self.rec = rec
        self.on_skip = on_skip
        self.skipped: list[int] = []  # recorded steps that GradScaler skipped
        self._cls: Any = None
        self._orig: Any = None
        self._warned = False

    def install(self) -> None:
        """Wrap ``GradScaler._maybe_opt_step`` (idempotent; a no-op on a torch without it)."""
        if self._cls is not None:
            return
        try:
            from torch.amp.grad_scaler import GradScaler
        except ImportError:
            return
        orig = GradScaler.__dict__.get("_maybe_opt_step")
        if orig is None:
            log.debug("echo_trace: GradScaler has no _maybe_opt_step; skipped steps not seen")
            return
        watch = self

        def _maybe_opt_step(scaler: Any, optimizer: Any, optimizer_state: dict[str, Any],
                            *args: Any, **kwargs: Any) -> Any:
            retval = orig(scaler, optimizer, optimizer_state, *args, **kwargs)
            watch._after(optimizer, optimizer_state)
            return retval

        self._cls, self._orig = GradScaler, orig
        GradScaler._maybe_opt_step = _maybe_opt_step  # type: ignore[method-assign, assignment]

    def remove(self) -> None:
        """Restore ``GradScaler`` (idempotent)."""
        if self._cls is not None:
            self._cls._maybe_opt_step = self._orig
            self._cls = self._orig = None

    def _after(self, optimizer: Any, state: dict[str, Any]) -> None:
        rec = self.rec
        if not rec.enabled:
            return
        try:
            found = state.get("found_inf_per_device") or {}
            if not sum(float(v.item()) for v in found.values()):
                return
            step = rec.step
            recording = rec.recording
            if not self._warned:
                self._warned = True
                log.warning("echo_trace: GradScaler skipped optimizer.step() (inf/NaN "
                            "gradients); the step still counts and its STEP event is marked "
                            "grad_scaler_skipped (further skips are marked, not logged)")
            if recording:
                self.skipped.append(step)
            self.on_skip(optimizer)  # may close the step (and the window) right now
        except Exception as e:  # noqa: BLE001 - never raise into the job
            rec.fail("GradScaler watch", e)

    def step_args(self, step: int) -> dict[str, Any]:
        """Extra args of the STEP event of ``step``: ``grad_scaler_skipped`` if it was."""
        return {"grad_scaler_skipped": True} if step in self.skipped else {}
