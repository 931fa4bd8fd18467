"""The writer's pacing: its share of time while the job trains, and no pacing once waited for."""

from __future__ import annotations

import threading
import time

import pytest

from echo_trace.pacing import Pacer


def _busy(pacer: Pacer, work_s: float) -> None:
    """CPU work of ``work_s`` seconds (thread time) with the pacer called in between."""
    spent = time.thread_time()
    while time.thread_time() - spent < work_s:
        sum(range(2000))
        pacer()


def test_the_pacer_sleeps_so_that_work_is_at_most_its_share() -> None:
    pacer = Pacer(share=0.25)
    _busy(pacer, 0.05)
    # work 0.05 s at a 25 % share: about 3x as long asleep (the last slice may be unslept)
    assert pacer.slept_s >= 0.05 * 3 * 0.8


def test_hurry_stops_pacing_and_wakes_a_sleep() -> None:
    pacer = Pacer(share=0.01)  # would sleep 99x its work
    done = threading.Event()

    def work() -> None:
        _busy(pacer, 0.02)
        done.set()

    t = threading.Thread(target=work)
    t.start()
    time.sleep(0.05)
    pacer.hurry()
    assert done.wait(5.0)  # unpaced, it finishes at once (paced: about 2 s)
    t.join()
    assert pacer.hurried and pacer.slept_s < 1.5


def test_a_share_out_of_range_is_refused() -> None:
    with pytest.raises(ValueError, match="share"):
        Pacer(share=0.0)
