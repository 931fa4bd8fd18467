"""Issue 11, input side: hostile or broken inputs end in one-line EchoErrors, bounded.

Each test builds its broken input from a real fixture (tests/data/load) or writes it here,
and checks the loader refuses it with an :class:`EchoError` (never a traceback) or, for
crash traces, reads what is readable and says so.
"""

from __future__ import annotations

import gzip
import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from echo_sim.errors import EchoError, TraceFormatError, TraceMismatchError
from echo_sim.load import load_trace
from echo_sim.load.files import read_maybe_gzip, read_regular_file
from echo_sim.load.gml import read_dag
from echo_sim.load.jsonio import read_trace_event_chunks, read_trace_events
from echo_sim.load.triosim import read_triosim
from echo_sim.textsafe import safe_text
from echo_sim.trace.validate import check_meta, validate

DATA = Path(__file__).parent / "data" / "load"


def _echo_copy(tmp_path: Path) -> Path:
    dst = tmp_path / "run"
    shutil.copytree(DATA / "echo_2rank", dst)
    return dst


def _edit_json(path: Path, fn: Any) -> None:
    """Edit a JSON file in place (``trace.json`` also found as ``trace.json.gz``)."""
    gz = path.with_name(path.name + ".gz")
    if not path.exists() and gz.exists():
        doc = json.loads(gzip.decompress(gz.read_bytes()))
        fn(doc)
        gz.write_bytes(gzip.compress(json.dumps(doc).encode()))
        return
    doc = json.loads(path.read_text())
    fn(doc)
    path.write_text(json.dumps(doc))


def _one_line_error(path: Path, exc: type[EchoError] = EchoError) -> str:
    with pytest.raises(exc) as info:
        load_trace(path, progress=False)
    msg = str(info.value)
    assert msg and "\n" not in msg and "Traceback" not in msg
    return msg


def _first_x(doc: dict[str, Any]) -> dict[str, Any]:
    return next(e for e in doc["traceEvents"] if e.get("ph") == "X")


# ---------------------------------------------------------------- files: bombs, devices
def test_gzip_bomb_is_refused_at_the_limit(tmp_path: Path) -> None:
    run = _echo_copy(tmp_path)
    trace = run / "0_0" / "trace.json"
    trace.unlink()
    # ~100 KB of gzip that would inflate to 96 MiB: over 64x, past the 64 MiB floor (it
    # starts like JSON, so that its first bytes do not refuse it already)
    with gzip.open(run / "0_0" / "trace.json.gz", "wb", compresslevel=9) as f:
        f.write(b'{"traceEvents": [')
        chunk = b" " * (1 << 20)
        for _ in range(96):
            f.write(chunk)
    msg = _one_line_error(run, TraceFormatError)
    assert "gzip bomb" in msg and "trace.json.gz" in msg


def test_gzip_within_limits_reads_whole(tmp_path: Path) -> None:
    f = tmp_path / "x.gz"
    body = b'{"a": 1}' * 1000
    f.write_bytes(gzip.compress(body) + gzip.compress(b" "))  # two members
    assert bytes(read_maybe_gzip(f)) == body + b" "


def test_truncated_gzip_is_one_error(tmp_path: Path) -> None:
    f = tmp_path / "x.json.gz"
    f.write_bytes(gzip.compress(b'{"traceEvents": []}' * 100)[:-20])
    with pytest.raises(TraceFormatError, match="truncated or corrupt gzip"):
        read_maybe_gzip(f)


def test_devices_fifos_and_oversize_are_refused(tmp_path: Path) -> None:
    with pytest.raises(TraceFormatError, match="device"):
        read_regular_file("/dev/zero")
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    with pytest.raises(TraceFormatError, match="FIFO"):
        read_regular_file(fifo)  # must not block waiting for a writer
    big = tmp_path / "big"
    big.write_bytes(b"x" * 1000)
    with pytest.raises(TraceFormatError, match="limit"):
        read_regular_file(big, max_bytes=999)
    assert bytes(read_regular_file(big, max_bytes=1000)) == b"x" * 1000
    with pytest.raises(EchoError):
        load_trace(fifo, progress=False)


# ---------------------------------------------------------------- parsers: depth, overflow
def test_deeply_nested_dag_gml_is_one_error(tmp_path: Path) -> None:
    g = tmp_path / "dag.gml"
    depth = 100_000
    g.write_text("graph [ directed 1 " + "a [ " * depth + "] " * depth + "]")
    with pytest.raises(TraceFormatError, match="nests brackets deeper"):
        read_dag(g)
    run = _echo_copy(tmp_path)
    shutil.copy(g, run / "0_0" / "dag.gml")
    _one_line_error(run, TraceFormatError)


def test_huge_integers_are_range_errors(tmp_path: Path) -> None:
    run = _echo_copy(tmp_path)
    _edit_json(run / "0_0" / "trace.json",
               lambda d: _first_x(d)["args"].__setitem__("step", 10**30))
    assert "step" in _one_line_error(run, TraceFormatError)
    run2 = _echo_copy(tmp_path / "b")
    _edit_json(run2 / "0_1" / "meta.json", lambda d: d.__setitem__("world_size", 10**12))
    assert "world_size" in _one_line_error(run2, TraceFormatError)


def test_kineto_huge_rank_and_step(tmp_path: Path) -> None:
    doc = json.loads(gzip.decompress((DATA / "kineto_1rank.json.gz").read_bytes()))
    doc["distributedInfo"] = {"rank": 10**30, "world_size": 1}
    f = tmp_path / "prof.json"
    f.write_text(json.dumps(doc))
    assert "distributedInfo.rank" in _one_line_error(f, TraceFormatError)
    doc["distributedInfo"] = {"rank": 0, "world_size": 1}
    for e in doc["traceEvents"]:
        if str(e.get("name", "")).startswith("ProfilerStep#"):
            e["name"] = "ProfilerStep#" + "9" * 40
    f.write_text(json.dumps(doc))
    trace = load_trace(f, progress=False)  # not a step number: the file is one step
    assert trace.steps == [0]


def test_triosim_huge_gpuid(tmp_path: Path) -> None:
    src = Path(__file__).parent / "data" / "triosim"
    csv_file = next(src.rglob("trace.csv"))
    lines = csv_file.read_text().splitlines()
    header = [h.strip() for h in lines[0].split(",")]
    cells = lines[1].split(",")
    cells[header.index("gpuid")] = "9" * 30
    (tmp_path / "trace.csv").write_text("\n".join([lines[0], ",".join(cells)]) + "\n")
    with pytest.raises(TraceFormatError, match="gpuid"):
        read_triosim(tmp_path / "trace.csv")


def test_meta_params_must_be_objects(tmp_path: Path) -> None:
    run = _echo_copy(tmp_path)
    _edit_json(run / "0_0" / "meta.json", lambda d: d.__setitem__("params", [1, "x"]))
    assert "'params'" in _one_line_error(run, TraceFormatError)


# ---------------------------------------------------------------- nonsense timestamps
@pytest.mark.parametrize("key,value,needle", [
    ("ts", True, "'ts' is True"),
    ("ts", 1e308, "out of range"),
    ("dur", -5.0, "negative duration"),
    ("dur", 1e300, "out of range"),
    ("ts", "12", "'ts' is '12'"),
])
def test_nonsense_times_are_rejected(tmp_path: Path, key: str, value: Any, needle: str) -> None:
    run = _echo_copy(tmp_path)
    _edit_json(run / "0_0" / "trace.json", lambda d: _first_x(d).__setitem__(key, value))
    assert needle in _one_line_error(run, TraceFormatError)


def test_nan_time_is_not_json(tmp_path: Path) -> None:
    run = _echo_copy(tmp_path)
    f = run / "0_0" / "trace.json"
    text = f.read_text()
    first = json.dumps(_first_x(json.loads(text))["ts"])
    f.write_text(text.replace(f'"ts": {first}', '"ts": NaN', 1))
    assert "JSON" in _one_line_error(run, TraceFormatError)


@pytest.mark.parametrize("value,needle", [(True, "True"), (1e308, "ts 1e+308")])
def test_kineto_nonsense_times(tmp_path: Path, value: Any, needle: str) -> None:
    doc = json.loads(gzip.decompress((DATA / "kineto_1rank.json.gz").read_bytes()))
    _first_x(doc)["ts"] = value
    f = tmp_path / "prof.json"
    f.write_text(json.dumps(doc))
    assert needle in _one_line_error(f, TraceFormatError)


# ---------------------------------------------------------------- terminal safety
def test_control_characters_are_escaped(tmp_path: Path) -> None:
    assert safe_text("FW.\x1b]0;pwned\x07x") == "FW.\\x1b]0;pwned\\x07x"
    assert safe_text("a\u202eb") == "a\\u202eb"
    assert safe_text("Zürich ok") == "Zürich ok"
    assert safe_text("x" * 10, 6) == "xxx..."
    run = _echo_copy(tmp_path)
    _edit_json(run / "0_0" / "trace.json",
               lambda d: _first_x(d).__setitem__("name", "FW.\x1b[2Jevil"))
    trace = load_trace(run, progress=False)
    assert "FW.\\x1b[2Jevil" in trace.names
    assert all(n.isprintable() for n in trace.names)


# ---------------------------------------------------------------- batched parsing
def _record(batch: list[Any], sizes: list[int], into: list[Any]) -> None:
    sizes.append(len(batch))
    into.extend(batch)


def test_batched_events_equal_whole_parse(tmp_path: Path) -> None:
    events = [{"ph": "X", "name": f"FW.m{i}", "ts": float(i), "dur": 1.0,
               "args": {"s": "},{\"tricky\"", "nested": [{"a": i}, {"b": 2}]}}
              for i in range(3000)]
    f = tmp_path / "t.json"
    f.write_text(json.dumps({"traceEvents": events, "otherData": {"k": 1}}))
    got: list[Any] = []
    top = read_trace_event_chunks(f, got.extend, got.clear, chunk_bytes=4096)
    whole, _ = read_trace_events(f)
    assert got == whole and top == {"otherData": {"k": 1}}
    plain = [{"ph": "X", "name": "a", "ts": float(i), "dur": 1.0} for i in range(5000)]
    f.write_text(json.dumps({"traceEvents": plain, "baseTimeNanoseconds": 7}))
    got.clear()
    batches: list[int] = []
    top = read_trace_event_chunks(f, lambda b: _record(b, batches, got), got.clear,
                                  chunk_bytes=4096)
    assert got == plain and top == {"baseTimeNanoseconds": 7} and len(batches) > 10


# ---------------------------------------------------------------- crash traces
def _drop_step(run: Path, rank_dir: str, step: int) -> None:
    def cut(d: dict[str, Any]) -> None:
        d["traceEvents"] = [e for e in d["traceEvents"]
                            if (e.get("args") or {}).get("step") != step]
    _edit_json(run / rank_dir / "trace.json", cut)


def test_ranks_stopped_at_different_steps_keep_common_steps(tmp_path: Path) -> None:
    run = _echo_copy(tmp_path)
    full = load_trace(run, progress=False)
    assert full.steps == [2, 3] and not full.notes
    # rank 1 died inside step 3: its meta lists step 3 as partial
    _edit_json(run / "0_1" / "meta.json",
               lambda d: d.update(steps=[2], partial_steps=[3]))
    trace = load_trace(run, progress=False)
    assert trace.steps == [2]
    assert set(trace.events.step.tolist()) <= {2, -1}
    assert any("partial trace" in n and "dropping step 3" in n for n in trace.notes)
    assert any(v.rule == "load" for v in validate(trace))


def test_cli_says_which_steps_a_crash_trace_dropped(tmp_path: Path, capsys: Any) -> None:
    from echo_sim import cli

    run = _echo_copy(tmp_path)
    _edit_json(run / "0_1" / "meta.json", lambda d: d.update(steps=[2], partial_steps=[3]))
    assert cli.main(["statistic", str(run), "--head", "0"]) == 0
    err = capsys.readouterr().err.splitlines()
    assert any(line.startswith("echo_sim: warning: ") and "dropping step 3" in line
               for line in err), err


def test_different_steps_without_meta_claims(tmp_path: Path) -> None:
    run = tmp_path / "ddp"
    shutil.copytree(DATA / "echo_real_ddp", run)
    for rank_dir in ("0_0", "0_1"):
        _edit_json(run / rank_dir / "meta.json",
                   lambda d: [d.pop(k, None) for k in ("steps", "partial_steps")])
    assert load_trace(run, progress=False).steps == [2, 3, 4]
    _drop_step(run, "0_1", 4)
    trace = load_trace(run, progress=False)
    # rank 1 stopped before the others: its last step (3) is taken as cut short
    assert trace.steps == [2]
    assert trace.notes and "dropping step 3-4" in trace.notes[0]
    assert set(trace.events.step.tolist()) <= {2, -1}


def test_no_common_complete_step_is_refused(tmp_path: Path) -> None:
    run = _echo_copy(tmp_path)
    _drop_step(run, "0_0", 3)
    _drop_step(run, "0_1", 2)
    for rank_dir in ("0_0", "0_1"):
        _edit_json(run / rank_dir / "meta.json", lambda d: d.pop("steps"))
    msg = _one_line_error(run, TraceMismatchError)
    assert "none is complete" in msg


# ---------------------------------------------------------------- validate cross-checks
def test_validate_flags_new_trace_with_old_meta(tmp_path: Path) -> None:
    run = _echo_copy(tmp_path)
    assert check_meta(load_trace(run, progress=False)) == []
    # an interrupted overwrite: trace.json from a new run (new clock base, other steps)
    _edit_json(run / "0_0" / "trace.json", lambda d: d.__setitem__("baseTimeNanoseconds", 5))
    _edit_json(run / "0_0" / "meta.json", lambda d: d.__setitem__("base_time_ns", 9))
    _edit_json(run / "0_1" / "meta.json", lambda d: d.__setitem__("steps", [2, 3, 4]))
    trace = load_trace(run, progress=False)
    v = check_meta(trace)
    msgs = " | ".join(x.message for x in v)
    assert all(x.fatal for x in v)
    assert "base_time_ns" in msgs and "interrupted overwrite" in msgs
    _edit_json(run / "0_1" / "meta.json", lambda d: d.__setitem__("world_size", 3))
    assert any("world_size differs" in x.message or "world_size 3" in x.message
               for x in check_meta(load_trace(run, progress=False)))


# ---------------------------------------------------------------- Kineto step bounds
def _kineto_gpu_mirrored(path: Path, steps: int = 3, prefix: str = "ProfilerStep#") -> list[float]:
    """A profiler trace laid out as ROCm/CUDA profiles are: ``ProfilerStep#N`` on the main
    CPU thread, the same step mirrored as ``gpu_user_annotation`` on each of two GPU
    streams (covering only that stream's kernels), kernels on both streams, forward and
    backward CPU ops. Returns the CPU ProfilerStep durations (µs)."""
    ev: list[dict[str, Any]] = []
    t = 1000.0
    durs = []
    for s in range(steps):
        start = t
        gpu = {7: t + 3.0, 9: t + 4.0}
        for i in range(6):
            ev.append({"ph": "X", "cat": "cpu_op", "name": "aten::linear", "pid": 1, "tid": 11,
                       "ts": t, "dur": 8.0})
            for stream in gpu:
                ev.append({"ph": "X", "cat": "kernel", "name": f"gemm_{i}", "pid": 0,
                           "tid": stream, "ts": gpu[stream], "dur": 5.0})
                gpu[stream] += 6.0
            t += 10.0
        for _ in range(6):
            ev.append({"ph": "X", "cat": "cpu_op", "pid": 1, "tid": 12, "ts": t, "dur": 9.0,
                       "name": "autograd::engine::evaluate_function: AddmmBackward0"})
            t += 10.0
        ev.append({"ph": "X", "cat": "user_annotation", "name": "Optimizer.step#SGD.step",
                   "pid": 1, "tid": 11, "ts": t, "dur": 20.0})
        t += 30.0
        ev.append({"ph": "X", "cat": "user_annotation", "name": f"{prefix}{s}", "pid": 1,
                   "tid": 11, "ts": start, "dur": t - start})
        durs.append(t - start)
        for stream, end in gpu.items():
            ev.append({"ph": "X", "cat": "gpu_user_annotation", "name": f"{prefix}{s}",
                       "pid": 0, "tid": stream, "ts": start + 3.0, "dur": end - start - 3.0})
        t += 50.0
    path.write_text(json.dumps({"schemaVersion": 1, "deviceProperties": [],
                                "distributedInfo": {"rank": 0, "world_size": 1},
                                "traceEvents": ev}))
    return durs


@pytest.mark.parametrize("prefix", ["ProfilerStep#", "STEP"])
def test_kineto_iteration_is_the_cpu_profiler_step(tmp_path: Path, prefix: str) -> None:
    from echo_sim.analysis.statistic import step_grid

    f = tmp_path / "rank0.json"
    durs = _kineto_gpu_mirrored(f, prefix=prefix)
    trace = load_trace(f, progress=False)
    assert trace.steps == [0, 1, 2]
    got = step_grid(trace).iteration_us.tolist()
    for g, want in zip(got, durs, strict=True):
        assert abs(g - want) <= 0.03 * want
    ev = trace.events
    assert (ev.cat == 4).sum() == 3  # one STEP marker per step, not one per GPU mirror
    assert {int(t) for t in ev.tid[ev.tid >= 200]} == {207, 209}


# ---------------------------------------------------------------- combine round trip
@pytest.mark.parametrize("fixture", ["echo_2rank", "echo_real_ddp", "byteprofile_2rank"])
def test_combined_trace_reads_back_as_its_ranks(tmp_path: Path, fixture: str) -> None:
    from echo_sim.analysis.combine import combine
    from echo_sim.analysis.statistic import statistic

    original = load_trace(DATA / fixture, progress=False)
    out = tmp_path / "combined.json"
    combine(original, out)
    again = load_trace(out, progress=False)
    assert sorted(again.ranks) == sorted(original.ranks)
    assert again.steps == original.steps
    assert len(again.events) == len(original.events)
    assert any("combined trace" in n for n in again.notes)
    a, b = statistic(original).to_dict(), statistic(again).to_dict()
    # the originals hold absolute Unix µs (float64 resolution 0.25 µs); the combined file
    # holds them relative to a whole-µs offset, so figures agree to that resolution
    for key in ("step_time_us",):
        assert b[key] == pytest.approx(a[key], rel=1e-6, abs=1.0)
    for ra, rb in zip(a["ranks"], b["ranks"], strict=True):
        assert ra.keys() == rb.keys()
        for k in ra:
            assert rb[k] == pytest.approx(ra[k], rel=1e-6, abs=1.0)
    ops_a = {o["name"]: o for o in a["ops"]}
    ops_b = {o["name"]: o for o in b["ops"]}
    assert ops_a.keys() == ops_b.keys()
    for name, o in ops_a.items():
        assert ops_b[name]["count"] == o["count"]
        assert ops_b[name]["total_us"] == pytest.approx(o["total_us"], rel=1e-6, abs=1.0)


def test_byteprofile_nonsense_time(tmp_path: Path) -> None:
    run = tmp_path / "bp"
    shutil.copytree(DATA / "byteprofile_2rank", run)
    f = next((run / "0_0").glob("bps_trace_*.json"))
    _edit_json(f, lambda d: _first_x(d).__setitem__("ts", 1e308))
    assert "'ts' is 1e+308" in _one_line_error(run, TraceFormatError)


def test_batched_events_after_header_keys_and_pretty_printed(tmp_path: Path) -> None:
    events = [{"ph": "X", "name": f"k{i}", "ts": float(i), "dur": 1.0, "args": {"i": i}}
              for i in range(4000)]
    doc = {"schemaVersion": 1, "deviceProperties": [{"name": "traceEvents: [x"}],
           "traceEvents": events, "baseTimeNanoseconds": 3}
    f = tmp_path / "prof.json"
    f.write_text(json.dumps(doc, indent=1))  # '{\n  "ph"': whitespace inside the cuts
    got: list[Any] = []
    batches: list[int] = []
    top = read_trace_event_chunks(f, lambda b: _record(b, batches, got), got.clear,
                                  chunk_bytes=8192)
    assert got == events and len(batches) > 10
    assert top == {"schemaVersion": 1, "deviceProperties": [{"name": "traceEvents: [x"}],
                   "baseTimeNanoseconds": 3}


def _rank_dir_with_trace(tmp_path: Path, trace: Path) -> Path:
    root = tmp_path / "t"
    (root / "0_0").mkdir(parents=True)
    shutil.copy(Path(__file__).parent / "data" / "load" / "echo_2rank" / "0_0" / "meta.json",
                root / "0_0" / "meta.json")
    os.replace(trace, root / "0_0" / "trace.json")
    return root


def test_a_huge_sparse_trace_is_refused_from_its_first_bytes(tmp_path: Path) -> None:
    """A 2 GB sparse trace.json (NUL bytes) used to be read whole, then crash orjson under
    ``ulimit -v``: its first bytes already say it is no JSON."""
    import subprocess
    import sys

    f = tmp_path / "trace.json"
    with f.open("wb") as fh:
        fh.truncate(2 << 30)
    root = _rank_dir_with_trace(tmp_path, f)
    r = subprocess.run([sys.executable, "-m", "echo_sim", "validate", str(root)],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and r.stderr.count("\n") == 1, r.stderr
    assert "not valid JSON (starts with" in r.stderr and "Traceback" not in r.stderr


def test_a_parse_that_would_not_fit_in_memory_is_refused_in_one_line(tmp_path: Path) -> None:
    """Under ``ulimit -v`` a JSON document whose parse would need more than the address space
    left is refused before parsing (it used to end in MemoryError or SIGSEGV)."""
    import resource
    import subprocess
    import sys

    f = tmp_path / "trace.json"
    with f.open("wb") as fh:  # '[' then 600 MB of NULs (sparse): JSON-looking, huge
        fh.write(b"[")
        fh.truncate(600 << 20)
    root = _rank_dir_with_trace(tmp_path, f)

    def limit() -> None:  # 1.5 GiB of address space: the read fits, a 3x parse does not
        resource.setrlimit(resource.RLIMIT_AS, (3 << 29, 3 << 29))

    r = subprocess.run([sys.executable, "-m", "echo_sim", "validate", str(root)],
                       capture_output=True, text=True, timeout=120, preexec_fn=limit)
    assert r.returncode == 2 and r.stderr.count("\n") == 1, r.stderr
    assert "of memory, more than the" in r.stderr and "Traceback" not in r.stderr


def test_memory_budget_refuses_a_read_that_cannot_fit(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    from echo_sim.load import files

    p = tmp_path / "x.json"
    p.write_text("[1, 2, 3]")
    assert read_regular_file(p) == b"[1, 2, 3]"
    monkeypatch.setattr(files, "memory_budget", lambda: 4)
    with pytest.raises(TraceFormatError, match=r"x.json: reading its 9 B needs about 9 B of "
                                               r"memory, more than the 4 B available"):
        read_regular_file(p)


def test_a_short_truncated_trace_says_truncated_json_not_unknown_format(tmp_path: Path) -> None:
    body = (Path(__file__).parent / "data" / "load" / "echo_2rank" / "0_0" /
            "trace.json").read_bytes()
    f = tmp_path / "trace.json"
    f.write_bytes(body[:300])
    with pytest.raises(TraceFormatError, match=r"trace.json: truncated JSON at byte 300"):
        load_trace(f)
    f.write_bytes(b'{"traceEvents": [1,, 2]}')
    with pytest.raises(TraceFormatError, match=r"not valid JSON at byte 19"):
        load_trace(f)
