"""echo_trace: capture distributed PyTorch training as per-rank Chrome traces.

``with echo_trace.capture(out_dir="traces", start_step=2, end_step=5) as cap:`` around a
training loop, or ``TRACE_ON=1`` with no code change. Importing this package reads no
environment variable, registers no hook, touches no CUDA and does not import torch
(torch is imported when a capture starts).
"""

from __future__ import annotations

# ``capture`` is both a submodule and the function users call: importing the function here,
# first, keeps ``echo_trace.capture`` bound to the function.
from echo_trace.capture import Capture, capture
from echo_trace.config import CaptureConfig
from echo_trace.ranks import RankInfo, detect_ranks
from echo_trace.recorder import Recorder

__all__ = ["Capture", "CaptureConfig", "RankInfo", "Recorder", "capture", "detect_ranks"]

__version__ = "0.1.0"
