"""Every file and directory an echo_sim command writes, attacked.

Each output flag of each command (:data:`OUTPUTS`) meets each attack (:data:`CASES`): an
existing file (kept unless --force), a link to a victim file, a link planted at a directory
level the command makes (``out/0_0 -> ../victim``), a FIFO, a missing parent directory and a
full file system (a 64 KiB tmpfs, when this process may mount one). Every refusal must be
exit status 2 with one line on stderr and no traceback, and leave the tree exactly as it was
(names, types, sizes, mtimes, link targets). The commands run as subprocesses with a
timeout (a writer that opened a FIFO would block forever), forked from servers that
imported the CLI once (:class:`tests.forker.Forker`), several at once to keep the sweep
short; one module fixture runs them all and each test checks one outcome.
"""

from __future__ import annotations

import errno
import functools
import os
import shutil
import stat
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest

from echo_sim.trace.outfiles import OutputError, atomic_output, atomic_write, output_tree
from tests.forker import Forker

DATA = Path(__file__).parent / "data" / "load" / "echo_2rank"
TRACE = "{trace}"  # in an Output's argv: the copy of DATA in the case's directory
HOST_PROFILE = Path(__file__).parent / "data" / "comm" / "gloo2_host.json"
TIMEOUT_S = 60
SYNTH = ("synth", "--layers", "2", "--hidden", "64", "--heads", "2", "--seq", "32",
         "--vocab", "100")


@dataclass(frozen=True)
class Output:
    """One output of a command: ``argv`` without the output path, the ``flag`` its errors
    name, the target's ``name``. ``in_trace``: the path is implied (bare ``--xlsx``, combine's
    default), the target lies in the trace directory and ``argv`` names none. ``measures``:
    a real run measures collectives (profile-comm, replay-comm), so only its refusals are
    swept."""

    argv: tuple[str, ...]
    flag: str
    name: str
    directory: bool = False
    in_trace: bool = False
    measures: bool = False
    # a directory output's (level it makes, file the "exists" case plants there, file the
    # "file-link" case links there)
    inner: tuple[str, str, str] = ("0_0", "trace.json", "meta.json")

    @property
    def id(self) -> str:
        how = "implied" if self.in_trace else self.flag.lstrip("-")
        return f"{self.argv[0]}-{how}-{self.name}"

    def command(self, trace: Path, target: Path) -> list[str]:
        args = [str(trace) if a == TRACE else a for a in self.argv]
        return args if self.in_trace else [*args, self.flag, str(target)]


OUTPUTS = (
    Output(("statistic", TRACE), "--csv", "o.csv"),
    Output(("statistic", TRACE), "--xlsx", "o.xlsx"),
    Output(("statistic", TRACE, "--xlsx"), "--xlsx", "statistic.xlsx", in_trace=True),
    Output(("statistic", TRACE), "--plot", "o.png"),
    Output(("collect", TRACE), "--csv", "o.csv"),
    Output(("combine", TRACE), "--output", "o.json"),
    Output(("combine", TRACE), "--output", "combined.json", in_trace=True),
    Output(("compare", TRACE, TRACE), "--csv", "o.csv"),
    Output(("compare", TRACE, TRACE), "--xlsx", "o.xlsx"),
    Output(("compare", TRACE, TRACE, "--xlsx"), "--xlsx", "compare.xlsx", in_trace=True),
    Output(("critical", TRACE), "--output", "o.json"),
    Output(("replay", TRACE), "--output", "o.json"),
    Output(("graph", TRACE), "--output", "o.gml"),
    Output(("graph", TRACE), "--output", "o.svg"),
    Output(("search", TRACE, "--gpus", "2", "--global-batch", "16"), "--output", "best.json"),
    Output(("search", TRACE, "--gpus", "2", "--global-batch", "16"), "--plot", "space.png"),
    Output(("profile-comm", "--nproc", "2", "--sizes", "1KB", "--iters", "1", "--warmup", "0",
            "--ops", "all_reduce", "--no-host-overheads", "--no-progress"), "--output",
           "p.json", measures=True),
    Output(("replay-comm", TRACE, "--comm-profile", str(HOST_PROFILE)), "--output", "p.json",
           measures=True),
    Output(("simulate", TRACE), "--output", "out", directory=True),
    Output(SYNTH, "--output", "out", directory=True),
    Output(("report", TRACE), "--output", "o.html"),
    Output(("export", TRACE, "--to", "echo"), "--output", "out", directory=True),
    Output(("convert", TRACE), "--to", "store", directory=True,
           inner=("events", "part-00000.parquet", "part-00000.parquet")),
)

# attack -> words its one-line error must hold
CASES = {
    "exists": "exists; pass --force",
    "link": "symbolic link",
    "dir-link": "symbolic link",  # out/0_0 -> ../victim: directories only
    "file-link": "symbolic link",  # out/0_0/meta.json -> victim: directories only
    "fifo": "",  # a regular-file check for files, a directory check for out/
    "no-parent": "does not exist",
    "full": "No space left on device",
}


@functools.cache
def mount_problem() -> str | None:
    """None when a tmpfs can be mounted here (tried once), else why not."""
    if os.geteuid() != 0:
        return "mounting a tmpfs needs root"
    probe = Path(tempfile.mkdtemp(prefix="echo_tmpfs_probe"))
    try:
        r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(probe)],
                           capture_output=True, timeout=10)
        if r.returncode != 0:
            return f"mount -t tmpfs failed: {r.stderr.decode(errors='replace').strip()}"
        subprocess.run(["umount", str(probe)], capture_output=True, timeout=10, check=True)
        return None
    except (OSError, subprocess.SubprocessError) as e:
        return f"mount -t tmpfs is not available: {e}"
    finally:
        probe.rmdir()


def applies(out: Output, case: str) -> bool:
    """Whether the attack ``case`` means anything for ``out``."""
    if case in ("dir-link", "file-link"):
        return out.directory  # a file output makes no directory
    if case in ("no-parent", "full") and out.in_trace:
        return False  # the implied path lies in the (existing) trace directory
    # profile-comm would measure collectives before filling the disk: atomic_write's
    # ENOSPC is tested in process below
    return not (case == "full" and out.measures)


# ---------------------------------------------------------------------------- snapshots
Snapshot = dict[str, tuple[int, int, int, str | None]]


def snapshot(root: Path) -> Snapshot:
    """Every entry under ``root`` (links not followed): type, size, mtime, link target.
    Directories by name only: a temporary file made and removed in one changes its mtime."""
    out: Snapshot = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for n in dirnames + filenames:
            p = os.path.join(dirpath, n)
            st = os.lstat(p)
            kind = stat.S_IFMT(st.st_mode)
            if stat.S_ISDIR(st.st_mode):
                out[os.path.relpath(p, root)] = (kind, 0, 0, None)
                continue
            link = os.readlink(p) if stat.S_ISLNK(st.st_mode) else None
            out[os.path.relpath(p, root)] = (kind, st.st_size, st.st_mtime_ns, link)
    return out


def changed(a: Snapshot, b: Snapshot) -> set[str]:
    return {k for k in a.keys() | b.keys() if a.get(k) != b.get(k)}


# ---------------------------------------------------------------------------- one case
@dataclass
class Outcome:
    argv: list[str]
    refused: subprocess.CompletedProcess[str]
    before: Snapshot
    after: Snapshot
    target: str  # relative to the case directory
    forced: subprocess.CompletedProcess[str] | None = None  # "exists" rerun with --force
    after_forced: Snapshot | None = None


class Forkers(threading.local):
    """One :class:`Forker` per thread of the sweep; all closed at the end."""

    made: list[Forker] = []

    def get(self) -> Forker:
        if not hasattr(self, "forker"):
            self.forker = Forker()
            self.made.append(self.forker)
        return self.forker


FORKERS = Forkers()


def echo_sim(argv: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return FORKERS.get().run(["-m", "echo_sim", *argv], cwd=cwd, timeout=TIMEOUT_S)


def fill(mount: Path) -> None:
    """Write zeros into ``mount`` until the file system refuses."""
    with open(mount / "filler", "wb", buffering=0) as f:
        try:
            while True:
                f.write(b"\0" * 4096)
        except OSError as e:
            assert e.errno == errno.ENOSPC, e


def stage(out: Output, case: str, world: Path, mounts: list[Path]) -> tuple[Path, list[str]]:
    """Build the scene of ``case`` in ``world``; the target and the extra flags."""
    trace = world / "trace"
    shutil.copytree(DATA, trace)
    (world / "victim.json").write_text("VICTIM\n")
    (world / "victim").mkdir()
    (world / "victim" / "keep.txt").write_text("KEEP\n")
    target = (trace if out.in_trace else world) / out.name
    force = [] if case == "exists" else ["--force"]
    level, planted, linked = out.inner
    inner = target / level / planted  # a file a directory output writes
    if case == "exists":
        if out.directory:
            inner.parent.mkdir(parents=True)
            inner.write_text("KEEP\n")
        else:
            target.write_text("KEEP\n")
    elif case == "link":
        target.symlink_to(world / ("victim" if out.directory else "victim.json"))
    elif case == "dir-link":
        target.mkdir()
        (target / level).symlink_to("../victim")
    elif case == "file-link":
        (target / level).mkdir(parents=True)
        (target / level / linked).symlink_to("../../victim.json")
    elif case == "fifo":
        os.mkfifo(target)
    elif case == "no-parent":
        target = world / "missing" / out.name
    elif case == "full":
        mount = world / "full"
        mount.mkdir()
        subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mount)],
                       check=True, timeout=10)
        mounts.append(mount)
        fill(mount)
        target = mount / out.name
    return target, force


def run_case(out: Output, case: str, world: Path, mounts: list[Path]) -> Outcome:
    world.mkdir(parents=True)
    target, force = stage(out, case, world, mounts)
    argv = out.command(world / "trace", target) + force
    before = snapshot(world)
    proc = echo_sim(argv, world)
    o = Outcome(argv, proc, before, snapshot(world), os.path.relpath(target, world))
    if case == "exists" and not out.measures:
        o.forced = echo_sim(argv + ["--force"], world)
        o.after_forced = snapshot(world)
    return o


KEYS = [(out, case) for out in OUTPUTS for case in CASES if applies(out, case)]


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Outcome]]:
    """Every applicable (output, case), run four at a time."""
    root = tmp_path_factory.mktemp("protect")
    mounts: list[Path] = []
    todo = [(o, c) for o, c in KEYS if c != "full" or mount_problem() is None]
    try:
        with ThreadPoolExecutor(max_workers=4) as pool:
            futures = {f"{o.id}:{c}": pool.submit(run_case, o, c, root / f"{i}_{c}", mounts)
                       for i, (o, c) in enumerate(todo)}
            yield {k: f.result() for k, f in futures.items()}
    finally:
        for m in mounts:
            subprocess.run(["umount", str(m)], capture_output=True, timeout=10)
        while FORKERS.made:
            FORKERS.made.pop().close()


def one_line_error(proc: subprocess.CompletedProcess[str], *words: str) -> None:
    err = proc.stderr
    assert proc.returncode == 2, f"exit {proc.returncode}: {err}"
    assert "Traceback" not in err and err.count("\n") == 1, err
    assert err.startswith("echo_sim: error: "), err
    for w in words:
        assert w in err, (w, err)


@pytest.mark.parametrize("out, case", KEYS, ids=[f"{o.id}:{c}" for o, c in KEYS])
def test_output_is_protected(outcomes: dict[str, Outcome], out: Output, case: str) -> None:
    if case == "full" and mount_problem():
        pytest.skip(mount_problem())
    o = outcomes[f"{out.id}:{case}"]
    words = [out.flag, CASES[case]]
    if case == "fifo":
        words[1] = "not a directory" if out.directory else "not a regular file"
    if case == "no-parent":
        words.append("missing")
    one_line_error(o.refused, *words)
    assert o.after == o.before, f"{o.argv} changed {changed(o.before, o.after)}"
    if o.forced is not None:  # --force replaces what exists, and touches nothing else
        assert o.forced.returncode == 0 and o.forced.stderr == "", o.forced.stderr
        assert o.after_forced is not None
        diff = changed(o.before, o.after_forced)
        assert o.target in diff or any(d.startswith(o.target + os.sep) for d in diff)
        stray = {d for d in diff if d != o.target and not d.startswith(o.target + os.sep)}
        assert not stray, stray


def test_every_output_flag_is_swept() -> None:
    """Each command's file-writing flags appear in OUTPUTS (a new one must be added)."""
    from echo_sim.cli import _subparser as subparser
    from echo_sim.cli import build_parser, load_commands

    writers = {"--output", "--csv", "--xlsx", "--plot"}
    writers_of = {"convert": {"--to"}}  # a flag that writes only in these commands
    parser = build_parser(load_commands())
    swept = {(o.argv[0], o.flag) for o in OUTPUTS}
    for cmd in load_commands():
        sub = subparser(parser, cmd.name)
        assert sub is not None
        flags = ({s for a in sub._actions for s in a.option_strings}
                 & (writers | writers_of.get(cmd.name, set())))
        assert {(cmd.name, f) for f in flags} <= swept, cmd.name
        if flags:
            assert "--force" in {s for a in sub._actions for s in a.option_strings}, cmd.name


# ---------------------------------------------------------------------------- stdout
PRINTERS = (
    ("validate", TRACE), ("statistic", TRACE), ("collect", TRACE), ("compare", TRACE, TRACE),
    ("critical", TRACE), ("graph", TRACE), ("replay", TRACE), ("stragglers", TRACE),
    ("simulate", TRACE), ("statistic", TRACE, "--json"),
)


def _argv(spec: tuple[str, ...]) -> list[str]:
    return [sys.executable, "-m", "echo_sim", *(str(DATA) if a == TRACE else a for a in spec)]


@pytest.mark.parametrize("spec", PRINTERS, ids=["-".join(a for a in p if a != TRACE)
                                                  for p in PRINTERS])
def test_stdout_on_a_full_disk(spec: tuple[str, ...]) -> None:
    with open("/dev/full", "w") as full:
        proc = subprocess.run(_argv(spec), stdout=full, stderr=subprocess.PIPE, text=True,
                              timeout=TIMEOUT_S)
    assert proc.returncode != 0 and "Traceback" not in proc.stderr, proc.stderr
    assert proc.stderr.count("\n") == 1 and "stdout" in proc.stderr, proc.stderr


def test_stdout_closed_or_broken() -> None:
    closed = subprocess.run(_argv(("statistic", TRACE)), stderr=subprocess.PIPE, text=True,
                            timeout=TIMEOUT_S, preexec_fn=lambda: os.close(1))
    assert closed.returncode != 0 and "Traceback" not in closed.stderr, closed.stderr
    assert closed.stderr.count("\n") == 1 and "stdout" in closed.stderr, closed.stderr
    with subprocess.Popen(_argv(("statistic", TRACE)), stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True) as p:
        assert p.stdout is not None and p.stderr is not None
        p.stdout.close()  # the reader is gone before anything is written (``| head``)
        err = p.stderr.read()
        code = p.wait(timeout=TIMEOUT_S)
    assert code == 0 and err == "", err  # quiet, as Unix tools end on a broken pipe


# ---------------------------------------------------------------------------- in process
def _no_space(*_: object) -> None:
    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


def test_atomic_write_on_a_full_disk_leaves_the_old_file(tmp_path, monkeypatch):
    target = tmp_path / "p.json"
    target.write_text("old")
    monkeypatch.setattr(os, "fsync", _no_space)
    with pytest.raises(OutputError, match="No space left on device"):
        atomic_write(target, b"new", overwrite=True)
    assert target.read_text() == "old" and os.listdir(tmp_path) == ["p.json"]


def test_atomic_output_maps_a_writers_wrapped_os_error(tmp_path):
    """xlsxwriter raises FileCreateError from the OSError of a full disk."""
    from xlsxwriter.exceptions import FileCreateError

    with pytest.raises(OutputError, match="No space left on device"):
        with atomic_output(tmp_path / "t.xlsx", overwrite=False):
            try:
                _no_space()
            except OSError as e:
                raise FileCreateError(e)  # noqa: B904 - as xlsxwriter does it
    assert os.listdir(tmp_path) == []


def test_output_tree_failing_midway_leaves_nothing(tmp_path, monkeypatch):
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "mine.txt").write_text("keep")
    calls = []

    def fsync(fd: int) -> None:
        calls.append(fd)
        if len(calls) == 2:  # 0_0/a.json staged, 0_1/ made
            _no_space()

    monkeypatch.setattr(os, "fsync", fsync)
    with pytest.raises(OutputError, match="No space left on device"):
        with output_tree(tmp_path / "out", overwrite=True) as tree:
            for rank in ("0_0", "0_1"):
                tree.write(f"{rank}/a.json", b"{}")
    assert sorted(os.listdir(tmp_path / "out")) == ["mine.txt"]
    with pytest.raises(OutputError, match="does not exist"):  # parents are never made
        with output_tree(tmp_path / "no" / "out", overwrite=False):
            pass
    assert not (tmp_path / "no").exists()


def test_output_tree_refuses_a_planted_directory_link(tmp_path):
    victim = tmp_path / "victim"
    victim.mkdir()
    out = tmp_path / "out"
    out.mkdir()
    (out / "0_0").symlink_to(victim)
    with pytest.raises(OutputError, match="symbolic link"):
        with output_tree(out, overwrite=True) as tree:
            tree.write("0_0/trace.json", b"{}")
    assert os.listdir(victim) == [] and os.path.islink(out / "0_0")
