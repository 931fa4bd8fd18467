"""The contract shared by writer and reader, and zero-code activation's cost.

* the DAG echo_trace writes (``dag.gml``) for a real traced run equals the one echo_sim
  rebuilds from ``trace.json`` with the same rules (one rank; two DDP ranks over gloo);
* ``echo_trace.contract`` (what echo_sim imports) and the ``echo_trace`` package import no
  torch;
* ``echo_trace.pth`` accepts the spellings ``TRACE_ON`` accepts in config, imports nothing
  of echo_trace until torch is imported, and then starts a capture;
* ``pip install -e .`` installs ``echo_trace.pth``.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import networkx as nx
import pytest
import torch
from torch import nn

import echo_trace
from echo_sim.load import load_trace
from echo_sim.trace.graph import rank_dag
from echo_trace.config import TRUE_SPELLINGS, CaptureConfig
from tests.harness import REPO, base_env, run_python, spawn
from tests.marks import needs_pip

PTH = REPO / "echo_trace.pth"


def _same_dag(rank_dir: Path, trace_root: Path, rank: int) -> None:
    written = nx.read_gml(rank_dir / "dag.gml")
    step = written.graph["step"]
    rebuilt = rank_dag(load_trace(trace_root), rank, step)
    assert set(written.nodes) == set(rebuilt.nodes)
    assert set(written.edges) == set(rebuilt.edges)
    for n, attrs in written.nodes(data=True):
        other = rebuilt.nodes[n]
        assert (attrs["cat"], attrs["step"]) == (other["cat"], other["step"]), n
        assert abs(attrs["dur_us"] - other["dur_us"]) <= 0.002, n  # 3-decimal roundings
    assert len(written) > 5


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.emb = nn.Embedding(20, 8)
        self.body = nn.Sequential(nn.Linear(8, 16), nn.GELU(), nn.Linear(16, 8))
        self.head = nn.Linear(8, 20)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.body(self.emb(x)))


def _train(model: nn.Module, steps: int, out: Path, depth: int | None = None) -> None:
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    g = torch.Generator().manual_seed(0)
    with echo_trace.capture(out, start_step=1, end_step=3, depth=depth, model=model):
        for _ in range(steps):
            x = torch.randint(0, 20, (4, 5), generator=g)
            nn.functional.cross_entropy(model(x).flatten(0, 1), x.flatten()).backward()
            opt.step()
            opt.zero_grad()


@pytest.mark.parametrize("depth", [None, 1])
def test_written_dag_equals_rebuilt_dag_one_rank(tmp_path, depth):
    torch.manual_seed(0)
    _train(Net(), 4, tmp_path, depth)
    _same_dag(tmp_path / "0_0", tmp_path, 0)


def _ddp_rank(rank: int, world_size: int, out: str) -> None:
    torch.manual_seed(0)
    model = nn.parallel.DistributedDataParallel(Net(), bucket_cap_mb=0.0001)
    _train(model, 4, Path(out))


@pytest.mark.slow
def test_written_dag_equals_rebuilt_dag_two_ddp_ranks(tmp_path):
    spawn(_ddp_rank, 2, str(tmp_path), timeout=120)
    for rank in (0, 1):
        d = tmp_path / f"0_{rank}"
        assert any(n.startswith("Comm.") for n in nx.read_gml(d / "dag.gml"))
        _same_dag(d, tmp_path, rank)


def test_contract_and_package_import_no_torch():
    code = ("import sys, echo_trace.contract, echo_trace.dag, echo_trace.writer, echo_trace; "
            "print(sorted(m for m in ('torch', 'networkx', 'numpy') if m in sys.modules))")
    out = run_python(["-c", code], timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def test_pth_spells_trace_on_as_config_does():
    line = next(ln for ln in PTH.read_text().splitlines() if ln.startswith("import"))
    spelled = re.search(r"in \(([^)]*)\)", line)
    assert spelled is not None
    assert tuple(s.strip().strip("'\"") for s in spelled.group(1).split(",")) == TRUE_SPELLINGS
    for v in ("1", "true", "TRUE", " Yes ", "on", "On"):
        assert CaptureConfig.trace_on({"TRACE_ON": v})
    for v in ("0", "off", "", "2", "enable"):
        assert not CaptureConfig.trace_on({"TRACE_ON": v})


# Process the .pth as site does (exec of its import line), then report what was imported.
PTH_PROBE = """
import sys
exec(open(sys.argv[1]).read())
armed = any(getattr(f, 'echo_trace_watcher', False) for f in sys.meta_path)
before = sorted(m for m in sys.modules if m.startswith('echo_trace'))
import torch
import importlib
cap = importlib.import_module('echo_trace.capture').current() if armed else None
print(armed, before, cap is not None and cap.autostart)
"""


@pytest.mark.parametrize("value,armed", [("1", True), ("yes", True), ("TRUE", True),
                                         (" on", True), ("0", False), ("nope", False)])
def test_pth_arms_only_on_and_imports_nothing_before_torch(tmp_path, value, armed):
    probe = tmp_path / "probe.py"
    probe.write_text(PTH_PROBE)
    out = run_python([str(probe), str(PTH)], timeout=120,
                     env={"TRACE_ON": value, "TRACE_DIR": str(tmp_path / "t")})
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == [str(armed), "[]", str(armed)]


@pytest.mark.slow
@needs_pip
def test_editable_install_ships_the_pth(tmp_path):
    """``pip install -e .`` (PEP 660, setuptools' editable_wheel) puts echo_trace.pth in
    site-packages, so TRACE_ON=1 works in an editable install (into a throwaway venv that
    sees this interpreter's packages; no download)."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", "--without-pip",
                    str(venv)], check=True, timeout=120)
    py = venv / "bin" / "python"
    env = {k: v for k, v in base_env().items() if k != "PYTHONPATH"}
    pip = subprocess.run([str(py), "-m", "pip", "install", "-q", "--no-build-isolation",
                          "--no-deps", "--no-index", "-e", str(REPO)], env=env, cwd=tmp_path,
                         capture_output=True, text=True, timeout=300)
    assert pip.returncode == 0, pip.stderr[-3000:]
    site = subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()"
                           "['purelib'])"], env=env, capture_output=True, text=True,
                          timeout=60, check=True).stdout.strip()
    assert (Path(site) / "echo_trace.pth").read_text() == PTH.read_text()
    code = ("import torch; m = torch.nn.Linear(2, 2); o = torch.optim.SGD(m.parameters(), "
            "lr=0.1)\nfor _ in range(4): m(torch.randn(1, 2)).sum().backward(); o.step()")
    run = subprocess.run([str(py), "-c", code], cwd=tmp_path, capture_output=True, text=True,
                         timeout=120, env=dict(env, TRACE_ON="yes", TRACE_START_STEP="1",
                                               TRACE_END_STEP="3", TRACE_DIR="t"))
    assert run.returncode == 0, run.stderr
    assert (tmp_path / "t" / "0_0" / "trace.json").is_file(), run.stderr
    assert os.path.isdir(site)
