"""End-to-end tracing of real 2-process gloo jobs, checked against docs/trace-format.md.

Each job is ``examples/train.py`` unchanged, launched by torchrun with ``TRACE_ON=1``:
either through ``python -m echo_trace.run`` (``run``) or through the ``echo_trace.pth``
start-up hook (``pth``: the file placed in a temporary user site-packages, or the installed
one when echo is installed). Every job runs once per module and is checked by several
tests, one property each. Also: an injected internal failure and a SIGTERM both leave a
valid trace behind while training is unharmed.
"""

from __future__ import annotations

import gzip
import json
import math
import os
import re
import signal
import site
import statistics
import subprocess
import sys
import threading
import time
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import networkx as nx
import pytest

from echo_trace.meta import malloc_settings
from examples.models import GPT, CNNConfig, GPTConfig, SmallCNN
from tests.harness import REPO, base_env, free_port, run_python, run_torchrun

pytestmark = pytest.mark.slow

TRAIN = str(REPO / "examples" / "train.py")
START, END = 1, 3  # captured steps 1 and 2
STEPS = END + 1
GPT_FLAGS = {"layers": 2, "hidden": 64, "heads": 4, "seq": 32, "micro_batch": 4, "vocab": 256}
CNN_FLAGS = {"width": 8, "image_size": 16, "micro_batch": 8}
FLOAT32 = 4


# ============================================================================ trace reader
@dataclass
class RankTrace:
    """One rank directory, loaded."""

    dir: Path
    events: list[dict[str, Any]]
    other: dict[str, Any]
    meta: dict[str, Any]
    dag: nx.DiGraph

    def x(self, cat: str | None = None, step: int | None = None) -> list[dict[str, Any]]:
        """Complete (``X``) events, optionally of one category and one captured step."""
        return [e for e in self.events if e.get("ph") == "X"
                and (cat is None or e.get("cat") == cat)
                and (step is None or e["args"].get("step") == step)]


def load_rank(d: Path) -> RankTrace:
    """Read ``trace.json`` (or ``.gz``), ``meta.json`` and ``dag.gml`` of one rank dir."""
    if (d / "trace.json").is_file():
        doc = json.loads((d / "trace.json").read_text())
    else:
        with gzip.open(d / "trace.json.gz", "rt") as f:
            doc = json.load(f)
    meta = json.loads((d / "meta.json").read_text())
    dag = nx.read_gml(d / "dag.gml")
    return RankTrace(d, doc["traceEvents"], doc.get("otherData", {}), meta, dag)


def load_job(root: Path, world: int) -> dict[int, RankTrace]:
    """All rank dirs of a single-node job, keyed by global rank; checks the layout."""
    dirs = sorted(p.name for p in root.iterdir() if p.is_dir())
    assert dirs == [f"0_{r}" for r in range(world)], f"rank dirs under {root}: {dirs}"
    for name in dirs:
        files = {p.name for p in (root / name).iterdir()}
        assert {"dag.gml", "meta.json"} <= files and files & {"trace.json", "trace.json.gz"}, \
            f"{root / name}: {sorted(files)}"
        assert not any(f.endswith(".tmp") for f in files), f"{root / name}: leftover tmp files"
    ranks = {}
    for r in range(world):
        rt = load_rank(root / f"0_{r}")
        assert rt.meta["rank"] == r and rt.meta["local_rank"] == r
        assert rt.meta["world_size"] == world and rt.meta["node_rank"] == 0
        assert rt.other.get("format") == "echo-trace/1" and rt.other.get("rank") == r
        assert {e.get("pid") for e in rt.events if e.get("ph") in ("X", "C")} == {r}
        ranks[r] = rt
    return ranks


def partial_overlaps(events: list[dict[str, Any]], eps_us: float = 0.002,
                     ) -> list[tuple[str, str, float]]:
    """``(outer, inner, overlap_us)`` for ``X`` slices on one (pid, tid) that overlap
    without nesting (Perfetto's rule), beyond ``eps_us`` (the 3-decimal rounding)."""
    tracks: dict[tuple[Any, Any], list[dict[str, Any]]] = defaultdict(list)
    for e in events:
        if e.get("ph") == "X":
            tracks[(e.get("pid"), e.get("tid"))].append(e)
    bad: list[tuple[str, str, float]] = []
    for evs in tracks.values():
        evs.sort(key=lambda e: (e["ts"], -e["dur"]))
        stack: list[dict[str, Any]] = []
        for e in evs:
            while stack and stack[-1]["ts"] + stack[-1]["dur"] <= e["ts"] + eps_us:
                stack.pop()
            top_end = stack[-1]["ts"] + stack[-1]["dur"] if stack else 0.0
            if stack and e["ts"] + e["dur"] > top_end + eps_us:
                bad.append((stack[-1]["name"], e["name"], top_end - e["ts"]))
            stack.append(e)
    return bad


def leaf_names(model: Any) -> set[str]:
    return {n for n, m in model.named_modules() if n and not any(True for _ in m.children())}


def check_valid_trace(rt: RankTrace) -> None:
    """What any trace must satisfy, however its capture ended."""
    assert not partial_overlaps(rt.events), partial_overlaps(rt.events)[:5]
    for e in rt.events:
        if e.get("ph") == "X":
            assert e["dur"] >= 0 and math.isfinite(e["ts"]), e
            assert isinstance(e["args"].get("step"), int) and isinstance(e["args"].get("occ"), int)
    assert nx.is_directed_acyclic_graph(rt.dag)


# ============================================================================ jobs
def _pth_site(tmp: Path) -> dict[str, str]:
    """Env that makes the interpreter process ``echo_trace.pth`` at start-up.

    Uses the installed file when echo is installed, else a temporary user site-packages
    (``PYTHONUSERBASE``) holding a copy of the repo's ``echo_trace.pth``.
    """
    for d in [*site.getsitepackages(), site.getusersitepackages()]:
        if (Path(d) / "echo_trace.pth").is_file():
            return {}
    base = tmp / "userbase"
    user_site = Path(subprocess.run(
        [sys.executable, "-c", "import site; print(site.getusersitepackages())"],
        env={**os.environ, "PYTHONUSERBASE": str(base)}, capture_output=True, text=True,
        check=True).stdout.strip())
    user_site.mkdir(parents=True, exist_ok=True)
    (user_site / "echo_trace.pth").write_text((REPO / "echo_trace.pth").read_text())
    return {"PYTHONUSERBASE": str(base), "PYTHONNOUSERSITE": ""}


def _flags(model: str, extra: dict[str, Any] | None = None) -> list[str]:
    d = dict(GPT_FLAGS if model == "gpt" else CNN_FLAGS)
    d.update(extra or {})
    out = []
    for k, v in d.items():
        out += [f"--{k.replace('_', '-')}", str(v)]
    return out


@dataclass
class Job:
    layout: str
    model: str
    activation: str
    n_micro: int  # FW/BW occurrences per leaf per step
    ranks: dict[int, RankTrace]
    stdout: str
    root: Path | None = None  # the traces' directory

    @property
    def id(self) -> str:
        return f"{self.layout}-{self.model}-{self.activation}"


JOB_SPECS = [  # (layout, model, activation, extra flags)
    ("ddp", "gpt", "run", {}),
    ("ddp", "gpt", "pth", {}),
    ("ddp", "cnn", "run", {}),
    ("fsdp", "gpt", "pth", {}),
    ("tp", "gpt", "run", {}),
    ("pp", "gpt", "run", {"global_batch": 8}),
]
SPEC_IDS = [f"{la}-{m}-{a}" for la, m, a, _ in JOB_SPECS]


def launch(tmp: Path, layout: str, model: str, activation: str,
           extra: dict[str, Any] | None = None, *, steps: int = STEPS,
           env: dict[str, str] | None = None) -> tuple[list[str], dict[str, str]]:
    """torchrun argv (after the launcher options) and env for one traced job."""
    e = {"TRACE_ON": "1", "TRACE_START_STEP": str(START), "TRACE_END_STEP": str(END),
         "TRACE_DIR": str(tmp / "traces")}
    train = [TRAIN, "--layout", layout, "--model", model, "--steps", str(steps),
             "--print-losses", *_flags(model, extra)]
    if activation == "run":
        argv = ["-m", "echo_trace.run", *train]
    else:
        e.update(_pth_site(tmp))
        argv = train
    e.update(env or {})
    return argv, e


_JOBS: dict[str, Job] = {}  # each job runs once per test session


def get_job(spec_id: str, tmp_path_factory: pytest.TempPathFactory) -> Job:
    """Run the job of ``spec_id`` once (first test that needs it) and load its traces."""
    if spec_id not in _JOBS:
        layout, model, activation, extra = JOB_SPECS[SPEC_IDS.index(spec_id)]
        tmp = tmp_path_factory.mktemp(spec_id)
        argv, env = launch(tmp, layout, model, activation, extra)
        proc = run_torchrun(argv, nproc=2, env=env, timeout=180, cwd=tmp)
        assert proc.returncode == 0, f"{spec_id}:\n{proc.stdout[-2000:]}\n{proc.stderr[-4000:]}"
        n_micro = (extra.get("global_batch", 0) // GPT_FLAGS["micro_batch"]) if layout == "pp" else 1
        _JOBS[spec_id] = Job(layout, model, activation, n_micro,
                             load_job(tmp / "traces", 2), proc.stdout, tmp / "traces")
    return _JOBS[spec_id]


@pytest.fixture(params=SPEC_IDS)
def job(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Job:
    return get_job(request.param, tmp_path_factory)


def expected_leaves(job: Job, rank: int) -> set[str]:
    if job.model == "cnn":
        cfg = CNNConfig(width=CNN_FLAGS["width"], image_size=CNN_FLAGS["image_size"])
        return leaf_names(SmallCNN(cfg))
    gpt = GPT(GPTConfig(vocab_size=GPT_FLAGS["vocab"], seq_len=GPT_FLAGS["seq"],
                        hidden=GPT_FLAGS["hidden"], layers=GPT_FLAGS["layers"],
                        heads=GPT_FLAGS["heads"]))
    if job.layout == "pp":
        gpt.keep_stage(rank, 2)
    return leaf_names(gpt)


def comm(rt: RankTrace, step: int | None = None, **match: Any) -> list[dict[str, Any]]:
    return [e for e in rt.x("Comm", step) if all(e["args"].get(k) == v for k, v in match.items())]


# ============================================================================ generic checks
def test_training_unchanged_and_finished(job: Job) -> None:
    lines = [ln for ln in job.stdout.splitlines() if ln.startswith("rank ")]
    reporters = {"ddp": 2, "fsdp": 2, "tp": 1, "pp": 1}[job.layout]
    assert len(lines) == STEPS * reporters
    assert all(math.isfinite(float(ln.split()[-1])) for ln in lines)


@pytest.fixture(scope="module")
def reference_losses() -> list[float]:
    """Untraced single process on the same global batch (2 micro-batches of 4)."""
    proc = run_python([TRAIN, "--steps", str(STEPS), "--print-losses", "--global-batch", "8",
                       *_flags("gpt")], timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return mean_losses(proc.stdout)


def mean_losses(stdout: str) -> list[float]:
    per: dict[int, list[float]] = defaultdict(list)
    for ln in stdout.splitlines():
        if ln.startswith("rank "):
            per[int(ln.split()[3])].append(float(ln.split()[5]))
    return [sum(v) / len(v) for _, v in sorted(per.items())]


@pytest.mark.parametrize("spec", ["ddp-gpt-run", "ddp-gpt-pth", "fsdp-gpt-pth", "pp-gpt-run"])
def test_traced_losses_match_untraced_single_process(
        spec: str, reference_losses: list[float],
        tmp_path_factory: pytest.TempPathFactory) -> None:
    job = get_job(spec, tmp_path_factory)
    assert mean_losses(job.stdout) == pytest.approx(reference_losses, rel=1e-5)


def test_steps_counted(job: Job) -> None:
    for rt in job.ranks.values():
        assert rt.meta["steps"] == list(range(START, END))
        assert rt.meta["step_source"] == "optimizer"
        steps = rt.x("step")
        assert [e["name"] for e in steps] == ["STEP"] * (END - START)
        assert [e["args"]["step"] for e in steps] == list(range(START, END))
        assert all(e["tid"] == 1 for e in steps)
        assert {e["args"]["step"] for e in rt.x()} == set(range(START, END))
        assert rt.meta["dropped_events"] == 0 and rt.meta["disabled_reason"] is None


def test_fw_and_bw_for_every_leaf_in_every_step(job: Job) -> None:
    for r, rt in job.ranks.items():
        want = expected_leaves(job, r)
        for step in range(START, END):
            for cat in ("FW", "BW"):
                counts = Counter(e["args"]["module"] for e in rt.x(cat, step))
                missing = want - set(counts)
                assert not missing, f"rank {r} step {step}: no {cat} for {sorted(missing)}"
                assert set(counts) <= want, sorted(set(counts) - want)
                wrong = {m: c for m, c in counts.items() if c != job.n_micro}
                assert not wrong, f"rank {r} step {step} {cat}: occurrences {wrong}"
            for e in rt.x("FW", step) + rt.x("BW", step):
                assert e["name"] == f"{e['cat']}.{e['args']['module']}" and e["tid"] == 0
            assert len(rt.x("UPDATE", step)) == 1
            assert rt.x("UPDATE", step)[0]["name"] == "UPDATE.AdamW"


def test_no_partially_overlapping_slices(job: Job) -> None:
    for rt in job.ranks.values():
        check_valid_trace(rt)


def test_memory_counters(job: Job) -> None:
    for rt in job.ranks.values():
        mem = [e for e in rt.events if e.get("ph") == "C" and e.get("name") == "memory"]
        assert len(mem) >= 2
        assert all(e["args"]["rss_bytes"] > 10 * 2**20 for e in mem)  # a torch process
        assert all(e["args"]["peak_rss_bytes"] > 10 * 2**20 for e in rt.x("step"))
        # the process's page faults in each step (Linux: getrusage)
        assert all(type(e["args"]["minor_faults"]) is int and e["args"]["minor_faults"] >= 0
                   and e["args"]["major_faults"] >= 0 for e in rt.x("step"))


def test_dag_is_acyclic_and_covers_one_step(job: Job) -> None:
    for r, rt in job.ranks.items():
        g = rt.dag
        assert nx.is_directed_acyclic_graph(g) and g.number_of_nodes() > 0
        cats = Counter(d.get("cat") for _, d in g.nodes(data=True))
        leaves = len(expected_leaves(job, r))
        assert cats["FW"] == cats["BW"] == leaves * job.n_micro
        assert cats["UPDATE"] == 1
        if job.layout in ("ddp", "fsdp", "tp", "pp"):
            assert cats["Comm"] > 0


def test_meta_fields(job: Job) -> None:
    for rt in job.ranks.values():
        m = rt.meta
        assert m["backend"] == "gloo" and m["device"] == "cpu"
        assert m["rank_source"] in ("torchrun", "dist")
        assert m["clock_sync"] == "all_gather"
        assert m["param_bytes"] == sum(p["bytes"] for p in m["params"]) > 0
        # the buffers DDP broadcasts: the CNN's BatchNorm statistics; the GPT holds none
        bn = {b["name"].rpartition(".")[2] for b in m["buffers"]}
        assert bn == ({"running_mean", "running_var", "num_batches_tracked"}
                      if job.model == "cnn" else set())
        # the allocator settings the process started with ({}: glibc's default)
        assert m["malloc"] == malloc_settings(base_env())


def test_page_faults_reach_the_simulator(tmp_path_factory: pytest.TempPathFactory) -> None:
    """echo_sim loads each step's page faults as a per-step counter; the workload keeps the
    traced rank's median and simulate says what they mean for the op times it starts from."""
    from echo_sim.load import load_trace
    from echo_sim.sim.config import SimConfig
    from echo_sim.sim.simulate import simulate
    from echo_sim.workload.ops import extract_workload

    job = get_job("ddp-gpt-run", tmp_path_factory)
    assert job.root is not None
    trace = load_trace(job.root)
    assert "minor_faults" in trace.counter_names and "major_faults" in trace.counter_names
    w = extract_workload(trace)
    per_step = [e["args"]["minor_faults"] for e in job.ranks[w.rank].x("step")]
    assert w.minor_faults_per_step == pytest.approx(statistics.median(per_step))
    res = simulate(trace, SimConfig(dp=2))
    note = next(m for m in res.models if "minor page faults per step" in m)
    # the simulated job's representative rank (the slowest of the traced two)
    medians = {f"{statistics.median(e['args']['minor_faults'] for e in rt.x('step')):,.0f}"
               for rt in job.ranks.values()}
    assert any(f"traced process: {m} minor page faults" in note for m in medians), note
    assert ("glibc's adaptive default" in note) == (job.ranks[w.rank].meta["malloc"] == {})
    for k, v in job.ranks[w.rank].meta["malloc"].items():
        assert f"{k}={v}" in note
    # the report lists them per step as counts beside the memory peaks, not as bytes
    pytest.importorskip("plotly")
    from echo_sim.analysis.overview import overview
    from echo_sim.render.report_html import render_report

    ov = overview(trace)
    faults = ov.memory_peak_per_step["minor_faults"]
    assert faults == [float(max(rt.x("step")[j]["args"]["minor_faults"]
                                for rt in job.ranks.values())) for j in range(len(ov.steps))]
    row = re.search(r"<tr><td>minor_faults</td>(.*?)</tr>", render_report(ov), re.S)
    assert row and f"<td>{faults[0]:,.0f}</td>" in row.group(1) and "iB" not in row.group(1)


# ============================================================================ communication
@pytest.mark.parametrize("spec", ["ddp-gpt-run", "ddp-gpt-pth", "ddp-cnn-run"])
def test_ddp_comm_bytes_equal_gradient_bytes(spec: str,
                                            tmp_path_factory: pytest.TempPathFactory) -> None:
    job = get_job(spec, tmp_path_factory)
    for rt in job.ranks.values():
        grads = sum(p["bytes"] for p in rt.meta["params"])
        for step in range(START, END):
            ddp = comm(rt, step, path="ddp")
            assert ddp and all(e["args"]["collective"] == "all_reduce" for e in ddp)
            assert sum(e["args"]["bytes"] for e in ddp) == grads
            assert all(e["args"]["group_ranks"] == [0, 1] for e in ddp)
            assert all(e["tid"] >= 100 for e in ddp)
        assert sum(b["bytes"] for b in rt.meta["buckets"]) == grads
    # the same bucket all-reduces, in the same order, on both ranks
    seqs = [[(e["args"]["seq"], e["args"]["bytes"]) for e in comm(rt, path="ddp")]
            for rt in job.ranks.values()]
    assert seqs[0] == seqs[1]


@pytest.mark.parametrize("spec", ["ddp-gpt-run", "ddp-cnn-run"])
def test_ddp_comm_ends_before_update(spec: str, tmp_path_factory: pytest.TempPathFactory,
                                     ) -> None:
    """DDP's backward returns only once every bucket's all-reduce is done, so a bucket's
    Comm slice (which ends when its result is ready) ends before that step's UPDATE."""
    job = get_job(spec, tmp_path_factory)
    for rt in job.ranks.values():
        for step in range(START, END):
            update = rt.x("UPDATE", step)[0]["ts"]
            late = [(e["name"], e["ts"] + e["dur"] - update) for e in comm(rt, step, path="ddp")
                    if e["ts"] + e["dur"] > update + 1.0]
            assert not late, f"rank {rt.meta['rank']} step {step}: ends after UPDATE (us): {late}"


def test_fsdp_all_gather_and_reduce_scatter(tmp_path_factory: pytest.TempPathFactory) -> None:
    job = get_job("fsdp-gpt-pth", tmp_path_factory)
    for rt in job.ranks.values():
        full = sum(p["bytes"] for p in rt.meta["params"])
        for step in range(START, END):
            kinds = Counter(e["args"]["collective"] for e in rt.x("Comm", step))
            assert kinds["all_gather"] > 0 and kinds["reduce_scatter"] > 0, kinds
            rs = sum(e["args"]["bytes"] for e in comm(rt, step, collective="reduce_scatter"))
            # every gradient is reduce-scattered once: unsharded bytes (plus padding)
            assert full <= rs <= full + 2 * FLOAT32 * len(rt.meta["params"]) * 4, (rs, full)
            assert all(e["args"]["group_ranks"] == [0, 1] for e in rt.x("Comm", step))


def test_tp_all_reduces(tmp_path_factory: pytest.TempPathFactory) -> None:
    job = get_job("tp-gpt-run", tmp_path_factory)
    act = GPT_FLAGS["micro_batch"] * GPT_FLAGS["seq"] * GPT_FLAGS["hidden"] * FLOAT32
    for rt in job.ranks.values():
        for step in range(START, END):
            ar = comm(rt, step, collective="all_reduce")
            # rowwise proj and fc2 all-reduce their output in forward; colwise qkv and
            # fc1 all-reduce their input gradient in backward: 4 per block per step
            assert len(ar) == 4 * GPT_FLAGS["layers"], len(ar)
            assert all(e["args"]["bytes"] == act for e in ar)
            assert all(e["args"]["group_ranks"] == [0, 1] for e in ar)
    s0 = sorted(e["args"]["seq"] for e in comm(job.ranks[0], collective="all_reduce"))
    s1 = sorted(e["args"]["seq"] for e in comm(job.ranks[1], collective="all_reduce"))
    assert s0 == s1 and len(set(s0)) == len(s0)


def test_pp_send_recv(tmp_path_factory: pytest.TempPathFactory) -> None:
    job = get_job("pp-gpt-run", tmp_path_factory)
    act = GPT_FLAGS["micro_batch"] * GPT_FLAGS["seq"] * GPT_FLAGS["hidden"] * FLOAT32
    for r, rt in job.ranks.items():
        for step in range(START, END):
            p2p = [e for e in rt.x("Comm", step) if e["args"]["collective"] in ("send", "recv")]
            kinds = Counter(e["args"]["collective"] for e in p2p)
            # stage 0 sends activations and receives their gradients, one per micro-batch
            assert kinds == {"send": job.n_micro, "recv": job.n_micro}, kinds
            assert all(e["args"]["peer"] == 1 - r and e["args"]["bytes"] == act for e in p2p)
    sends0 = sorted(e["args"]["seq"] for e in comm(job.ranks[0], collective="send"))
    recvs1 = sorted(e["args"]["seq"] for e in comm(job.ranks[1], collective="recv"))
    assert sends0 == recvs1


# ============================================================================ clocks
@pytest.mark.serial
def test_rank_clocks_aligned(tmp_path: Path) -> None:
    """Synchronous data parallel: both ranks wait for the same gradient all-reduce before
    ``optimizer.step()``, so on the aligned clock their UPDATE slices start together,
    up to scheduling noise (2 shared cores): the median signed gap over 8 steps is small."""
    argv, env = launch(tmp_path, "ddp", "gpt", "run", steps=11,
                       env={"TRACE_START_STEP": "2", "TRACE_END_STEP": "10"})
    proc = run_torchrun(argv, nproc=2, env=env, timeout=180, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-4000:]
    ranks = load_job(tmp_path / "traces", 2)
    assert all(rt.meta["clock_sync"] == "all_gather" for rt in ranks.values())
    starts = [{e["args"]["step"]: e["ts"] for e in rt.x("UPDATE")} for rt in ranks.values()]
    assert sorted(starts[0]) == sorted(starts[1]) == list(range(2, 10))
    gaps_ms = sorted((starts[0][s] - starts[1][s]) / 1000 for s in starts[0])
    step_ms = sorted(e["dur"] / 1000 for e in ranks[0].x("step"))[4]
    median = (gaps_ms[3] + gaps_ms[4]) / 2
    assert abs(median) < 5.0, (gaps_ms, step_ms)
    assert min(abs(g) for g in gaps_ms) < 3.0, (gaps_ms, step_ms)


# ============================================================================ robustness
HOOK_FAILURE = '''
import runpy, sys
from echo_trace import recorder

LIMIT = int(sys.argv[1])


class BoomList(list):
    # every event the recorder keeps goes through events.append: fail after LIMIT
    def append(self, ev):
        if len(self) >= LIMIT:
            raise RuntimeError("injected recorder failure")
        super().append(ev)


_init = recorder.Recorder.__init__


def __init__(self, *args, **kwargs):
    _init(self, *args, **kwargs)
    self.events = BoomList()


recorder.Recorder.__init__ = __init__
sys.argv = sys.argv[2:]
runpy.run_path(sys.argv[0], run_name="__main__")
'''


def test_hook_failure_leaves_valid_trace_and_training_finishes(tmp_path: Path) -> None:
    script = tmp_path / "inject.py"
    script.write_text(HOOK_FAILURE)
    argv, env = launch(tmp_path, "ddp", "gpt", "run", steps=STEPS + 1)
    train = argv[argv.index(TRAIN):]
    proc = run_torchrun(["-m", "echo_trace.run", str(script), "60", *train], nproc=2, env=env,
                        timeout=180, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-4000:]
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("rank ")]
    assert len(lines) == 2 * (STEPS + 1)
    ranks = load_job(tmp_path / "traces", 2)
    for rt in ranks.values():
        assert "injected recorder failure" in (rt.meta["disabled_reason"] or "")
        check_valid_trace(rt)
        assert 0 < len([e for e in rt.events if e.get("ph") in ("X", "C")]) <= 60


def test_sigterm_leaves_valid_trace(tmp_path: Path) -> None:
    """SIGTERM to torchrun mid-window: the agent forwards it, each rank writes its files."""
    argv, env = launch(tmp_path, "ddp", "gpt", "run", steps=100_000,
                       env={"TRACE_END_STEP": "100000"})
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node=2",
           "--master_addr=127.0.0.1", f"--master_port={free_port()}", *argv]
    proc = subprocess.Popen(cmd, env=base_env(env), cwd=tmp_path, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    killer = threading.Timer(150, lambda: os.killpg(proc.pid, signal.SIGKILL))
    killer.start()
    try:
        assert proc.stdout is not None
        seen = 0
        for line in proc.stdout:
            if line.startswith("rank ") and int(line.split()[3]) >= START + 3:
                seen += 1
                if seen == 2:  # both ranks are well inside the window
                    break
        assert seen == 2, "job ended before the window was reached"
        t0 = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=120)
        assert time.monotonic() - t0 < 60
    finally:
        killer.cancel()
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode != 0  # terminated, not finished
    ranks = load_job(tmp_path / "traces", 2)
    for rt in ranks.values():
        check_valid_trace(rt)
        done = rt.meta["steps"]
        assert done[:3] == [START, START + 1, START + 2], done
        assert [e["args"]["step"] for e in rt.x("step")] == done
