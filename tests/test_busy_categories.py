"""GPU busy time in the categories: an event's idle gaps are idle.

A GPU echo trace's FW/BW/UPDATE/Comm slice is one run of kernels; ``args.busy_us`` is the
kernel time inside it. ``statistic``/``collect``/``stragglers`` count each slice at its density
busy/dur, so disjoint slices add up to their ``busy_us``. The trace below is written to disk
as real echo rank directories (trace.json + meta.json) and read by the echo loader.

Rank 0 (``busy`` = args.busy_us; FW.b in step 2 has none: busy = dur), all µs:

step 1: STEP [0,100]   FW.a [0,20] 5   FW.b [20,40] 10   BW.b [40,60] 8   BW.a [60,80] 12
        Comm.bucket0 [50,90] 30 (comm lane)   UPDATE.SGD [85,95] 4
step 2: STEP [100,220] FW.a [100,130] 6   FW.b [130,150] -   BW.b [150,170] 10
        BW.a [170,200] 15   Comm.bucket0 [180,210] 24   UPDATE.SGD [205,215] 5

Busy rule, step 1 / 2: FW 15 / 26, BW 20 / 25, UPDATE 4 / 5, Comm 30 / 24,
compute 39 / 56. Parts of the step (statistic; they add up to it): FW alone 15 / 26, BW
alone 20 − 12 / 25 − 8, UPDATE alone 4 − 1.5 / 5 − 2, Comm overlapped 13.5 / 10, exposed
16.5 / 14, idle 44.5 / 50.
Union rule (no busy_us, rank 1 of the two-rank run): FW 40 / 50, BW 40 / 50, UPDATE 10 / 10,
Comm 40 / 30, compute 90 / 110. Parts: FW 40 / 50, BW 10 / 30, UPDATE 5 / 5, Comm
overlapped 35 / 25, exposed 5 / 5, idle 5 / 5.

Overlap (collect), busy: ∫ compute(t)·comm(t) dt with comm at 30/40 = 0.75 (step 1) and
24/30 = 0.8 (step 2): step 1 = 10·0.4·0.75 + 20·0.6·0.75 + 5·0.4·0.75 = 13.5 (exposed 16.5);
step 2 = 20·0.5·0.8 + 5·0.5·0.8 = 10 (exposed 14). Union: 35 / 25 (exposed 5 / 5).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from echo_sim.analysis.collect import collect
from echo_sim.analysis.combine import combine
from echo_sim.analysis.statistic import covered_us, overlap_us, statistic
from echo_sim.analysis.stragglers import stragglers
from echo_sim.errors import TraceFormatError
from echo_sim.load import load_trace
from echo_sim.trace.export import write_echo_dirs
from echo_sim.trace.model import Cat, Events, TraceBuilder
from tests.cli_util import run

# (name, cat, tid, start, end, busy_us or None) per step
STEPS: dict[int, list[tuple[str, str, int, float, float, float | None]]] = {
    1: [("STEP", "step", 1, 0, 100, None),
        ("FW.a", "FW", 0, 0, 20, 5.0), ("FW.b", "FW", 0, 20, 40, 10.0),
        ("BW.b", "BW", 0, 40, 60, 8.0), ("BW.a", "BW", 0, 60, 80, 12.0),
        ("Comm.bucket0", "Comm", 100, 50, 90, 30.0), ("UPDATE.SGD", "UPDATE", 0, 85, 95, 4.0)],
    2: [("STEP", "step", 1, 100, 220, None),
        ("FW.a", "FW", 0, 100, 130, 6.0), ("FW.b", "FW", 0, 130, 150, None),
        ("BW.b", "BW", 0, 150, 170, 10.0), ("BW.a", "BW", 0, 170, 200, 15.0),
        ("Comm.bucket0", "Comm", 100, 180, 210, 24.0),
        ("UPDATE.SGD", "UPDATE", 0, 205, 215, 5.0)],
}
BASE_NS = 1_700_000_000_000_000_000  # the files' baseTimeNanoseconds: ts are µs since then


def _events(rank: int, with_busy: bool) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for step, rows in STEPS.items():
        for name, cat, tid, start, end, busy in rows:
            args: dict[str, Any] = {"step": step, "occ": 0}
            if cat == "Comm":
                args.update(collective="all_reduce", bytes=400, group_ranks=[0, 1],
                            seq=step - 1)
            if with_busy and busy is not None:
                args["busy_us"] = busy
            out.append({"ph": "X", "name": name, "cat": cat, "ts": float(start),
                        "dur": float(end - start), "pid": rank, "tid": tid, "args": args})
    return out


def write_rank(root: Path, rank: int, world_size: int, *, with_busy: bool) -> Path:
    """One echo rank directory ``root/0_<rank>`` (trace.json, meta.json) of the layout above."""
    d = root / f"0_{rank}"
    d.mkdir(parents=True)
    doc = {"traceEvents": _events(rank, with_busy), "baseTimeNanoseconds": BASE_NS,
           "otherData": {"format": "echo-trace/1", "rank": rank, "world_size": world_size}}
    (d / "trace.json").write_text(json.dumps(doc))
    meta = {"format": "echo-trace/1", "rank": rank, "local_rank": rank, "node_rank": 0,
            "world_size": world_size, "backend": "nccl", "device": "cuda", "host": "gpuhost",
            "steps": [1, 2], "partial_steps": [], "timer": "kineto",
            "trace_file": "trace.json"}
    (d / "meta.json").write_text(json.dumps(meta))
    return d


@pytest.fixture
def busy_run(tmp_path: Path) -> Path:
    """Rank 0 only, with busy_us."""
    write_rank(tmp_path / "busy", 0, 1, with_busy=True)
    return tmp_path / "busy"


@pytest.fixture
def plain_run(tmp_path: Path) -> Path:
    """The same spans, no busy_us anywhere."""
    write_rank(tmp_path / "plain", 0, 1, with_busy=False)
    return tmp_path / "plain"


def _cats(path: Path) -> dict[str, float]:
    return {c.category: c.total_us for c in statistic(load_trace(path)).categories}


# ---------------------------------------------------------------------------- loader / model
def test_loader_fills_busy_us_from_args(busy_run: Path) -> None:
    t = load_trace(busy_run)
    ev = t.events
    by_name = {(t.name_of(i), int(ev.step[i])): float(ev.busy_us[i]) for i in range(len(ev))}
    assert by_name[("FW.a", 1)] == 5.0 and by_name[("Comm.bucket0", 2)] == 24.0
    assert by_name[("FW.b", 2)] == 20.0  # no args.busy_us: its dur
    assert by_name[("STEP", 1)] == 100.0
    assert np.all(ev.busy_us <= ev.dur_us)


def test_no_busy_us_means_busy_equals_dur(plain_run: Path) -> None:
    ev = load_trace(plain_run).events
    assert np.array_equal(ev.busy_us, ev.dur_us)


def test_busy_us_clipped_to_the_span_and_checked(tmp_path: Path) -> None:
    d = write_rank(tmp_path / "run", 0, 1, with_busy=True)
    doc = json.loads((d / "trace.json").read_text())
    doc["traceEvents"][1]["args"]["busy_us"] = 1e9  # FW.a, dur 20
    doc["traceEvents"][2]["args"]["busy_us"] = -3  # FW.b, an int
    (d / "trace.json").write_text(json.dumps(doc))
    t = load_trace(tmp_path / "run")
    rows = {t.name_of(i): i for i in np.flatnonzero(t.events.step == 1).tolist()}
    assert t.events.busy_us[rows["FW.a"]] == 20.0 and t.events.busy_us[rows["FW.b"]] == 0.0
    doc["traceEvents"][1]["args"]["busy_us"] = "lots"
    (d / "trace.json").write_text(json.dumps(doc))
    with pytest.raises(TraceFormatError, match=r"traceEvents\[1\]: args.busy_us is 'lots'"):
        load_trace(tmp_path / "run")


def test_ranks_concatenate_with_their_own_busy(tmp_path: Path) -> None:
    write_rank(tmp_path / "run", 0, 2, with_busy=True)
    write_rank(tmp_path / "run", 1, 2, with_busy=False)
    t = load_trace(tmp_path / "run")
    ev = t.events
    r0, r1 = t.rank_rows(0), t.rank_rows(1)
    assert ev.busy_us[r0].sum() == 5 + 10 + 8 + 12 + 30 + 4 + 100 + 6 + 20 + 10 + 15 + 24 + 5 + 120
    assert np.array_equal(ev.busy_us[r1], ev.dur_us[r1])
    # subsetting keeps the column aligned with its rows
    t.keep_steps([2])
    ev = t.events
    assert len(ev) == 14 and np.all(ev.step == 2)
    assert sorted(ev.busy_us[ev.rank == 0].tolist()) == [5, 6, 10, 15, 20, 24, 120]


def test_builder_and_events_default_busy_to_dur() -> None:
    b = TraceBuilder()
    b.add(rank=0, name="FW.a", cat=Cat.FW, ts_us=10, dur_us=8, step=0, busy_us=3)
    b.add(rank=0, name="FW.b", cat=Cat.FW, ts_us=0, dur_us=5, step=0)
    b.add(rank=0, name="FW.c", cat=Cat.FW, ts_us=20, dur_us=4, step=0, busy_us=9)
    ev = b.build().events
    assert ev.busy_us.tolist() == [5.0, 3.0, 4.0]  # sorted by ts; None → dur; clipped
    cut = ev.take(np.array([2, 0]))
    assert cut.busy_us.tolist() == [4.0, 5.0]
    assert Events.concat([cut, ev]).busy_us.tolist() == [4.0, 5.0, 5.0, 3.0, 4.0]
    cols = {c: getattr(ev, c) for c in ("rank", "step", "cat", "name", "tid", "ts_us",
                                        "dur_us", "occ", "coll", "nbytes", "group", "seq",
                                        "peer", "kind", "param_bytes", "in_bytes",
                                        "out_bytes", "flops")}
    plain = Events(**cols)  # busy_us left out: a copy of dur_us
    assert plain.busy_us.tolist() == [5.0, 8.0, 4.0] and plain.busy_us is not plain.dur_us
    with pytest.raises(ValueError, match="busy_us has 1 rows"):
        Events(**cols, busy_us=np.ones(1))


def test_export_and_combine_round_trips_keep_busy(tmp_path: Path) -> None:
    write_rank(tmp_path / "run", 0, 2, with_busy=True)
    write_rank(tmp_path / "run", 1, 2, with_busy=False)
    t = load_trace(tmp_path / "run")
    write_echo_dirs(t, tmp_path / "again")
    back = load_trace(tmp_path / "again")
    assert np.array_equal(back.events.busy_us, t.events.busy_us)
    combine(t, tmp_path / "combined.json")
    merged = load_trace(tmp_path / "combined.json")  # split back into its two ranks
    assert sorted(merged.ranks) == [0, 1]
    assert np.array_equal(merged.events.busy_us, t.events.busy_us)
    doc = json.loads((tmp_path / "again" / "0_0" / "trace.json").read_text())
    written = {(e["name"], e["args"]["step"]): e["args"].get("busy_us")
               for e in doc["traceEvents"] if e["ph"] == "X"}
    assert written[("FW.a", 1)] == 5.0
    assert written[("STEP", 1)] is None and written[("FW.b", 2)] is None  # busy = dur: left out


# ---------------------------------------------------------------------------- statistic
def test_statistic_categories_are_busy_sums(busy_run: Path) -> None:
    s = statistic(load_trace(busy_run))
    cats = {c.category: c.total_us for c in s.categories}
    assert s.step_time_us == 220.0  # iteration time: STEP end − start, busy or not
    assert cats == pytest.approx({"FW": 15 + 26, "BW": 8 + 17, "UPDATE": 2.5 + 3, "other": 0,
                                  "Comm_overlapped": 13.5 + 10, "Comm_exposed": 16.5 + 14,
                                  "idle": 44.5 + 50})
    assert sum(cats.values()) == pytest.approx(220.0)
    assert sum(c.share for c in s.categories) == pytest.approx(1.0)
    (r0,) = s.ranks
    assert (r0.fw_us, r0.bw_us, r0.update_us, r0.comm_us, r0.idle_us) == pytest.approx(
        (20.5, 12.5, 2.75, 27.0, 47.25))
    # the operator table keeps durations
    fa = next(o for o in s.ops if o.name == "FW.a")
    assert (fa.count, fa.total_us, fa.mean_us) == (2, 50.0, 25.0)


def test_statistic_without_busy_is_the_union(plain_run: Path) -> None:
    assert _cats(plain_run) == {"FW": 90.0, "BW": 40.0, "UPDATE": 10.0, "other": 0.0,
                                "Comm_overlapped": 60.0, "Comm_exposed": 10.0, "idle": 10.0}


def test_per_rank_busy_and_plain_in_one_run(tmp_path: Path) -> None:
    write_rank(tmp_path / "run", 0, 2, with_busy=True)
    write_rank(tmp_path / "run", 1, 2, with_busy=False)
    r0, r1 = statistic(load_trace(tmp_path / "run")).ranks
    assert (r0.fw_us, r0.bw_us, r0.idle_us) == pytest.approx((20.5, 12.5, 47.25))
    assert (r1.fw_us, r1.bw_us, r1.comm_us, r1.comm_overlapped_us, r1.comm_exposed_us,
            r1.update_us, r1.idle_us) == (45.0, 20.0, 35.0, 30.0, 5.0, 5.0, 5.0)


def test_covered_us_density() -> None:
    """Disjoint intervals sum their busy time; where they overlap, the earlier start owns it."""
    g = np.zeros(3, np.int64)
    s, e = np.array([0.0, 10.0, 15.0]), np.array([10.0, 20.0, 30.0])
    d = np.array([0.5, 0.25, 1.0])
    # [0,10]·0.5 + [10,20]·0.25 + [20,30]·1 (the third's [15,20] is the second's)
    assert covered_us(g, s, e, 1, density=d).tolist() == [5.0 + 2.5 + 10.0]
    assert covered_us(g, s, e, 1).tolist() == [30.0] == covered_us(g, s, e, 1,
                                                                   density=np.ones(3)).tolist()
    # a parent [0,30] at 0.2 with a child [5,10]: the parent owns all of it
    assert covered_us(g[:2], np.array([0.0, 5.0]), np.array([30.0, 10.0]), 1,
                      density=np.array([0.2, 1.0])).tolist() == [pytest.approx(6.0)]


def test_overlap_us_is_the_product_of_densities() -> None:
    one = np.zeros(1, np.int64)
    a = (one, np.array([0.0]), np.array([100.0]), np.array([0.3]))
    b = (one, np.array([20.0]), np.array([60.0]), np.array([1.0]))
    assert overlap_us(a, b, 1).tolist() == [pytest.approx(12.0)]  # 40 · 0.3 · 1
    full = (one, a[1], a[2], np.ones(1))
    assert overlap_us(full, b, 1).tolist() == [40.0]  # |[0,100] ∩ [20,60]|
    empty = (np.zeros(0, np.int64), np.zeros(0), np.zeros(0), np.zeros(0))
    assert overlap_us(a, empty, 2).tolist() == [0.0, 0.0]


# ---------------------------------------------------------------------------- collect, stragglers
def test_collect_splits_busy_compute_and_comm(busy_run: Path, plain_run: Path) -> None:
    c = collect(load_trace(busy_run))
    assert c.cells["iteration_us"][0].tolist() == [100.0, 120.0]
    assert c.cells["fwbw_us"][0].tolist() == [35.0, 51.0]
    assert c.cells["compute_us"][0].tolist() == [39.0, 56.0]
    assert c.cells["comm_us"][0].tolist() == [30.0, 24.0]
    assert c.cells["overlapped_us"][0].tolist() == pytest.approx([13.5, 10.0])
    assert c.cells["exposed_us"][0].tolist() == pytest.approx([16.5, 14.0])
    p = collect(load_trace(plain_run))
    assert p.cells["compute_us"][0].tolist() == [90.0, 110.0]
    assert p.cells["overlapped_us"][0].tolist() == [35.0, 25.0]
    assert p.cells["exposed_us"][0].tolist() == [5.0, 5.0]


def test_stragglers_compare_busy_compute(tmp_path: Path) -> None:
    write_rank(tmp_path / "run", 0, 2, with_busy=True)
    write_rank(tmp_path / "run", 1, 2, with_busy=False)
    rep = stragglers(load_trace(tmp_path / "run"), threshold_us=1000.0)
    got = {(c.step, c.rank): (c.compute_us, c.compute_excess_us) for c in rep.cells}
    # median of two ranks is their mean: step 1 (39 + 90) / 2, step 2 (56 + 110) / 2
    assert got == {(1, 0): (39.0, -25.5), (1, 1): (90.0, 25.5),
                   (2, 0): (56.0, -27.0), (2, 1): (110.0, 27.0)}


# ---------------------------------------------------------------------------- CLI
def test_statistic_and_collect_json_show_busy_figures(capsys: Any, busy_run: Path) -> None:
    code, out, _ = run(capsys, "statistic", busy_run, "--json")
    assert code == 0
    d = json.loads(out)
    cats = d["categories"]
    assert (cats["FW"]["total_us"], cats["BW"]["total_us"], cats["UPDATE"]["total_us"],
            cats["Comm_overlapped"]["total_us"], cats["Comm_exposed"]["total_us"],
            cats["idle"]["total_us"]) == pytest.approx((41.0, 25.0, 5.5, 23.5, 30.5, 94.5))
    assert sum(c["share"] for c in cats.values()) == pytest.approx(1.0)
    assert d["step_time_us"] == 220.0
    code, out, _ = run(capsys, "collect", busy_run, "--json")
    assert code == 0
    d = json.loads(out)
    assert d["compute_us"] == 47.5 and d["comm_us"] == 27.0
    assert d["exposed_us"] == pytest.approx(15.25)
