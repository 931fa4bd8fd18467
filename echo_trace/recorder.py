"""The event buffer every hook writes into.

One :class:`Recorder` per capture. Hooks call :meth:`Recorder.complete` for finished slices,
:meth:`Recorder.comm_begin` / :meth:`Recorder.comm_end` for communication in flight (which
get a lane of their own so slices never partially overlap on one Perfetto track), and
:meth:`Recorder.counter` for memory samples. Hooks wrap their bodies with
:meth:`Recorder.guard` so that any internal error disables capture once, never the job.

Times are local microseconds from :meth:`Recorder.now_us` (``time.perf_counter_ns`` / 1000);
the writer maps them to the aligned clock. The buffer is bounded: past ``max_events`` events
are dropped and counted, with one warning.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

__all__ = ["COMM_TID_BASE", "COMPUTE_TID", "STEP_TID", "CommToken", "Recorder"]

log = logging.getLogger("echo_trace")

COMPUTE_TID = 0
STEP_TID = 1
COMM_TID_BASE = 100


@dataclass
class CommToken:
    """A communication operation in flight: returned by ``comm_begin``, closed by ``comm_end``."""

    name: str
    ts_us: float
    lane: int
    args: dict[str, Any]
    step: int
    occ: int
    closed: bool = False


class Recorder:
    """Bounded, thread-safe event buffer with the capture's on/off switch."""

    def __init__(self, *, rank: int = 0, max_events: int = 2_000_000) -> None:
        self.rank = rank
        self.max_events = max_events
        self.events: list[dict[str, Any]] = []
        self.dropped = 0
        self.enabled = True
        self.recording = False  # True only inside the captured step window
        self.step = -1  # the captured step events belong to
        self.disabled_reason: str | None = None
        self._lock = threading.Lock()
        self._lanes: list[bool] = []  # lane k busy?
        self._occ: dict[tuple[int, str], int] = {}
        self._warned_full = False

    # ----------------------------------------------------------------- clock
    @staticmethod
    def now_us() -> float:
        return time.perf_counter_ns() / 1000.0

    # ----------------------------------------------------------------- state
    @property
    def active(self) -> bool:
        """True when hooks should record (capture on and inside the step window)."""
        return self.enabled and self.recording

    def fail(self, where: str, exc: BaseException) -> None:
        """An internal error: log it once, turn capture off; the training step goes on."""
        if self.disabled_reason is None:
            self.disabled_reason = f"{where}: {type(exc).__name__}: {exc}"
            log.warning("echo_trace: error in %s (%s: %s); capture disabled, training continues",
                        where, type(exc).__name__, exc)
        self.enabled = False

    @contextlib.contextmanager
    def guard(self, where: str) -> Iterator[None]:
        """``with rec.guard("forward hook"):`` — swallow and report any internal error."""
        try:
            yield
        except Exception as e:  # noqa: BLE001 - hooks must never raise into the job
            self.fail(where, e)

    # ----------------------------------------------------------------- events
    def _append(self, ev: dict[str, Any]) -> None:
        if len(self.events) >= self.max_events:
            self.dropped += 1
            if not self._warned_full:
                self._warned_full = True
                log.warning("echo_trace: event buffer full (%d events); further events dropped "
                            "(raise max_events or narrow the step window)", self.max_events)
            return
        self.events.append(ev)

    def occurrence(self, name: str) -> int:
        """0-based count of ``name`` so far in the current step (the contract's ``occ``)."""
        key = (self.step, name)
        with self._lock:
            k = self._occ.get(key, 0)
            self._occ[key] = k + 1
        return k

    def complete(self, name: str, cat: str, ts_us: float, dur_us: float,
                 args: dict[str, Any] | None = None, *, tid: int = COMPUTE_TID,
                 step: int | None = None, occ: int | None = None) -> None:
        """Record a finished slice (``ph: X``) with ``step`` and ``occ`` added to its args."""
        a = dict(args) if args else {}
        a["step"] = self.step if step is None else step
        a["occ"] = self.occurrence(name) if occ is None else occ
        self._append({"name": name, "cat": cat, "ph": "X", "tid": tid, "ts": ts_us,
                      "dur": max(dur_us, 0.0), "args": a})

    def complete_owned(self, name: str, cat: str, ts_us: float, dur_us: float,
                       args: dict[str, Any], tid: int = COMPUTE_TID) -> None:
        """:meth:`complete` for hot paths: takes ownership of ``args`` (adds step/occ in
        place, no copy) and always uses the current step."""
        step = self.step
        key = (step, name)
        with self._lock:
            k = self._occ.get(key, 0)
            self._occ[key] = k + 1
        args["step"] = step
        args["occ"] = k
        if len(self.events) >= self.max_events:
            self._append(args)  # counts and warns
            return
        self.events.append({"name": name, "cat": cat, "ph": "X", "tid": tid, "ts": ts_us,
                            "dur": dur_us if dur_us > 0.0 else 0.0, "args": args})

    def comm_begin(self, name: str, args: dict[str, Any]) -> CommToken:
        """A communication op was issued now; returns the token to close at completion."""
        with self._lock:
            for lane, busy in enumerate(self._lanes):
                if not busy:
                    break
            else:
                lane = len(self._lanes)
                self._lanes.append(False)
            self._lanes[lane] = True
        return CommToken(name, self.now_us(), lane, args, self.step, self.occurrence(name))

    def comm_end(self, token: CommToken, end_us: float | None = None) -> None:
        """The op's result is ready (may run on another thread, e.g. a future callback)."""
        if token.closed:
            return
        token.closed = True
        end = self.now_us() if end_us is None else end_us
        with self._lock:
            self._lanes[token.lane] = False
        if self.enabled:
            self.complete(token.name, "Comm", token.ts_us, end - token.ts_us, token.args,
                          tid=COMM_TID_BASE + token.lane, step=token.step, occ=token.occ)

    def counter(self, name: str, ts_us: float, values: dict[str, float]) -> None:
        """A counter sample (``ph: C``), e.g. ``counter("memory", t, {"rss_bytes": ...})``."""
        self._append({"name": name, "cat": "memory", "ph": "C", "ts": ts_us, "args": values})

    def new_step(self, step: int) -> None:
        """Events recorded from now on belong to ``step``."""
        self.step = step
