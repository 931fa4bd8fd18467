"""The one adapter between torch's profiler event objects and the torch-free attribution.

``_ProfilerResult.events()`` yields ``_KinetoEvent`` objects whose accessors change across
the torch versions echo supports (2.4–2.13): ``activity_type()`` exists only from 2.13 on,
``is_user_annotation()`` came late, and so on. Everything echo reads from them goes through
:func:`read_events`, which feature-detects each accessor once per event type and has a
fallback for every optional one:

========================  =========================================================
accessor                  without it
========================  =========================================================
``activity_type()``       a device event is classified by name: user annotations and
                          synchronisation records (``...Sync...``, ``Stream Wait...``)
                          are not work; ``Memcpy...`` / ``Memset...`` are copies and
                          fills; everything else is a kernel (torch 2.11 recordings)
``is_user_annotation()``  False
``end_ns()``              ``start_ns() + duration_ns()``
``duration_ns()``         ``end_ns() - start_ns()``
``sequence_nr()``         -1 (backward then goes to the remainder rules)
``fwd_thread_id()``       0
``device_resource_id()``  0
``nbytes()``              0
========================  =========================================================

``name()``, ``device_type()``, ``start_ns()``, ``correlation_id()`` and
``linked_correlation_id()`` are required (:data:`REQUIRED`): :func:`missing_accessors`
names the ones a torch lacks, and the timer then falls back to CUDA events with one
warning instead of switching capture off.

The same code reads a recording (:mod:`echo_trace.gpu.recording`): :class:`RecordedEvent`
answers the same accessors from a dict, so the live chain and its offline replay cannot
drift apart. Times are converted to local ``perf_counter`` µs with ``unix_minus_perf_ns``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from echo_trace.gpu.attribute import Activity, CpuOp, Launch

__all__ = ["ACCESSORS", "PAUSE_EVERY", "RAW_FORMAT", "REQUIRED", "AttributionInputs", "RecordedEvent",
           "event_row", "missing_accessors", "read_events", "recording_doc"]

#: events between two calls of a ``pause`` callback (a background thread's pacing)
PAUSE_EVERY = 512
#: ``format`` of ``kineto_raw.json.gz`` (a superset of the shared H200 recordings' layout)
RAW_FORMAT = "echo-kineto-raw/1"

#: every accessor a recording keeps (``kineto_raw.json.gz``), in this order
ACCESSORS = ("name", "device_type", "start_ns", "end_ns", "duration_ns", "correlation_id",
             "linked_correlation_id", "device_resource_id", "sequence_nr", "fwd_thread_id",
             "is_user_annotation", "start_thread_id", "end_thread_id", "device_index",
             "is_async", "activity_type", "nbytes")
#: accessors without which GPU activity cannot be tied to the CPU op that launched it
REQUIRED = ("name", "device_type", "start_ns", "correlation_id", "linked_correlation_id")

_EVAL = "autograd::engine::evaluate_function"
#: dispatcher ops of c10d collectives (``c10d::allreduce_``; functional collectives'
#: ``_c10d_functional::all_reduce``): one per operation, around its kernel launches
_COMM_OPS = ("c10d::", "_c10d_functional::")
#: ``activity_type()`` of device events that are GPU work (as the ``cat`` of Kineto JSON)
_KINDS = {"kernel": "kernel", "gpu_memcpy": "memcpy", "gpu_memset": "memset"}
#: name markers of device-side records that are not work (without ``activity_type``)
_SYNC_MARKERS = ("Sync", "Stream Wait", "Event Record", "Event Wait")


def missing_accessors(event_type: Any) -> list[str]:
    """The :data:`REQUIRED` accessors ``event_type`` (``torch._C._autograd._KinetoEvent``)
    lacks, and ``start_ns`` needing one of ``end_ns`` / ``duration_ns``."""
    miss = [a for a in REQUIRED if not hasattr(event_type, a)]
    if not (hasattr(event_type, "end_ns") or hasattr(event_type, "duration_ns")):
        miss.append("end_ns/duration_ns")
    return miss


class RecordedEvent:
    """A recorded event (one dict of :func:`event_row`) with ``_KinetoEvent``'s accessors:
    ``ev.name()`` returns ``row["name"]``; an accessor the row lacks raises
    ``AttributeError``, as on a torch that lacks it."""

    __slots__ = ("_row",)

    def __init__(self, row: dict[str, Any]) -> None:
        self._row = row

    def __getattr__(self, name: str) -> Any:
        try:
            value = self._row[name]
        except KeyError:
            raise AttributeError(name) from None
        return lambda: value


def event_row(ev: Any, accessors: Sequence[tuple[str, Any]] | None = None) -> dict[str, Any]:
    """One event's accessors (those of :data:`ACCESSORS` it has) as JSON-ready values;
    ``device_type`` as its ``str()`` (``"DeviceType.CUDA"``). ``accessors``: the
    ``(name, unbound method)`` pairs of the event's type, looked up once for many events."""
    row: dict[str, Any] = {}
    pairs = accessors if accessors is not None else [
        (a, fn) for a in ACCESSORS if (fn := getattr(type(ev), a, None)) is not None] \
        or [(a, None) for a in ACCESSORS]
    for a, fn in pairs:
        try:
            v = fn(ev) if fn is not None else getattr(ev, a)()
        except (RuntimeError, TypeError, ValueError, AttributeError):
            continue
        row[a] = v if isinstance(v, (int, float, str, bool)) or v is None else str(v)
    return row


@dataclass
class AttributionInputs:
    """What :func:`~echo_trace.gpu.attribute.attribute` and the comm matcher need."""

    c10d: list[tuple[float, float, int]] = field(default_factory=list)
    ops: list[CpuOp] = field(default_factory=list)
    launches: list[Launch] = field(default_factory=list)
    activities: list[Activity] = field(default_factory=list)
    #: (start, end) of each device synchronisation the host waited in
    #: (``cudaDeviceSynchronize``, ``cudaStreamSynchronize``, ``cudaEventSynchronize``)
    syncs: list[tuple[float, float]] = field(default_factory=list)
    #: ``activity_type`` was absent: device events were classified by name
    by_name: bool = False


def _kind_by_name(name: str, annotation: bool) -> str | None:
    if annotation or any(s in name for s in _SYNC_MARKERS):
        return None
    if name.startswith("Memcpy"):
        return "memcpy"
    if name.startswith("Memset"):
        return "memset"
    return "kernel"


def _getter(first: Any, name: str, default: Any) -> Any:
    """``lambda e: e.<name>()`` when the event type has it, else a constant."""
    if hasattr(first, name):
        return lambda e: getattr(e, name)()
    return lambda e: default


def read_events(events: Iterable[Any], unix_minus_perf_ns: int, *,
                pause: Callable[[], None] | None = None) -> AttributionInputs:
    """Attribution inputs from profiler events, live or recorded (times → local perf µs).

    CPU ops (``linked_correlation_id() == 0``) give launches (their own correlation id,
    start, OS thread), and :class:`CpuOp` when they carry a sequence number or run a backward
    node; device events that are work (kernels, copies, fills) give activities, linked to
    the CPU op by ``linked_correlation_id()``; ``cuda*Synchronize`` calls give syncs. c10d dispatcher ops give (start, end, thread)
    CPU ranges. A CPU event with a linked id is a CUDA runtime call: its op is the launch.
    ``pause`` is called every :data:`PAUSE_EVERY` events (a background thread's pacing).
    """
    out = AttributionInputs()
    it = iter(events)
    first = next(it, None)
    if first is None:
        return out
    off = unix_minus_perf_ns
    annotation = _getter(first, "is_user_annotation", False)
    seq_of = _getter(first, "sequence_nr", -1)
    fwd_of = _getter(first, "fwd_thread_id", 0)
    res_of = _getter(first, "device_resource_id", 0)
    bytes_of = _getter(first, "nbytes", 0)
    if hasattr(first, "end_ns"):
        def end_ns(e: Any) -> int:
            return int(e.end_ns())
    else:
        def end_ns(e: Any) -> int:
            return int(e.start_ns()) + int(e.duration_ns())
    if hasattr(first, "duration_ns"):
        def dur_ns(e: Any) -> int:
            return int(e.duration_ns())
    else:
        def dur_ns(e: Any) -> int:
            return int(e.end_ns()) - int(e.start_ns())
    has_kind = hasattr(first, "activity_type")
    out.by_name = not has_kind
    cpu_types: dict[Any, bool] = {}  # device_type value -> is CPU (enum or recorded str)
    for k, e in enumerate(_chain(first, it)):
        if pause is not None and k % PAUSE_EVERY == 0:
            pause()
        dt = e.device_type()
        is_cpu = cpu_types.get(dt)
        if is_cpu is None:
            is_cpu = cpu_types[dt] = str(dt).rsplit(".", 1)[-1] == "CPU"
        t0 = (int(e.start_ns()) - off) / 1000.0
        if is_cpu:
            name = e.name()
            if name.endswith("Synchronize"):  # a runtime call, linked to its op or not
                out.syncs.append((t0, (end_ns(e) - off) / 1000.0))
                continue
            if int(e.linked_correlation_id()) > 0:
                continue
            tid = int(res_of(e))
            out.launches.append(Launch(int(e.correlation_id()), t0, tid))
            seq = int(seq_of(e))
            t1 = (end_ns(e) - off) / 1000.0
            if seq >= 0:
                out.ops.append(CpuOp(t0, t1, tid, seq, int(fwd_of(e))))
            elif name.startswith(_EVAL):
                out.ops.append(CpuOp(t0, t1, tid, -1, -1))
            if name.startswith(_COMM_OPS) and "wait" not in name:
                out.c10d.append((t0, t1, tid))
            continue
        name = e.name()
        if has_kind:
            kind = _KINDS.get(str(e.activity_type()))
        else:
            kind = _kind_by_name(name, bool(annotation(e)))
        if kind is not None:
            out.activities.append(Activity(name, kind, int(res_of(e)), t0, dur_ns(e) / 1000.0,
                                           int(e.linked_correlation_id()),
                                           int(bytes_of(e) or 0)))
    return out


def recording_doc(events: Iterable[Any], marks: Iterable[Any], records: Iterable[Any],
                  unix_minus_perf_ns: int, *, root: str = "model",
                  pause: Callable[[], None] | None = None) -> dict[str, Any]:
    """The recording of one window (``kineto_raw.json.gz``): every profiler event with the
    accessors of :data:`ACCESSORS` it has (:func:`event_row`), echo's marks (STEP ranges
    included) as dicts, the recorder's rows before the attribution edits them
    (``rec_events``, fields :data:`~echo_trace.recorder.RECORD_FIELDS`), the clock pairing
    and the versions. Enough to replay the live chain offline."""
    import dataclasses
    import time

    try:
        import torch

        torch_version = str(torch.__version__)
        device = torch.cuda.get_device_name() if torch.cuda.is_available() else "cpu"
    except Exception:  # noqa: BLE001 - a label, never worth failing the recording
        torch_version, device = "unknown", "unknown"
    return {
        "format": RAW_FORMAT, "torch": torch_version, "device": device, "root": root,
        "unix_minus_perf_ns": int(unix_minus_perf_ns),
        "clocks_now_ns": {"time": time.time_ns(), "perf_counter": time.perf_counter_ns()},
        "marks": [dataclasses.asdict(m) for m in marks],
        "rec_events": [list(r) for r in records],
        "events": _rows(events, pause),
    }


def _rows(events: Iterable[Any], pause: Callable[[], None] | None = None,
          ) -> list[dict[str, Any]]:
    """:func:`event_row` of every event, the accessors looked up once per event type."""
    out: list[dict[str, Any]] = []
    pairs: dict[type, list[tuple[str, Any]]] = {}
    for k, e in enumerate(events):
        if pause is not None and k % PAUSE_EVERY == 0:
            pause()
        t = type(e)
        got = pairs.get(t)
        if got is None:
            got = pairs[t] = [(a, fn) for a in ACCESSORS
                              if (fn := getattr(t, a, None)) is not None] \
                or [(a, None) for a in ACCESSORS]
        out.append(event_row(e, got))
    return out


def _chain(first: Any, rest: Iterable[Any]) -> Iterable[Any]:
    yield first
    yield from rest
