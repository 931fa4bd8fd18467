"""How much a prediction moves with the communication profile alone: fixed traces, fresh profiles.

``simulate --comm-profile`` prices every collective from a profile measured on the machine
(``python -m echo_sim profile-comm``). On a host whose collectives stall now and then (this
project's 2-core VM: a third of a 256 KiB all-reduce's runs wait ~3 ms for a halted vCPU),
a size's mean is only as good as the number of stalls its runs happened to see, so two
profiles taken a minute apart price the same job differently. This benchmark measures that
spread directly, with nothing else changing:

1. each model size is traced once in one process (``benchmarks/accuracy.py``'s worker, the
   same traces its held-out table predicts from);
2. ``--profiles`` rounds, each measuring one profile per mode, modes interleaved so that
   the host's drift hits them alike; a mode is a number of timed runs per size
   (``profile-comm --iters``; default 15, the default before 2026-11-27, and 60, the
   default now), every mode with the same estimator (one run in 15 left out at each end of
   a size's mean), so that their medians should agree and only the spread differ;
3. every case (layout x size, as ``accuracy.py`` runs them) is predicted from every profile
   through the simulate command a user runs (``accuracy.py``'s ``_predict``).

Per case and mode: the median prediction and its spread over the profiles, as the
coefficient of variation (standard deviation over mean) and as (max - min) / median. Per
mode: the profile's wall time and the median standard error of its points between 16 KiB
and 1 MiB (what ``simulate`` refuses above 20 %). The table is the README's; the JSON keeps
every prediction and profile.

Usage::

    python benchmarks/profile_precision.py [--sizes gpt-s,bert,llama] [--layouts ddp,fsdp,tp]
        [--profiles 4] [--iters 15,60] [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from benchmarks.accuracy import (  # noqa: E402  (after the path: run as a script)
    CASES,
    SIZES,
    Case,
    _launch,
    _predict,
    _train_flags,
)
from echo_sim.commands.checks import int_in  # noqa: E402
from echo_sim.measure.host_overheads import DEFAULT_ROUNDS  # noqa: E402
from echo_sim.measure.profile_comm import HOST_ROUNDS_RANGE  # noqa: E402

__all__ = ["Mode", "main", "summarise", "table"]

RESULTS = REPO / "benchmarks" / "results" / "profile_precision.json"
OPS = ("all_reduce", "all_gather", "reduce_scatter", "broadcast", "send")  # accuracy.py's
SE_LO, SE_HI = 16 << 10, 1 << 20  # the sizes whose runs stall most (their price is noisiest)


@dataclass(frozen=True)
class Mode:
    """One way of measuring a profile: ``iters`` timed runs per size."""

    name: str
    iters: int


def _profile(path: Path, mode: Mode, *, sizes: str,
             host_rounds: int = DEFAULT_ROUNDS) -> dict[str, Any]:
    """Measure one profile into ``path`` as ``accuracy.py`` does (its ops and sizes);
    its wall time (s) and the median standard error (%) of its 16 KiB..1 MiB points."""
    from echo_sim.cost.comm_profile import save_comm_profile
    from echo_sim.measure.profile_comm import ProfileSpec, measure_comm_profile, parse_sizes

    spec = ProfileSpec(nproc=2, sizes_bytes=parse_sizes(sizes), ops=OPS, iters=mode.iters,
                       warmup=2, progress=False, host_rounds=host_rounds)
    t0 = time.perf_counter()
    prof = measure_comm_profile(spec)
    wall = time.perf_counter() - t0
    path.parent.mkdir(parents=True, exist_ok=True)
    save_comm_profile(prof, path, overwrite=True)
    errs = [e for (op, _), v in prof.stderr_pct.items() if op != "send"
            for (s, _), e in zip(prof.samples[(op, 2)], v, strict=True) if SE_LO <= s <= SE_HI]
    return {"mode": mode.name, "iters": mode.iters, "path": str(path),
            "wall_s": round(wall, 2),
            "median_stderr_pct": round(statistics.median(errs), 2) if errs else None}


def summarise(preds: dict[str, dict[str, list[float]]], profiles: list[dict[str, Any]]
              ) -> dict[str, Any]:
    """Per case and mode the median prediction (µs) and spread over the profiles; per mode
    the median profile wall time and standard error. ``preds[case][mode]``: one predicted
    iteration time per profile of that mode."""
    cases = []
    for name, by_mode in preds.items():
        row: dict[str, Any] = {"case": name}
        for mode, xs in by_mode.items():
            if not xs:
                continue
            med = statistics.median(xs)
            mean = statistics.fmean(xs)
            row[mode] = {
                "median_us": round(med, 1), "n": len(xs),
                "cv_pct": round(100 * statistics.stdev(xs) / mean, 2) if len(xs) > 1 else 0.0,
                "range_pct": round(100 * (max(xs) - min(xs)) / med, 2),
                "predicted_us": [round(x, 1) for x in xs]}
        cases.append(row)
    modes: dict[str, Any] = {}
    for p in profiles:
        modes.setdefault(p["mode"], []).append(p)
    per_mode = {m: {"profiles": len(ps),
                    "wall_s": round(statistics.median(p["wall_s"] for p in ps), 1),
                    "median_stderr_pct": round(statistics.median(
                        p["median_stderr_pct"] for p in ps
                        if p["median_stderr_pct"] is not None), 1)
                    if any(p["median_stderr_pct"] is not None for p in ps) else None,
                    "median_cv_pct": round(statistics.median(
                        c[m]["cv_pct"] for c in cases if m in c), 2)
                    if any(m in c for c in cases) else None}
                for m, ps in modes.items()}
    return {"cases": cases, "per_mode": per_mode}


def table(doc: dict[str, Any]) -> str:
    """Markdown: one row per case, each mode's median prediction, CV and range."""
    modes = list(doc["per_mode"])
    head = ["case", *[f"{m}: median ms, CV, range" for m in modes]]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for c in doc["cases"]:
        cells = [c["case"]]
        for m in modes:
            v = c.get(m)
            cells.append("—" if v is None else
                         f"{v['median_us'] / 1e3:.1f}, {v['cv_pct']:.1f} %, {v['range_pct']:.1f} %")
        lines.append("| " + " | ".join(cells) + " |")
    lines += ["", "| mode | profiles | wall s (median) | median standard error 16 KiB-1 MiB "
              "| median CV of the predictions |", "|---|---|---|---|---|"]
    for m, v in doc["per_mode"].items():
        se = "—" if v["median_stderr_pct"] is None else f"{v['median_stderr_pct']:.1f} %"
        cv = "—" if v["median_cv_pct"] is None else f"{v['median_cv_pct']:.2f} %"
        lines.append(f"| {m} | {v['profiles']} | {v['wall_s']:.1f} | {se} | {cv} |")
    return "\n".join(lines)


def run(cases: tuple[Case, ...], modes: tuple[Mode, ...], *, profiles: int,
        profile_sizes: str, steps: int, root: Path, timeout: float,
        host_rounds: int = DEFAULT_ROUNDS, log: Any = sys.stderr) -> dict[str, Any]:
    """Trace every size once, then ``profiles`` rounds of one profile per mode, each
    predicting every case; the result document."""
    traces: dict[str, Path] = {}
    for size in dict.fromkeys(c.size for c in cases):
        base = root / size
        _launch(_train_flags("single", size, steps=steps, capture=base / "trace", nproc=1),
                base / "single", 1, timeout, size)
        traces[size] = base / "trace"
        print(f"traced {size}", file=log)
    preds: dict[str, dict[str, list[float]]] = {c.name: {m.name: [] for m in modes}
                                                for c in cases}
    made: list[dict[str, Any]] = []
    loads: list[float] = []
    for k in range(profiles):
        for mode in modes:
            loads.append(os.getloadavg()[0])
            prof = _profile(root / f"p{k}-{mode.name}.json", mode, sizes=profile_sizes,
                            host_rounds=host_rounds)
            made.append(prof)
            for case in cases:
                pred = _predict(traces[case.size], case, Path(prof["path"]), None, root=root,
                                timeout=timeout)
                preds[case.name][mode.name].append(pred["iteration_time_us"])
            print(f"profile {k} {mode.name}: {prof['wall_s']:.1f} s, median standard error "
                  f"{prof['median_stderr_pct']} % at 16 KiB-1 MiB", file=log)
    doc = summarise(preds, made)
    doc.update(benchmark="profile_precision", date=time.strftime("%Y-%m-%d %H:%M"),
               machine={"cpus": os.cpu_count(), "load_avg_1min": [min(loads), max(loads)]},
               method={"profile_sizes": profile_sizes, "ops": list(OPS),
                       "steps_traced": steps, "modes": {m.name: m.iters for m in modes},
                       "trim": "one run in 15 left out at each end (RUN_CUT)"},
               profiles=made)
    return doc


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="profile_precision.py", description=__doc__.split("\n\n")[0],
                                epilog="Prints a markdown table; writes JSON to --output.")
    p.add_argument("--sizes", default="gpt-s,bert,llama",
                   help=f"comma list of model sizes (default gpt-s,bert,llama): {', '.join(SIZES)}")
    p.add_argument("--layouts", default="ddp,fsdp,tp",
                   help="comma list of ddp,fsdp,tp,pp (default ddp,fsdp,tp; as accuracy.py pairs "
                        "them with sizes)")
    p.add_argument("--profiles", type=int, default=4, help="profiles per mode (default 4)")
    p.add_argument("--iters", default="15,60",
                   help="comma list of timed runs per size, one mode each (default 15,60: "
                        "the default before 2026-11-27 and now)")
    p.add_argument("--profile-sizes", default="1KB..16MB",
                   help="message sizes of every profile (default 1KB..16MB, as accuracy.py)")
    p.add_argument("--host-rounds", type=int_in(*HOST_ROUNDS_RANGE), default=DEFAULT_ROUNDS,
                   metavar="N", help=f"samples of each host microbenchmark in every profile "
                                     f"(default {DEFAULT_ROUNDS}, as profile-comm; "
                                     f"{HOST_ROUNDS_RANGE[0]}..{HOST_ROUNDS_RANGE[1]})")
    p.add_argument("--steps", type=int, default=12, help="steps of each traced run (default 12)")
    p.add_argument("--timeout", type=float, default=300.0, help="seconds per job (default 300)")
    p.add_argument("--keep", default="", metavar="DIR", help="keep traces and profiles under DIR")
    p.add_argument("--output", default=str(RESULTS), metavar="FILE",
                   help=f"result JSON (default {RESULTS.relative_to(REPO)})")
    return p


def main(argv: list[str] | None = None) -> int:
    p = _parser()
    a = p.parse_args(argv)
    sizes = [x for x in a.sizes.split(",") if x]
    layouts = [x for x in a.layouts.split(",") if x]
    bad = [s for s in sizes if s not in SIZES]
    if bad:
        p.error(f"--sizes {','.join(bad)}: choose from {', '.join(SIZES)}")
    for name in ("profiles", "steps"):
        if getattr(a, name) < 1:
            p.error(f"--{name} must be >= 1")
    try:
        iters = [int(x) for x in a.iters.split(",") if x.strip()]
    except ValueError:
        iters = []
    if not iters or min(iters) < 1 or len(set(iters)) != len(iters):
        p.error(f"--iters {a.iters!r}: a comma list of different counts >= 1, e.g. 15,60")
    if a.steps < 4:
        p.error("--steps must be >= 4: the trace window is steps 2..steps-1")
    cases = tuple(c for c in CASES if c.size in sizes and c.layout in layouts)
    if "tiny" in sizes:
        cases += tuple(Case(layout=lay, size="tiny") for lay in layouts)
    if not cases:
        p.error(f"no case for --layouts {a.layouts} on --sizes {a.sizes}")
    modes = tuple(Mode(f"{n} runs", n) for n in iters)
    os.environ["OMP_NUM_THREADS"] = "1"  # the profiling processes inherit it
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(a.keep) if a.keep else Path(tmp)
        root.mkdir(parents=True, exist_ok=True)
        doc = run(cases, modes, profiles=a.profiles, profile_sizes=a.profile_sizes,
                  steps=a.steps, root=root, timeout=a.timeout, host_rounds=a.host_rounds)
    out = Path(a.output)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(doc, indent=1) + "\n")
    print(table(doc))
    print(f"\nwrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
