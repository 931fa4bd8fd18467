"""Path 1: Python ``torch.distributed`` collectives and point-to-point ops (``path: "c10d"``).

Each function is replaced on ``torch.distributed`` and ``torch.distributed.distributed_c10d``
by a wrapper that, while recording, opens a ``Comm.<collective>`` slice at the call and
closes it at return (sync) or when the returned Work completes (``async_op=True``: its
future's done-callback, or for gloo send/recv, which have no future, the first
``Work.wait()``). Nested calls (``all_gather_into_tensor`` → ``all_gather_single``,
``send`` → ``isend``) record once, at the outermost call.

Bytes follow the nccl-tests convention (whole buffer): all_reduce/broadcast/reduce the
tensor; all_gather the gathered output; reduce_scatter the unscattered input; all_to_all
the input; gather/scatter the per-rank tensor × group size; send/recv the tensor.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from echo_trace.comm.sizes import dtype_name, tensor_nbytes
from echo_trace.comm.tracer import CommPath, CommTracer, register_path

if TYPE_CHECKING:
    from echo_trace.recorder import CommToken

__all__ = ["COLLECTIVE_SPECS", "P2P_KINDS", "Getter", "install", "param_index"]

Getter = Callable[[str, Any], Any]
# describe(get, group_size) -> (bytes, tensor whose dtype is reported)
Describe = Callable[[Getter, int], tuple[int, Any]]


def _sum_bytes(ts: Any) -> int:
    return sum(tensor_nbytes(t) for t in ts) if isinstance(ts, (list, tuple)) else 0


def _first(ts: Any) -> Any:
    return ts[0] if isinstance(ts, (list, tuple)) and ts else None


def _one(name: str) -> Describe:
    return lambda g, n: (tensor_nbytes(g(name, None)), g(name, None))


def _gathered(out: str, inp: str) -> Describe:
    """Bytes of the gathered ``out`` tensor (whole buffer), the local ``inp`` tensor."""
    return lambda g, n: (tensor_nbytes(g(out, None)), g(inp, None))


def _times_group(name: str) -> Describe:
    return lambda g, n: (tensor_nbytes(g(name, None)) * n, g(name, None))


COLLECTIVE_SPECS: dict[str, tuple[str, Describe]] = {
    "all_reduce": ("all_reduce", _one("tensor")),
    "all_gather": (
        "all_gather",
        lambda g, n: (_sum_bytes(g("tensor_list", None)), g("tensor", None)),
    ),
    "all_gather_single": ("all_gather", _gathered("output_tensor", "input_tensor")),
    "all_gather_into_tensor": ("all_gather", _gathered("output_tensor", "input_tensor")),
    "reduce_scatter": (
        "reduce_scatter",
        lambda g, n: (_sum_bytes(g("input_list", None)), g("output", None)),
    ),
    "reduce_scatter_single": ("reduce_scatter", _one("input")),
    "reduce_scatter_tensor": ("reduce_scatter", _one("input")),
    "broadcast": ("broadcast", _one("tensor")),
    "reduce": ("reduce", _one("tensor")),
    "all_to_all": (
        "all_to_all",
        lambda g, n: (
            _sum_bytes(g("input_tensor_list", None)),
            _first(g("input_tensor_list", None)),
        ),
    ),
    "all_to_all_single": ("all_to_all", _one("input")),
    "gather": ("gather", _times_group("tensor")),
    "scatter": ("scatter", _times_group("tensor")),
    "barrier": ("barrier", lambda g, n: (0, None)),
}
P2P_KINDS: dict[str, tuple[str, bool]] = {  # function -> (collective, async)
    "send": ("send", False),
    "recv": ("recv", False),
    "isend": ("send", True),
    "irecv": ("recv", True),
}


def param_index(fn: Callable[..., Any]) -> dict[str, int]:
    """Parameter name -> position, from the signature (decorators keep ``__wrapped__``)."""
    try:
        return {p: i for i, p in enumerate(inspect.signature(fn).parameters)}
    except (TypeError, ValueError):
        return {}


def make_getter(index: dict[str, int], args: tuple[Any, ...], kwargs: dict[str, Any]) -> Getter:
    def get(name: str, default: Any) -> Any:
        if name in kwargs:
            return kwargs[name]
        i = index.get(name)
        if i is not None and i < len(args):
            return args[i]
        return default

    return get


def install(tracer: CommTracer) -> None:
    """Patch every collective, point-to-point op and ``Work.wait`` (see module doc)."""
    import torch.distributed as dist
    import torch.distributed.distributed_c10d as c10d

    for fn_name, spec in COLLECTIVE_SPECS.items():
        make = functools.partial(_collective_wrapper, tracer, fn_name, spec)
        for owner in (c10d, dist):
            tracer.patch(owner, fn_name, make)
    for fn_name, kind in P2P_KINDS.items():
        make = functools.partial(_p2p_wrapper, tracer, fn_name, kind)
        for owner in (c10d, dist):
            tracer.patch(owner, fn_name, make)
    for owner in (c10d, dist):
        tracer.patch(owner, "batch_isend_irecv", lambda orig: _batch_wrapper(tracer, orig, c10d))
    tracer.patch(c10d.Work, "wait", lambda orig: _wait_wrapper(tracer, orig))


def _call(
    tracer: CommTracer,
    fn_name: str,
    orig: Callable[..., Any],
    tokens: list[CommToken],
    is_async: bool,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
) -> Any:
    """Run the user's call once with nested wrappers silenced; close ``tokens`` at completion."""
    tracer.tls.busy = True
    try:
        out = orig(*args, **kwargs)
    except BaseException:
        for tok in tokens:
            tracer.end(tok)
        raise
    finally:
        tracer.tls.busy = False
    if tokens:
        try:
            if is_async:
                tracer.end_when_done(tokens, out)
            else:
                for tok in tokens:
                    tracer.end(tok)
        except Exception as e:  # noqa: BLE001 - never raise into the job
            tracer.rec.fail(f"comm {fn_name} end", e)
    return out


def _collective_wrapper(
    tracer: CommTracer, fn_name: str, spec: tuple[str, Describe], orig: Callable[..., Any]
) -> Callable[..., Any]:
    collective, describe = spec
    index = param_index(orig)
    rec = tracer.rec

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if not tracer.recording():
            return orig(*args, **kwargs)
        tokens: list[CommToken] = []
        is_async = False
        try:
            get = make_getter(index, args, kwargs)
            is_async = bool(get("async_op", False))
            ranks = tracer.group_ranks(get("group", None))
            if tracer.rank in ranks:  # non-members return at once and are not recorded
                nbytes, dtensor = describe(get, len(ranks))
                tokens.append(
                    tracer.begin(
                        collective,
                        {
                            "bytes": nbytes,
                            "dtype": dtype_name(dtensor),
                            "group_ranks": list(ranks),
                            "seq": tracer.next_seq(ranks),
                            "path": "c10d",
                            "async": is_async,
                        },
                    )
                )
        except Exception as e:  # noqa: BLE001 - never raise into the job
            rec.fail(f"comm {fn_name}", e)
        return _call(tracer, fn_name, orig, tokens, is_async, args, kwargs)

    wrapper.__wrapped__ = orig  # type: ignore[attr-defined]
    wrapper.__name__ = getattr(orig, "__name__", fn_name)
    wrapper.__doc__ = getattr(orig, "__doc__", None)
    return wrapper


def _global_peer(group: Any, peer: Any, group_peer: Any) -> int | None:
    if peer is not None:
        return int(peer)
    if group_peer is None:
        return None
    import torch.distributed as dist

    pg = group if group is not None else dist.distributed_c10d._get_default_group()
    return int(dist.get_global_rank(pg, int(group_peer)))


def p2p_args(
    tracer: CommTracer, collective: str, tensor: Any, group: Any, peer: int | None, is_async: bool
) -> dict[str, Any] | None:
    """Args of one send/recv, advancing the (src, dst) counter; None if not a group member."""
    ranks = tracer.group_ranks(group)
    me = tracer.rank
    if me not in ranks:
        return None
    seq = None
    if peer is not None:
        seq = (
            tracer.next_p2p_seq(me, peer) if collective == "send" else tracer.next_p2p_seq(peer, me)
        )
    return {
        "bytes": tensor_nbytes(tensor),
        "dtype": dtype_name(tensor),
        "group_ranks": list(ranks),
        "seq": seq,
        "peer": peer,
        "path": "c10d",
        "async": is_async,
    }


def _p2p_wrapper(
    tracer: CommTracer, fn_name: str, kind: tuple[str, bool], orig: Callable[..., Any]
) -> Callable[..., Any]:
    collective, is_async = kind
    index = param_index(orig)
    rec = tracer.rec
    peer_arg, group_peer_arg = (
        ("dst", "group_dst") if collective == "send" else ("src", "group_src")
    )
    fix_isend = fn_name == "isend"

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if fix_isend and "group_src" in kwargs and "group_dst" not in kwargs:
            # batch_isend_irecv tells isend from irecv by identity (`op.op is isend`); a
            # P2POp built with this wrapper but run after remove() (or inside the batch
            # wrapper below) is taken for a receive and handed group_src: it is the peer.
            kwargs["group_dst"] = kwargs.pop("group_src")
        if not tracer.recording():
            return orig(*args, **kwargs)
        tokens: list[CommToken] = []
        with rec.guard(f"comm {fn_name}"):
            get = make_getter(index, args, kwargs)
            group = get("group", None)
            peer = _global_peer(group, get(peer_arg, None), get(group_peer_arg, None))
            a = p2p_args(tracer, collective, get("tensor", None), group, peer, is_async)
            if a is not None:
                tokens.append(tracer.begin(collective, a))
        out = _call(tracer, fn_name, orig, tokens, is_async, args, kwargs)
        if tokens and collective == "recv" and not is_async and tokens[0].args["peer"] is None:
            with rec.guard(f"comm {fn_name} peer"):  # recv from any source returns the sender
                if isinstance(out, int) and out >= 0:
                    tokens[0].args["peer"] = out
                    tokens[0].args["seq"] = tracer.next_p2p_seq(out, tracer.rank)
        return out

    wrapper.__wrapped__ = orig  # type: ignore[attr-defined]
    wrapper.__name__ = getattr(orig, "__name__", fn_name)
    wrapper.__doc__ = getattr(orig, "__doc__", None)
    return wrapper


def _batch_wrapper(
    tracer: CommTracer,
    orig: Callable[..., Any],
    c10d: Any,
) -> Callable[..., Any]:
    rec = tracer.rec

    def batch_isend_irecv(p2p_op_list: Any) -> Any:
        orig_isend = tracer.original("isend")
        sends = {orig_isend, getattr(c10d, "isend", None)}
        # P2POps built before install hold the original isend; the original batch function
        # recognises a send by `op.op is isend` (the module global), so run it with the
        # original in place; P2POps built with our wrapper are then fixed by its group_src
        # translation (see _p2p_wrapper).
        swap = (
            orig_isend is not None
            and c10d.isend is not orig_isend
            and isinstance(p2p_op_list, list)
            and any(getattr(op, "op", None) is orig_isend for op in p2p_op_list)
        )
        tokens: list[CommToken] = []
        if tracer.recording():
            with rec.guard("comm batch_isend_irecv"):
                for op in p2p_op_list:
                    collective = "send" if op.op in sends else "recv"
                    a = p2p_args(tracer, collective, op.tensor, op.group, op.peer, True)
                    if a is not None:
                        tokens.append(tracer.begin(collective, a))
        saved = c10d.isend
        if swap:
            c10d.isend = orig_isend
        tracer.tls.busy = True
        try:
            works = orig(p2p_op_list)
        except BaseException:
            for tok in tokens:
                tracer.end(tok)
            raise
        finally:
            tracer.tls.busy = False
            if swap and c10d.isend is orig_isend:
                c10d.isend = saved
        if tokens:
            with rec.guard("comm batch_isend_irecv end"):
                if isinstance(works, list) and len(works) == len(tokens):
                    for tok, work in zip(tokens, works, strict=True):
                        tracer.end_when_done([tok], work)
                else:  # coalesced (NCCL): one Work for the whole batch
                    tracer.end_when_done(tokens, works[-1] if works else None)
        return works

    batch_isend_irecv.__wrapped__ = orig  # type: ignore[attr-defined]
    batch_isend_irecv.__doc__ = getattr(orig, "__doc__", None)
    return batch_isend_irecv


def _wait_wrapper(tracer: CommTracer, orig: Callable[..., Any]) -> Callable[..., Any]:
    def wait(self: Any, *args: Any, **kwargs: Any) -> Any:
        out = orig(self, *args, **kwargs)
        if tracer.has_pending_works():
            with tracer.rec.guard("comm Work.wait"):
                tracer.work_waited(self)
        return out

    wait.__doc__ = getattr(orig, "__doc__", None)
    return wait


# CommTracer.install installs every registered path (echo_trace/comm/__init__.py imports this)
register_path(CommPath(name="c10d", install=install))
