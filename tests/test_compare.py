"""compare: two sets of ranks of one trace, two traces, sorting, CSV-free xlsx round trip.

Ranks 0 vs 1 of ``two_rank_trace`` (tests/test_statistic.py), mean µs per occurrence:
FW.a 22.5 vs 25 (+2.5, 1.111x); Comm.bucket0 35 vs 32.5 (-2.5); BW.a 20 vs 17.5 (-2.5);
FW.b, BW.b, UPDATE.SGD equal. Iteration: rank 0 median(100, 110) = 105, rank 1
median(120, 100) = 110.
"""

from __future__ import annotations

import pytest

from echo_sim.analysis.compare import compare, write_xlsx
from echo_sim.errors import EchoError
from echo_sim.trace.model import Cat, TraceBuilder
from tests.test_statistic import two_rank_trace


def _by_name(c):
    return {o.name: o for o in c.ops}


def test_rank_sets_golden():
    t = two_rank_trace()
    c = compare(t, t, ranks_a=[0], ranks_b=[1])
    ops = _by_name(c)
    fa = ops["FW.a"]
    assert (fa.count_a, fa.count_b, fa.mean_a_us, fa.mean_b_us, fa.diff_us) == (
        2, 2, 22.5, 25.0, 2.5)
    assert fa.ratio == pytest.approx(25 / 22.5)
    assert ops["Comm.bucket0"].diff_us == -2.5
    assert ops["BW.a"].mean_b_us == 17.5
    assert ops["UPDATE.SGD"].diff_us == 0.0 and ops["UPDATE.SGD"].ratio == 1.0
    assert (c.iteration_a_us, c.iteration_b_us) == (105.0, 110.0)
    assert c.iteration_ratio == pytest.approx(110 / 105)
    # |diff| descending, ties by name
    assert [o.name for o in c.ops] == ["BW.a", "Comm.bucket0", "FW.a", "BW.b", "FW.b",
                                       "UPDATE.SGD"]


def test_operator_on_one_side_only_and_sorting():
    a = two_rank_trace()
    b = TraceBuilder()
    b.add(rank=0, name="FW.a", cat=Cat.FW, ts_us=0, dur_us=40, step=1)
    b.add(rank=0, name="FW.new", cat=Cat.FW, ts_us=40, dur_us=5, step=1)
    c = compare(a, b.build(), sort="mean_b", head=2)
    assert [o.name for o in c.ops] == ["FW.a", "FW.new"]
    assert c.num_ops == 7
    new = _by_name(c)["FW.new"]
    assert (new.count_a, new.mean_a_us, new.diff_us, new.ratio) == (0, None, None, None)
    assert _by_name(c)["FW.a"].ratio == pytest.approx(40 / 23.75)
    assert compare(a, a, sort="name").ops[0].name == "BW.a"


def test_errors_name_the_choices():
    t = two_rank_trace()
    with pytest.raises(EchoError, match="it has ranks \\[0, 1\\]"):
        compare(t, t, ranks_a=[5])
    with pytest.raises(EchoError, match="choose from"):
        compare(t, t, sort="speed")


def test_xlsx_round_trip(tmp_path):
    t = two_rank_trace()
    c = compare(t, t, ranks_a=[0], ranks_b=[1], label_a="r0", label_b="r1")
    (tmp_path / "out").mkdir()
    p = write_xlsx(c, tmp_path / "out" / "cmp.xlsx")
    wb = pytest.importorskip("openpyxl").load_workbook(p)
    assert wb.sheetnames == ["operators", "summary"]
    rows = list(wb["operators"].iter_rows(values_only=True))
    assert rows[0][:8] == ("operator", "category", "count A", "count B", "mean A (us)",
                           "mean B (us)", "diff B-A (us)", "ratio B/A")
    by_name = {r[0]: r for r in rows[1:]}
    assert len(by_name) == 6
    assert by_name["FW.a"][1:7] == ("FW", 2, 2, 22.5, 25.0, 2.5)
    assert by_name["FW.a"][7] == pytest.approx(25 / 22.5)
    summary = {r[0]: r[1] for r in wb["summary"].iter_rows(values_only=True)}
    assert summary["A"] == "r0" and summary["iteration B (us)"] == 110.0


def test_xlsx_blank_for_missing(tmp_path):
    a = two_rank_trace()
    b = TraceBuilder()
    b.add(rank=0, name="FW.new", cat=Cat.FW, ts_us=0, dur_us=5, step=1)
    p = write_xlsx(compare(a, b.build(), sort="name"), tmp_path / "m.xlsx")
    book = pytest.importorskip("openpyxl").load_workbook(p)
    rows = {r[0]: r for r in book["operators"].iter_rows(values_only=True)}
    assert rows["FW.new"][4] is None and rows["FW.new"][5] == 5.0
