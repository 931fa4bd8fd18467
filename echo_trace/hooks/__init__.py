"""Hooks into the training step: what the job's own code does, as trace events.

:mod:`.modules` times each traced module's forward and backward (``FW.<path>`` /
``BW.<path>``; global forward hooks installed only while the window is open, grad hooks for
backward) with the forward FLOPs of :mod:`.flops` and the bytes autograd saves for backward
measured by :mod:`.saved`; :mod:`.optim` records ``UPDATE.<optimizer>`` and counts steps
through torch's global optimizer-step hooks; :mod:`.watch` counts the steps GradScaler
skips. Every hook is a handle removed when capture ends. Importing this package imports
none of its modules (``modules``, ``saved`` and ``flops`` import torch).
"""

from __future__ import annotations

__all__ = ["flops", "modules", "optim", "saved", "watch"]
