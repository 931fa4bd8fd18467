"""What echo_sim makes of a recorded GPU run, against the training script's own step times.

    python -m benchmarks.gpu_figures RUN [RUN ...] [--json FILE] [--replay]

``RUN`` is a run directory laid out like ``../shared/reference/gpu-h200/<run>/``:
``echo/`` (the trace directory, ``0_0/`` holding ``kineto_raw.json.gz`` for ``--replay``),
``steps_traced.json`` and optionally ``steps_plain.json`` (``{"step_s": [...]}``, index i =
optimizer step i, each synchronised). With ``--replay`` the recording is first run through
today's live chain (``python -m echo_trace.gpu.recording``) into a temporary directory, so
recordings made by older commits give today's figures; without it the trace is read as
written.

Per run, through the CLI a user runs (``python -m echo_sim collect|statistic|simulate
--json``): ``collect``'s iteration per window step beside the script's time of that step and
their difference (%); ``statistic``'s FW / BW / UPDATE / idle per step (GPU busy time); the
``simulate`` iteration with no flags beside the script's window steps and plain steps; the
simulated peak beside the allocator's traced peak (``peak_cuda_allocated_bytes`` of the STEP
markers). The window's last step is left out of the comparisons: its script time includes
closing the window.
"""

from __future__ import annotations

import argparse
import gzip
import json
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent

__all__ = ["figures", "main", "table"]


def _cli(args: Sequence[str], timeout_s: float) -> Any:
    r = subprocess.run([sys.executable, "-m", *args], capture_output=True, text=True,
                       cwd=REPO, timeout=timeout_s)
    if r.returncode != 0:
        raise RuntimeError((r.stderr.strip().splitlines() or ["no output"])[-1][:300])
    return json.loads(r.stdout) if "--json" in args else r.stdout


def _steps(path: Path) -> list[float] | None:
    try:
        return [1e3 * float(x) for x in json.loads(path.read_text())["step_s"]]
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _peak(trace_dir: Path) -> float | None:
    for f in sorted(trace_dir.glob("*/trace.json*")):
        opener = gzip.open if f.name.endswith(".gz") else open
        with opener(f, "rt") as fh:  # type: ignore[operator]
            evs = json.load(fh)["traceEvents"]
        peaks = [e["args"].get("peak_cuda_allocated_bytes") for e in evs
                 if e.get("name") == "STEP"]
        got = [p for p in peaks if isinstance(p, int | float)]
        return float(max(got)) if got else None
    return None


def _pct(a: float, b: float) -> float:
    return round(100.0 * (a / b - 1.0), 2)


def figures(run: Path, *, replay: bool = False, timeout_s: float = 120.0) -> dict[str, Any]:
    """The figures of one run directory (see the module docstring)."""
    trace = run / "echo"
    with tempfile.TemporaryDirectory() as tmp:
        if replay:
            dest = Path(tmp) / "echo"
            for rank in sorted(trace.glob("*/kineto_raw.json.gz")):
                _cli(["echo_trace.gpu.recording", str(rank.parent), str(dest / rank.parent.name)],
                     timeout_s)
            trace = dest
        col = _cli(["echo_sim", "collect", str(trace), "--json"], timeout_s)
        stat = _cli(["echo_sim", "statistic", str(trace), "--json"], timeout_s)
        sim = _cli(["echo_sim", "simulate", str(trace), "--json"], timeout_s)
        peak = _peak(trace)
    window = [int(s) for s in col["steps"]]
    clean = window[:-1]  # the last window step's script time includes closing the window
    traced, plain = _steps(run / "steps_traced.json"), _steps(run / "steps_plain.json")
    per_step = {int(p["step"]): p["iteration_us"] / 1e3 for p in col["per_step"]}
    out: dict[str, Any] = {
        "run": run.name, "replayed": replay, "window_steps": window,
        "collect_ms": {s: round(v, 3) for s, v in per_step.items()},
        "statistic_ms_per_step": {c: round(v["per_step_us"] / 1e3, 3)
                                  for c, v in stat["categories"].items()},
        "simulate_ms": round(sim["iteration_time_us"] / 1e3, 3),
        "simulate_peak_bytes": sim.get("peak_memory_bytes"),
        "traced_peak_bytes": peak,
    }
    if traced:
        out["script_traced_ms"] = {s: round(traced[s], 3) for s in clean if s < len(traced)}
        out["collect_vs_script_pct"] = {s: _pct(per_step[s], traced[s]) for s in clean
                                        if s < len(traced) and s in per_step}
        out["simulate_vs_traced_pct"] = {s: _pct(out["simulate_ms"], traced[s]) for s in clean
                                         if s < len(traced)}
    if plain:
        steady = statistics.median(plain[2:]) if len(plain) > 2 else statistics.median(plain)
        out["plain_median_ms"] = round(steady, 3)
        out["simulate_vs_plain_pct"] = _pct(out["simulate_ms"], steady)
    if peak and out["simulate_peak_bytes"]:
        out["memory_vs_traced_peak_pct"] = _pct(float(out["simulate_peak_bytes"]), peak)
    return out


def table(rows: Sequence[dict[str, Any]]) -> str:
    """A Markdown table of :func:`figures` rows."""
    head = ("| run | script traced steps (ms) | collect (ms) | collect vs script | FW / BW / "
            "UPDATE / idle per step (ms) | simulate (ms) | vs traced | vs plain | peak vs "
            "allocator |\n|---|---|---|---|---|---|---|---|---|")
    lines = [head]
    for r in rows:
        st = r["statistic_ms_per_step"]
        steps = sorted(r.get("script_traced_ms", {}))

        def by_step(d: dict[Any, Any], fmt: str, steps: list[Any] = steps) -> str:
            return ", ".join(format(d[s], fmt) for s in steps if s in d) or "—"

        lines.append(
            f"| {r['run']} | {by_step(r.get('script_traced_ms', {}), '.1f')} "
            f"| {by_step(r['collect_ms'], '.1f')} "
            f"| {by_step(r.get('collect_vs_script_pct', {}), '+.1f')} % "
            f"| {st['FW']:.1f} / {st['BW']:.1f} / {st['UPDATE']:.1f} / {st['idle']:.1f} "
            f"| {r['simulate_ms']:.1f} | {by_step(r.get('simulate_vs_traced_pct', {}), '+.1f')} % "
            f"| {format(r['simulate_vs_plain_pct'], '+.1f') + ' %' if 'simulate_vs_plain_pct' in r else '—'} "
            f"| {format(r['memory_vs_traced_peak_pct'], '+.1f') + ' %' if 'memory_vs_traced_peak_pct' in r else '—'} |")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.gpu_figures",
                                 description="echo_sim's figures of recorded GPU runs beside "
                                             "the training script's own step times.")
    ap.add_argument("runs", nargs="+", metavar="RUN", type=Path,
                    help="run directory: echo/, steps_traced.json[, steps_plain.json]")
    ap.add_argument("--replay", action="store_true", help="replay each recording through "
                    "today's live chain first (echo_trace.gpu.recording)")
    ap.add_argument("--json", metavar="FILE", type=Path, help="also write the rows as JSON")
    a = ap.parse_args(argv)
    rows = []
    for run in a.runs:
        if not (run / "echo").is_dir():
            ap.error(f"{run}: no echo/ trace directory")
        try:
            rows.append(figures(run, replay=a.replay))
        except (RuntimeError, subprocess.TimeoutExpired, KeyError, ValueError) as e:
            print(f"error: {run}: {e}", file=sys.stderr)
            return 2
    print(table(rows))
    if a.json:
        a.json.write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
