"""``report PATH --output report.html``: one self-contained HTML report of a trace."""

from __future__ import annotations

import argparse
import shlex
from pathlib import Path
from typing import Any, NoReturn

from echo_sim.commands.checks import float_in, int_in
from echo_sim.commands.outputs import check_output, output_file
from echo_sim.commands.spec import Command, Result, arg
from echo_sim.errors import ConfigError, EchoError

__all__ = ["COMMAND"]

DESCRIPTION = """\
One HTML file a person would rather look at: interactive charts (plotly, embedded: the
file opens with no network) of
  * step time per rank and step (stragglers stand out),
  * where each step goes: FW, BW, UPDATE, communication overlapped with compute, exposed
    communication and idle, adding up to 100 % (as `statistic` counts them),
  * the top operators with FLOPs, achieved TFLOP/s and MFU against the traced device's
    peak (its preset for the dtype meta.json records; --peak-tflops to give one),
  * communication per collective and process group with achieved bus bandwidth,
  * memory over time and the peak of every step,
  * the critical path of one step,
  * with --simulate, the predicted breakdown beside the measured one (the prediction is
    exactly what `simulate` with the same flags says, its warnings included).
Works on every trace echo reads (echo, Kineto, ByteProfile/dPRO, TrioSim, simulated
traces written by `simulate --output`); what a trace cannot give (no FLOPs, no memory
counters, no communication) is listed at the top instead of drawn. The data behind the
charts is embedded as JSON (<script id="echo-data">).
"""


class _FlagParser(argparse.ArgumentParser):
    """simulate's own options, parsed from the --simulate string; errors as one line."""

    def error(self, message: str) -> NoReturn:
        raise ConfigError(f"--simulate: {message} (see simulate --help)")


def _predict(path: str, flags: str, trace: Any) -> tuple[Any, str, dict[str, Any]]:
    """(overview of the simulated timeline, label, headline figures) for ``--simulate``."""
    from echo_sim.analysis.overview import overview
    from echo_sim.commands import simulate as sim_cmd
    from echo_sim.sim.simulate import simulate

    parser = _FlagParser(prog="report --simulate", add_help=False)
    sim_cmd.COMMAND.add_arguments(parser)
    try:
        argv = shlex.split(flags)
    except ValueError as e:
        raise ConfigError(f"--simulate {flags!r}: {e}") from None
    opts = parser.parse_args([path, *argv])
    if len(opts.paths) > 1:
        raise ConfigError(f"--simulate {flags!r}: simulate's flags only; the report's trace is "
                          "the one predicted")
    if opts.output:
        raise ConfigError("--simulate: --output is simulate's own; run simulate for it")
    from echo_sim.workload.traced import traced_workload

    workload = traced_workload(trace)
    res = simulate(workload, sim_cmd.sim_config(opts, workload.traced_layout), keep=True)
    pred = overview(res.to_trace(), top=10)
    d = res.to_dict()
    label = "predicted" + (f" ({flags.strip()})" if flags.strip() else "")
    head = (f"{d['iteration_time_us'] / 1e3:,.3f} ms per iteration at dp={res.config.dp} "
            f"tp={res.config.tp} pp={res.config.pp} ({flags.strip() or 'as traced'})")
    return pred, label, {"headline": head, "iteration_time_us": d["iteration_time_us"],
                         "flags": flags, "warnings": list(d["warnings"])}


def run(opts: Any) -> Result:
    from echo_sim.analysis.overview import overview
    from echo_sim.load import load_trace
    from echo_sim.render.report_html import render_report

    out = opts.output
    if Path(out).suffix.lower() not in (".html", ".htm"):
        raise EchoError(f"--output {out}: the report is HTML; name it .html")
    check_output("--output", out, force=opts.force)  # before the work
    path = opts.paths[0]
    trace = load_trace(path)
    ov = overview(trace, top=opts.top, peak_tflops=opts.peak_tflops, critical_step=opts.step)
    predicted = label = summary = None
    if opts.simulate is not None:
        predicted, label, summary = _predict(path, opts.simulate, trace)
    page = render_report(ov, predicted=predicted, predicted_label=label or "predicted",
                         predicted_summary=summary)
    with output_file("--output", out, force=opts.force) as tmp:
        Path(tmp).write_text(page, encoding="utf-8")
    size = len(page.encode("utf-8"))
    lines = [f"wrote {out} ({size / 2**20:.1f} MiB): {len(ov.ranks)} rank(s), steps "
             f"{ov.steps}, mean step {ov.mean_iteration_us / 1e3:,.3f} ms"]
    if summary:
        lines.append(f"predicted: {summary['headline']}")
        lines += [f"prediction warning: {w}" for w in summary["warnings"]]
    lines += [f"not computed: {m}" for m in ov.missing]
    data = {"output": str(out), "bytes": size, "source": path, "missing": ov.missing,
            "mean_iteration_us": ov.mean_iteration_us, "mfu": ov.mfu,
            "categories": ov.stats.to_dict()["categories"]}
    if summary:
        data["predicted"] = summary
    return Result("\n".join(lines), data)


COMMAND = Command(
    name="report",
    help="one self-contained HTML report with interactive charts (open it in a browser)",
    description=DESCRIPTION,
    run=run,
    args=(
        arg("--output", "-o", metavar="FILE.html", default="report.html",
            help="where to write the report (default report.html; never replaced without "
                 "--force)"),
        arg("--force", action="store_true", help="replace --output if it exists"),
        arg("--simulate", metavar="FLAGS", default=None, nargs="?", const="",
            help="also predict the job with these simulate flags, quoted (e.g. "
                 "--simulate '--dp 4 --gpu h100'; bare --simulate: at its own layout) and "
                 "show the predicted breakdown beside the measured one"),
        arg("--step", type=int_in(-1, 2**40), default=None,
            help="the step whose critical path is drawn (default: the last captured)"),
        arg("--top", type=int_in(1, 10_000), default=25, metavar="N",
            help="operators listed (default 25)"),
        arg("--peak-tflops", type=float_in(0.0, 1e9, lo_open=True), default=None,
            metavar="TFLOPS",
            help="the device's peak TFLOP/s for MFU (default: the traced device's preset "
                 "for the trace's dtype)"),
    ),
    epilog="example: python -m echo_sim report traces --output report.html "
           "--simulate '--dp 8'",
)
