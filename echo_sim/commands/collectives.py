"""``collectives PATH``: where each collective's time goes, across its members."""

from __future__ import annotations

from typing import Any

from echo_sim.analysis.comm_anatomy import CommAnatomy, comm_anatomy
from echo_sim.analysis.tables import fmt_us, format_table
from echo_sim.commands.checks import int_in
from echo_sim.commands.spec import Command, Result, arg

__all__ = ["COMMAND", "render"]

DESCRIPTION = """\
Where each collective's time goes across its members: waiting for the last member to
arrive, the transfer after it, and returning after the first member finished.

Collectives are matched across ranks by (process group, sequence number); send/recv and
collectives with a member missing from the trace are left out. A member arrives when it
issues the collective or, if its own earlier collectives of the group and kind were still
in flight, when they ended (the time before is "queued": DDP's buckets issued back to back,
or a fast rank's buckets all waiting for a straggler's; it belongs to those earlier ones
and is not counted again). For member r of one collective: wait = last arrival - r's arrival;
transfer = first completion - last arrival; lag = r's completion - first completion;
own = wait + transfer + lag, what the collective cost r. Per (collective, group size, bytes): instances per step, the mean own / wait / lag
over members and instances, the transfer's mean, median and 90th percentile, and the cost
per step (what a typical member pays). A transfer mean far above its median is a
heavy tail: some instances stall (a descheduled thread or a virtual CPU woken late), and a
step pays the mean. A large lag is a member's thread coming back late.

The ranks must share one clock (one host, or aligned traces): a negative transfer, a
member done before the last one arrived, says they do not. Times in microseconds.
"""


def render(an: CommAnatomy, *, head: int | None) -> str:
    tot = an.total
    lines = [f"per step ({an.steps} steps), a typical member spends {fmt_us(tot['own_us'])} us "
             f"in collectives: waiting {fmt_us(tot['wait_us'])}, transfer "
             f"{fmt_us(tot['transfer_us'])}, returning late {fmt_us(tot['lag_us'])}"
             + (f" (and {fmt_us(tot['queued_us'])} queued behind its own earlier ones, "
                "not counted again)" if tot["queued_us"] > 0 else "")]
    rows = an.rows if head is None else an.rows[:head]
    lines.append(format_table(
        ["collective", "group", "bytes", "per_step", "own_us", "wait_us", "transfer_mean",
         "transfer_median", "transfer_p90", "stalled", "lag_us", "per_step_us"],
        [[r.collective, str(r.group_size), f"{r.nbytes:,}", f"{r.per_step:g}",
          fmt_us(r.own_mean_us), fmt_us(r.wait_mean_us), fmt_us(r.transfer_mean_us),
          fmt_us(r.transfer_median_us), fmt_us(r.transfer_p90_us), f"{r.stalled:.0%}",
          fmt_us(r.lag_mean_us),
          fmt_us(r.per_step_us)] for r in rows],
        title="\nCollectives (costliest per step first)", left=1))
    neg = sum(r.negative for r in an.rows)
    if neg:
        lines.append(f"\nwarning: {neg} collective(s) with a negative transfer: a member "
                     f"finished before the last one arrived (ranks on different clocks?)")
    return "\n".join(lines)


def run(opts: Any) -> Result:
    from echo_sim.load import load_trace

    an = comm_anatomy(load_trace(opts.paths[0]))
    data = an.to_dict()
    data["source"] = opts.paths[0]
    return Result(render(an, head=None if opts.head == 0 else opts.head), data)


COMMAND = Command(
    name="collectives",
    help="per collective: waiting for the last member, transfer, returning late",
    description=DESCRIPTION,
    run=run,
    args=(
        arg("--head", type=int_in(0, 2**31), default=20, metavar="N",
            help="rows of the table (0: all); default 20"),
    ),
    epilog="example: python -m echo_sim collectives traces/",
)
