"""The capture session: step window, hook lifetimes, files at the end.

``with echo_trace.capture(out_dir="traces", start_step=2, end_step=5) as cap:`` around a
training loop records steps 2, 3 and 4 (``end_step`` is exclusive, see
:mod:`echo_trace.config`) and writes ``out_dir/<node_rank>_<local_rank>/`` as soon as step
5 would begin. Steps are counted by optimizer steps (global optimizer hooks, no user code)
unless the user calls ``cap.step()`` at the end of each iteration; from the first such call
on, only ``cap.step()`` counts. With several optimizers the first one that steps counts.

Lifetimes: optimizer hooks for the whole session (they count steps); module hooks,
communication patches and the memory sampler only while the window is open. Files are
written once: when the window closes, at ``stop()`` / context exit (also when the loop
raises), at interpreter exit (atexit) and on SIGTERM. Any internal error is reported once
and turns recording off; the training step still runs and gives the same result, and the
events recorded so far are still written.

No stall: the thread that closes the window only takes the recorder's buffer (handing it
over, so memory stays bounded by ``max_events``) and the metadata that reads torch state;
a writer thread (``echo_trace-writer``) builds the events, the DAG and the files. ``stop()``,
atexit and the SIGTERM handler wait for it: the handler finishes (or waits for) a write in
progress before it chains to the previous handler or the default action, and a SIGTERM that
lands while the training thread is handing over the buffer is re-raised once the write is
done. One line per process says where the trace went and how many events it holds.
"""

from __future__ import annotations

import atexit
import itertools
import logging
import os
import platform
import signal
import sys
import threading
from pathlib import Path
from types import FrameType, TracebackType
from typing import Any

from echo_trace.config import DEFAULT_MAX_EVENTS, CaptureConfig
from echo_trace.meta import build_meta, echo_version
from echo_trace.pacing import Pacer
from echo_trace.ranks import RankInfo, detect_ranks, job_token
from echo_trace.recorder import STEP_TID, Recorder
from echo_trace.timing.clock import ClockMap, CpuTimer, sync_clock
from echo_trace.timing.memory import DEFAULT_INTERVAL_MS
from echo_trace.writer import YIELD_EVERY, dir_is_nonempty, refuse_reason, write_rank_dir

__all__ = ["Capture", "capture", "current"]

log = logging.getLogger("echo_trace")

_SEQ = itertools.count()  # per-process capture number, tags the clock-sync rendezvous
#: longest wait, when the window closes, for collectives still closing (s; see _close_window)
COMM_DRAIN_S = 0.05


# The capture this process is running ("capture"), set on first use, never at import: an
# explicit ``echo_trace.capture(...)`` takes over from an automatic (TRACE_ON) one.
_RUNNING: dict[str, Any] = {}


def current() -> Capture | None:
    """The capture this process is running, or None."""
    return _RUNNING.get("capture")


def _yield_to_explicit() -> None:
    """An explicit capture is starting: stop an automatic one that has not recorded yet."""
    cap = _RUNNING.get("capture")
    if cap is not None and cap.autostart:
        if cap._window or cap._steps:
            log.warning("echo_trace: explicit capture started while TRACE_ON capture is "
                        "recording; the automatic one stops now")
        cap.stop()


class Capture:
    """One capture session; see the module docstring. Every public method is idempotent
    and never raises into the training job once constructed."""

    def __init__(self, config: CaptureConfig | None = None, *, model: Any = None,
                 enabled: bool = True, autostart: bool = False) -> None:
        self.config = config if config is not None else CaptureConfig()
        self.model = model
        self.autostart = autostart
        self.ranks: RankInfo = RankInfo()
        self.rec = Recorder(max_events=self.config.max_events)
        self.rec.enabled = enabled
        self.rank_dir: Path | None = None
        self.written: dict[str, Path] | None = None
        self._requested = enabled
        self._started = False
        self._stopped = False
        self._window = False  # window open (hooks installed)
        self._finished = False  # window closed (or never to open)
        self._blocked = False  # rank dir not empty: stays off, still joins clock sync
        self._count = 0
        self._user_steps = 0
        self._step_source = "optimizer"
        self._primary_opt: Any = None
        self._steps: list[int] = []
        self._step_t0: float | None = None
        self._pid = os.getpid()
        self._seq = next(_SEQ)
        self._clock: ClockMap | None = None
        self._timer: Any = None
        self._gpu_stopped: Any = None  # Kineto's stop(): attributed by the writer thread
        self._pacer: Pacer | None = None  # the writer's share of time while the job trains
        self._optim: Any = None
        self._watch: Any = None
        self._modules: Any = None
        self._comm: Any = None
        self._memory: Any = None
        self._ddp_type: Any = None
        self._prev_sigterm: Any = None
        self._sig_installed = False
        self._atexit = False
        self._write_state = "none"  # none | due (handing over) | running | done
        self._writer: threading.Thread | None = None
        self._pending_signal: tuple[int, FrameType | None] | None = None
        self._handing_over = False  # the training thread is handing the buffer over
        self._timer_name = "perf_counter"
        self._device = "cpu"
        self._device_name = platform.processor() or platform.machine()
        self._cuda_index: int | None = None

    # ---------------------------------------------------------------- public
    @property
    def enabled(self) -> bool:
        """True while this capture may still record."""
        return self.rec.enabled and not self._finished and not self._stopped

    @property
    def step_count(self) -> int:
        """Steps completed so far (the number of the step now running)."""
        return self._count

    def start(self) -> Capture:
        """Begin counting steps (idempotent); opens the window at once if start_step is 0."""
        if self._started or not self._requested:
            return self
        self._started = True
        try:
            self._start()
        except Exception as e:  # noqa: BLE001
            self.rec.fail("capture start", e)
            self._finished = True
        return self

    def step(self) -> None:
        """Mark the end of an iteration; from the first call on, optimizer steps no longer
        count."""
        if not self._started or self._stopped:
            return
        try:
            self._user_steps += 1
            self._step_source = "user"
            if self._user_steps > self._count:
                if self._finished:
                    self._count = self._user_steps
                else:
                    self._advance(self._user_steps)
        except Exception as e:  # noqa: BLE001
            self.rec.fail("cap.step", e)

    def stop(self) -> None:
        """End the session: close the window, write the files, remove every hook."""
        if self._stopped or not self._started or os.getpid() != self._pid:
            return
        self._stopped = True
        try:
            self._finish(partial=True)
        except Exception as e:  # noqa: BLE001
            self.rec.fail("capture stop", e)
        self.join_writer()
        try:
            self._close_window()  # hooks left inert by a SIGTERM handler
            if self._optim is not None:
                self._optim.remove()
            if self._watch is not None:
                self._watch.remove()
            self._uninstall_signal()
            if self._atexit:
                atexit.unregister(self._atexit_stop)
                self._atexit = False
            if _RUNNING.get("capture") is self:
                del _RUNNING["capture"]
        except Exception as e:  # noqa: BLE001
            self.rec.fail("capture stop", e)

    def join_writer(self, timeout_s: float | None = None) -> bool:
        """Wait for the background write (if any) to finish; True when none is running."""
        t = self._writer
        if t is None or t is threading.current_thread():
            return True
        if self._pacer is not None:
            self._pacer.hurry()  # somebody waits for the files: no more pacing
        t.join(timeout_s)
        return not t.is_alive()

    def __enter__(self) -> Capture:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()

    # ---------------------------------------------------------------- session
    def _start(self) -> None:
        from echo_trace.hooks.optim import OptimizerTracer

        if not self.autostart:
            _yield_to_explicit()
        _RUNNING["capture"] = self
        self.ranks = detect_ranks()
        self.rec.rank = self.ranks.rank
        self._set_rank_dir()
        self._clock = ClockMap()
        self._optim = OptimizerTracer(self.rec, get_timer=lambda: self._timer,
                                      on_step=self._on_optimizer_step,
                                      on_compute_start=self._compute_start)
        self._optim.install()
        from echo_trace.hooks.watch import ScalerWatch

        self._watch = ScalerWatch(self.rec, on_skip=self._on_optimizer_step)
        self._watch.install()
        if not self._blocked:
            atexit.register(self._atexit_stop)
            self._atexit = True
        if self.config.start_step == 0:
            self._open_window()

    def _set_rank_dir(self) -> None:
        self.rank_dir = Path(self.config.out_dir) / self.ranks.dir_name
        reason = refuse_reason(self.rank_dir)
        if reason is not None:
            log.warning("echo_trace: %s %s; capture stays off on this process",
                        self.rank_dir, reason)
            self._blocked = True
            self.rec.enabled = False
        elif not self.config.overwrite and dir_is_nonempty(self.rank_dir):
            log.warning("echo_trace: %s is not empty; capture stays off on this process "
                        "(pass overwrite=True or TRACE_OVERWRITE=1 to replace it)",
                        self.rank_dir)
            self._blocked = True
            self.rec.enabled = False

    def _on_optimizer_step(self, opt: Any) -> None:
        if self._finished or self._stopped or self._step_source != "optimizer":
            return
        try:
            if self._primary_opt is None:
                import weakref

                self._primary_opt = weakref.ref(opt)
            if self._primary_opt() is opt:
                self._advance(self._count + 1)
        except Exception as e:  # noqa: BLE001
            self.rec.fail("step counting", e)

    def _advance(self, count: int) -> None:
        """``count`` steps are complete: move the window along."""
        self._count = count
        cfg = self.config
        assert cfg.end_step is not None
        if self._window:
            self._end_step_marker()
            if count >= cfg.end_step or not self.rec.enabled:
                self._finish(partial=False)
            else:
                self._begin_step_marker(count)
        elif cfg.start_step <= count < cfg.end_step and not self._finished:
            self._open_window()
        elif count >= cfg.end_step:
            self._finish(partial=False)

    # ---------------------------------------------------------------- window
    def _open_window(self) -> None:
        import torch

        rec = self.rec
        self._window = True
        echo_version()  # cached now: meta() runs on the step that closes the window
        self._refine_ranks()
        assert self._clock is not None
        try:  # every rank joins, even one whose capture is off, so peers never wait
            sync_clock(self._clock, f"clock{self._seq}")
        except Exception as e:  # noqa: BLE001
            rec.fail("clock sync", e)
        if not rec.enabled:
            self._window = False
            self._finished = True
            return
        with rec.guard("opening the capture window"):
            if torch.cuda.is_available() and torch.cuda.is_initialized():
                self._cuda_index = torch.cuda.current_device()
                from echo_trace.gpu.backend import make_timer

                # Kineto; CudaTimer if a profiler runs or this torch's cannot be used
                self._timer = make_timer(rec, raw=self.config.kineto_raw)
                self._device = "cuda"
                self._device_name = torch.cuda.get_device_name(self._cuda_index)
            else:
                self._timer = CpuTimer(rec)
            self._timer_name = self._timer.timer_name
            from echo_trace.hooks.modules import ModuleTracer
            from echo_trace.timing.memory import MemorySampler

            self._comm = self._make_comm()  # before the tracer: model= may be a DDP
            if self._comm is not None:
                self._comm.install()
            self._modules = ModuleTracer(rec, self._timer, depth=self.config.depth,
                                         root=self.model, on_module=self._on_module)
            self._memory = MemorySampler(rec, interval_ms=self.config.memory_interval_ms,
                                         cuda_device=self._cuda_index)
            self._install_signal()
            self._modules.install()
            self._memory.start()
            # last: the first step starts when the job gets control back, so opening the
            # window is the closing step's cost, as the training script's timer sees it
            self._begin_step_marker(self._count)
        if not rec.enabled:
            self._finish(partial=True)

    def _refine_ranks(self) -> None:
        """Prefer the process group's rank when it disagrees with the environment."""
        try:
            import torch.distributed as dist

            if not (dist.is_available() and dist.is_initialized()):
                return
            rank, world = dist.get_rank(), dist.get_world_size()
        except Exception as e:  # noqa: BLE001
            self.rec.fail("rank detection", e)
            return
        r = self.ranks
        if r.rank == rank and r.world_size == world:
            return
        lws = r.local_world_size if r.local_world_size <= world and world % r.local_world_size == 0 \
            and r.source != "single" else world
        self.ranks = RankInfo(rank=rank, local_rank=rank % lws, world_size=world,
                              local_world_size=lws, node_rank=rank // lws, source="dist")
        self.rec.rank = rank
        if not self._blocked:
            self._set_rank_dir()

    def _make_comm(self) -> Any:
        try:
            from echo_trace.comm import CommTracer
        except ImportError:
            return None
        return CommTracer(self.rec)

    def _on_module(self, mod: Any) -> None:
        if self._comm is None:
            return
        if self._ddp_type is None:
            from torch.nn.parallel import DistributedDataParallel

            self._ddp_type = DistributedDataParallel
        if isinstance(mod, self._ddp_type):
            self._comm.attach_ddp(mod)

    def _compute_start(self, t: Any) -> None:
        if self._modules is not None:
            self._modules.close_open_bw(t)

    def _begin_step_marker(self, step: int) -> None:
        self.rec.new_step(step)
        self.rec.recording = True
        if self._memory is not None:
            with self.rec.guard("memory sampler"):
                self._memory.take_peaks()
                self._memory.sample()
        self._step_t0 = Recorder.now_us()

    def _end_step_marker(self) -> None:
        """Close the running step: resolve timings, write its STEP slice."""
        rec = self.rec
        t0, self._step_t0 = self._step_t0, None
        if self._modules is not None:
            self._modules.end_step()
        with rec.guard("step end"):
            if self._timer is not None and rec.enabled:
                self._timer.flush()
            if t0 is None or not rec.enabled:
                return
            args: dict[str, Any] = {}
            if self._memory is not None:
                self._memory.sample()
                args.update(self._memory.take_peaks())
            if self._watch is not None:
                args.update(self._watch.step_args(rec.step))
            t1 = Recorder.now_us()
            rec.complete("STEP", "step", t0, t1 - t0, args, tid=STEP_TID, occ=0)
            self._steps.append(rec.step)

    def _close_window(self) -> None:
        """Remove window-only hooks and stop the sampler (safe outside module hooks)."""
        self.rec.recording = False
        self._window = False
        if self._comm is not None:
            # a collective of the last step that the job already waited for may still be
            # closing on the backend's thread (DDP's bucket futures): let it land in this
            # window (bounded: an op genuinely in flight across the boundary is closed by
            # the comm tracer's removal below)
            with self.rec.guard("comm drain"):
                self.rec.wait_comm_idle(COMM_DRAIN_S)
        if hasattr(self._timer, "stop"):  # Kineto: stop the profiler here (it must be
            # stopped by the thread that started it); the writer attributes its activity
            with self.rec.guard("GPU timing"):
                self._gpu_stopped = self._timer.stop()
        for part, name in ((self._modules, "module hooks"), (self._comm, "comm hooks")):
            if part is not None:
                try:
                    part.remove()
                except Exception as e:  # noqa: BLE001
                    self.rec.fail(f"removing {name}", e)
        if self._memory is not None:
            self._memory.close(wait=False)

    def _finish(self, *, partial: bool) -> None:
        """Close the window (if open) and write the files once."""
        if self._finished:
            return
        was_open = self._window
        if was_open and partial:
            with self.rec.guard("step end"):
                if self._timer is not None and self.rec.enabled:
                    self._timer.flush()
        if was_open or self._steps:
            self._write_state = "due"  # a SIGTERM from here on waits for the write
            self._handing_over = True
        if was_open:
            self._close_window()
        self._finished = True
        if was_open or self._steps:
            self._write()
        elif not self._blocked and self._requested:
            # a process that never stepped (torchrun's agent, a data worker) stays quiet
            level = logging.WARNING if self._count or not self.autostart else logging.DEBUG
            log.log(level, "echo_trace: the job ended after %d steps, before start_step=%d "
                    "(TRACE_START_STEP); no trace written", self._count,
                    self.config.start_step)

    # ---------------------------------------------------------------- files
    def meta(self) -> dict[str, Any]:
        """The contents of meta.json as of now."""
        meta = self._meta_now()
        meta["partial_steps"] = self._partial_steps(self.rec.steps_recorded())
        return meta

    def _partial_steps(self, recorded: set[int]) -> list[int]:
        """Steps with events but no STEP marker (cut short by stop, SIGTERM or an error)."""
        return [s for s in sorted(recorded) if s not in self._steps]

    def _meta_now(self) -> dict[str, Any]:
        """meta.json but ``partial_steps`` (O(1) in the number of events: this runs on the
        step that closes the window)."""
        return build_meta(config=self.config, ranks=self.ranks, clock=self._clock,
                          modules=self._modules, rec=self.rec, comm=self._comm,
                          device=self._device, device_name=self._device_name,
                          steps=self._steps, step_source=self._step_source,
                          # the timer's own name: a Kineto timer that yielded to the
                          # user's torch.profiler recorded CPU times
                          timer=str(getattr(self._timer, "timer_name", self._timer_name)))

    def _write(self) -> None:
        """Hand the buffer and the metadata to a writer thread (see the module doc)."""
        if self._write_state in ("running", "done") or os.getpid() != self._pid:
            return
        self._write_state = "due"
        self._handing_over = True
        try:
            if self.rank_dir is None or self._blocked:
                self._write_state = "done"
                return
            meta: dict[str, Any] | None
            try:
                meta = self._meta_now()
            except Exception as e:  # noqa: BLE001 - the trace is still written
                self.rec.fail("building meta.json", e)
                meta = None
            offset_us, base_ns = 0.0, 0
            if self._clock is not None:
                try:
                    offset_us, base_ns = self._clock.shift_us(), self._clock.trace_base_ns
                except Exception as e:  # noqa: BLE001 - local clock then
                    self.rec.fail("clock shift", e)
            records, counts = self.rec.snapshot(detach=True)
            gpu, self._gpu_stopped = self._gpu_stopped, None
            job = (records, counts, meta, offset_us, base_ns, gpu)
            self._pacer = Pacer()
            writer = threading.Thread(target=self._write_job, name="echo_trace-writer",
                                      daemon=False, args=job)
            self._writer, self._write_state = writer, "running"
            try:
                writer.start()
            except RuntimeError as e:  # no thread to be had: write here and now
                log.info("echo_trace: no writer thread (%s); writing inline", e)
                self._writer = None
                self._pacer.hurry()
                self._write_job(*job)
        except Exception as e:  # noqa: BLE001 - writing must not break the job either
            self._write_state = "done"
            self.rec.fail("writing the trace", e)
        finally:
            self._handing_over = False
            pending, self._pending_signal = self._pending_signal, None
            if pending is not None:  # SIGTERM arrived while handing over: now re-raise it
                self.join_writer()
                self._chain_signal(*pending)

    def _write_job(self, records: list[Any], counts: dict[Any, int],
                   meta: dict[str, Any] | None, offset_us: float, base_ns: int,
                   gpu: Any = None) -> None:
        """Writer thread: GPU attribution (``gpu``: what the Kineto timer's ``stop`` returned),
        events, DAG, files (trace.json first), one line on stderr."""
        try:
            from echo_trace import dag as dag_mod

            pause = self._pacer
            extra = self._resolve_gpu(records, gpu, offset_us, base_ns)

            recorded = {r[6] for r in records if r[0] == "X"}
            events = Recorder.to_dicts(records, counts, yield_every=YIELD_EVERY, pause=pause)
            del records
            self._check_depth(events)
            step = dag_mod.last_complete_step(events)
            if step is None and not self._steps and events:
                step = max((e["args"]["step"] for e in events if e.get("ph") == "X"),
                           default=None)

            def build_meta() -> dict[str, Any]:
                if meta is None:
                    raise RuntimeError(f"metadata unavailable ({self.rec.disabled_reason})")
                return dict(meta, dag_step=step, partial_steps=self._partial_steps(recorded))

            def build_dag() -> str:
                # no recorded step (e.g. a tiny buffer): a graph holding only the sink
                return dag_mod.dag_gml(dag_mod.step_dag(events, -1 if step is None else step))

            if self.config.trace_format == "byteprofile":
                extra.update(self._byteprofile_files(events, recorded, meta, offset_us))

            assert self.rank_dir is not None
            result = write_rank_dir(self.rank_dir, events=events, meta=build_meta,
                                    dag_gml=build_dag, gzip=self.config.gzip,
                                    offset_us=offset_us, base_time_ns=base_ns,
                                    overwrite=self.config.overwrite,
                                    yield_every=YIELD_EVERY, extra_files=extra,
                                    pause=pause, conflict_tag=job_token())
            self.written = dict(result)
            if result.conflict:
                log.warning("echo_trace: %s was filled by another run while this one was "
                            "recording; this run's trace is in %s instead", self.rank_dir,
                            result.rank_dir)
            print(f"echo_trace: rank {self.ranks.rank} wrote {len(events)} events to "
                  f"{result.rank_dir}", file=sys.stderr, flush=True)
        except Exception as e:  # noqa: BLE001 - writing must not break the job either
            self.rec.fail("writing the trace", e)
        finally:
            self._write_state = "done"

    def _byteprofile_files(self, events: list[dict[str, Any]], recorded: set[int],
                           meta: dict[str, Any] | None, offset_us: float) -> dict[str, bytes]:
        """TRACE_FORMAT=byteprofile: ByteProfile's files for the rank directory (writer
        thread). A failure is one warning: the echo files are written all the same."""
        try:
            from echo_trace.byteprofile import byteprofile_files, byteprofile_steps

            files = byteprofile_files(
                events, rank=self.ranks.rank, local_rank=self.ranks.local_rank,
                steps=byteprofile_steps(self._steps, recorded), offset_us=offset_us,
                params=(meta or {}).get("params"), yield_every=YIELD_EVERY, pause=self._pacer)
            return files.contents(yield_every=YIELD_EVERY, pause=self._pacer)
        except Exception as e:  # noqa: BLE001 - the echo trace is still worth writing
            log.warning("echo_trace: could not build the ByteProfile files (%s: %s); the "
                        "echo trace is written without them", type(e).__name__, e)
            return {}

    def _check_depth(self, events: list[dict[str, Any]]) -> None:
        """One warning when a set ``depth`` leaves most of the step in no module event."""
        if self.config.depth is None:
            return
        from echo_trace.hooks.coverage import COVERAGE_WARN_BELOW, module_coverage

        try:
            cov = module_coverage(events)
        except (KeyError, TypeError, ValueError) as e:  # a check, never the trace's problem
            log.debug("echo_trace: depth coverage check failed: %s", e)
            return
        if cov is not None and cov < COVERAGE_WARN_BELOW:
            log.warning("echo_trace: TRACE_DEPTH=%d: the traced modules cover only %.0f %% of "
                        "the step (median); the rest is in no FW/BW event. Use a larger depth "
                        "or leave TRACE_DEPTH unset (leaf modules)", self.config.depth,
                        100 * cov)

    def _resolve_gpu(self, records: list[Any], gpu: Any, offset_us: float,
                     base_ns: int) -> dict[str, Any]:
        """Attribute the window's GPU activity into ``records`` (off the training thread);
        returns the extra files: ``kineto_raw.json.gz`` when asked for. A failure keeps the
        window's CPU-clock events, with one warning: the trace is still written."""
        if gpu is None:
            return {}
        timer = self._timer
        try:
            timer.resolve(*gpu, records=records, pause=self._pacer)
        except Exception as e:  # noqa: BLE001 - the rest of the trace is still worth writing
            log.warning("echo_trace: GPU attribution failed (%s: %s); this window keeps its "
                        "CPU-clock STEP and Comm events only", type(e).__name__, e)
        doc = getattr(timer, "raw_doc", None)
        if not doc:
            return {}
        timer.raw_doc = None
        from echo_trace.gpu.recording import RAW_FILE

        def raw() -> bytes:
            import gzip

            from echo_trace.writer import dumps_compact

            full = dict(doc, offset_us=offset_us, base_time_ns=int(base_ns))
            return gzip.compress(dumps_compact(full), compresslevel=6, mtime=0)

        return {RAW_FILE: raw}

    # ---------------------------------------------------------------- exits
    def _atexit_stop(self) -> None:
        if os.getpid() == self._pid:
            self.stop()

    def _install_signal(self) -> None:
        if self._sig_installed or threading.current_thread() is not threading.main_thread():
            return
        try:
            self._prev_sigterm = signal.signal(signal.SIGTERM, self._on_sigterm)
            self._sig_installed = True
        except (ValueError, OSError) as e:
            log.info("echo_trace: SIGTERM handler not installed (%s)", e)

    def _uninstall_signal(self) -> None:
        if not self._sig_installed or threading.current_thread() is not threading.main_thread():
            return
        try:
            if signal.getsignal(signal.SIGTERM) == self._on_sigterm:
                signal.signal(signal.SIGTERM, self._prev_sigterm)
        except (ValueError, OSError, TypeError):
            pass  # interpreter shutting down
        self._sig_installed = False

    def _on_sigterm(self, signum: int, frame: FrameType | None) -> None:
        """Write what was captured (or wait for the write in progress), then do what
        SIGTERM did before us."""
        if os.getpid() == self._pid:
            try:
                if not self._finished:
                    # hooks may be running right now: make them inert rather than removing
                    self.rec.recording = False
                    self._write_state = "due"
                    if self._memory is not None:
                        self._memory.stop(timeout_s=0.2)
                    self._finished = True
                    self._window = False
                    self._write()
                elif self._handing_over:
                    # the interrupted code is handing the buffer over: it re-raises later
                    self._pending_signal = (signum, frame)
                    return
                self.join_writer()
            except Exception as e:  # noqa: BLE001
                self.rec.fail("SIGTERM handler", e)
        self._chain_signal(signum, frame)

    def _chain_signal(self, signum: int, frame: FrameType | None) -> None:
        prev = self._prev_sigterm
        if callable(prev):
            prev(signum, frame)
        elif prev == signal.SIG_IGN:
            return
        else:
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            os.kill(os.getpid(), signal.SIGTERM)


def capture(out_dir: str | os.PathLike[str] = "traces", start_step: int = 2,
            end_step: int | None = 5, *, gzip: bool = False, depth: int | None = None,
            memory_interval_ms: float = DEFAULT_INTERVAL_MS, overwrite: bool = False,
            max_events: int = DEFAULT_MAX_EVENTS, model: Any = None,
            enabled: bool = True, micro_batch: int | None = None,
            kineto_raw: bool = False, trace_format: str = "echo") -> Capture:
    """A :class:`Capture` to use as ``with capture(...) as cap:`` (or ``.start()/.stop()``).

    Records steps ``start_step .. end_step-1``; ``enabled=False`` gives a capture whose
    every call is a no-op; ``micro_batch`` overrides the detected micro-batch in meta.json;
    ``kineto_raw`` also writes the GPU profiler's raw events (``kineto_raw.json.gz``);
    ``trace_format="byteprofile"`` also writes ByteProfile's files in each rank directory
    (:mod:`echo_trace.byteprofile`). Bad arguments raise ``ValueError`` here, before
    training.
    """
    cfg = CaptureConfig(out_dir=os.fspath(out_dir), start_step=start_step, end_step=end_step,
                        gzip=gzip, depth=depth, memory_interval_ms=memory_interval_ms,
                        overwrite=overwrite, max_events=max_events, micro_batch=micro_batch,
                        kineto_raw=kineto_raw, trace_format=trace_format)
    return Capture(cfg, model=model, enabled=enabled)
