"""One model of benchmarks/gpu.py trained for N steps in this process; per-step times to JSON.

    python -m benchmarks.gpu_child --model hf_gpt2 --steps 10 --out steps.json
        [--device cuda|cpu] [--size full|tiny] [--profiler-window 3:6] [--seed 0]

Writes ``{"model", "desc", "device", "torch", "step_s", ...}``: ``step_s[i]`` is the wall time
of optimizer step i (counted from 0) in seconds, with the device synchronised before and after
it (like ``../shared/reference/gpu-h200/how/hf_bench_train.py``). This module imports nothing
of echo_trace: a zero-code run traces it from outside (``TRACE_ON=1`` with the installed
``.pth``, or ``python -m echo_trace.run -m benchmarks.gpu_child ...``).
``--profiler-window A:B`` runs ``torch.profiler`` (CPU, and CUDA on a GPU) from the end of
step A−1 to the end of step B−1, the steps in which a zero-code window ``A..B`` opens and
closes.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from benchmarks.gpu import DEVICES, MODELS, _build  # noqa: E402

__all__ = ["main", "parse_args"]


def _window(text: str) -> tuple[int, int]:
    a, sep, b = text.partition(":")
    try:
        start, end = int(a), int(b)
    except ValueError:
        start = end = -1
    if not sep or not 1 <= start < end:
        raise argparse.ArgumentTypeError(f"{text!r}: expected START:END with 1 <= START < END")
    return start, end


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.gpu_child",
                                 description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--model", required=True, choices=MODELS)
    ap.add_argument("--steps", type=int, default=10, help="optimizer steps (default 10)")
    ap.add_argument("--out", required=True, help="JSON file for the per-step times")
    ap.add_argument("--device", default="cuda", choices=DEVICES)
    ap.add_argument("--size", default="full", choices=("full", "tiny"),
                    help="tiny: a few layers of width 64 (CPU plumbing tests)")
    ap.add_argument("--profiler-window", type=_window, default=None, metavar="START:END",
                    help="torch.profiler over steps START..END-1 (opened at the end of step "
                         "START-1, closed at the end of step END-1)")
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args(argv)
    if a.steps < 1:
        ap.error(f"--steps {a.steps} must be >= 1")
    if a.profiler_window and a.steps < a.profiler_window[1]:
        ap.error(f"--steps {a.steps}: --profiler-window ends at step {a.profiler_window[1]}")
    return a


def main(argv: Sequence[str] | None = None) -> int:
    a = parse_args(argv)
    import torch

    cuda = a.device == "cuda"
    if cuda and not torch.cuda.is_available():
        print("benchmarks.gpu_child: CUDA is not available (use --device cpu)", file=sys.stderr)
        return 2
    sync: Callable[[], None] = torch.cuda.synchronize if cuda else (lambda: None)
    _, step, desc = _build(a.model, a.seed, a.device, tiny=a.size == "tiny")
    prof: Any = None
    step_s: list[float] = []
    for i in range(a.steps):
        sync()
        t0 = time.perf_counter()
        step()
        if a.profiler_window and i == a.profiler_window[0] - 1:
            from torch.profiler import ProfilerActivity, profile

            acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
            prof = profile(activities=acts)
            prof.__enter__()
        elif prof is not None and i == a.profiler_window[1] - 1:
            prof.__exit__(None, None, None)
            prof = None
        sync()
        step_s.append(time.perf_counter() - t0)
    res: dict[str, Any] = {
        "model": a.model, "desc": desc, "device": torch.cuda.get_device_name() if cuda else "cpu",
        "torch": torch.__version__, "size": a.size, "step_s": step_s,
        "profiler_window": list(a.profiler_window) if a.profiler_window else None}
    if cuda:
        res["max_memory_allocated"] = torch.cuda.max_memory_allocated()
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_text(json.dumps(res, indent=1))
    print(a.model, [round(1e3 * t, 1) for t in step_s])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
