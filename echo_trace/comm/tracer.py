"""Communication capture: every collective and point-to-point op as a ``Comm.*`` slice.

:class:`CommTracer` covers the three paths a PyTorch job communicates through, one module
each in this package:

1. Python ``torch.distributed`` collectives and point-to-point ops (:mod:`.c10d`): the
   functions are replaced on ``torch.distributed`` and ``torch.distributed.distributed_c10d``
   while installed. FSDP2 (``fully_shard``) calls ``dist.all_gather_single`` /
   ``dist.reduce_scatter_single`` and is captured here (``path: "c10d"``).
2. DDP gradient buckets (:mod:`.ddp`): a comm hook doing what DDP's default does, recording
   bucket index, bytes and parameter names (``path: "ddp"``).
3. Functional collectives (:mod:`.functional`): DTensor tensor parallel calls the Python
   ``torch.distributed._functional_collectives`` functions; they are replaced while
   installed and complete at ``wait_tensor`` (``path: "functional"``).

The tracer imports none of them: each path module adds a :class:`CommPath` (its
``install(tracer)``, and for DDP ``attach(tracer, module)``) to this module's registry with
:func:`register_path` when it is imported, and ``echo_trace/comm/__init__.py`` imports the
three. Paths depend on the tracer, never the reverse: no import cycle. The paths patch
disjoint functions, so the order they install in does not matter.

Every wrapper calls the user's function exactly once with the same arguments and returns
its result unchanged; bookkeeping runs under ``Recorder.guard`` (on the per-call paths an
equivalent ``try``/``except`` calling ``Recorder.fail``, which skips the generator-based
context manager), so an internal error turns capture off and never reaches the job.
Nothing is recorded unless ``recorder.active``.

Sequence numbers: one counter per set of global ranks (the contract matches collectives
across ranks by ``(group_ranks, seq)``), one per ordered ``(src, dst)`` pair for send/recv.
Counters advance only while recording, so ranks that start and stop recording at the same
step boundary agree.
"""

from __future__ import annotations

import logging
import threading
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from echo_trace.comm.sizes import dtype_name, tensor_nbytes
from echo_trace.recorder import CommToken, Recorder

__all__ = [  # the two helpers come from echo_trace.comm.sizes
    "CommPath",
    "CommTracer",
    "dtype_name",
    "register_path",
    "registered_paths",
    "tensor_nbytes",
]

log = logging.getLogger("echo_trace")


@dataclass(frozen=True, kw_only=True)
class CommPath:
    """One way a job communicates, as the tracer sees it.

    ``install(tracer)`` patches the path's entry points through :meth:`CommTracer.patch`
    (undone by :meth:`CommTracer.remove`); ``attach(tracer, module)``, where the path needs
    one, instruments one already-built module (DDP's comm hook).
    """

    name: str
    install: Callable[[CommTracer], None]
    attach: Callable[[CommTracer, Any], None] | None = None


_PATHS: dict[str, CommPath] = {}  # name -> path, in registration order


def register_path(path: CommPath) -> None:
    """Add ``path`` to what :meth:`CommTracer.install` installs; a path registered again
    under the same name (a reloaded module) replaces the earlier one."""
    _PATHS[path.name] = path


def registered_paths() -> tuple[CommPath, ...]:
    """The registered paths, in registration order."""
    return tuple(_PATHS.values())


class CommTracer:
    """Capture of collectives and point-to-point ops into a :class:`Recorder`.

    ``install()`` patches the Python entry points (idempotent), ``remove()`` restores them
    and closes operations still in flight, ``attach_ddp(ddp)`` adds the bucket hook to one
    DDP module (idempotent), ``meta()`` returns the DDP buckets seen while recording.
    """

    def __init__(self, recorder: Recorder) -> None:
        self.rec = recorder
        self.installed = False
        self.tls = threading.local()  # .busy: inside a wrapped call (nested calls pass through)
        self._patches: list[tuple[Any, str, Any, Any]] = []  # (owner, attr, original, wrapper)
        self._originals: dict[str, Callable[..., Any]] = {}
        self._lock = threading.Lock()
        self._rank: int | None = None
        self._ranks_by_group: dict[Any, tuple[int, ...]] = {}
        self._seq: dict[tuple[int, ...], int] = {}
        self._p2p_seq: dict[tuple[int, int], int] = {}
        self._pending_works: dict[int, tuple[Any, list[CommToken]]] = {}  # id(Work) -> tokens
        # functional collectives awaiting wait_tensor: storage data_ptr -> (token, weakref)
        self.pending_tensors: dict[int, tuple[CommToken, Any]] = {}
        self.buckets: dict[tuple[int, int], dict[str, Any]] = {}  # (ddp no, index) -> meta
        self.ddp_count = 0
        self._warned: set[str] = set()

    # ------------------------------------------------------------------ lifecycle
    def install(self) -> None:
        """Patch the communication entry points; a second call does nothing."""
        if self.installed:
            return
        done = False
        with self.rec.guard("comm install"):
            import torch.distributed as dist

            if not dist.is_available():
                return
            self.installed = True
            for path in registered_paths():
                path.install(self)
            done = True
        if not done:  # install itself failed: leave nothing half-patched
            self.remove()

    def remove(self) -> None:
        """Restore every patched function and close operations still in flight; idempotent."""
        self.installed = False
        while self._patches:
            owner, attr, original, wrapper = self._patches.pop()
            with self.rec.guard("comm remove"):
                if getattr(owner, attr, None) is wrapper:
                    setattr(owner, attr, original)
                else:  # someone patched over us: leave theirs; ours is now a passthrough
                    self.warn_once(
                        f"repatched {attr}",
                        f"echo_trace: {attr} was replaced by someone else while "
                        "capture was installed; leaving it in place",
                    )
        with self._lock:
            tokens = [t for _, toks in self._pending_works.values() for t in toks]
            tokens += [tok for tok, _ in self.pending_tensors.values()]
            self._pending_works.clear()
            self.pending_tensors.clear()
        for tok in tokens:
            self.end(tok)

    def attach_ddp(self, ddp_module: Any) -> None:
        """Register the bucket-recording comm hook on ``ddp_module`` (once per module): the
        ``attach`` of every registered path that has one (the DDP path's)."""
        with self.rec.guard("comm attach_ddp"):
            for path in registered_paths():
                if path.attach is not None:
                    path.attach(self, ddp_module)

    def meta(self) -> dict[str, Any]:
        """``{"buckets": [{"index", "bytes", "params"}, ...]}`` as seen while recording."""
        with self._lock:
            buckets = [dict(self.buckets[k]) for k in sorted(self.buckets)]
        return {"buckets": buckets}

    # ------------------------------------------------------------------ patching helpers
    def patch(self, owner: Any, attr: str, make: Callable[[Any], Any]) -> Any:
        """Replace ``owner.attr`` by ``make(original)``; undone by :meth:`remove`.

        The same original on two owners (``torch.distributed.all_reduce`` is
        ``distributed_c10d.all_reduce``) gets the same wrapper.
        """
        original = getattr(owner, attr, None)
        if original is None:
            return None
        for o, a, orig, wrapper in self._patches:
            if orig is original and a == attr and o is not owner:
                setattr(owner, attr, wrapper)
                self._patches.append((owner, attr, original, wrapper))
                return wrapper
        wrapper = make(original)
        setattr(owner, attr, wrapper)
        self._patches.append((owner, attr, original, wrapper))
        self._originals.setdefault(attr, original)
        return wrapper

    def original(self, attr: str) -> Callable[..., Any] | None:
        """The function ``attr`` that was in place before the first install."""
        return self._originals.get(attr)

    def warn_once(self, key: str, message: str) -> None:
        if key not in self._warned:
            self._warned.add(key)
            log.warning(message)

    def recording(self) -> bool:
        """True when a wrapper should record: capture active, installed, not nested."""
        return self.rec.active and self.installed and not getattr(self.tls, "busy", False)

    # ------------------------------------------------------------------ ranks and seq
    @property
    def rank(self) -> int:
        if self._rank is None:
            import torch.distributed as dist

            self._rank = dist.get_rank()
        return self._rank

    def group_ranks(self, group: Any) -> tuple[int, ...]:
        """Global ranks of a ProcessGroup (None: the default group), ascending; cached."""
        ranks = self._ranks_by_group.get(group)
        if ranks is None:
            import torch.distributed as dist

            pg = group if group is not None else dist.distributed_c10d._get_default_group()
            ranks = tuple(sorted(int(r) for r in dist.get_process_group_ranks(pg)))
            self._ranks_by_group[group] = ranks
        return ranks

    def cache_ranks(self, key: Any, ranks: tuple[int, ...]) -> None:
        self._ranks_by_group[key] = ranks

    def cached_ranks(self, key: Any) -> tuple[int, ...] | None:
        return self._ranks_by_group.get(key)

    def next_seq(self, ranks: tuple[int, ...]) -> int:
        with self._lock:
            n = self._seq.get(ranks, 0)
            self._seq[ranks] = n + 1
        return n

    def next_p2p_seq(self, src: int, dst: int) -> int:
        with self._lock:
            n = self._p2p_seq.get((src, dst), 0)
            self._p2p_seq[(src, dst)] = n + 1
        return n

    # ------------------------------------------------------------------ begin / end
    def begin(self, collective: str, args: dict[str, Any], name: str | None = None) -> CommToken:
        a = {"collective": collective, **args}
        return self.rec.comm_begin(name or f"Comm.{collective}", a)

    def end(self, token: CommToken) -> None:
        try:
            self.rec.comm_end(token)
        except Exception as e:  # noqa: BLE001 - never raise into the job
            self.rec.fail("comm end", e)

    def end_when_done(self, tokens: list[CommToken], work: Any) -> None:
        """Close ``tokens`` when ``work`` (a c10d Work) completes, adding no synchronize.

        Uses the Work's future where the backend has one; otherwise (gloo send/recv) the
        first ``Work.wait()`` on it, or its garbage collection, closes them.
        """
        if not tokens:
            return
        if work is None:
            for tok in tokens:
                self.end(tok)
            return
        try:
            fut = work.get_future()
        except RuntimeError:  # "Work::getFuture not implemented" (gloo point-to-point)
            fut = None
        if fut is not None:

            def _done(_f: Any, tokens: list[CommToken] = tokens) -> None:
                for tok in tokens:
                    self.end(tok)

            fut.add_done_callback(_done)
            return
        key = id(work)

        def _collected(_r: Any, key: int = key) -> None:
            self._work_collected(key)

        ref = weakref.ref(work, _collected)
        with self._lock:
            self._pending_works[key] = (ref, tokens)

    def work_waited(self, work: Any) -> None:
        """Called after ``Work.wait()`` returned: close the tokens waiting on it."""
        with self._lock:
            entry = self._pending_works.get(id(work))
            if entry is None or entry[0]() is not work:
                return
            del self._pending_works[id(work)]
        for tok in entry[1]:
            self.end(tok)

    def note_bucket(self, key: tuple[int, int], meta: dict[str, Any]) -> None:
        """Remember a DDP bucket's layout for :meth:`meta` (the latest one wins)."""
        with self._lock:
            self.buckets[key] = meta

    def has_pending_works(self) -> bool:
        return bool(self._pending_works)

    def _work_collected(self, key: int) -> None:
        with self._lock:
            entry = self._pending_works.pop(key, None)
        if entry is not None:
            for tok in entry[1]:
                self.end(tok)
