"""Timers and samplers: when things ran on one clock shared by all ranks, and how much
memory they held.

:mod:`.clock` holds the trace clock (local ``perf_counter`` mapped to Unix time, aligned to
rank 0 by a collective at the first captured step) and the CPU and CUDA-event timers that
turn time points into events; :mod:`.memory` samples host RSS, the CUDA allocator and NVML
on a background thread and takes the per-step peaks. The Kineto GPU timer, which replaces
the CUDA-event timer when it can, lives in :mod:`echo_trace.gpu`. Importing this package
imports none of its modules.
"""

from __future__ import annotations

__all__ = ["clock", "memory"]
