"""Path 2: DDP gradient buckets (``path: "ddp"``), through ``register_comm_hook``.

DDP's reducer all-reduces buckets in C++, never through Python ``dist.all_reduce``; a comm
hook is the one place they are visible. The hook registered here does what DDP does
without one (divide the bucket by the group size, all-reduce it, return the future; the
same as ``torch.distributed.algorithms.ddp_comm_hooks.default_hooks.allreduce_hook``) and,
while recording, adds a ``Comm.bucket<i>`` slice from issue to the all-reduce's completion
with the bucket index, bytes and parameter names.

torch allows one comm hook per DDP module and none can be removed (torch 2.13
``Reducer::register_comm_hook`` raises "can only be called once"; registering after a
backward is allowed). So:

* the hook stays after capture and is a passthrough when not recording;
* a module that already has a hook (the user's, or DDP's own mixed-precision hook) is
  skipped with one warning;
* a user hook registered *after* ours is not refused: ``ddp.register_comm_hook`` is
  replaced on the instance by a function that makes our hook delegate to the user's
  (its slice then spans the user's future);
* DDP modules built while installed get the hook (``DistributedDataParallel.__init__`` is
  patched while installed).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from echo_trace.comm.sizes import dtype_name, tensor_nbytes
from echo_trace.comm.tracer import CommPath, CommTracer, register_path

__all__ = ["HOOK_ATTR", "DDPHookState", "attach", "install"]

HOOK_ATTR = "_echo_trace_comm_hook"  # set on each DDP module we registered a hook on


class DDPHookState:
    """What the hook on one DDP module needs; re-pointed at a new tracer on re-attach."""

    def __init__(self, tracer: CommTracer, ddp: Any, number: int) -> None:
        self.tracer = tracer
        self.number = number  # which DDP module of this process (bucket meta key)
        self.group = ddp.process_group
        self.names = {id(p): n for n, p in ddp.module.named_parameters()}
        self.user: tuple[Any, Callable[..., Any]] | None = None  # (state, hook) registered after

    def describe(self, bucket: Any) -> tuple[str, dict[str, Any]]:
        tracer = self.tracer
        index = int(bucket.index())
        buf = bucket.buffer()
        params = [self.names.get(id(p), "?") for p in bucket.parameters()]
        ranks = tracer.group_ranks(self.group)
        nbytes = tensor_nbytes(buf)
        tracer.note_bucket(
            (self.number, index), {"index": index, "bytes": nbytes, "params": params}
        )
        return f"Comm.bucket{index}", {
            "bytes": nbytes,
            "dtype": dtype_name(buf),
            "group_ranks": list(ranks),
            "seq": tracer.next_seq(ranks),
            "path": "ddp",
            "bucket": index,
            "params": params,
            "async": True,
        }


def _make_hook(hs: DDPHookState) -> Callable[..., Any]:
    import torch.distributed as dist

    # No annotations on bucket / return: DDP's _check_comm_hook compares them with
    # dist.GradBucket / Future[Tensor] unevaluated, and this module defers annotations.
    def echo_trace_allreduce_hook(state, bucket):  # type: ignore[no-untyped-def]
        tracer = hs.tracer
        rec = tracer.rec
        token = None
        if tracer.recording():
            with rec.guard("comm ddp hook"):
                name, args = hs.describe(bucket)
                token = tracer.begin("all_reduce", args, name=name)
        tracer.tls.busy = True  # the all-reduce below is this bucket's, not a c10d event
        try:
            if hs.user is not None:
                user_state, user_hook = hs.user
                fut = user_hook(user_state, bucket)
                work = None
            else:
                buf = bucket.buffer()
                buf.div_(hs.group.size())
                work = dist.all_reduce(buf, group=hs.group, async_op=True)
                if token is not None:
                    # Our end callback goes first: DDP's `.then` continuation below runs
                    # the reducer's Python-free work, but ours must not queue behind it.
                    with rec.guard("comm ddp hook end"):
                        tracer.end_when_done([token], work)
                    token = None
                fut = work.get_future().then(lambda f: f.value()[0])
        except BaseException:
            if token is not None:
                tracer.end(token)
            raise
        finally:
            tracer.tls.busy = False
        if token is not None:
            with rec.guard("comm ddp hook end"):
                if work is not None:
                    tracer.end_when_done([token], work)
                else:
                    fut.add_done_callback(lambda _f, t=token: tracer.end(t))
        return fut

    return echo_trace_allreduce_hook


def attach(tracer: CommTracer, ddp: Any) -> None:
    """Register the bucket hook on ``ddp`` once; skip (one warning) where torch cannot."""
    hs = getattr(ddp, HOOK_ATTR, None)
    if isinstance(hs, DDPHookState):
        hs.tracer = tracer  # attached before (maybe by an earlier capture): reuse
        return
    if not hasattr(ddp, "reducer") or not hasattr(ddp, "register_comm_hook"):
        return
    if getattr(ddp, "_use_python_reducer", False):
        tracer.warn_once(
            "ddp python reducer",
            "echo_trace: DDP with the Python reducer "
            "(compiled autograd) is not traced; its buckets are not recorded",
        )
        return
    if getattr(ddp, "_comm_hooks", None):
        tracer.warn_once(
            "ddp user hook",
            "echo_trace: this DDP module already has a comm "
            "hook; its gradient buckets are not recorded",
        )
        return
    tracer.ddp_count += 1
    hs = DDPHookState(tracer, ddp, tracer.ddp_count - 1)
    hook = _make_hook(hs)
    hooks = getattr(ddp, "_comm_hooks", None)
    n_hooks = len(hooks) if isinstance(hooks, list) else 0
    try:
        ddp.register_comm_hook(None, hook)
    except RuntimeError as e:  # a built-in (C++) hook is already registered
        if isinstance(hooks, list):
            del hooks[n_hooks:]  # register_comm_hook appended ours before the reducer refused
        tracer.warn_once(
            "ddp builtin hook",
            f"echo_trace: cannot add a comm hook to this DDP "
            f"module ({e}); its gradient buckets are not recorded",
        )
        return
    object.__setattr__(ddp, HOOK_ATTR, hs)
    object.__setattr__(ddp, "register_comm_hook", _make_register(ddp, hs))


def _make_register(ddp: Any, hs: DDPHookState) -> Callable[[object, Callable[..., Any]], None]:
    def register_comm_hook(state: object, hook: Callable[..., Any]) -> None:
        """DDP's ``register_comm_hook``, delegated to from echo_trace's recording hook."""
        if hs.user is not None:
            raise RuntimeError(
                "register_comm_hook or register_builtin_comm_hook can only be called once."
            )
        ddp._check_comm_hook(hook)
        hs.user = (state, hook)
        if isinstance(getattr(ddp, "_comm_hooks", None), list):
            ddp._comm_hooks.append((hook, state))

    return register_comm_hook


def install(tracer: CommTracer) -> None:
    """Attach the hook to DDP modules constructed while installed."""
    from torch.nn.parallel import DistributedDataParallel

    def make(orig_init: Callable[..., Any]) -> Callable[..., Any]:
        def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
            orig_init(self, *args, **kwargs)
            if tracer.installed:
                tracer.attach_ddp(self)

        __init__.__wrapped__ = orig_init  # type: ignore[attr-defined]
        return __init__

    tracer.patch(DistributedDataParallel, "__init__", make)


# CommTracer.install installs every registered path (echo_trace/comm/__init__.py imports this)
register_path(CommPath(name="ddp", install=install, attach=attach))
