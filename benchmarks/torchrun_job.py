"""Run a benchmark's own worker under torchrun and read back its result with the machine's state.

The host-cost benchmarks (``tp_host_cost.py``, ``ddp_host_cost.py``) measure inside real
multi-process gloo jobs: the script starts itself under torchrun with ``--worker FILE``, rank 0
writes its JSON there, and the parent adds what the figures depend on (cores, torch, the 1-minute
load average before and after, the date, the process count and the script's settings).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

__all__ = ["host_cost_main", "run_worker", "value_range"]

REPO = Path(__file__).resolve().parent.parent


def run_worker(script: str, args: Sequence[str], out: Path, *, nproc: int, timeout: float,
               settings: dict[str, Any]) -> dict[str, Any] | None:
    """``torchrun --nproc_per_node NPROC script ARGS --worker TMP`` (one thread per rank);
    the worker's JSON with ``"machine"`` added (``settings`` merged into it), or None after
    printing the worker's last lines when it failed. ``TMP`` lies beside ``out``."""
    from benchmarks.launch import run_torchrun

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


def host_cost_main(argv: Sequence[str] | None, *, script: str, doc: str,
                   models: Sequence[str], results: Path, rounds: int,
                   worker: Callable[[list[str], int, int, Path], None],
                   table: Callable[[dict[str, Any]], str]) -> int:
    """The command line of a host-cost benchmark (``--models``, ``--samples``, ``--rounds``,
    ``--nproc``, ``--timeout``, ``--output``): as ``--worker FILE`` (under torchrun) run
    ``worker(models, samples, rounds, FILE)``; else start it (:func:`run_worker`), write the
    result JSON to ``--output`` and print ``table`` of it with the load average."""
    p = argparse.ArgumentParser(prog=Path(script).name, description=doc.split("\n\n")[0])
    p.add_argument("--models", default=",".join(models),
                   help=f"comma-separated, of {', '.join(models)} (default all)")
    p.add_argument("--samples", type=int, default=12, help="samples per median (default 12)")
    p.add_argument("--rounds", type=int, default=rounds,
                   help=f"rounds of every measurement (default {rounds})")
    p.add_argument("--nproc", type=int, default=2, help="processes (default 2)")
    p.add_argument("--timeout", type=float, default=900.0, help="seconds (default 900)")
    p.add_argument("--output", default=str(results), help="results JSON")
    p.add_argument("--worker", default="", help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    chosen = [m for m in a.models.split(",") if m]
    bad = [m for m in chosen if m not in models]
    if bad:
        p.error(f"--models {','.join(bad)} unknown (known: {', '.join(models)})")
    if a.samples < 1 or a.rounds < 1 or a.nproc < 2:
        p.error("--samples and --rounds must be >= 1, --nproc >= 2")
    if a.worker:
        worker(chosen, a.samples, a.rounds, Path(a.worker))
        # Skip interpreter teardown, as profile-comm's ranks do: module-level caches (FSDP2's
        # DeviceMesh) still hold the gloo groups, and destroying them at exit aborted a rank
        # of fsdp_host_cost.py once (SIGABRT, 2026-11-29 CI) after its result was written
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)
    out = Path(a.output)
    res = run_worker(script, ["--models", ",".join(chosen), "--samples", str(a.samples),
                              "--rounds", str(a.rounds)], out, nproc=a.nproc,
                     timeout=a.timeout, settings={"samples": a.samples, "rounds": a.rounds})
    if res is None:
        return 1
    out.write_text(json.dumps(res, indent=1))
    print(table(res))
    m = res["machine"]
    print(f"\nload average (1-min) {m['load_avg_before'][0]:.2f} -> "
          f"{m['load_avg_after'][0]:.2f}; wrote {out}")
    return 0


def value_range(xs: Sequence[float], digits: int = 0) -> str:
    """``"lo–hi"`` of ``xs`` at ``digits`` decimals (one value when both print alike): the
    spread of a figure over a benchmark's rounds, as its tables show it."""
    lo, hi = f"{min(xs):.{digits}f}", f"{max(xs):.{digits}f}"
    return lo if lo == hi else f"{lo}–{hi}"
