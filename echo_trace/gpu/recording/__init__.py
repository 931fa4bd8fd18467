"""Replay a GPU window offline: ``python -m echo_trace.gpu.recording RANK_DIR OUT_DIR``.

A GPU run with ``TRACE_KINETO_RAW=1`` leaves ``kineto_raw.json.gz`` beside ``trace.json``;
:mod:`~echo_trace.gpu.recording.replay` runs the live chain on it (adapter, attribution,
records, DAG, writer) and :mod:`~echo_trace.gpu.recording.cli` is its command line.
"""

from echo_trace.gpu.recording.cli import main
from echo_trace.gpu.recording.replay import (
    RAW_FILE,
    RecordingError,
    Replay,
    load_recording,
    replay,
    write_replay,
)

__all__ = ["RAW_FILE", "RecordingError", "Replay", "load_recording", "main", "replay",
           "write_replay"]
