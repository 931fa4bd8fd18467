"""Output files through the CLI: link-safe atomic writes, --force, one flag-named line."""

from __future__ import annotations

import json
import os
import stat

import pytest

from echo_sim.trace.export import write_echo_dirs
from echo_sim.trace.outfiles import OutputError, OutputProblem, atomic_output, atomic_write
from tests.cli_util import run, write_two_rank_trace
from tests.marks import not_root
from tests.test_statistic import two_rank_trace


@pytest.fixture
def trace_dir(tmp_path):
    return write_two_rank_trace(tmp_path)


def one_line(err: str) -> str:
    assert err.count("\n") == 1 and err.startswith("echo_sim: error:"), err
    return err


def test_planted_symlink_is_never_followed(tmp_path):
    victim = tmp_path / "victim"
    victim.write_text("keep me")
    target = tmp_path / "out.json"
    # the old writer used <name>.tmp<pid>; plant links at every predictable name
    for name in (f"out.json.tmp{os.getpid()}", "out.json.tmp", ".out.json.tmp"):
        (tmp_path / name).symlink_to(victim)
    atomic_write(target, b"new", overwrite=False)
    assert victim.read_text() == "keep me" and target.read_bytes() == b"new"
    # a link AT the target is refused even with overwrite, and left alone
    link = tmp_path / "link.json"
    link.symlink_to(victim)
    with pytest.raises(OutputError) as e:
        atomic_write(link, b"x", overwrite=True)
    assert e.value.problem is OutputProblem.SPECIAL and victim.read_text() == "keep me"
    assert os.path.islink(link)


def test_failed_writer_leaves_target_and_no_temp(tmp_path):
    target = tmp_path / "t.csv"
    target.write_text("old")
    with pytest.raises(RuntimeError):
        with atomic_output(target, overwrite=True) as tmp:
            assert tmp.parent == tmp_path and tmp.name.endswith(".csv")
            assert stat.S_IMODE(os.stat(tmp).st_mode) == 0o600
            tmp.write_text("half")
            raise RuntimeError("writer died")
    assert target.read_text() == "old" and os.listdir(tmp_path) == ["t.csv"]


@pytest.mark.parametrize("flag", ["--csv", "--plot", "--xlsx"])
def test_statistic_outputs_need_force(capsys, trace_dir, tmp_path, flag):
    out = tmp_path / {"--csv": "o.csv", "--plot": "o.png", "--xlsx": "o.xlsx"}[flag]
    out.write_text("precious")
    code, _, err = run(capsys, "statistic", trace_dir, flag, out)
    assert code == 2 and f"{flag} {out} exists; pass --force" in one_line(err)
    assert out.read_text() == "precious"
    code, _, _ = run(capsys, "statistic", trace_dir, flag, out, "--force")
    assert code == 0 and out.read_bytes() != b"precious" and out.stat().st_size > 100


def test_collect_and_compare_outputs_need_force(capsys, trace_dir, tmp_path):
    csv = tmp_path / "c.csv"
    csv.write_text("x")
    assert run(capsys, "collect", trace_dir, "--csv", csv)[0] == 2
    xl = tmp_path / "d.xlsx"
    xl.write_text("x")
    code, _, err = run(capsys, "compare", trace_dir, trace_dir, "--xlsx", xl)
    assert code == 2 and "--xlsx" in one_line(err) and xl.read_text() == "x"


def test_force_refuses_devices_and_fifos(capsys, trace_dir, tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    for argv in (["combine", trace_dir, "--output", "/dev/full", "--force"],
                 ["statistic", trace_dir, "--csv", "/dev/null", "--force"],
                 ["combine", trace_dir, "-o", fifo, "--force"]):
        code, _, err = run(capsys, *argv)
        assert code == 2 and "not a regular file" in one_line(err)
    assert stat.S_ISCHR(os.stat("/dev/full").st_mode) and stat.S_ISFIFO(os.stat(fifo).st_mode)


@pytest.mark.parametrize("where, words", [
    ("dir", "it is a directory"),
    ("/proc/self/echo_out.json", "--output /proc/self/echo_out.json:"),
    ("missing/sub/out.json", "does not exist"),
    ("/dev/full/x.json", "not a directory"),
])
def test_output_path_errors_are_one_line(capsys, trace_dir, tmp_path, where, words):
    if where == "dir":
        (tmp_path / "dir").mkdir()
        (tmp_path / "dir.gml").mkdir()
    path = where if where.startswith("/") else tmp_path / where
    for argv in (["combine", trace_dir, "-o", path], ["statistic", trace_dir, "--csv", path],
                 ["replay", trace_dir, "-o", path], ["critical", trace_dir, "-o", path],
                 ["graph", trace_dir, "-o", str(path) + ".gml"]):
        code, _, err = run(capsys, *argv)
        assert code == 2 and argv[2] in one_line(err), err
        if argv[0] == "combine":
            assert words in err
    assert not (tmp_path / "missing").exists()


def test_full_disk_is_one_line_and_leaves_nothing(trace_dir, tmp_path):
    """A write the kernel refuses midway (file-size limit: EFBIG, as ENOSPC on a full disk):
    one line naming the flag, the target untouched, no temporary file left."""
    import resource
    import signal
    import subprocess
    import sys

    def limit() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (2000, 2000))

    out = tmp_path / "c.json"
    out.write_text("old")
    proc = subprocess.run([sys.executable, "-m", "echo_sim", "combine", str(trace_dir), "-o",
                           str(out), "--force"], capture_output=True, text=True,
                          preexec_fn=limit, timeout=120)
    assert proc.returncode == 2 and proc.stdout == "", proc.stderr
    assert "--output" in one_line(proc.stderr) and "too large" in proc.stderr
    assert out.read_text() == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.json", "run"]


@not_root
def test_read_only_directory(capsys, trace_dir, tmp_path):
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o500)
    code, _, err = run(capsys, "statistic", trace_dir, "--csv", ro / "x.csv")
    assert code == 2 and "--csv" in one_line(err)


def test_non_utf8_paths_in_combine(capsys, tmp_path):
    raw = os.fsencode(str(tmp_path)) + b"/r\xff\xfe"
    write_echo_dirs(two_rank_trace(), os.fsdecode(raw))
    code, out, err = run(capsys, "combine", os.fsdecode(raw))
    assert code == 0 and "\\udcff" in out and "\udcff" not in out
    doc = json.loads((tmp_path / os.fsdecode(b"r\xff\xfe") / "combined.json").read_bytes())
    assert "\ufffd" in doc["otherData"]["source"]
    code, _, err = run(capsys, "combine", os.fsdecode(raw + b"/nope\xff"))
    assert code == 2 and "\\udcff" in one_line(err)


def test_combine_several_runs_side_by_side(capsys, trace_dir, tmp_path):
    code, out, _ = run(capsys, "combine", trace_dir, trace_dir, "-o", tmp_path / "both.json")
    assert code == 0 and "2 runs side by side" in out
    doc = json.loads((tmp_path / "both.json").read_text())
    names = {e["pid"]: e["args"]["name"] for e in doc["traceEvents"]
             if e["name"] == "process_name"}
    assert sorted(names) == [0, 1, 1_000_000, 1_000_001]
    assert names[1_000_001].startswith(str(trace_dir)) and ": rank 1 (" in names[1_000_001]


def test_directory_outputs_refuse_planted_links(capsys, tmp_path):
    """synth/simulate --output DIR --force: a link planted as a rank file is refused, its
    target untouched; a file given as DIR is one line."""
    victim = tmp_path / "victim"
    victim.write_text("keep me")
    out = tmp_path / "syn"
    (out / "0_0").mkdir(parents=True)
    (out / "0_0" / "meta.json").symlink_to(victim)
    shape = ["--layers", "2", "--hidden", "32", "--heads", "2", "--seq", "8", "--vocab", "16"]
    code, _, err = run(capsys, "synth", *shape, "-o", out, "--force")
    assert code == 2 and "--output" in one_line(err) and "symbolic link" in err
    assert victim.read_text() == "keep me"
    code, _, err = run(capsys, "synth", *shape, "-o", victim)
    assert code == 2 and "not a directory" in one_line(err)
    (out / "0_0" / "meta.json").unlink()
    assert run(capsys, "synth", *shape, "-o", out)[0] == 0
    code, _, err = run(capsys, "synth", *shape, "-o", out)
    assert code == 2 and "exists; pass --force" in one_line(err)
