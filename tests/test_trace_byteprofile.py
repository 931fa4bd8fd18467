"""``TRACE_FORMAT=byteprofile``: real captures write ByteProfile's files next to echo's.

One process (a model whose layer runs twice a step: ``NAME#k``) and two gloo DDP ranks
(``examples/train.py`` under torchrun, slow). Each run is checked against its own echo files
(names, times, parameters, the dependencies ``args.argN`` = the DAG), read back by echo_sim's
ByteProfile loader, and compared with what ``echo_sim export --to byteprofile`` writes from
the same run's echo trace: the same events, names and name lists; ``dag.gml`` is echo's
(the exporter's graph plus the sink ``NEXT_STEP`` and node attributes).
"""

from __future__ import annotations

import json
import logging
import shutil
import textwrap
from pathlib import Path

import networkx as nx
import pytest
import torch
from torch import nn

import echo_trace
from echo_sim.load import load_trace
from echo_sim.trace.graph import rank_dag
from echo_trace.config import CaptureConfig
from echo_trace.contract import (
    BPS_ARG_NAMES_FILE,
    BPS_GRADIENT_LIST_FILE,
    COMPUTE_CATS,
    NEXT_STEP,
    node_id,
)
from tests.cli_util import run
from tests.harness import REPO, run_python, run_torchrun

BPS_FILES = {BPS_ARG_NAMES_FILE, BPS_GRADIENT_LIST_FILE, "dag.gml"}


class Twice(nn.Module):
    """``fc`` runs twice a step: its second call is ``FW.fc#1`` / ``BW.fc#1``."""

    def __init__(self) -> None:
        super().__init__()
        self.emb = nn.Embedding(20, 8)
        self.fc = nn.Linear(8, 8)
        self.act = nn.GELU()
        self.head = nn.Linear(8, 20)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.fc(self.act(self.fc(self.emb(x)))))


def _train(out: Path, steps: int = 5, **kw: object) -> Path:
    torch.manual_seed(0)
    model = Twice()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    g = torch.Generator().manual_seed(1)
    with echo_trace.capture(out, start_step=1, end_step=4, **kw):
        for _ in range(steps):
            x = torch.randint(0, 20, (4, 6), generator=g)
            nn.functional.cross_entropy(model(x).reshape(-1, 20), x.reshape(-1)).backward()
            opt.step()
            opt.zero_grad()
    return out / "0_0"


# ----------------------------------------------------------------------------- checks
def _bps_file(d: Path) -> Path:
    (f,) = d.glob("bps_trace_*.json")
    return f


def check_rank(d: Path, rank: int, local_rank: int) -> list[dict]:
    """One rank directory of a TRACE_FORMAT=byteprofile run against its own echo files;
    returns the ByteProfile events."""
    meta = json.loads((d / "meta.json").read_text())
    steps = meta["steps"]
    assert meta["trace_format"] == "byteprofile" and len(steps) == 3
    names = {p.name for p in d.iterdir()}
    bps = f"bps_trace_local_rank{local_rank}_{len(steps)}step.json"
    assert names == {"trace.json", "meta.json", bps} | BPS_FILES
    doc = json.loads((d / bps).read_text())
    assert set(doc) == {"traceEvents", "displayTimeUnit"}
    events = doc["traceEvents"]
    # the operators and Comm events of the complete steps, with trace.json's times
    trace = json.loads((d / "trace.json").read_text())["traceEvents"]
    want = sorted((e["ts"], node_id(e["name"], e["args"]["occ"]), e["dur"]) for e in trace
                  if e.get("ph") == "X" and e["args"]["step"] in steps
                  and e["cat"] in (*COMPUTE_CATS, "Comm"))
    assert sorted((e["ts"], e["name"], e["dur"]) for e in events) == want
    assert [e["ts"] for e in events] == sorted(e["ts"] for e in events)
    for e in events:
        comm = e["name"].startswith("Comm.")
        assert (e["cat"], e["tid"]) == (("Comm", "total") if comm else ("operator", 0))
        assert e["ph"] == "X" and e["pid"] == rank and e["args"]["name"] == e["name"]
    # parameters: meta.json's; gradients: the Comm tensors in first-issue order
    params = (d / BPS_ARG_NAMES_FILE).read_text().splitlines()
    assert params == [p["name"] for p in meta["params"]] and params
    grads = (d / BPS_GRADIENT_LIST_FILE).read_text().splitlines()
    assert grads == list(dict.fromkeys(e["name"][5:] for e in events
                                       if e["name"].startswith("Comm.")))
    # dependencies: args.argN of every step = the predecessors echo_sim's rules find, and
    # the last step's are dag.gml's edges (less the sink)
    echo = load_trace(d)
    assert echo.source_format == "echo"  # the echo files stay what echo_sim reads
    at = 0
    for step in steps:
        g = rank_dag(echo, rank, step)
        g.remove_node(NEXT_STEP)
        chunk = events[at:at + len(g)]
        at += len(g)
        assert {e["name"] for e in chunk} == set(g.nodes), step
        for e in chunk:
            deps = [v for k, v in e["args"].items() if k != "name"]
            assert list(e["args"])[1:] == [f"arg{k}" for k in range(len(deps))]
            assert sorted(deps) == sorted(g.predecessors(e["name"])), (step, e["name"])
    assert at == len(events)
    dag = nx.read_gml(d / "dag.gml")
    assert dag.graph["step"] == steps[-1]
    dag.remove_node(NEXT_STEP)
    inline = {(a, e["name"]) for e in chunk for k, a in e["args"].items() if k != "name"}
    assert set(dag.edges) == inline and set(dag.nodes) == {e["name"] for e in chunk}
    return events


def check_loader(root: Path, dirs: list[str], tmp: Path) -> None:
    """ByteProfile's files alone (gathered as dPRO does) read back by echo_sim's loader."""
    only = tmp / "bps_only"
    for name in dirs:
        (only / name).mkdir(parents=True)
        src = root / name
        for f in (_bps_file(src), *(src / n for n in BPS_FILES)):
            shutil.copy(f, only / name / f.name)
    back = load_trace(only)
    assert back.source_format == "byteprofile" and len(back.steps) == 3
    assert sorted(back.ranks) == list(range(len(dirs)))
    for r, name in enumerate(dirs):
        events = json.loads(_bps_file(root / name).read_text())["traceEvents"]
        rows = back.rank_rows(r)
        got = sorted(back.name_of(int(i)) for i in rows if back.name_of(int(i)) != "STEP")
        assert got == sorted(e["name"] for e in events)
        assert set(back.dags[r].edges) >= {(a, e["name"]) for e in events[-5:]
                                           for k, a in e["args"].items() if k != "name"}
    # the trace file alone (next to echo's files) reads as ByteProfile too
    one = load_trace(_bps_file(root / dirs[0]))
    assert one.source_format == "byteprofile" and len(one.steps) == 3


def check_export(root: Path, dirs: list[str], tmp: Path, capsys: pytest.CaptureFixture[str],
                 ) -> None:
    """``echo_sim export --to byteprofile`` of the same run's echo trace: the same files,
    but dag.gml (echo's, at capture time: the exporter's graph plus NEXT_STEP)."""
    out = tmp / "exported"
    code, _, err = run(capsys, "export", root, "--to", "byteprofile", "--output", out)
    assert code == 0, err
    for name in dirs:
        ours, theirs = root / name, out / name
        assert _bps_file(ours).name == _bps_file(theirs).name
        assert json.loads(_bps_file(ours).read_text()) == json.loads(_bps_file(theirs).read_text())
        for f in (BPS_ARG_NAMES_FILE, BPS_GRADIENT_LIST_FILE):
            assert (ours / f).read_bytes() == (theirs / f).read_bytes(), f
        a, b = nx.read_gml(ours / "dag.gml"), nx.read_gml(theirs / "dag.gml")
        a.remove_node(NEXT_STEP)
        assert set(a.nodes) == set(b.nodes) and set(a.edges) == set(b.edges)


# ----------------------------------------------------------------------------- one process
def test_capture_writes_the_byteprofile_layout(tmp_path, capsys):
    d = _train(tmp_path / "t", trace_format="byteprofile")
    events = check_rank(d, 0, 0)
    names = {e["name"] for e in events}
    assert {"FW.fc", "FW.fc#1", "BW.fc", "BW.fc#1", "UPDATE.Adam"} <= names
    assert (d / BPS_GRADIENT_LIST_FILE).read_text() == ""  # one process: no communication
    fw1 = next(e for e in events if e["name"] == "FW.fc#1")
    assert fw1["args"] == {"name": "FW.fc#1", "arg0": "FW.act"}
    check_loader(tmp_path / "t", ["0_0"], tmp_path)
    check_export(tmp_path / "t", ["0_0"], tmp_path, capsys)


def test_echo_default_writes_no_byteprofile_file(tmp_path):
    d = _train(tmp_path / "t")
    assert sorted(p.name for p in d.iterdir()) == ["dag.gml", "meta.json", "trace.json"]
    assert json.loads((d / "meta.json").read_text())["trace_format"] == "echo"


def test_a_failure_building_them_keeps_the_echo_trace(tmp_path, monkeypatch, caplog):
    import echo_trace.byteprofile as bp

    def broken(*a: object, **k: object) -> None:
        raise RuntimeError("boom")

    monkeypatch.setattr(bp, "byteprofile_files", broken)
    with caplog.at_level(logging.WARNING, logger="echo_trace"):
        d = _train(tmp_path / "t", trace_format="byteprofile")
    assert sorted(p.name for p in d.iterdir()) == ["dag.gml", "meta.json", "trace.json"]
    warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warnings) == 1 and "ByteProfile files (RuntimeError: boom)" in warnings[0]
    assert json.loads((d / "meta.json").read_text())["disabled_reason"] is None


def test_trace_format_values():
    assert CaptureConfig.from_env({}).trace_format == "echo"
    assert CaptureConfig.from_env({"TRACE_FORMAT": " ByteProfile "}).trace_format == "byteprofile"
    with pytest.raises(ValueError, match=r"TRACE_FORMAT='dpro': expected one of echo, "
                                         r"byteprofile"):
        CaptureConfig.from_env({"TRACE_FORMAT": "dpro"})
    with pytest.raises(ValueError, match=r"trace_format='bps': expected one of echo, byteprofile"):
        echo_trace.capture("t", trace_format="bps")


SCRIPT = textwrap.dedent("""
    import sys
    import torch
    from torch import nn
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1))
    opt = torch.optim.Adam(model.parameters())
    for i in range(5):
        model(torch.randn(2, 4)).sum().backward()
        opt.step()
    print("trained", i + 1)
""")


def test_run_flag_and_a_bad_env_value(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    out = run_python(["-m", "echo_trace.run", "--trace-dir", str(tmp_path / "t"),
                      "--start-step", "1", "--end-step", "4", "--trace-format", "byteprofile",
                      str(script)], timeout=120, cwd=REPO)
    assert out.returncode == 0, out.stderr
    d = tmp_path / "t" / "0_0"
    assert {"bps_trace_local_rank0_3step.json", BPS_ARG_NAMES_FILE} <= {p.name for p in d.iterdir()}
    assert (d / BPS_ARG_NAMES_FILE).read_text().splitlines() == ["0.weight", "0.bias",
                                                                "2.weight", "2.bias"]
    # a bad TRACE_FORMAT: one warning naming it, capture off, training unharmed
    out = run_python(["-m", "echo_trace.run", "--trace-dir", str(tmp_path / "u"), str(script)],
                     env={"TRACE_FORMAT": "chrome"}, timeout=120, cwd=REPO)
    assert out.returncode == 0 and "trained 5" in out.stdout, out.stderr
    lines = [ln for ln in out.stderr.splitlines() if "echo_trace" in ln]
    assert len(lines) == 1 and "TRACE_FORMAT='chrome': expected one of echo, byteprofile" \
        in lines[0], out.stderr
    assert not (tmp_path / "u").exists()
    out = run_python(["-m", "echo_trace.run", "--trace-format", "chrome", str(script)],
                     timeout=60, cwd=REPO)
    assert out.returncode == 2 and "invalid choice: 'chrome'" in out.stderr


# ----------------------------------------------------------------------------- two ranks
GPT_FLAGS = ["--layers", "2", "--hidden", "32", "--heads", "2", "--seq", "16",
             "--micro-batch", "4", "--vocab", "128"]


@pytest.mark.slow
def test_ddp_ranks_write_the_byteprofile_layout(tmp_path, capsys):
    root = tmp_path / "traces"
    env = {"TRACE_START_STEP": "1", "TRACE_END_STEP": "4", "TRACE_DIR": str(root),
           "TRACE_FORMAT": "byteprofile"}
    argv = ["-m", "echo_trace.run", str(REPO / "examples" / "train.py"), "--layout", "ddp",
            "--model", "gpt", "--steps", "5", *GPT_FLAGS]
    proc = run_torchrun(argv, nproc=2, env=env, timeout=240, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-4000:]
    dirs = ["0_0", "0_1"]
    per_rank = [check_rank(root / name, r, r) for r, name in enumerate(dirs)]
    for r, events in enumerate(per_rank):
        comm = [e for e in events if e["cat"] == "Comm"]
        assert comm and all(e["name"].startswith("Comm.") for e in comm)
        # every step's first UPDATE waits on gradient communication (rule 4)
        updates = [e for e in events if e["name"].startswith("UPDATE.")]
        assert len(updates) == 3
        assert all(any(v.startswith("Comm.") for v in u["args"].values()) for u in updates)
        grads = (root / dirs[r] / BPS_GRADIENT_LIST_FILE).read_text().splitlines()
        assert grads and all(g.startswith("bucket") for g in grads)
    # both ranks synchronise the same tensors and parameters
    assert ((root / "0_0" / BPS_GRADIENT_LIST_FILE).read_text()
            == (root / "0_1" / BPS_GRADIENT_LIST_FILE).read_text())
    assert ((root / "0_0" / BPS_ARG_NAMES_FILE).read_text()
            == (root / "0_1" / BPS_ARG_NAMES_FILE).read_text())
    check_loader(root, dirs, tmp_path)
    check_export(root, dirs, tmp_path, capsys)
