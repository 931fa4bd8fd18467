"""Path 3: functional collectives (``path: "functional"``): DTensor tensor parallel.

In torch 2.13 DTensor redistributes through the Python functions of
``torch.distributed._functional_collectives`` (``all_reduce``, ``all_gather_single``,
``reduce_scatter_single``, ``all_to_all_single``, ``broadcast``, looked up as ``funcol.X``
at call time, forward and backward) plus ``shard_dim_alltoall``
(``torch.distributed.tensor._collective_utils``, imported by name into
``placement_types``). FSDP2 does not use them: it calls c10d ``all_gather_single`` /
``reduce_scatter_single`` (path 1).

Those Python functions are replaced while installed. A functional collective returns an
``AsyncCollectiveTensor`` whose data is ready at ``wait_tensor`` (called by the wrapper on
first use); the slice runs from issue to the return of that wait, matched by the storage of
the result. A result waited only from C++ closes when it is freed. Chosen over a
``TorchDispatchMode`` on ``_c10d_functional.*`` ops because a mode intercepts every aten op
of the step (see the overhead note in the report), and in eager mode the Python functions
see every DTensor collective, backward included.
"""

from __future__ import annotations

import functools
import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from echo_trace.comm.c10d import make_getter, param_index
from echo_trace.comm.sizes import dtype_name, tensor_nbytes
from echo_trace.comm.tracer import CommPath, CommTracer, register_path

if TYPE_CHECKING:
    from echo_trace.recorder import CommToken

__all__ = ["FUNCOL_SPECS", "install"]

Describe = Callable[[Callable[[str, Any], Any], int], tuple[int, Any]]


def _sum(ts: Any) -> int:
    return sum(tensor_nbytes(t) for t in ts) if isinstance(ts, (list, tuple)) else 0


def _first(ts: Any) -> Any:
    return ts[0] if isinstance(ts, (list, tuple)) and ts else None


FUNCOL_SPECS: dict[str, tuple[str, str, Describe]] = {  # fn -> (collective, input arg, bytes)
    "broadcast": ("broadcast", "self", lambda g, n: (tensor_nbytes(g("self", None)), 0)),
    "all_reduce": ("all_reduce", "self", lambda g, n: (tensor_nbytes(g("self", None)), 0)),
    "all_gather_single": (
        "all_gather",
        "self",
        lambda g, n: (tensor_nbytes(g("self", None)) * n, 0),
    ),
    "reduce_scatter_single": (
        "reduce_scatter",
        "self",
        lambda g, n: (tensor_nbytes(g("self", None)), 0),
    ),
    "all_to_all_single": ("all_to_all", "self", lambda g, n: (tensor_nbytes(g("self", None)), 0)),
    "all_reduce_coalesced": ("all_reduce", "self", lambda g, n: (_sum(g("self", None)), 0)),
    "all_gather_single_coalesced": (
        "all_gather",
        "self",
        lambda g, n: (_sum(g("self", None)) * n, 0),
    ),
    "reduce_scatter_single_coalesced": (
        "reduce_scatter",
        "inputs",
        lambda g, n: (_sum(g("inputs", None)), 0),
    ),
}
_SHARD_DIM_ALLTOALL: tuple[str, str, Describe] = (
    "all_to_all",
    "input",
    lambda g, n: (tensor_nbytes(g("input", None)), 0),
)


def install(tracer: CommTracer) -> None:
    """Patch the functional collectives, ``wait_tensor`` and DTensor's shard_dim_alltoall."""
    import torch.distributed._functional_collectives as funcol

    act_type = funcol.AsyncCollectiveTensor
    for fn_name, spec in FUNCOL_SPECS.items():
        tracer.patch(
            funcol,
            fn_name,
            functools.partial(_wrapper, tracer, fn_name, spec, funcol=funcol, act_type=act_type),
        )
    tracer.patch(funcol, "wait_tensor", lambda orig: _wait_wrapper(tracer, orig, act_type))
    try:
        import torch.distributed.tensor._collective_utils as cu
        import torch.distributed.tensor.placement_types as pt
    except ImportError:  # older torch without DTensor in this place: nothing to patch
        return
    for owner in (cu, pt):
        tracer.patch(
            owner,
            "shard_dim_alltoall",
            functools.partial(
                _wrapper,
                tracer,
                "shard_dim_alltoall",
                _SHARD_DIM_ALLTOALL,
                funcol=funcol,
                act_type=act_type,
            ),
        )


def _group_ranks(tracer: CommTracer, group: Any, funcol: Any) -> tuple[int, ...]:
    """Global ranks of a functional-collective group (PG, name, mesh, (mesh, dim), ranks)."""
    if isinstance(group, list) and all(isinstance(r, int) for r in group):
        return tuple(sorted(group))
    try:
        cached = tracer.cached_ranks(group)
    except TypeError:  # unhashable group spec
        cached = None
    if cached is not None:
        return cached
    import torch.distributed as dist

    resolved = funcol._resolve_group(group)
    pg = (
        resolved
        if isinstance(resolved, dist.ProcessGroup)
        else dist.distributed_c10d._resolve_process_group(resolved)
    )
    ranks = tuple(sorted(int(r) for r in dist.get_process_group_ranks(pg)))
    try:
        tracer.cache_ranks(group, ranks)
    except TypeError:
        pass
    return ranks


def _wrapper(
    tracer: CommTracer,
    fn_name: str,
    spec: tuple[str, str, Describe],
    orig: Callable[..., Any],
    *,
    funcol: Any,
    act_type: Any,
) -> Callable[..., Any]:
    collective, input_arg, describe = spec
    index = param_index(orig)
    rec = tracer.rec
    is_sdaa = fn_name == "shard_dim_alltoall"

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if not tracer.recording():
            return orig(*args, **kwargs)
        token = None
        try:
            get = make_getter(index, args, kwargs)
            group = (get("mesh", None), get("mesh_dim", 0)) if is_sdaa else get("group", None)
            ranks = _group_ranks(tracer, group, funcol)
            nbytes, _ = describe(get, len(ranks))
            inp = get(input_arg, None)
            token = tracer.begin(
                collective,
                {
                    "bytes": nbytes,
                    "dtype": dtype_name(inp if not isinstance(inp, (list, tuple)) else _first(inp)),
                    "group_ranks": list(ranks),
                    "seq": tracer.next_seq(ranks),
                    "path": "functional",
                    "async": True,
                },
            )
        except Exception as e:  # noqa: BLE001 - never raise into the job
            rec.fail(f"comm funcol {fn_name}", e)
        tracer.tls.busy = True
        try:
            out = orig(*args, **kwargs)
        except BaseException:
            if token is not None:
                tracer.end(token)
            raise
        finally:
            tracer.tls.busy = False
        if token is not None:
            try:
                _track_result(tracer, token, out, act_type)
            except Exception as e:  # noqa: BLE001 - never raise into the job
                rec.fail(f"comm funcol {fn_name} result", e)
        return out

    wrapper.__wrapped__ = orig  # type: ignore[attr-defined]
    wrapper.__name__ = getattr(orig, "__name__", fn_name)
    wrapper.__doc__ = getattr(orig, "__doc__", None)
    return wrapper


def _storage_key(t: Any) -> int:
    return int(t.untyped_storage().data_ptr())


def _track_result(tracer: CommTracer, token: CommToken, out: Any, act_type: Any) -> None:
    """Close ``token`` at the wait of ``out`` (an AsyncCollectiveTensor), or now if ready."""
    outs = out if isinstance(out, (list, tuple)) else [out]
    elems = [o.elem for o in outs if isinstance(o, act_type) and not o.completed]
    if not elems:  # already waited inside (tracing, or a gather along dim != 0)
        token.args["async"] = False
        tracer.end(token)
        return
    for e in elems:
        key = _storage_key(e)

        def _freed(_r: Any, key: int = key, token: CommToken = token) -> None:
            entry = tracer.pending_tensors.get(key)
            if entry is not None and entry[0] is token:
                del tracer.pending_tensors[key]
            tracer.end(token)

        tracer.pending_tensors[key] = (token, weakref.ref(e, _freed))


def _wait_wrapper(
    tracer: CommTracer,
    orig: Callable[..., Any],
    act_type: Any,
) -> Callable[..., Any]:
    def wait_tensor(tensor: Any) -> Any:
        out = orig(tensor)
        if tracer.pending_tensors:
            with tracer.rec.guard("comm funcol wait_tensor"):
                t = tensor.elem if isinstance(tensor, act_type) else tensor
                entry = tracer.pending_tensors.pop(_storage_key(t), None)
                if entry is not None:
                    tracer.end(entry[0])
        return out

    wait_tensor.__wrapped__ = orig  # type: ignore[attr-defined]
    wait_tensor.__doc__ = getattr(orig, "__doc__", None)
    return wait_tensor


# CommTracer.install installs every registered path (echo_trace/comm/__init__.py imports this)
register_path(CommPath(name="functional", install=install))
