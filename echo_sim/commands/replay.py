"""``replay PATH``: run the measured dependency graph through the event engine."""

from __future__ import annotations

from typing import Any

from echo_sim.commands.checks import int_in, select_steps
from echo_sim.commands.outputs import check_output, flag_errors
from echo_sim.commands.spec import Command, Result, arg
from echo_sim.errors import ConfigError

__all__ = ["COMMAND", "parse_steps", "replay_steps"]

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

--del-queue (dPRO's --del_queue, "include each partition and QueueType for communication
traces"): every communication operation name (tensor, bucket or partition; and collective
type) gets its own in-order channel on each rank, instead of one channel per rank and
process group, so operations of different names never queue behind each other.
--pretty (dPRO's switch, "output necessary info"): also print a per-rank breakdown (means
per step: measured and replayed iteration, compute, host delay, communication, channels).
"""


def parse_steps(text: str | None, captured: list[int] | None = None) -> list[int] | None:
    """``"2,4-6"`` → the ``captured`` steps it names ([2, 4, 5, 6] when ``captured`` is not
    given and the ranges are small); None → all steps. Ranges are never expanded blindly:
    ``0-100000000000`` costs nothing (see :func:`echo_sim.commands.checks.select_steps`)."""
    from echo_sim.commands.checks import parse_steps as ranges

    if captured is not None:
        return select_steps(text, captured)
    spans = ranges(text)
    if spans is None:
        return None
    if sum(hi - lo + 1 for lo, hi in spans) > 1_000_000:
        raise ConfigError(f"--step {text!r}: more than 1,000,000 steps named")
    return [s for lo, hi in spans for s in range(lo, hi + 1)]


def replay_steps(opts: Any, captured: list[int]) -> list[int] | None:
    """--step, or dPRO's --step-num N (the last N captured steps); None: all."""
    if opts.step_num is not None:
        if opts.step is not None:
            raise ConfigError("--step and --step-num exclude each other; give one")
        return sorted(captured)[-opts.step_num:]
    return select_steps(opts.step, captured)


def run(opts: Any) -> Result:
    from echo_sim.load import load_trace
    from echo_sim.sim.replay import replay
    from echo_sim.trace.export import chrome_events, write_chrome

    if opts.output:
        check_output("--output", opts.output, force=opts.force)  # before the work
    trace = load_trace(opts.paths[0])
    res = replay(trace, scale=opts.scale or (), steps=replay_steps(opts, trace.steps),
                 durations=opts.durations, comm_queues="op" if opts.del_queue else "group")
    data = res.to_dict()
    data["source"] = opts.paths[0]
    text = res.text()
    if opts.pretty:
        from echo_sim.sim.replay_ranks import format_rank_lines, rank_lines

        lines = rank_lines(res)
        data["per_rank"] = [x.to_dict() for x in lines]
        text += "\n" + format_rank_lines(lines)
    if opts.output:
        with flag_errors("--output", opts.output):
            p = write_chrome(opts.output, chrome_events(res.replayed_trace()),
                             other_data={"replay_of": opts.paths[0], **{
                                 k: data[k] for k in ("replayed_iteration_time_us",
                                                      "measured_iteration_time_us",
                                                      "error_pct", "scale")}},
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
        arg("--step-num", "--step_num", type=int_in(1, 2**31), default=None, metavar="N",
            help="replay the last N captured steps (dPRO's --step_num)"),
        arg("--durations", choices=("measured", "mean", "median"), default="measured",
            help="measured: each event keeps its own step's times; mean / median: every "
                 "step replays the mean / median over steps of each event's times (a "
                 "typical iteration, as dPRO does with averages); default measured"),
        arg("--del-queue", "--del_queue", action="store_true",
            help="each communication operation (tensor / bucket / partition, collective "
                 "type) its own channel per rank, instead of one per rank and process group "
                 "(dPRO's --del_queue)"),
        arg("--pretty", action="store_true",
            help="also print a per-rank breakdown: measured and replayed iteration, "
                 "compute, host delay, communication, channels (dPRO's --pretty)"),
        arg("--output", "-o", metavar="FILE.json",
            help="write the replayed timeline as a Chrome trace (.json or .json.gz; opens in "
                 "Perfetto)"),
        arg("--force", action="store_true", help="replace the output file if it exists"),
    ),
    epilog="example: python -m echo_sim replay traces/ --scale 'Comm.*=0.5' -o replay.json",
)
