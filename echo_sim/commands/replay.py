"""``replay PATH``: run the measured dependency graph through the event engine."""

from __future__ import annotations

from typing import Any

from echo_sim.commands.spec import Command, Result, arg

__all__ = ["COMMAND", "parse_steps"]

DESCRIPTION = """\
Replay the measured multi-rank dependency graph with the discrete-event engine and compare
the replayed iteration time with the measured one.

Every leaf FW/BW/UPDATE event is a task on its rank's compute stream, lasting its measured
duration plus the measured host delay before it (the gap its dependencies do not explain:
Python overhead, data loading, untraced ops). A collective is one task holding every
member's communication channel: it starts when the last member issues it and lasts the
measured transfer time (first member completion minus last member start: earlier members'
durations include waiting). A send/recv pair is one task on the sender's send and the
receiver's receive channel. A member that saw the operation complete later keeps that lag.

Iteration time of a step = its slowest rank's STEP span; the figures are medians (and
means) over the captured steps, in microseconds (the table shows ms). error = replayed vs
measured.

What-if: --scale GLOB=FACTOR multiplies the durations of events whose name matches the
glob (repeatable; the last matching expression wins), e.g. --scale 'Comm.*=0.5' for a
network twice as fast, --scale 'BW.*=0.8'. Host delays are not scaled.
--durations mean (or median) replays the typical iteration: every event takes the mean
over the captured steps of its own op time, host delay and transfer; compare it with the
measured mean iteration time (the "mean" row).
"""


def parse_steps(text: str | None) -> list[int] | None:
    """``"2,4-6"`` → [2, 4, 5, 6]; None → all steps."""
    from echo_sim.errors import ConfigError

    if text is None or text == "":
        return None
    out: list[int] = []
    for part in text.split(","):
        a, sep, b = part.strip().partition("-")
        try:
            out += list(range(int(a), int(b) + 1)) if sep else [int(a)]
        except ValueError:
            raise ConfigError(f"--step {text!r}: expected step numbers like 3 or 2,4-6") from None
    return out


def run(opts: Any) -> Result:
    from echo_sim.load import load_trace
    from echo_sim.sim.replay import replay
    from echo_sim.trace.export import chrome_events, write_chrome

    trace = load_trace(opts.paths[0])
    res = replay(trace, scale=opts.scale or (), steps=parse_steps(opts.step),
                 durations=opts.durations)
    data = res.to_dict()
    data["source"] = opts.paths[0]
    text = res.text()
    if opts.output:
        p = write_chrome(opts.output, chrome_events(res.replayed_trace()),
                         other_data={"replay_of": opts.paths[0], **{
                             k: data[k] for k in ("replayed_iteration_time_us",
                                                  "measured_iteration_time_us", "error_pct",
                                                  "scale")}},
                         overwrite=opts.force)
        data["output"] = str(p)
        text += f"\nwrote replayed timeline to {p}"
    return Result(text, data)


COMMAND = Command(
    name="replay",
    help="replay the measured dependency graph; replayed vs measured iteration time, what-ifs",
    description=DESCRIPTION,
    run=run,
    args=(
        arg("--scale", action="append", metavar="GLOB=FACTOR",
            help="multiply durations of events matching GLOB (fnmatch on event names) by "
                 "FACTOR; repeatable, e.g. --scale 'Comm.*=0.5' --scale 'BW.*=0.8'"),
        arg("--step", metavar="STEPS",
            help="replay only these captured steps, e.g. 3 or 2,4-6 (default: all)"),
        arg("--durations", choices=("measured", "mean", "median"), default="measured",
            help="measured: each event keeps its own step's times; mean / median: every "
                 "step replays the mean / median over steps of each event's times (a "
                 "typical iteration, as dPRO does with averages); default measured"),
        arg("--output", "-o", metavar="FILE.json",
            help="write the replayed timeline as a Chrome trace (.json or .json.gz; opens in "
                 "Perfetto)"),
        arg("--force", action="store_true", help="replace the output file if it exists"),
    ),
    epilog="example: python -m echo_sim replay traces/ --scale 'Comm.*=0.5' -o replay.json",
)
