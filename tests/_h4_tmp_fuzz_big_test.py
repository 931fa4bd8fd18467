"""Fuzz the loaders with mutated real traces: every input ends in a Trace or an EchoError.

Mutations: truncate a file at a random offset, flip random bytes, delete a key from an
event or meta.json, change a value's type, drop a rank directory or a side file. Nothing
else may escape ``load_trace`` (no KeyError, no IndexError, no numpy error, no traceback).
"""

from __future__ import annotations

import gzip
import json
import shutil
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from echo_sim.errors import EchoError
from echo_sim.load import load_trace
from echo_sim.trace.model import Trace

DATA = Path(__file__).parent / "data" / "load"
FIXTURES = {
    "echo": (DATA / "echo_2rank", "0_1/trace.json"),
    "byteprofile": (DATA / "byteprofile_2rank", "1_0/bps_trace_local_rank0_2step.json"),
    "kineto": (None, "prof.json"),
}
SETTINGS = settings(max_examples=400, deadline=None, derandomize=False,
                    suppress_health_check=[HealthCheck.too_slow])

# values of every JSON type, including the nasty ones
ODD_VALUES = st.sampled_from([None, "", "x", "12", -1, -1e300, 2**70, 1.5, True, [], [1],
                              {}, {"a": 1}, float("inf")])


def _materialise(fmt: str, dst: Path) -> Path:
    src, _ = FIXTURES[fmt]
    if src is None:
        dst.mkdir()
        raw = gzip.decompress((DATA / "kineto_1rank.json.gz").read_bytes())
        (dst / "prof.json").write_bytes(raw)
    else:
        shutil.copytree(src, dst)
    return dst


def _outcome(path: Path) -> Trace | EchoError:
    """What load_trace gives: a Trace, or the EchoError it raised (anything else fails)."""
    try:
        trace = load_trace(path, progress=False)
    except EchoError as e:
        msg = str(e)
        assert msg and "\n" not in msg, f"error message is not one line: {msg!r}"
        return e
    assert isinstance(trace, Trace)
    return trace


fmt_st = st.sampled_from(sorted(FIXTURES))


@SETTINGS
@given(fmt=fmt_st, frac=st.floats(0.0, 1.0))
def test_truncated_file(fmt: str, frac: float) -> None:
    with tempfile.TemporaryDirectory() as d:
        root = _materialise(fmt, Path(d) / "t")
        f = root / FIXTURES[fmt][1]
        raw = f.read_bytes()
        f.write_bytes(raw[: int(len(raw) * frac)])
        out = _outcome(root)
        if frac < 0.99:
            assert isinstance(out, EchoError)


@SETTINGS
@given(fmt=fmt_st, data=st.data())
def test_flipped_bytes(fmt: str, data: st.DataObject) -> None:
    with tempfile.TemporaryDirectory() as d:
        root = _materialise(fmt, Path(d) / "t")
        f = root / FIXTURES[fmt][1]
        raw = bytearray(f.read_bytes())
        for _ in range(data.draw(st.integers(1, 8))):
            i = data.draw(st.integers(0, len(raw) - 1))
            raw[i] = data.draw(st.integers(0, 255))
        f.write_bytes(bytes(raw))
        _outcome(root)


def _mutate_events(doc: Any, data: st.DataObject) -> None:
    events = doc["traceEvents"]
    for _ in range(data.draw(st.integers(1, 4))):
        i = data.draw(st.integers(0, len(events) - 1))
        e = events[i]
        action = data.draw(st.sampled_from(["del", "type", "args", "replace"]))
        if action == "replace":
            events[i] = data.draw(ODD_VALUES)
            continue
        if not isinstance(e, dict):
            continue
        target = e
        if action == "args" and isinstance(e.get("args"), dict) and e["args"]:
            target = e["args"]
        keys = sorted(target)
        if not keys:
            continue
        k = data.draw(st.sampled_from(keys))
        if action == "del":
            del target[k]
        else:
            target[k] = data.draw(ODD_VALUES)


@SETTINGS
@given(fmt=fmt_st, data=st.data())
def test_deleted_keys_and_changed_types(fmt: str, data: st.DataObject) -> None:
    with tempfile.TemporaryDirectory() as d:
        root = _materialise(fmt, Path(d) / "t")
        f = root / FIXTURES[fmt][1]
        doc = json.loads(f.read_text())
        _mutate_events(doc, data)
        if data.draw(st.booleans()) and isinstance(doc, dict):
            k = data.draw(st.sampled_from(sorted(doc)))
            doc[k] = data.draw(ODD_VALUES)
        f.write_text(json.dumps(doc, allow_nan=True))
        _outcome(root)


@SETTINGS
@given(data=st.data())
def test_meta_and_dag_mutations(data: st.DataObject) -> None:
    with tempfile.TemporaryDirectory() as d:
        root = _materialise("echo", Path(d) / "t")
        rank = data.draw(st.sampled_from(["0_0", "0_1"]))
        meta = root / rank / "meta.json"
        m = json.loads(meta.read_text())
        k = data.draw(st.sampled_from(sorted(m)))
        if data.draw(st.booleans()):
            del m[k]
        else:
            m[k] = data.draw(ODD_VALUES)
        meta.write_text(json.dumps(m, allow_nan=True))
        dag = root / rank / "dag.gml"
        text = dag.read_text()
        cut = data.draw(st.integers(0, len(text)))
        if data.draw(st.booleans()):
            dag.write_text(text[:cut])
        _outcome(root)


@SETTINGS
@given(fmt=st.sampled_from(["echo", "byteprofile"]), data=st.data())
def test_dropped_ranks_and_side_files(fmt: str, data: st.DataObject) -> None:
    with tempfile.TemporaryDirectory() as d:
        root = _materialise(fmt, Path(d) / "t")
        files = sorted(p for p in root.rglob("*") if p.is_file())
        for p in data.draw(st.lists(st.sampled_from(files), max_size=4, unique=True)):
            p.unlink()
        if data.draw(st.booleans()):
            ranks = sorted(p for p in root.iterdir() if p.is_dir())
            shutil.rmtree(data.draw(st.sampled_from(ranks)))
        _outcome(root)


def test_dropping_a_rank_keeps_the_other() -> None:
    with tempfile.TemporaryDirectory() as d:
        root = _materialise("echo", Path(d) / "t")
        shutil.rmtree(root / "0_0")
        out = _outcome(root)
        assert isinstance(out, Trace) and list(out.ranks) == [1]


@pytest.mark.parametrize("fmt", sorted(FIXTURES))
def test_unmutated_fixtures_load(fmt: str) -> None:
    with tempfile.TemporaryDirectory() as d:
        assert isinstance(_outcome(_materialise(fmt, Path(d) / "t")), Trace)
