"""Capture settings: one frozen dataclass, and the ``TRACE_*`` environment variables.

Every environment variable echo_trace reads for its settings is declared in :data:`ENV_VARS`
and read only by :func:`CaptureConfig.from_env`, which runs at activation (never at import).

Step window
    Steps are counted from 0: step ``k`` is the iteration that runs after ``k`` steps have
    completed (``k`` optimizer steps, or ``k`` calls of ``cap.step()`` once the user calls
    it). Capture records steps ``start_step, ..., end_step - 1`` (``end_step`` is
    exclusive) and writes its files as soon as step ``end_step`` would begin, i.e. right
    after the optimizer step (or ``cap.step()``) that completes step ``end_step - 1``.
    ``start_step=2, end_step=5`` records steps 2, 3 and 4; steps 0 and 1 are warm-up.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, replace

__all__ = ["DEFAULT_MAX_EVENTS", "ENV_VARS", "TRACE_FORMATS", "TRUE_SPELLINGS", "CaptureConfig",
           "env_flag", "env_int"]

DEFAULT_MAX_EVENTS = 2_000_000

#: Valid ``TRACE_FORMAT`` / ``trace_format`` values: ``echo`` writes echo's rank directory
#: (``docs/trace-format.md``); ``byteprofile`` writes it too and, in the same directory,
#: ByteProfile's layout (:mod:`echo_trace.byteprofile`).
TRACE_FORMATS: tuple[str, ...] = ("echo", "byteprofile")

#: Every environment variable that configures capture, with its meaning and default.
ENV_VARS: dict[str, str] = {
    "TRACE_ON": "1 (or true/yes/on, any case) turns capture on in every process that imports "
                "torch (default: off)",
    "TRACE_START_STEP": "first step recorded; earlier steps are warm-up (default: 2, or 0 when "
                        "TRACE_END_STEP alone is 1 or 2)",
    "TRACE_END_STEP": "first step NOT recorded; files are written when it begins "
                      "(default: TRACE_START_STEP + 3)",
    "TRACE_DIR": "root of the output, one <node_rank>_<local_rank>/ per process (default: ./traces)",
    "TRACE_GZIP": "1 writes trace.json.gz instead of trace.json (default: 0)",
    "TRACE_DEPTH": "module depth traced as FW/BW events; unset = leaf modules (default: unset)",
    "TRACE_MEMORY_INTERVAL_MS": "memory sampling period in ms; 0 turns the sampler off; per-step peaks are also sampled at every step boundary (default: 50)",
    "TRACE_OVERWRITE": "1 replaces a non-empty rank directory, as a whole (default: 0)",
    "TRACE_MICRO_BATCH": "samples per forward recorded in meta.json (default: dim 0 of the "
                         "model's first tensor input)",
    "TRACE_MAX_EVENTS": f"event buffer bound per process (default: {DEFAULT_MAX_EVENTS})",
    "TRACE_KINETO_RAW": "1 also writes kineto_raw.json.gz on GPUs: the profiler events echo's "
                        "attribution read, to replay offline or attach to a bug report "
                        "(default: 0)",
    "TRACE_FORMAT": "echo, or byteprofile: also write ByteProfile's layout in each rank "
                    "directory (bps_trace_local_rank<L>_<N>step.json with the dependencies as "
                    "args.argN, arg_namesINpara_names.txt, gradient_name_list.txt; dag.gml "
                    "is shared) (default: echo)",
}

#: Values of a flag that mean "on" (compared stripped and lower-cased); ``echo_trace.pth``
#: spells the same tuple for ``TRACE_ON`` (a test pins them equal).
TRUE_SPELLINGS = ("1", "true", "yes", "on")
_TRUE = TRUE_SPELLINGS
_FALSE = ("", "0", "false", "no", "off")


def env_flag(value: str | None, name: str) -> bool:
    """Parse a boolean environment value (``1/true/yes/on`` or ``0/false/no/off/''``)."""
    v = (value or "").strip().lower()
    if v in _TRUE:
        return True
    if v in _FALSE:
        return False
    raise ValueError(f"{name}={value!r}: expected one of 1, 0, true, false, yes, no, on, off")


def env_int(env: Mapping[str, str], name: str) -> int | None:
    """An integer environment value; ``None`` when unset or blank."""
    raw = env.get(name, "").strip()
    if not raw:
        return None
    try:
        return int(raw)
    except ValueError:
        raise ValueError(f"{name}={raw!r}: expected an integer") from None


def _env_float(env: Mapping[str, str], name: str) -> float | None:
    raw = env.get(name, "").strip()
    if not raw:
        return None
    try:
        value = float(raw)
    except ValueError:
        raise ValueError(f"{name}={raw!r}: expected a finite number") from None
    if not math.isfinite(value):
        raise ValueError(f"{name}={raw!r}: expected a finite number (inf and nan are refused)")
    return value


@dataclass(frozen=True, kw_only=True)
class CaptureConfig:
    """What to capture and where (see the module docstring for the step window).

    ``out_dir``: root directory; ``start_step``: first recorded step (>= 0); ``end_step``:
    first step not recorded (> start_step; None means ``start_step + 3``); ``gzip``: write
    ``trace.json.gz``; ``depth``: None traces leaf modules, ``d`` traces modules ``d`` levels
    below the outermost module (and leaves above that level); ``memory_interval_ms``: sampler
    period, 0 = off; ``overwrite``: allow replacing a non-empty rank directory;
    ``max_events``: event buffer bound; ``micro_batch``: the samples per forward, recorded in
    meta.json instead of the detected one (None: detected from the model's input);
    ``kineto_raw``: on a Kineto-timed (GPU) run, also write ``kineto_raw.json.gz``, every
    profiler event of the window with the accessors echo reads (see
    :mod:`echo_trace.gpu.recording`); ``trace_format``: one of :data:`TRACE_FORMATS`,
    ``"byteprofile"`` also writes ByteProfile's files (:mod:`echo_trace.byteprofile`).
    """

    out_dir: str = "traces"
    start_step: int = 2
    end_step: int | None = None
    gzip: bool = False
    depth: int | None = None
    memory_interval_ms: float = 50.0
    overwrite: bool = False
    max_events: int = DEFAULT_MAX_EVENTS
    micro_batch: int | None = None
    kineto_raw: bool = False
    trace_format: str = "echo"

    def __post_init__(self) -> None:
        if not isinstance(self.start_step, int) or self.start_step < 0:
            raise ValueError(f"start_step={self.start_step!r}: expected an integer >= 0")
        if self.end_step is None:
            object.__setattr__(self, "end_step", self.start_step + 3)
        if not isinstance(self.end_step, int) or self.end_step <= self.start_step:
            raise ValueError(f"end_step={self.end_step!r}: expected an integer > start_step "
                             f"({self.start_step}); steps start_step..end_step-1 are recorded")
        if self.depth is not None and (not isinstance(self.depth, int) or self.depth < 0):
            raise ValueError(f"depth={self.depth!r}: expected None (leaf modules) or an integer >= 0")
        if isinstance(self.memory_interval_ms, bool) \
                or not isinstance(self.memory_interval_ms, int | float) \
                or not math.isfinite(self.memory_interval_ms) or self.memory_interval_ms < 0:
            raise ValueError(f"memory_interval_ms={self.memory_interval_ms!r}: expected a finite "
                             "number >= 0 (0 turns the sampler off)")
        if not isinstance(self.max_events, int) or self.max_events < 1:
            raise ValueError(f"max_events={self.max_events!r}: expected an integer >= 1")
        if self.micro_batch is not None and (not isinstance(self.micro_batch, int)
                                             or self.micro_batch < 1):
            raise ValueError(f"micro_batch={self.micro_batch!r}: expected None (detected) "
                             "or an integer >= 1")
        if not str(self.out_dir):
            raise ValueError("out_dir='': expected a directory path")
        if self.trace_format not in TRACE_FORMATS:
            raise ValueError(f"trace_format={self.trace_format!r}: expected one of "
                             f"{', '.join(TRACE_FORMATS)}")

    @property
    def last_step(self) -> int:
        """The last recorded step (``end_step - 1``)."""
        assert self.end_step is not None  # set in __post_init__
        return self.end_step - 1

    def with_changes(self, **changes: object) -> CaptureConfig:
        """A copy with some fields changed (validated again)."""
        return replace(self, **changes)  # type: ignore[arg-type]

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> CaptureConfig:
        """Build the config from the ``TRACE_*`` variables (see :data:`ENV_VARS`).

        Raises ``ValueError`` naming the variable when a value cannot be parsed.
        """
        env = os.environ if environ is None else environ
        start = env_int(env, "TRACE_START_STEP")
        end = env_int(env, "TRACE_END_STEP")
        if start is None:  # TRACE_END_STEP alone at or below the default start: from step 0
            start = 2 if end is None or end > 2 else 0
        depth = env_int(env, "TRACE_DEPTH")
        interval = _env_float(env, "TRACE_MEMORY_INTERVAL_MS")
        if interval is not None and interval < 0:
            raise ValueError(f"TRACE_MEMORY_INTERVAL_MS={interval!r}: expected a finite number "
                             ">= 0 (0 turns the sampler off)")
        max_events = env_int(env, "TRACE_MAX_EVENTS")
        trace_format = env.get("TRACE_FORMAT", "").strip().lower() or "echo"
        if trace_format not in TRACE_FORMATS:
            raise ValueError(f"TRACE_FORMAT={env.get('TRACE_FORMAT')!r}: expected one of "
                             f"{', '.join(TRACE_FORMATS)}")
        return cls(
            out_dir=env.get("TRACE_DIR", "").strip() or "traces",
            start_step=start,
            end_step=end,
            gzip=env_flag(env.get("TRACE_GZIP"), "TRACE_GZIP"),
            depth=depth,
            memory_interval_ms=50.0 if interval is None else interval,
            overwrite=env_flag(env.get("TRACE_OVERWRITE"), "TRACE_OVERWRITE"),
            max_events=DEFAULT_MAX_EVENTS if max_events is None else max_events,
            micro_batch=env_int(env, "TRACE_MICRO_BATCH"),
            kineto_raw=env_flag(env.get("TRACE_KINETO_RAW"), "TRACE_KINETO_RAW"),
            trace_format=trace_format,
        )

    @staticmethod
    def trace_on(environ: Mapping[str, str] | None = None) -> bool:
        """True when ``TRACE_ON`` asks for capture (an unparsable value counts as off)."""
        env = os.environ if environ is None else environ
        try:
            return env_flag(env.get("TRACE_ON"), "TRACE_ON")
        except ValueError:
            return False
