"""Run a measuring script in a fresh interpreter, so its wall time and peak RSS are its own.

The child prints one JSON object on its last line of stdout; a failure comes back as
``{"error": <its last stderr line>}`` so one broken case does not stop a benchmark.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

__all__ = ["run_child"]


def run_child(code: str, *args: str, pythonpath: str, timeout_s: float) -> dict[str, Any]:
    """``python -c code args...`` with ``PYTHONPATH=pythonpath`` and one OpenMP thread."""
    env = {**os.environ, "PYTHONPATH": pythonpath, "OMP_NUM_THREADS": "1"}
    r = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True,
                       env=env, timeout=timeout_s)
    if r.returncode != 0:
        return {"error": (r.stderr.strip().splitlines() or ["failed"])[-1]}
    return dict(json.loads(r.stdout.strip().splitlines()[-1]))
