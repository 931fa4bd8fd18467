"""The event buffer every hook writes into.

One :class:`Recorder` per capture. Hooks call :meth:`Recorder.record` (hot path) or
:meth:`Recorder.complete` for finished slices, :meth:`Recorder.comm_begin` /
:meth:`Recorder.comm_end` for communication in flight (which get a lane of their own so
slices never partially overlap on one Perfetto track), and :meth:`Recorder.counter` for
memory samples. Hooks wrap their bodies with :meth:`Recorder.guard` (or an equivalent
``try``/``except`` calling :meth:`Recorder.fail`) so that any internal error disables
capture once, never the job.

Times are local microseconds from :meth:`Recorder.now_us` (``time.perf_counter_ns`` / 1000);
the writer maps them to the trace clock. The buffer is bounded: past ``max_events`` events
are dropped and counted, with one warning.

Cheap recording: :attr:`Recorder.events` holds one plain tuple per event (see
:data:`RECORD_FIELDS`), and the Chrome event dicts are built only when the trace is
written (:meth:`Recorder.event_dicts`). ``args`` of a record is never mutated, so hooks pass
one shared dict of per-module constants and put the per-call values in ``extra``. The
contract's ``occ`` (occurrence of a name within its step) is numbered at that time too,
in record order, for records made with ``occ=None``; communication numbers its ops at
issue (:meth:`occurrence`), since they may complete out of order.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from echo_trace.contract import COMM_TID_BASE, COMPUTE_TID, STEP_TID

__all__ = ["COMM_TID_BASE", "COMPUTE_TID", "RECORD_FIELDS", "STEP_TID", "CommToken",
           "Recorder"]

log = logging.getLogger("echo_trace")


#: The fields of one record in :attr:`Recorder.events`, in order. ``ph`` is ``"X"`` or
#: ``"C"``; ``dur`` (µs) is None for counters; ``occ`` None means "numbered when written";
#: ``args`` (shared, read-only) and ``extra`` (per call) are dicts or None, merged in that
#: order into the event's ``args`` together with ``step`` and ``occ``.
RECORD_FIELDS = ("ph", "name", "cat", "tid", "ts", "dur", "step", "occ", "args", "extra")

_perf_counter_ns = time.perf_counter_ns


def _release() -> None:
    time.sleep(0)


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
        #: One tuple per event, fields :data:`RECORD_FIELDS`; every event goes through
        #: ``events.append`` (list.append is atomic, so threads need no lock).
        self.events: list[tuple[Any, ...]] = []
        self.dropped = 0
        self.enabled = True
        self.recording = False  # True only inside the captured step window
        self.step = -1  # the captured step events belong to
        self.disabled_reason: str | None = None
        self._lock = threading.Lock()
        self._lanes: list[bool] = []  # lane k busy?
        self._occ: dict[tuple[int, str], int] = {}  # explicit occurrence counters
        self._warned_full = False

    # ----------------------------------------------------------------- clock
    @staticmethod
    def now_us() -> float:
        return _perf_counter_ns() / 1000.0

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
    def _full(self) -> None:
        self.dropped += 1
        if not self._warned_full:
            self._warned_full = True
            log.warning("echo_trace: event buffer full (%d events); further events dropped "
                        "(raise max_events or narrow the step window)", self.max_events)

    def occurrence(self, name: str) -> int:
        """0-based count of ``name`` so far in the current step (the contract's ``occ``),
        for names numbered at issue (communication); other names are numbered when written."""
        key = (self.step, name)
        with self._lock:
            k = self._occ.get(key, 0)
            self._occ[key] = k + 1
        return k

    def record(self, name: str, cat: str, ts_us: float, dur_us: float,
               args: dict[str, Any] | None = None, extra: dict[str, Any] | None = None,
               tid: int = COMPUTE_TID) -> None:
        """Record a finished slice of the current step, ``occ`` numbered when written (the
        hot path: no copy, no lock; ``args`` must not change afterwards)."""
        events = self.events
        if len(events) < self.max_events:
            events.append(("X", name, cat, tid, ts_us, dur_us, self.step, None, args, extra))
        else:
            self._full()

    def complete(self, name: str, cat: str, ts_us: float, dur_us: float,
                 args: dict[str, Any] | None = None, *, tid: int = COMPUTE_TID,
                 step: int | None = None, occ: int | None = None,
                 extra: dict[str, Any] | None = None) -> None:
        """Record a finished slice (``ph: X``); ``args`` is copied, ``extra`` kept. ``step``
        defaults to the current step, ``occ`` (None) to numbering at write time."""
        events = self.events
        if len(events) < self.max_events:
            events.append(("X", name, cat, tid, ts_us, dur_us,
                           self.step if step is None else step, occ,
                           dict(args) if args else None, extra))
        else:
            self._full()

    def comm_begin(self, name: str, args: dict[str, Any]) -> CommToken:
        """A communication op was issued now; returns the token to close at completion."""
        with self._lock:
            lanes = self._lanes
            lane = next((k for k, busy in enumerate(lanes) if not busy), len(lanes))
            if lane == len(lanes):
                lanes.append(True)
            else:
                lanes[lane] = True
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

    def wait_comm_idle(self, timeout_s: float) -> bool:
        """Wait up to ``timeout_s`` for every open communication op to be closed; True
        when none is open. A collective the job already waited for can still be closing:
        its future's callback runs on the backend's thread after ``wait()`` returned."""
        deadline = time.monotonic() + timeout_s
        while True:
            with self._lock:
                busy = any(self._lanes)
            if not busy:
                return True
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.0005)

    def counter(self, name: str, ts_us: float, values: dict[str, float]) -> None:
        """A counter sample (``ph: C``), e.g. ``counter("memory", t, {"rss_bytes": ...})``;
        takes ownership of ``values``."""
        events = self.events
        if len(events) < self.max_events:
            events.append(("C", name, "memory", None, ts_us, None, self.step, None, values,
                           None))
        else:
            self._full()

    def new_step(self, step: int) -> None:
        """Events recorded from now on belong to ``step``."""
        self.step = step

    # ----------------------------------------------------------------- reading
    def steps_recorded(self) -> set[int]:
        """Steps that have at least one ``X`` event."""
        return {r[6] for r in list(self.events) if r[0] == "X"}

    def event_dicts(self) -> list[dict[str, Any]]:
        """The events as Chrome-style dicts in record order: ``name, cat, ph, tid, ts, dur,
        args`` (``X``; ``args`` with ``step`` and ``occ``) or ``name, cat, ph, ts, args``
        (``C``), times in local µs, negative durations clamped to 0."""
        return self.to_dicts(*self.snapshot())

    def snapshot(self, *, detach: bool = False) -> tuple[list[tuple[Any, ...]], dict[Any, int]]:
        """The records and the explicit occurrence counters, as of now (cheap: no dict is
        built). ``detach`` hands the buffer over: the recorder starts an empty one, so the
        memory is held once, by whoever converts the snapshot (:meth:`to_dicts`)."""
        with self._lock:
            counts = dict(self._occ)  # implicit numbers continue after explicit ones
        if detach:
            records, self.events = self.events, []
            return records, counts
        return list(self.events), counts

    @staticmethod
    def to_dicts(records: list[tuple[Any, ...]], counts: dict[Any, int], *,
                 yield_every: int = 0, pause: Callable[[], None] | None = None,
                 ) -> list[dict[str, Any]]:
        """:meth:`event_dicts` of a :meth:`snapshot` (safe on any thread). ``yield_every``
        > 0 calls ``pause`` (default ``time.sleep(0)``: releases the GIL) every that many
        records, so a background conversion never holds the training thread for long."""
        counts = dict(counts)
        out: list[dict[str, Any]] = []
        rest = pause or _release
        for k, (ph, name, cat, tid, ts, dur, step, occ, args, extra) in enumerate(records):
            if yield_every and k % yield_every == 0:
                rest()
            if ph != "X":
                out.append({"name": name, "cat": cat, "ph": ph, "ts": ts,
                            "args": dict(args) if args else {}})
                continue
            a = dict(args) if args else {}
            if extra:
                a.update(extra)
            if occ is None:
                key = (step, name)
                occ = counts.get(key, 0)
                counts[key] = occ + 1
            a["step"] = step
            a["occ"] = occ
            out.append({"name": name, "cat": cat, "ph": "X", "tid": tid, "ts": ts,
                        "dur": dur if dur > 0.0 else 0.0, "args": a})
        return out
