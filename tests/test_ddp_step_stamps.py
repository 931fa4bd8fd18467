"""benchmarks/ddp_step_stamps.py: DDP's buckets and buffer broadcast stamped in a real job,
and the per-step quantities read from the stamps."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks.ddp_step_stamps import main, summarize


def _rank(shift: float, *, ready1: float, sync_us: float) -> list[list[object]]:
    """One rank's stamps of two steps (µs): a buffer broadcast, a backward with two buckets
    (bucket 0 ready at 1000, bucket 1 at ``ready1``), each all-reduce done 500 after the
    later rank's ready, the backward returning 100 after the last one."""
    ev: list[list[object]] = []
    for step in range(2):
        t = step * 100_000 + shift
        ev += [["sync0", -1, t], ["sync1", -1, t + sync_us], ["bw0", -1, t + 500],
               ["ready", 0, t + 1000], ["ready", 1, t + ready1],
               ["done", 0, step * 100_000 + 1500 + 200], ["done", 1, step * 100_000 + 6500],
               ["bw1", -1, step * 100_000 + 6600]]
    return ev


def test_summarize_reads_gaps_transfers_and_the_slowest_rank() -> None:
    # rank 1 starts 200 us later and its last bucket is ready 2000 us after rank 0's; its
    # broadcast stalls (3000 us against 500)
    stamps = [_rank(0.0, ready1=4000.0, sync_us=500.0),
              _rank(200.0, ready1=5800.0, sync_us=3000.0)]
    recs = [{"step_s": [0.030, 0.030], "step_cpu_s": [0.02, 0.02],
             "step_runqueue_s": [0.001, 0.001], "step_other_threads_cpu_s": [0.002, 0.002]},
            {"step_s": [0.031, 0.032], "step_cpu_s": [0.025, 0.026],
             "step_runqueue_s": [0.002, 0.003], "step_other_threads_cpu_s": [0.001, 0.001]}]
    got = summarize(stamps, recs, warmup=0)
    assert got["steps"] == 2
    st = got["stats"]
    # the slowest rank is rank 1 in both steps: its step, CPU and waits
    assert st["step_ms"]["mean"] == pytest.approx(31.5)
    assert st["cpu_ms"]["median"] == pytest.approx(25.5)
    assert st["runqueue_ms"]["mean"] == pytest.approx(2.5)
    # bucket 0: ranks 200 us apart (half: 0.1 ms); bucket 1: 4000 vs 6000 (half 1.0 ms)
    assert st["bucket0_half_gap_ms"]["mean"] == pytest.approx(0.1)
    assert st["bucket1_half_gap_ms"]["mean"] == pytest.approx(1.0)
    # bucket 1 done at 6500, both ready at 6000 (rank 1's 200 + 5800)
    assert st["bucket1_after_both_ms"]["mean"] == pytest.approx(0.5)
    # first to last hook: rank 0 3.0 ms, rank 1 4.8 ms; rank 1's tail 6600 - 6000
    assert st["hooks_interval_rank0_ms"]["mean"] == pytest.approx(3.0)
    assert st["hooks_interval_rank1_ms"]["mean"] == pytest.approx(4.8)
    assert st["tail_ms"]["mean"] == pytest.approx(0.6)
    # the broadcast: rank 1's 3.0 ms, >= 2 ms over the run's fastest (0.5) in every step
    assert st["buffers_ms"]["mean"] == pytest.approx(3.0)
    assert st["buffers_stalled_pct"]["mean"] == pytest.approx(100.0)
    # a warm-up that leaves nothing leaves no rows
    assert summarize(stamps, recs, warmup=2)["steps"] == 0


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_a_real_ddp_job_is_stamped(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The tiny GPT under real 2-process DDP with the stamping hook: both buckets' ready and
    done stamps every step, the training unharmed (every step timed on both ranks)."""
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    out = tmp_path / "stamps.json"
    assert main(["--sizes", "tiny", "--steps", "5", "--warmup", "1", "--output", str(out),
                 "--keep", str(tmp_path / "jobs")]) == 0
    doc = json.loads(out.read_text())
    got = doc["models"]["tiny"]
    assert got["steps"] == 4
    st = got["stats"]
    assert st["bucket0_after_both_ms"]["mean"] > 0 and st["tail_ms"]["mean"] > 0
    assert st["step_ms"]["mean"] > st["tail_ms"]["mean"]
    assert "buffers_ms" not in st  # the GPT has no buffers: DDP broadcasts nothing
    for r in range(2):
        rec = json.loads((tmp_path / "jobs" / "tiny" / f"rank{r}.json").read_text())
        assert len(rec["step_s"]) == 5


def test_bad_flags_exit_with_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as e:
        main(["--sizes", "nope"])
    assert e.value.code == 2 and "unknown size" in capsys.readouterr().err
