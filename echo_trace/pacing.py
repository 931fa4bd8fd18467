"""Keep the background writer from slowing the training thread down (CPU-bound ones above all).

After the capture window closes, the writer thread attributes the GPU activity, builds the
events, the DAG and the files: pure Python for the most part, so it competes with the training
thread for the GIL. CPython hands the GIL over every switch interval (5 ms) when both threads
want it, so an unpaced writer takes up to half of a launch-bound job's host time for as long as
it runs (the H200 recording of a Llama step that is CPU-launch-bound ran 33–57 % slower for
the steps after the window).

:class:`Pacer` bounds the writer's share of time while the job trains: at each call (every few
hundred records, where the writer used to ``time.sleep(0)``) it sleeps so that its work is at
most ``share`` of the wall time: after working ``w`` seconds of its own CPU time
(``time.thread_time``: time spent waiting for the GIL is not work) it sleeps
``w · (1 − share) / share``. The job then keeps at least ``1 − share`` of the GIL, and the
files take ``1 / share`` times longer to appear. Whoever waits for the files (``stop()``,
exit, SIGTERM: :meth:`Pacer.hurry`) lifts the bound at once: the writer then runs flat out.
"""

from __future__ import annotations

import threading
import time

__all__ = ["DEFAULT_SHARE", "Pacer"]

#: the writer's share of wall time while the job trains
DEFAULT_SHARE = 0.2
#: work done between two sleeps at most (s): short enough that no training step waits long
_SLICE_S = 0.002


class Pacer:
    """Call it at regular points of background work (see the module docstring)."""

    def __init__(self, share: float = DEFAULT_SHARE) -> None:
        if not 0.0 < share <= 1.0:
            raise ValueError(f"share={share!r}: expected a fraction in (0, 1]")
        self.share = share
        self._hurry = threading.Event()
        self._since = time.thread_time()
        self.slept_s = 0.0  # total time spent pacing (for tests and reports)

    def hurry(self) -> None:
        """Somebody waits for the work: stop pacing (also wakes a pacing sleep)."""
        self._hurry.set()

    @property
    def hurried(self) -> bool:
        return self._hurry.is_set()

    def __call__(self) -> None:
        worked = time.thread_time() - self._since
        if worked < _SLICE_S:
            time.sleep(0)  # at least let a waiting thread have the GIL
            return
        if not self._hurry.is_set() and self.share < 1.0:
            t0 = time.perf_counter()
            self._hurry.wait(worked * (1.0 - self.share) / self.share)
            self.slept_s += time.perf_counter() - t0
        else:
            time.sleep(0)
        self._since = time.thread_time()
