"""CaptureConfig, TRACE_* parsing, and what importing echo_trace must not do."""

from __future__ import annotations

import pytest

from echo_trace.config import DEFAULT_MAX_EVENTS, ENV_VARS, CaptureConfig, env_flag
from tests.harness import run_python


def test_defaults_record_three_steps_from_two():
    cfg = CaptureConfig()
    assert (cfg.out_dir, cfg.start_step, cfg.end_step, cfg.last_step) == ("traces", 2, 5, 4)
    assert cfg.gzip is False and cfg.depth is None and cfg.overwrite is False
    assert cfg.memory_interval_ms == 50.0 and cfg.max_events == DEFAULT_MAX_EVENTS


def test_end_step_defaults_to_start_plus_three():
    assert CaptureConfig(start_step=7).end_step == 10


@pytest.mark.parametrize("kwargs, word", [
    ({"start_step": -1}, "start_step"),
    ({"start_step": 3, "end_step": 3}, "end_step"),
    ({"depth": -2}, "depth"),
    ({"memory_interval_ms": -1.0}, "memory_interval_ms"),
    ({"max_events": 0}, "max_events"),
    ({"out_dir": ""}, "out_dir"),
    ({"trace_format": "chrome"}, "trace_format"),
])
def test_invalid_values_name_the_field(kwargs, word):
    with pytest.raises(ValueError, match=word):
        CaptureConfig(**kwargs)


def test_config_is_frozen_and_keyword_only():
    cfg = CaptureConfig()
    with pytest.raises(AttributeError):
        cfg.start_step = 3  # type: ignore[misc]
    with pytest.raises(TypeError):
        CaptureConfig("traces")  # type: ignore[misc]
    assert cfg.with_changes(start_step=4).end_step == 5  # end kept, still > start


def test_from_env_reads_every_variable():
    env = {"TRACE_START_STEP": "3", "TRACE_END_STEP": "9", "TRACE_DIR": "/x/y",
           "TRACE_GZIP": "yes", "TRACE_DEPTH": "2", "TRACE_MEMORY_INTERVAL_MS": "2.5",
           "TRACE_OVERWRITE": "1", "TRACE_MAX_EVENTS": "1000", "TRACE_ON": "1",
           "TRACE_FORMAT": "byteprofile"}
    cfg = CaptureConfig.from_env(env)
    assert cfg == CaptureConfig(out_dir="/x/y", start_step=3, end_step=9, gzip=True, depth=2,
                                memory_interval_ms=2.5, overwrite=True, max_events=1000,
                                trace_format="byteprofile")
    assert set(env) <= set(ENV_VARS)


def test_from_env_defaults():
    assert CaptureConfig.from_env({}) == CaptureConfig()
    assert CaptureConfig.from_env({"TRACE_START_STEP": "10"}).end_step == 13


@pytest.mark.parametrize("env, word", [
    ({"TRACE_START_STEP": "two"}, "TRACE_START_STEP"),
    ({"TRACE_GZIP": "maybe"}, "TRACE_GZIP"),
    ({"TRACE_MEMORY_INTERVAL_MS": "fast"}, "TRACE_MEMORY_INTERVAL_MS"),
    ({"TRACE_FORMAT": "chrome"}, "TRACE_FORMAT"),
    ({"TRACE_START_STEP": "5", "TRACE_END_STEP": "4"}, "end_step"),
])
def test_from_env_bad_values_name_the_variable(env, word):
    with pytest.raises(ValueError, match=word):
        CaptureConfig.from_env(env)


def test_flags_and_trace_on():
    assert env_flag("ON", "X") is True and env_flag(None, "X") is False
    assert CaptureConfig.trace_on({"TRACE_ON": "1"}) is True
    assert CaptureConfig.trace_on({"TRACE_ON": "0"}) is False
    assert CaptureConfig.trace_on({"TRACE_ON": "garbage"}) is False
    assert CaptureConfig.trace_on({}) is False


def test_import_reads_no_env_imports_no_torch_registers_nothing():
    code = (
        "import os, sys\n"
        "seen = []\n"
        "class Env(type(os.environ)):\n"
        "    def __getitem__(self, k):\n"
        "        seen.append(k); return super().__getitem__(k)\n"
        "    def get(self, k, d=None):\n"
        "        seen.append(k); return super().get(k, d)\n"
        "os.environ.__class__ = Env\n"
        "import echo_trace, echo_trace.capture, echo_trace.config, echo_trace.ranks\n"
        "assert callable(echo_trace.capture), echo_trace.capture\n"
        "bad = [k for k in seen if k.startswith(('TRACE_', 'RANK', 'LOCAL_', 'SLURM', 'OMPI'))]\n"
        "assert not bad, bad\n"
        "assert 'torch' not in sys.modules\n"
        "print('ok')\n"
    )
    out = run_python(["-c", code], env={"TRACE_ON": "1", "RANK": "0"}, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"


def test_trace_end_step_alone_below_the_default_start_records_from_step_0() -> None:
    cfg = CaptureConfig.from_env({"TRACE_ON": "1", "TRACE_END_STEP": "2"})
    assert (cfg.start_step, cfg.end_step) == (0, 2)
    cfg = CaptureConfig.from_env({"TRACE_END_STEP": "1"})
    assert (cfg.start_step, cfg.end_step) == (0, 1)
    cfg = CaptureConfig.from_env({"TRACE_END_STEP": "6"})  # above it: the default start
    assert (cfg.start_step, cfg.end_step) == (2, 6)
    with pytest.raises(ValueError, match="end_step=2"):  # both given: still checked
        CaptureConfig.from_env({"TRACE_START_STEP": "2", "TRACE_END_STEP": "2"})
