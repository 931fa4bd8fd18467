"""benchmarks/gpu.py, gpu_zerocode.py, gpu_child.py and gpu_check.py: their pure parts and
the CPU plumbing here; the timing itself needs CUDA (marked gpu)."""

from __future__ import annotations

import json
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
import torch

from benchmarks import gpu_check, gpu_child
from benchmarks.gpu import MODELS, GpuBenchConfig, _bench_model, overhead, parse_args
from benchmarks.gpu_zerocode import (
    WINDOW,
    echo_lines,
    measure_zerocode,
    window_figures,
    zerocode_cmd,
    zerocode_env,
)
from tests.harness import run_python


def test_parse_args_and_validation() -> None:
    cfg = parse_args(["--models", "gpt,small", "--reps", "3", "--steps", "4"])
    assert cfg.models == ("gpt", "small") and cfg.reps == 3 and cfg.steps == 4
    assert parse_args([]).models == MODELS
    with pytest.raises(ValueError, match="--reps 0"):
        GpuBenchConfig(reps=0)
    with pytest.raises(ValueError, match="choose from"):
        GpuBenchConfig(models=("resnet",))
    with pytest.raises(SystemExit):
        parse_args(["--models", "nope"])
    cfg = parse_args(["--paths", "zerocode", "--zerocode-steps", "9", "--device", "cpu"])
    assert cfg.paths == ("zerocode",) and cfg.zerocode_steps == 9 and cfg.device == "cpu"
    assert "llama" in MODELS
    with pytest.raises(ValueError, match="--zerocode-steps 7 must be >= 8"):
        GpuBenchConfig(zerocode_steps=7)
    with pytest.raises(ValueError, match="--paths 'inline': choose from interleaved, zerocode"):
        GpuBenchConfig(paths=("inline",))


@pytest.mark.parametrize("parse, flags", [
    (parse_args, ["--models", "--paths", "--zerocode-steps", "--zerocode-reps", "--device"]),
    (gpu_child.parse_args, ["--model", "--steps", "--out", "--device", "--size",
                            "--profiler-window"]),
    (gpu_check.parse_args, ["OUT", "--quick", "--device", "--archive", "--force", "--stages",
                            "--budget-s", "--commit"]),
])
def test_help_lists_every_option(parse, flags, capsys) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(SystemExit) as e:
        parse(["--help"])
    assert e.value.code == 0
    out = capsys.readouterr().out
    assert all(f in out for f in flags), out


def test_child_and_check_arguments() -> None:
    a = gpu_child.parse_args(["--model", "llama", "--out", "x.json", "--profiler-window", "3:6"])
    assert a.model == "llama" and a.profiler_window == (3, 6) and a.steps == 10
    for bad in (["--model", "gpt", "--out", "x", "--profiler-window", "6:3"],
                ["--model", "gpt", "--out", "x", "--steps", "5", "--profiler-window", "3:6"],
                ["--model", "resnet", "--out", "x"]):
        with pytest.raises(SystemExit):
            gpu_child.parse_args(bad)
    cfg = gpu_check.parse_args(["out", "--device", "cpu", "--stages", "runs"])
    assert cfg.stages == ("runs",) and cfg.budget_s == 150.0 and not cfg.quick
    assert gpu_check.parse_args(["out"]).budget_s == 420.0
    with pytest.raises(ValueError, match="must lie outside OUT"):
        gpu_check.CheckConfig(out="o", archive="o/x.tar.gz")
    with pytest.raises(ValueError, match="choose from runs, benchmark, pytest"):
        gpu_check.CheckConfig(out="o", stages=("lint",))


def test_window_figures_golden() -> None:
    """Window 3..6: step 2 opens it, steps 3 and 4 are inside, step 5 closes it."""
    plain = [0.5, 0.12, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1]
    traced = [0.5, 0.12, 0.13, 0.101, 0.103, 0.8, 0.1, 0.11, 0.1, 0.12]
    f = window_figures(plain, traced)
    assert f["plain_median_ms"] == pytest.approx(100.0)
    assert f["window_ms"] == pytest.approx([101.0, 103.0])
    assert f["in_window_pct"] == pytest.approx(2.0)  # median(101, 103) / 100 - 1
    assert f["opening_ratio"] == pytest.approx(1.3)
    assert f["closing_ratio"] == pytest.approx(8.0)
    assert f["after_ms"] == pytest.approx(105.0)  # median(100, 110, 100, 120)
    assert f["after_pct"] == pytest.approx(5.0)
    short = window_figures(plain, traced[:6])
    assert short["after_ms"] is None and short["after_pct"] is None
    other = window_figures(plain, traced, start=2, end=5, plain_from=1)
    assert other["plain_median_ms"] == pytest.approx(100.0)
    assert other["opening_ratio"] == pytest.approx(1.2)  # step 1
    assert other["closing_ratio"] == pytest.approx(1.03)  # step 4
    with pytest.raises(ValueError, match="5 traced steps"):
        window_figures(plain, traced[:5])
    with pytest.raises(ValueError, match="expected 1 <= start < end - 1"):
        window_figures(plain, traced, start=4, end=5)


def test_zerocode_command_lines() -> None:
    target = ["-m", "benchmarks.gpu_child", "--model", "gpt"]
    assert zerocode_cmd(target, "pth") == [sys.executable, *target]
    assert zerocode_cmd(target, "run") == [sys.executable, "-m", "echo_trace.run", *target]
    ddp = zerocode_cmd(["examples/train.py", "--layout", "ddp"], "run", torchrun_nproc=1,
                       master_port=1234)
    assert ddp[1:4] == ["-m", "torch.distributed.run", "--nproc_per_node=1"]
    assert "--master_port=1234" in ddp
    assert ddp[-5:] == ["-m", "echo_trace.run", "examples/train.py", "--layout", "ddp"]
    with pytest.raises(ValueError, match="choose from pth, run"):
        zerocode_cmd(target, "sitecustomize")
    assert zerocode_env("/t", extra={"TRACE_KINETO_RAW": "1"}) == {
        "TRACE_ON": "1", "TRACE_START_STEP": str(WINDOW[0]), "TRACE_END_STEP": str(WINDOW[1]),
        "TRACE_DIR": "/t", "TRACE_GZIP": "1", "TRACE_KINETO_RAW": "1"}
    assert echo_lines("$ python echo_trace\necho_trace: a\nx\necho_trace: a\necho_trace: b") == [
        "echo_trace: a", "echo_trace: b"]


def test_check_runs_mirror_the_h200_recordings() -> None:
    cuda = {r.name: r for r in gpu_check.run_specs("cuda")}
    assert list(cuda) == ["gpt12_single", "gpt12_ddp_nccl_1rank", "hf_gpt2",
                          "llama_launch_bound"]
    assert " ".join(cuda["gpt12_single"].target) == (
        "examples/train.py --layout single --model gpt --layers 12 --hidden 768 --heads 12 "
        "--seq 512 --vocab 8192 --micro-batch 8 --steps 10")
    assert cuda["gpt12_ddp_nccl_1rank"].torchrun == 1 and not cuda["gpt12_ddp_nccl_1rank"].skip
    assert dict(cuda["llama_launch_bound"].env) == {"TRACE_MICRO_BATCH": "4"}
    cpu = {r.name: r for r in gpu_check.run_specs("cpu")}
    assert cpu["gpt12_ddp_nccl_1rank"].skip and "tiny" in cpu["hf_gpt2"].target


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the no-CUDA message")
def test_check_without_cuda_says_so_and_exits_2(tmp_path, capsys) -> None:  # type: ignore[no-untyped-def]
    assert gpu_check.main([str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert "CUDA is not available" in err and "--device cpu" in err
    assert not (tmp_path / "out").exists()


def test_check_refuses_a_non_empty_out(tmp_path, capsys) -> None:  # type: ignore[no-untyped-def]
    (tmp_path / "keep.txt").write_text("x")
    assert gpu_check.main([str(tmp_path), "--device", "cpu"]) == 2
    assert "--force replaces it" in capsys.readouterr().err
    assert (tmp_path / "keep.txt").is_file()


def test_overhead_is_the_median_ratio_per_repetition() -> None:
    out = overhead({"plain": [0.100, 0.110, 0.090],
                    "capture": [0.101, 0.1122, 0.0918],
                    "profiler": [0.103, 0.1133, 0.0927]})
    assert out["plain"]["overhead_pct"] == pytest.approx(0.0)
    assert out["capture"]["overhead_pct"] == pytest.approx(2.0)  # ratios 1.01, 1.02, 1.02
    assert out["profiler"]["overhead_pct"] == pytest.approx(3.0)
    assert out["capture"]["median_step_ms"] == pytest.approx(101.0)


def test_block_logic_on_cpu_with_the_small_model(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """The same interleaved blocks, modes and summaries, on CPU (timings not asserted)."""
    cfg = GpuBenchConfig(models=("small",), reps=2, steps=2)
    res = _bench_model("small", cfg, tmp_path, device="cpu")
    assert set(res["modes"]) == {"plain", "capture", "profiler"}
    assert all(len(v) == 2 for v in res["block_median_ms"].values())
    assert res["micro_batch"] == 8 and res["model"] == "GPT 4x128"
    assert list(tmp_path.iterdir()) == []  # every block's capture output removed


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the no-CUDA message")
def test_skips_with_a_clear_message_without_cuda() -> None:
    r = run_python(["-m", "benchmarks.gpu", "--reps", "1"], timeout=120)
    assert r.returncode == 0, r.stderr
    assert "skipped: CUDA is not available" in r.stdout


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_runs_on_a_gpu(tmp_path) -> None:  # type: ignore[no-untyped-def]
    import json

    out = tmp_path / "gpu.json"
    r = run_python(["-m", "benchmarks.gpu", "--models", "small", "--reps", "2", "--steps",
                    "3", "--zerocode-steps", "8", "--out", str(out)],
                   env={"CUDA_VISIBLE_DEVICES": "0"}, timeout=600)
    assert r.returncode == 0, r.stderr
    res = json.loads(out.read_text())["results"]["small"]
    assert set(res["modes"]) == {"plain", "capture", "profiler"}
    zc = res["zerocode"]
    assert "error" not in zc, zc
    assert zc["trace_written"] and len(zc["step_ms"]["zerocode"][0]) == 8


@pytest.mark.slow
def test_zerocode_children_under_echo_trace_run_on_cpu(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """The three children of one model, zero-code via ``python -m echo_trace.run`` (the
    launcher used where no .pth is installed); timings not asserted."""
    res = measure_zerocode("small", steps=8, reps=1, device="cpu", tiny=True, seed=0,
                           root=tmp_path, how="run", timeout_s=120)
    assert "error" not in res, res
    assert res["launcher"] == "run" and res["trace_written"]
    assert {len(v[0]) for v in res["step_ms"].values()} == {8}
    for mode in ("zerocode", "profiler"):
        assert set(res[mode]) >= {"in_window_pct", "opening_ratio", "closing_ratio", "after_ms"}
    assert any("wrote" in ln for ln in res["echo_log"])


@pytest.mark.slow
def test_gpu_check_cpu_smoke_run(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """``python -m benchmarks.gpu_check OUT --device cpu``: the layout of the shared
    recordings, figures.json, and traces that ``echo_sim validate`` accepts."""
    out, arch = tmp_path / "check", tmp_path / "check.tar.gz"
    r = run_python(["-m", "benchmarks.gpu_check", str(out), "--device", "cpu", "--archive",
                    str(arch)], timeout=400)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "runs/gpt12_single/traced: ok" in r.stdout and "gpu_check: all ok" in r.stdout
    fig = json.loads((out / "figures.json").read_text())
    assert set(fig) == {"meta", "stages", "runs", "benchmark", "pytest_gpu", "ok"} and fig["ok"]
    assert {"date", "commit", "torch", "gpu", "launcher", "window"} <= set(fig["meta"])
    assert fig["stages"]["pytest"]["status"] == "skipped"
    assert fig["runs"]["gpt12_ddp_nccl_1rank"] == {"skipped": "NCCL needs CUDA (--device cpu)"}
    for run in ("gpt12_single", "hf_gpt2", "llama_launch_bound"):
        d = out / run
        assert (d / "echo" / "0_0" / "meta.json").is_file()
        assert (d / "echo" / "0_0" / "trace.json.gz").is_file()
        for name in ("steps_plain.json", "steps_traced.json"):
            assert len(json.loads((d / name).read_text())["step_s"]) == 8
        res = fig["runs"][run]
        assert res["validate"]["returncode"] == 0
        assert set(res["window"]) >= {"in_window_pct", "opening_ratio", "closing_ratio"}
    v = run_python(["-m", "echo_sim", "validate", str(out / "gpt12_single" / "echo")])
    assert v.returncode == 0, v.stdout + v.stderr
    bench = fig["benchmark"]["results"]["small"]
    assert set(bench) >= {"modes", "zerocode"} and bench["zerocode"]["trace_written"]
    readme = (out / "README.md").read_text()
    assert "| gpt12_single |" in readme and "## Overhead benchmark" in readme
    with tarfile.open(arch) as tar:
        names = set(tar.getnames())
    assert {"check/figures.json", "check/gpt12_single/echo/0_0/trace.json.gz"} <= names


def test_gpu_figures_of_the_kept_h200_recording(tmp_path: Path) -> None:
    """benchmarks.gpu_figures replays the recording kept in tests/data and sets echo_sim's
    figures beside the script's own step times (the table gpu_check and the README show)."""
    run = Path(__file__).resolve().parent / "data" / "gpu" / "h200_hf_gpt2"
    out = tmp_path / "rows.json"
    done = subprocess.run([sys.executable, "-m", "benchmarks.gpu_figures", str(run),
                           "--replay", "--json", str(out)], capture_output=True, text=True,
                          timeout=300, cwd=Path(__file__).resolve().parent.parent)
    assert done.returncode == 0, done.stderr
    (row,) = json.loads(out.read_text())
    assert row["window_steps"] == [3, 4, 5] and set(row["collect_vs_script_pct"]) == {"3", "4"}
    assert all(abs(v) <= 5.0 for v in row["collect_vs_script_pct"].values())
    assert abs(row["memory_vs_traced_peak_pct"]) <= 10.0
    assert row["statistic_ms_per_step"]["UPDATE"] > 0
    assert "| h200_hf_gpt2 |" in done.stdout
