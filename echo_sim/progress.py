"""Progress of long steps (loading, converting, out-of-core analysis) on stderr.

On a terminal a tqdm bar appears once the step has run :data:`SHOW_AFTER_S` seconds (short
steps print nothing). When stderr is not a terminal (a batch job's log, CI) the bar would be
``\\r`` noise, so :class:`Progress` writes one plain line instead, first after
:data:`LOG_FIRST_S` seconds and then every :data:`LOG_EVERY_S` seconds, plus a last line
when a step that printed anything ends::

    echo_sim: converting: 384/1024 ranks (38 %), 41 s, about 66 s left

The time left extrapolates the pace since the first unit finished (none is given before a
second one has), so a slow start does not inflate it.

``enabled=False`` prints nothing; ``None`` (the default) prints as above; ``True`` shows the
bar at once and always writes the last line. Nothing is read from the environment and
nothing is printed at import.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterable, Iterator
from types import TracebackType
from typing import IO, Any, TypeVar

__all__ = ["LOG_EVERY_S", "LOG_FIRST_S", "SHOW_AFTER_S", "Progress", "progress_iter"]

SHOW_AFTER_S = 1.0
"""A terminal bar appears after this many seconds (tqdm's ``delay``)."""
LOG_FIRST_S = 5.0
"""Without a terminal, the first line is written after this many seconds."""
LOG_EVERY_S = 15.0
"""Without a terminal, one line every this many seconds after the first."""

T = TypeVar("T")


class Progress:
    """Count ``total`` units of work (``unit``: "rank", "file"); use as a context manager.

    ``update(n)`` adds done units; ``note`` replaces the text after the count (what runs
    now). ``stream``: where to write (default ``sys.stderr``, looked up when made).
    """

    def __init__(self, total: int, desc: str, *, unit: str = "it",
                 enabled: bool | None = None, stream: IO[str] | None = None) -> None:
        self.total = max(0, int(total))
        self.desc = desc
        self.unit = unit
        self.done = 0
        self._stream = stream if stream is not None else sys.stderr
        self._on = enabled is not False
        self._forced = enabled is True
        self._t0 = time.monotonic()
        self._first: tuple[float, int] | None = None  # (when, done) at the first update
        self._next_log = self._t0 + LOG_FIRST_S
        self._logged = False
        self._bar: Any = None
        if self._on and _isatty(self._stream):
            from tqdm import tqdm

            self._bar = tqdm(total=self.total or None, desc=desc, unit=unit,
                             file=self._stream, leave=False,
                             delay=0.0 if self._forced else SHOW_AFTER_S)

    def update(self, n: int = 1) -> None:
        """Mark ``n`` more units done."""
        self.done += n
        now = time.monotonic()
        if self._first is None:
            self._first = (now, self.done)
        if not self._on:
            return
        if self._bar is not None:
            self._bar.update(n)
            return
        if now >= self._next_log:
            self._write(self._line(now))
            self._next_log = now + LOG_EVERY_S

    def _line(self, now: float) -> str:
        spent = now - self._t0
        if self.total:
            pct = 100.0 * self.done / self.total
            left = ""
            if self._first is not None and self._first[1] < self.done < self.total:
                # the pace since the first unit finished: a start-up before it (search's
                # operator probes, a file's header) is not extrapolated over the rest
                t1, d1 = self._first
                left = (f", about {_dur((now - t1) * (self.total - self.done) / (self.done - d1))}"
                        " left")
            return (f"echo_sim: {self.desc}: {self.done}/{self.total} {self.unit}s "
                    f"({pct:.0f} %), {_dur(spent)}{left}")
        return f"echo_sim: {self.desc}: {self.done} {self.unit}s, {_dur(spent)}"

    def _write(self, line: str) -> None:
        try:
            self._stream.write(line + "\n")
            self._stream.flush()
        except (OSError, ValueError):  # a closed or broken stderr: progress is not worth dying
            self._on = False
            return
        self._logged = True

    def close(self) -> None:
        """End the step: close the bar, or write the last line if any was written."""
        if self._bar is not None:
            self._bar.close()
            self._bar = None
        elif self._on and (self._logged or self._forced):
            self._write(self._line(time.monotonic()) + " (done)")
        self._on = False

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, et: type[BaseException] | None, e: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()


def progress_iter(items: Iterable[T], total: int, desc: str, *, unit: str = "it",
                  enabled: bool | None = None) -> Iterator[T]:
    """Yield ``items``, counting each one on a :class:`Progress`."""
    with Progress(total, desc, unit=unit, enabled=enabled) as bar:
        for item in items:
            yield item
            bar.update(1)


def _isatty(stream: IO[str]) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError, OSError):
        return False


def _dur(seconds: float) -> str:
    s = int(round(seconds))
    if s < 120:
        return f"{s} s"
    return f"{s // 60} min {s % 60:02d} s"
