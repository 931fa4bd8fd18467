"""The columnar trace store (echo_sim.store) and out-of-core analysis (echo_sim.outofcore).

Round trip: ``convert`` then every analysis gives the same JSON as the original trace, for
echo, Kineto and ByteProfile inputs. Engines: the duckdb engine gives the memory engine's
results (counts, ranks, flags exact; sums to 1e-9 relative) on the same store, including
ranks missing steps, GPU busy densities (busy_us < dur_us), ranks on later time bases and a
crashed run's dropped steps; through a local 2-process pool and a local 2-worker Ray runtime.
"""

from __future__ import annotations

import io
import itertools
import json
import shutil
import types
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("pyarrow")
pytest.importorskip("duckdb")

from echo_sim import progress as progress_mod  # noqa: E402
from echo_sim.analysis.collect import collect  # noqa: E402
from echo_sim.analysis.statistic import statistic  # noqa: E402
from echo_sim.analysis.stragglers import stragglers  # noqa: E402
from echo_sim.load import load_trace  # noqa: E402
from echo_sim.outofcore import (  # noqa: E402
    choose_engine,
    collect_store,
    statistic_store,
    stragglers_store,
)
from echo_sim.outofcore import engine as engine_mod  # noqa: E402
from echo_sim.store import is_store, load_store, read_store_info  # noqa: E402
from echo_sim.store.convert import convert, write_trace_store  # noqa: E402
from echo_sim.store.write import RankRows, StoreWriter, rank_rows_of  # noqa: E402
from echo_sim.trace.model import _COLUMNS, COLLECTIVES, Cat, Trace, TraceBuilder  # noqa: E402
from echo_sim.trace.outfiles import output_tree  # noqa: E402
from tests.cli_util import run  # noqa: E402

DATA = Path(__file__).parent / "data" / "load"
INPUTS = ["echo_2rank", "echo_real_ddp", "byteprofile_2rank", "kineto_1rank.json.gz"]


class _Cli:
    def __init__(self, code: int, out: str, err: str) -> None:
        self.code, self.out, self.err = code, out, err


def close(a: Any, b: Any, path: str = "") -> None:
    """Equal JSON, floats to 1e-9 relative (+1e-6 us: float sums in another order)."""
    if isinstance(a, dict):
        assert a.keys() == b.keys(), path
        for k in a:
            close(a[k], b[k], f"{path}/{k}")
    elif isinstance(a, list | tuple):
        assert len(a) == len(b), path
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            close(x, y, f"{path}[{i}]")
    elif isinstance(a, float) or isinstance(b, float):
        assert a is not None and b is not None, (path, a, b)
        assert (a != a and b != b) or a == pytest.approx(b, rel=1e-9, abs=1e-6), (path, a, b)
    else:
        assert a == b, (path, a, b)


def _json(d: dict[str, Any]) -> Any:
    return json.loads(json.dumps(d, default=lambda o: o.tolist()))


def all_three(trace: Trace) -> list[Any]:
    return [_json(statistic(trace).to_dict()), _json(collect(trace).to_dict()),
            _json(stragglers(trace).to_dict())]


def all_three_store(path: Path, **kw: Any) -> list[Any]:
    kw.setdefault("workers", 1)  # in process: the pool and Ray have their own tests
    return [_json(statistic_store(path, **kw).to_dict()),
            _json(collect_store(path, **kw).to_dict()),
            _json(stragglers_store(path, **kw).to_dict())]


# ---------------------------------------------------------------------------- round trip
@pytest.mark.parametrize("name", INPUTS)
def test_convert_round_trip_gives_the_same_trace(tmp_path: Path, name: str) -> None:
    out = tmp_path / "store"
    s = convert(DATA / name, out, rows_per_part=10)  # several parts even for small traces
    assert is_store(out) and s.parts > 1 or s.ranks == 1
    a, b = load_trace(DATA / name), load_trace(out)
    for c in _COLUMNS:
        assert np.array_equal(getattr(a.events, c), getattr(b.events, c), equal_nan=True), c
    assert (a.names, a.kinds, a.groups, a.steps, a.notes) == (b.names, b.kinds, b.groups,
                                                               b.steps, b.notes)
    assert a.comm_args == b.comm_args and a.counter_names == b.counter_names
    for c in ("rank", "ts_us", "series", "value"):
        assert np.array_equal(np.sort(getattr(a.counters, c)), np.sort(getattr(b.counters, c)))
    assert a.ranks == b.ranks and a.source_format == b.source_format
    assert set(a.dags) == set(b.dags)
    for r in a.dags:
        assert dict(a.dags[r].nodes(data=True)) == dict(b.dags[r].nodes(data=True))
        assert sorted(a.dags[r].edges(data=True)) == sorted(b.dags[r].edges(data=True))


@pytest.mark.parametrize("name", ["echo_real_ddp", "byteprofile_2rank", "kineto_1rank.json.gz"])
def test_cli_on_the_store_prints_what_it_prints_on_the_trace(tmp_path: Path, name: str,
                                                             capsys: Any) -> None:
    def run_cli(argv: list[str]) -> _Cli:
        return _Cli(*run(capsys, *argv))

    store = tmp_path / "s"
    r = run_cli(["convert", str(DATA / name), "--to", str(store), "--rows-per-part", "50",
                 "--json"])
    assert r.code == 0, r.err
    assert json.loads(r.out)["events"] == len(load_trace(DATA / name).events)
    for cmd in ("statistic", "collect", "stragglers"):
        want = json.loads(run_cli([cmd, str(DATA / name), "--json"]).out)
        for engine in ("memory", "duckdb"):
            got = run_cli([cmd, str(store), "--json", "--engine", engine])
            assert got.code == 0, got.err
            have = json.loads(got.out)
            want.pop("source", None), have.pop("source", None)
            if engine == "memory":
                assert have == want  # the same Trace: byte-identical results
            else:
                close(want, have)


def test_convert_refuses_to_overwrite_and_duckdb_needs_a_store(tmp_path: Path,
                                                                capsys: Any) -> None:
    def run_cli(argv: list[str]) -> _Cli:
        return _Cli(*run(capsys, *argv))

    store = tmp_path / "s"
    assert run_cli(["convert", str(DATA / "echo_2rank"), "--to", str(store)]).code == 0
    again = run_cli(["convert", str(DATA / "echo_2rank"), "--to", str(store)])
    assert again.code == 2 and "--to" in again.err and "--force" in again.err
    assert run_cli(["convert", str(DATA / "echo_2rank"), "--to", str(store),
                    "--force"]).code == 0
    bad = run_cli(["collect", str(DATA / "echo_2rank"), "--engine", "duckdb"])
    assert bad.code == 2 and "--engine duckdb" in bad.err and "convert" in bad.err
    assert len(bad.err.strip().splitlines()) == 1


# ---------------------------------------------------------------------------- engines
def edge_trace() -> Trace:
    """3 ranks, 3 steps: rank 2 has no events in step 1 (a missing cell), GPU slices with
    busy_us < dur_us, nested modules, comm on two lanes overlapping compute, collectives
    matched by (group, seq) entered late by different ranks, send/recv (not collectives),
    device kernels outside modules, a STEP marker on some cells only."""
    b = TraceBuilder(source_format="echo", source="edge")
    rng = np.random.default_rng(3)
    for rank in range(3):
        for step in range(3):
            if rank == 2 and step == 1:
                continue
            t0 = 1000.0 * step + rng.uniform(0, 5)
            if (rank + step) % 2 == 0:
                b.add(rank=rank, name="STEP", cat=Cat.STEP, ts_us=t0, dur_us=900.0, step=step,
                      tid=1)
            t = t0
            for i in range(6):
                dur = float(rng.uniform(20, 60))
                b.add(rank=rank, name=f"FW.m{i}", cat=Cat.FW, ts_us=t, dur_us=dur, step=step,
                      busy_us=dur * float(rng.uniform(0.3, 1.0)), tid=0)
                b.add(rank=rank, name=f"FW.m{i}.inner", cat=Cat.FW, ts_us=t + 2,
                      dur_us=dur / 2, step=step, busy_us=dur / 3)
                t += dur + 1
            for i in range(6):
                dur = float(rng.uniform(30, 90))
                b.add(rank=rank, name=f"BW.m{5 - i}", cat=Cat.BW, ts_us=t, dur_us=dur,
                      step=step, busy_us=dur * 0.7)
                if i % 2 == 1:
                    b.add(rank=rank, name=f"Comm.b{i // 2}", cat=Cat.COMM,
                          ts_us=t + rng.uniform(0, 20), dur_us=120.0, step=step,
                          tid=100 + i % 4 // 2, collective="all_reduce", nbytes=4096,
                          group_ranks=[0, 1, 2], seq=10 * step + i // 2, busy_us=80.0)
                t += dur + 1
            if rank < 2:
                b.add(rank=rank, name="Comm.p2p", cat=Cat.COMM, ts_us=t, dur_us=15.0,
                      step=step, tid=110, collective="send" if rank == 0 else "recv",
                      group_ranks=[0, 1], seq=step, peer=1 - rank)
            b.add(rank=rank, name="kernel.x", cat=Cat.OTHER, ts_us=t + 5, dur_us=40.0,
                  step=step, tid=200, busy_us=25.0)
            b.add(rank=rank, name="UPDATE.SGD", cat=Cat.UPDATE, ts_us=t + 60, dur_us=50.0,
                  step=step)
        b.add(rank=rank, name="FW.outside", cat=Cat.FW, ts_us=5000.0, dur_us=5.0, step=-1)
    t = b.build(steps=[0, 1, 2])
    return t


@pytest.mark.parametrize("rows_per_part", [1, 30, 10**6])
def test_engines_agree_on_edge_cases(tmp_path: Path, rows_per_part: int) -> None:
    trace = edge_trace()
    store = tmp_path / "s"
    write_trace_store(trace, store, rows_per_part=rows_per_part)
    want = all_three(trace)
    got = all_three_store(store)
    for w, g in zip(want, got, strict=True):
        close(w, g)
    cells = got[1]["cells"]["iteration_us"]
    assert cells[2][1] is None  # rank 2, step 1: missing on both paths
    assert got[0]["categories"]["other"]["total_us"] > 0  # device work outside modules
    assert any(r["times_last"] for r in got[2]["ranks"])
    # GPU densities are weighted, not whole slices: compute < sum of FW/BW durations
    assert got[1]["compute_us"] < want[0]["step_time_us"]


def test_engines_agree_on_time_bases_and_dropped_steps(tmp_path: Path) -> None:
    """Rank 1 written on a base 2.5 ms later (times shifted back on reading, as the echo
    loader does) and a crashed run (step 2 incomplete: dropped on reading)."""
    trace = edge_trace()
    store = tmp_path / "s"
    with output_tree(store, overwrite=False) as tree:
        w = StoreWriter(tree, source="edge", source_format="echo", rows_per_part=40)
        for rank in (0, 1, 2):
            rr = rank_rows_of(trace, rank)
            base = 2_500_000 if rank == 1 else 0  # ns
            rr = RankRows(rr.info, {**rr.cols, "ts_us": rr.cols["ts_us"] - base / 1000.0},
                          rr.comm_args, rr.counters, rr.dag, base)
            w.add_rank(rr)
        w.finish(names=trace.names, kinds=trace.kinds, groups=trace.groups,
                 counter_names=trace.counter_names, steps=[0, 1], drop_other_steps=True,
                 notes=["partial trace: dropping step 2"])
    info = read_store_info(store)
    assert info.ts_shift_us == {1: 2500.0}
    back = load_store(store)
    trace.keep_steps([0, 1])
    assert np.allclose(back.events.ts_us, trace.events.ts_us, rtol=0, atol=1e-9)
    assert back.steps == [0, 1] and set(np.unique(back.events.step)) == {-1, 0, 1}
    for w_, g in zip(all_three(back), all_three_store(store), strict=True):
        close(w_, g)
    close(all_three(trace), all_three(back))


def test_engines_agree_through_a_process_pool(tmp_path: Path) -> None:
    store = tmp_path / "s"
    write_trace_store(edge_trace(), store, rows_per_part=25)
    one, two = all_three_store(store, workers=1), all_three_store(store, workers=2)
    assert one == two  # the same functions on the same parts: bit-identical


@pytest.mark.slow
def test_engines_agree_on_ray(tmp_path: Path) -> None:
    """A local Ray runtime with 2 workers runs the rank groups and parses the ranks of a
    conversion (skips without ray)."""
    ray = pytest.importorskip("ray", reason="ray is optional (pip install 'ray[default]')")
    store = tmp_path / "s"
    trace = edge_trace()
    write_trace_store(trace, store, rows_per_part=25)
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
             ignore_reinit_error=True)
    try:
        got = all_three_store(store, workers="ray")
        convert(DATA / "echo_real_ddp", tmp_path / "ray.store", workers="ray",
                rows_per_part=100)
    finally:
        ray.shutdown()
    a, b = load_trace(DATA / "echo_real_ddp"), load_trace(tmp_path / "ray.store")
    assert np.array_equal(a.events.ts_us, b.events.ts_us) and a.names == b.names
    assert got == all_three_store(store, workers=1)
    for w, g in zip(all_three(trace), got, strict=True):
        close(w, g)


def test_auto_engine_by_size(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = tmp_path / "s"
    write_trace_store(edge_trace(), store)
    assert choose_engine(DATA / "echo_2rank") == "memory"
    assert choose_engine(store) == "memory"
    assert choose_engine(store, "duckdb") == "duckdb"
    monkeypatch.setattr(engine_mod, "AUTO_DUCKDB_EVENTS", 10)
    assert choose_engine(store) == "duckdb"
    monkeypatch.setattr(engine_mod, "AUTO_DUCKDB_EVENTS", 10**12)
    monkeypatch.setattr(engine_mod, "available_memory_bytes", lambda: 1000)
    assert choose_engine(store) == "duckdb"  # too big for the memory there is


def test_collectives_table_matches_p2p_index() -> None:
    from echo_sim.outofcore.queries import _P2P

    assert [COLLECTIVES[i] for i in _P2P] == ["send", "recv"]


# ---------------------------------------------------------------------------- progress
def test_progress_lines_without_a_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(progress_mod, "LOG_FIRST_S", 0.0)
    monkeypatch.setattr(progress_mod, "LOG_EVERY_S", 0.0)
    buf = io.StringIO()
    with progress_mod.Progress(4, "converting", unit="rank", stream=buf) as bar:
        for _ in range(4):
            bar.update(1)
    lines = buf.getvalue().splitlines()
    assert lines[0].startswith("echo_sim: converting: 1/4 ranks (25 %)")
    assert lines[-1].endswith("(done)") and "4/4 ranks (100 %)" in lines[-1]
    assert "left" not in lines[0] and "about" in lines[1]  # a pace needs two units
    # a slow start before the first unit (search's probes) is not extrapolated
    clock = itertools.chain([0.0, 100.0, 101.0], itertools.repeat(102.0))
    monkeypatch.setattr(progress_mod, "time", types.SimpleNamespace(monotonic=lambda: next(clock)))
    slow = io.StringIO()
    with progress_mod.Progress(10, "searching", unit="layout", stream=slow) as bar:
        bar.update(1)  # at 100 s
        bar.update(1)  # at 101 s: 1 s a layout since the first, 8 left
    assert slow.getvalue().splitlines()[1].endswith("about 8 s left"), slow.getvalue()
    quiet = io.StringIO()
    with progress_mod.Progress(4, "x", stream=quiet, enabled=False) as bar:
        bar.update(4)
    assert quiet.getvalue() == ""


def test_short_steps_print_nothing() -> None:
    buf = io.StringIO()
    with progress_mod.Progress(2, "loading", stream=buf) as bar:
        bar.update(2)
    assert buf.getvalue() == ""  # under LOG_FIRST_S: no line at all


def test_store_copy_elsewhere_still_reads(tmp_path: Path) -> None:
    """Part paths are relative: a store moved or copied to a shared file system reads."""
    store = tmp_path / "s"
    convert(DATA / "echo_2rank", store)
    moved = tmp_path / "moved"
    shutil.copytree(store, moved)
    shutil.rmtree(store)
    close(all_three(load_trace(DATA / "echo_2rank")), all_three_store(moved))


@pytest.mark.parametrize("argv", [["validate"], ["critical"], ["replay"], ["graph", "--rank", "0"]])
def test_every_command_takes_the_store_as_path(tmp_path: Path, capsys: Any,
                                               argv: list[str]) -> None:
    """Commands other than the three out-of-core ones read the store through load_trace:
    the same Trace, the same JSON."""
    src = DATA / "echo_real_ddp"
    store = tmp_path / "s"
    convert(src, store, rows_per_part=100)
    outs = []
    for path in (src, store):
        code, out, err = run(capsys, argv[0], path, *argv[1:], "--json")
        assert code == 0, err
        d = json.loads(out)
        d.pop("source", None)
        outs.append(json.dumps(d, sort_keys=True).replace(str(store), "P").replace(str(src), "P"))
    assert outs[0] == outs[1]


def test_combine_keeps_what_perfetto_opens(tmp_path: Path, capsys: Any,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib

    combine_mod = importlib.import_module("echo_sim.analysis.combine")

    src = DATA / "echo_real_ddp"
    full = load_trace(src)
    one_rank = combine_mod.estimate_bytes(full) // 2 // len(full.steps)  # a rank, a step
    monkeypatch.setattr(combine_mod, "PERFETTO_LIMIT_BYTES", one_rank + 1)
    code, out, err = run(capsys, "combine", src, "--output", tmp_path / "c.json", "--json")
    assert code == 0, err
    d = json.loads(out)
    assert "Perfetto" in d["subset"] and f"step {full.steps[0]}" in d["subset"]
    assert "ranks 0-0 of 2" in d["subset"] and d["num_ranks"] == 1
    back = load_trace(tmp_path / "c.json")
    assert sorted(back.ranks) == [0] and back.steps == full.steps[:1]
    code, out, _ = run(capsys, "combine", src, "--output", tmp_path / "all.json", "--all",
                       "--json")
    assert code == 0 and "subset" not in json.loads(out)
    assert json.loads(out)["num_ranks"] == 2
    code, out, _ = run(capsys, "combine", src, "--output", tmp_path / "r1.json", "--ranks",
                       "1", "--json")
    assert code == 0 and json.loads(out)["num_ranks"] == 1


def test_compare_engines_agree(tmp_path: Path, capsys: Any) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    trace = edge_trace()
    write_trace_store(trace, a, rows_per_part=30)
    convert(DATA / "echo_2rank", b, rows_per_part=10)
    for extra in ([], ["--ranks-a", "0,2", "--ranks-b", "1"]):
        outs = []
        for engine in ("memory", "duckdb"):
            code, out, err = run(capsys, "compare", a, b, "--json", "--head", "0",
                                 "--engine", engine, "--workers", "1", *extra)
            assert code == 0, err
            outs.append(json.loads(out))
        close(outs[0], outs[1])
        assert outs[1]["ops"] and outs[1]["iteration_a_us"] > 0
    code, _, err = run(capsys, "compare", a, DATA / "echo_2rank", "--engine", "duckdb")
    assert code == 2 and "convert" in err


@pytest.mark.parametrize("step", [2, 3, 4])
def test_critical_reads_one_step_of_a_store(tmp_path: Path, capsys: Any, step: int) -> None:
    """critical on a store loads only the step whose path it draws (memory bounded by one
    step of every rank), and finds the same path as on the whole trace."""
    from tests.cli_util import run

    convert(DATA / "echo_real_ddp", tmp_path / "s.store")
    one = load_store(tmp_path / "s.store", steps=[step])
    whole = load_trace(DATA / "echo_real_ddp")
    assert one.steps == [step] and set(one.events.step.tolist()) == {step}
    assert len(one.events) == int((whole.events.step == step).sum())
    got = []
    for path in (tmp_path / "s.store", DATA / "echo_real_ddp"):
        code, out, err = run(capsys, "critical", path, "--step", step, "--json")
        assert code == 0, err
        got.append(json.loads(out))
    assert got[0]["segments"] == got[1]["segments"]
    assert got[0]["total_us"] == got[1]["total_us"]
