"""The README's tracing and trace-by-name examples, run top to bottom as printed.

Each line of the two ``bash`` blocks runs verbatim in one scratch directory (the repo on
PYTHONPATH; ``torchrun`` gets a free port), then ``statistic`` reads every directory the
examples wrote: the by-name runs no longer land inside ``traces/`` (which made
``statistic traces`` fail with "rank 0 appears twice").
"""

from __future__ import annotations

import re
import shlex
import sys
from pathlib import Path

import pytest

from tests.harness import REPO, base_env, free_port

pytestmark = pytest.mark.slow


def _block_after(heading: str) -> list[str]:
    """The command lines of the first ```bash block after ``heading`` (continuations joined,
    comments dropped)."""
    text = (REPO / "README.md").read_text()
    start = text.index(heading)
    block = re.search(r"```bash\n(.*?)```", text[start:], re.S)
    assert block, heading
    lines = block.group(1).replace("\\\n", " ").splitlines()
    return [ln.strip() for ln in lines if ln.strip() and not ln.strip().startswith("#")]


def _run(cmd: str, cwd: Path) -> None:
    import subprocess

    argv = shlex.split(cmd)
    env = base_env()
    while "=" in argv[0] and not argv[0].startswith("-"):
        key, _, val = argv.pop(0).partition("=")
        env[key] = val
    if argv[0] == "torchrun":
        argv = [sys.executable, "-m", "torch.distributed.run", "--master_addr=127.0.0.1",
                f"--master_port={free_port()}", *argv[1:]]
    elif argv[0] == "python":
        argv[0] = sys.executable
    if "examples/train.py" in argv:  # the script is the repo's, the outputs the scratch dir's
        argv[argv.index("examples/train.py")] = str(REPO / "examples" / "train.py")
    got = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=300)
    assert got.returncode == 0, f"{cmd}\n{got.stdout[-2000:]}\n{got.stderr[-2000:]}"


def test_readme_tracing_and_profile_examples_run_in_order(tmp_path: Path) -> None:
    tracing = _block_after("## Tracing")
    by_name = _block_after("### Trace a model by name")
    assert any("TRACE_DIR=traces " in c for c in tracing)
    for cmd in tracing + by_name:
        _run(cmd, tmp_path)
    outputs = {p.name for p in tmp_path.iterdir() if p.is_dir()}
    assert {"traces", "traces-single", "gpt2-traces", "mine-traces", "gpt2-graph"} <= outputs
    for out in ("traces", "traces-single", "gpt2-traces", "mine-traces", "gpt2-graph"):
        _run(f"python -m echo_sim statistic {out} --head 3", tmp_path)
    # the 2-rank DDP job is one job: exactly its two ranks
    assert sorted(p.name for p in (tmp_path / "traces").iterdir()) == ["0_0", "0_1"]
