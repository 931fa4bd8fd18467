"""Run a benchmark's own worker under torchrun and read back its result with the machine's state.

The host-cost benchmarks (``tp_host_cost.py``, ``ddp_host_cost.py``) measure inside real
multi-process gloo jobs: the script starts itself under torchrun with ``--worker FILE``, rank 0
writes its JSON there, and the parent adds what the figures depend on (cores, torch, the 1-minute
load average before and after, the date, the process count and the script's settings).
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

__all__ = ["run_worker"]

REPO = Path(__file__).resolve().parent.parent


def run_worker(script: str, args: Sequence[str], out: Path, *, nproc: int, timeout: float,
               settings: dict[str, Any]) -> dict[str, Any] | None:
    """``torchrun --nproc_per_node NPROC script ARGS --worker TMP`` (one thread per rank);
    the worker's JSON with ``"machine"`` added (``settings`` merged into it), or None after
    printing the worker's last lines when it failed. ``TMP`` lies beside ``out``."""
    from tests.harness import run_torchrun

    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(".part.json")
    load0 = os.getloadavg()
    proc = run_torchrun([script, *args, "--worker", str(tmp)], nproc=nproc,
                        env={"OMP_NUM_THREADS": "1"}, timeout=timeout, cwd=REPO)
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
        print(f"{Path(script).name}: error: the worker exited {proc.returncode}: "
              f"{' | '.join(tail)}", file=sys.stderr)
        return None
    res: dict[str, Any] = json.loads(tmp.read_text())
    tmp.unlink()
    import torch

    res["machine"] = {"cpu_count": os.cpu_count(), "torch": torch.__version__,
                      "load_avg_before": list(load0), "load_avg_after": list(os.getloadavg()),
                      "date": time.strftime("%Y-%m-%dT%H:%M:%S"), "nproc": nproc, **settings}
    return res
