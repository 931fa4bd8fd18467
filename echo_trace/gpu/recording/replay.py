"""Replay a GPU window offline (the library behind ``python -m echo_trace.gpu.recording``).

A GPU run with ``TRACE_KINETO_RAW=1`` (``capture(kineto_raw=True)``) leaves
``kineto_raw.json.gz`` beside ``trace.json``: every profiler event of the capture window
with the accessors echo reads, echo's marks, the recorder's rows before attribution and the
clock pairing (:func:`~echo_trace.gpu.adapter.recording_doc`). It is the file to attach to
a bug report about GPU timings, and what lets the GPU path be developed on a machine
without a GPU: this command runs the whole live chain on it — the adapter
(:class:`~echo_trace.gpu.adapter.RecordedEvent` answers ``_KinetoEvent``'s accessors), the
attribution, the recorded events, the DAG and the writer — and writes the rank directory
today's echo_trace would have written for that window into ``OUT_DIR`` (``meta.json`` is
the recorded one with the counts brought up to date; the recording is copied along).

The clock shift to the trace's time base is the recording's ``offset_us`` when it has one;
recordings made before that field existed take it from the ``STEP`` events of the
``trace.json[.gz]`` beside them.
"""

from __future__ import annotations

import gzip
import json
import logging
import shutil
from pathlib import Path
from typing import Any

from echo_trace.gpu.adapter import RecordedEvent
from echo_trace.gpu.attribute import Attribution, Mark

__all__ = ["RAW_FILE", "RecordingError", "Replay", "load_recording", "replay",
           "write_replay"]

log = logging.getLogger("echo_trace")

#: the recording's file name in a rank directory
RAW_FILE = "kineto_raw.json.gz"
_MAX_BYTES = 2 << 30  # a recording is a few MB; refuse to inflate more than this


class RecordingError(ValueError):
    """A recording or rank directory that cannot be replayed (the message says why)."""


class Replay:
    """What :func:`replay` made: the events (Chrome dicts, local µs), the attribution,
    the meta document and the clock shift."""

    def __init__(self, events: list[dict[str, Any]], attribution: Attribution,
                 meta: dict[str, Any], offset_us: float, base_time_ns: int) -> None:
        self.events = events
        self.attribution = attribution
        self.meta = meta
        self.offset_us = offset_us
        self.base_time_ns = base_time_ns


def _read_json(path: Path, *, gz: bool) -> Any:
    try:
        if gz:
            with gzip.open(path, "rb") as f:
                data = f.read(_MAX_BYTES + 1)
        else:
            data = path.read_bytes()
    except FileNotFoundError:
        raise RecordingError(f"{path}: no such file") from None
    except (OSError, EOFError, gzip.BadGzipFile) as e:
        raise RecordingError(f"{path}: cannot read ({e})") from None
    if len(data) > _MAX_BYTES:
        raise RecordingError(f"{path}: larger than {_MAX_BYTES >> 30} GiB uncompressed")
    try:
        return json.loads(data)
    except (ValueError, UnicodeDecodeError) as e:
        raise RecordingError(f"{path}: not valid JSON ({e})") from None


def load_recording(rank_dir: str | Path) -> dict[str, Any]:
    """The recording of ``rank_dir`` (checked for the fields :func:`replay` needs)."""
    path = Path(rank_dir) / RAW_FILE
    doc = _read_json(path, gz=True)
    need = ("events", "marks", "rec_events", "unix_minus_perf_ns")
    if not isinstance(doc, dict) or any(k not in doc for k in need):
        raise RecordingError(f"{path}: not an echo GPU recording (needs {', '.join(need)})")
    if not all(isinstance(doc[k], list) for k in ("events", "marks", "rec_events")):
        raise RecordingError(f"{path}: events, marks and rec_events must be lists")
    return doc


def _offset_from_trace(rank_dir: Path, records: list[tuple[Any, ...]]) -> float | None:
    """The local → trace clock shift, from the first STEP of the trace beside a recording
    that predates ``offset_us``."""
    steps = sorted((r[6], r[4]) for r in records if r[0] == "X" and r[2] == "step")
    if not steps:
        return None
    for name, gz in (("trace.json.gz", True), ("trace.json", False)):
        path = rank_dir / name
        if not path.exists():
            continue
        doc = _read_json(path, gz=gz)
        for e in doc.get("traceEvents", []) if isinstance(doc, dict) else []:
            if e.get("name") == "STEP" and e.get("args", {}).get("step") == steps[0][0]:
                # a STEP written before GPU-clock steps carries its CPU start
                return float(e["ts"]) - float(steps[0][1])
    return None


def replay(rank_dir: str | Path) -> Replay:
    """Run the live chain on the recording in ``rank_dir`` (see the module docstring)."""
    from echo_trace import dag as dag_mod
    from echo_trace.gpu.backend import resolve_window
    from echo_trace.recorder import Recorder

    rank_dir = Path(rank_dir)
    doc = load_recording(rank_dir)
    meta = _read_json(rank_dir / "meta.json", gz=False)
    if not isinstance(meta, dict):
        raise RecordingError(f"{rank_dir / 'meta.json'}: not a JSON object")
    try:
        events = [RecordedEvent(r) for r in doc["events"]]
        marks = [Mark(**m) for m in doc["marks"]]
        records: list[tuple[Any, ...]] = [tuple(r) for r in doc["rec_events"]]
        if any(len(r) != 10 for r in records):
            raise ValueError("rec_events rows must have 10 fields")
        off = int(doc["unix_minus_perf_ns"])
    except (TypeError, ValueError, KeyError) as e:
        raise RecordingError(f"{rank_dir / RAW_FILE}: malformed ({e})") from None
    offset = doc.get("offset_us")
    if offset is None:
        offset = _offset_from_trace(rank_dir, records)
    if offset is None:
        raise RecordingError(f"{rank_dir}: the recording has no offset_us and no trace.json "
                             "with its STEP events beside it to take the clock shift from")
    base_ns = int(doc.get("base_time_ns", meta.get("base_time_ns", 0)) or 0)
    try:
        out, _ = resolve_window(records, events, marks, unix_minus_perf_ns=off,
                                root=str(doc.get("root", "model")))
    except (TypeError, ValueError, KeyError, AttributeError) as e:
        raise RecordingError(f"{rank_dir / RAW_FILE}: cannot be replayed "
                             f"({type(e).__name__}: {e})") from None
    counts: dict[Any, int] = {}
    for r in records:  # implicit occurrence numbers continue after the explicit ones
        if r[0] == "X" and r[7] is not None:
            key = (r[6], r[1])
            counts[key] = max(counts.get(key, 0), int(r[7]) + 1)
    dicts = Recorder.to_dicts(records, counts)
    step = dag_mod.last_complete_step(dicts)
    meta = dict(meta, dag_step=step, timer="kineto")
    return Replay(dicts, out, meta, float(offset), base_ns)


def write_replay(rank_dir: str | Path, out_dir: str | Path, *, gzip_trace: bool = True,
                 overwrite: bool = False) -> Path:
    """:func:`replay` ``rank_dir`` and write the rank directory to ``out_dir`` (the
    recording copied along); returns where it went. Never writes over a non-empty
    ``out_dir`` unless ``overwrite``."""
    from echo_trace import dag as dag_mod
    from echo_trace.writer import dir_is_nonempty, write_rank_dir

    out_dir = Path(out_dir)
    if Path(rank_dir).resolve() == out_dir.resolve():
        raise RecordingError(f"{out_dir}: the output must not be the recording's own directory")
    if dir_is_nonempty(out_dir) and not overwrite:
        raise RecordingError(f"{out_dir} is not empty (pass overwrite / --force to replace it)")
    rep = replay(rank_dir)
    step = rep.meta.get("dag_step")
    result = write_rank_dir(
        out_dir, events=rep.events, meta=rep.meta,
        dag_gml=lambda: dag_mod.dag_gml(dag_mod.step_dag(rep.events,
                                                          -1 if step is None else step)),
        gzip=gzip_trace, offset_us=rep.offset_us, base_time_ns=rep.base_time_ns,
        overwrite=overwrite)
    shutil.copyfile(Path(rank_dir) / RAW_FILE, result.rank_dir / RAW_FILE)
    return result.rank_dir
