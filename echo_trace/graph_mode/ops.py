"""A model's forward operator graph with shapes, FLOPs and bytes per operator (no run needed).

:func:`operator_graph` exports ``model(batch)`` (and its loss) with ``torch.export``
(non-strict), falling back to ``torch.fx.symbolic_trace`` + shape propagation when export
fails. Tensors are fake where export allows, so nothing is computed on real data.

Per operator (:class:`OpNode`):

* ``module``: the innermost module that ran it (``nn_module_stack``), relative to the model;
  ``""`` for ops of the loss outside the model;
* ``flops``: matrix products only, as echo_trace counts them (docs/trace-format.md: Linear
  ``2·in·out·rows``): ``torch.utils.flop_counter``'s registry (mm, addmm, bmm, conv, ...)
  plus ``linear`` = 2·rows·in·out and ``scaled_dot_product_attention`` = 4·b·h·sq·sk·d
  (Q·Kᵀ and P·V, 2 FLOPs per multiply-add; Narayanan et al. 2021 §5.1's 4bs²h);
  element-wise operators count 0 and are timed by their bytes;
* ``in_bytes`` / ``out_bytes`` / ``param_bytes``: tensor bytes read (activations, and
  parameters/buffers separately) and written. View-like operators move no bytes
  (``trivial``) and are folded into their neighbours.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

__all__ = ["OpGraph", "OpNode", "operator_graph"]

# Operators that only re-describe memory (no data moved, nothing computed).
_VIEW_OPS = frozenset({
    "view", "_unsafe_view", "reshape", "unsqueeze", "squeeze", "transpose", "t", "permute",
    "expand", "slice", "select", "alias", "split", "split_with_sizes", "chunk", "unbind",
    "detach", "_assert_tensor_metadata", "lift_fresh_copy", "sym_size", "sym_numel",
    "_assert_scalar", "getitem", "as_strided", "unflatten", "flatten", "view_as",
    "expand_as",
})


@dataclass
class OpNode:
    """One forward operator (see the module docstring for the fields)."""

    index: int
    name: str
    op: str
    module: str
    module_type: str
    out_shapes: list[list[int]]
    out_dtypes: list[str]
    flops: float
    in_bytes: int
    out_bytes: int
    param_bytes: int
    deps: list[int] = field(default_factory=list)  # indices of producing operators
    trivial: bool = False
    # activation inputs: (source node name, producing operator index or -1, bytes)
    inputs: list[tuple[str, int, int]] = field(default_factory=list)


@dataclass
class OpGraph:
    """The operators in execution order, the parameters, and how the graph was obtained."""

    ops: list[OpNode]
    params: list[dict[str, Any]]
    method: str
    root_type: str

    @property
    def real_ops(self) -> list[OpNode]:
        return [o for o in self.ops if not o.trivial]

    @property
    def flops(self) -> float:
        return sum(o.flops for o in self.ops)


def _nbytes(val: Any) -> int:
    import torch

    if isinstance(val, torch.Tensor):
        return int(val.numel()) * int(val.element_size())
    if isinstance(val, (tuple, list)):
        return sum(_nbytes(v) for v in val)
    return 0


def _shapes(val: Any) -> tuple[list[list[int]], list[str]]:
    import torch

    if isinstance(val, torch.Tensor):
        return [[int(d) for d in val.shape]], [str(val.dtype).removeprefix("torch.")]
    if isinstance(val, (tuple, list)):
        shapes: list[list[int]] = []
        dtypes: list[str] = []
        for v in val:
            s, d = _shapes(v)
            shapes += s
            dtypes += d
        return shapes, dtypes
    return [], []


def _op_name(target: Any) -> str:
    packet = getattr(target, "overloadpacket", None)
    if packet is not None:
        return str(getattr(packet, "__name__", packet))
    return str(getattr(target, "__name__", target))


def _extra_flops(op: str, args: tuple[Any, ...], out: Any) -> float | None:
    """FLOPs of matrix operators the flop_counter registry leaves out (module docstring)."""
    import torch

    if op == "linear" and len(args) >= 2 and isinstance(args[1], torch.Tensor):
        x, w = args[0], args[1]
        rows = x.numel() // max(1, x.shape[-1])
        return 2.0 * rows * w.shape[0] * w.shape[1]
    if op == "scaled_dot_product_attention" and len(args) >= 3:
        q, k = args[0], args[1]
        b_h = math.prod(int(d) for d in q.shape[:-2])
        return 4.0 * b_h * q.shape[-2] * k.shape[-2] * q.shape[-1]
    return None


def _flops(target: Any, op: str, args: tuple[Any, ...], kwargs: dict[str, Any],
           out: Any) -> float:
    from torch.utils.flop_counter import flop_registry

    extra = _extra_flops(op, args, out)
    if extra is not None:
        return float(extra)
    packet = getattr(target, "overloadpacket", None)
    fn: Callable[..., Any] | None = flop_registry.get(packet) if packet is not None else None
    if fn is None:
        return 0.0
    try:
        return float(fn(*args, **kwargs, out_val=out))
    except (TypeError, ValueError, RuntimeError, IndexError, AttributeError):
        return 0.0


class _LossModule:
    """``model(batch)`` then the loss, as one callable module to export."""

    @staticmethod
    def make(model: Any, loss_fn: Callable[[Any], Any] | None) -> Any:
        import torch

        from echo_trace.profile_models import loss_of

        class LossOf(torch.nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.model = model

            def forward(self, *args: Any, **kwargs: Any) -> Any:
                return loss_of(self.model(*args, **kwargs), loss_fn)

        return LossOf()


def _export(wrapper: Any, args: tuple[Any, ...], kwargs: dict[str, Any],
            ) -> tuple[Any, str, set[str]]:
    """(fx graph module with ``meta['val']`` on nodes, method name, names of the placeholders
    that hold parameters or buffers)."""
    import torch

    try:
        ep = torch.export.export(wrapper, args=args, kwargs=kwargs, strict=False)
        sig = ep.graph_signature
        state = set(sig.inputs_to_parameters) | set(sig.inputs_to_buffers)
        state |= set(getattr(sig, "inputs_to_lifted_tensor_constants", {}) or {})
        return ep.graph_module, "torch.export", state
    except Exception as export_error:  # noqa: BLE001 - any export failure: try FX
        try:
            from torch.fx.passes.shape_prop import ShapeProp

            gm = torch.fx.symbolic_trace(wrapper)
            flat = list(args) + list(kwargs.values())
            ShapeProp(gm).propagate(*flat)
            for n in gm.graph.nodes:  # ShapeProp stores metadata, not values
                n.meta.setdefault("val", _meta_value(n))
            return gm, "torch.fx", set()
        except Exception as fx_error:  # noqa: BLE001
            raise RuntimeError(f"torch.export failed ({export_error}); FX symbolic trace "
                               f"failed too ({fx_error})") from None


def _meta_value(node: Any) -> Any:
    import torch

    tm = node.meta.get("tensor_meta")
    if tm is None:
        return None
    if hasattr(tm, "shape"):
        return torch.empty(tm.shape, dtype=tm.dtype, device="meta")
    return None


def operator_graph(model: Any, batch: Any, loss_fn: Callable[[Any], Any] | None = None,
                   ) -> OpGraph:
    """Export ``loss(model(batch))`` and describe every operator (module docstring)."""
    import torch

    config = getattr(model, "config", None)
    if config is not None and getattr(config, "use_cache", None):
        config.use_cache = False  # a KV cache in the output is not a tensor tree
    wrapper = _LossModule.make(model, loss_fn)
    if isinstance(batch, dict):
        args: tuple[Any, ...] = ()
        kwargs: dict[str, Any] = dict(batch)
    elif isinstance(batch, (tuple, list)):
        args, kwargs = tuple(batch), {}
    else:
        args, kwargs = (batch,), {}
    gm, method, state = _export(wrapper, args, kwargs)
    placeholders: dict[str, str] = {}  # node name -> "param" | "input"
    ops: list[OpNode] = []
    index_of: dict[str, int] = {}
    for n in gm.graph.nodes:
        if n.op == "placeholder":
            placeholders[n.name] = "param" if n.name in state else "input"
            continue
        if n.op == "get_attr":
            placeholders[n.name] = "param"
            continue
        if n.op not in ("call_function", "call_method", "call_module"):
            continue
        op = _op_name(n.target)
        val = n.meta.get("val")
        stack = n.meta.get("nn_module_stack") or {}
        path, mtype = ("", "")
        if stack:
            path, mtype = list(stack.values())[-1]
            mtype = str(mtype).rsplit(".", 1)[-1].rstrip("'>")
        path = str(path)
        if path == "model":
            path, mtype = "", type(model).__name__
        elif path.startswith("model."):
            path = path[len("model."):]
        elif path in ("", "L['self']"):
            path, mtype = "", "loss"
        in_bytes = param_bytes = 0
        deps: list[int] = []
        inputs: list[tuple[str, int, int]] = []
        for a in n.all_input_nodes:
            v = a.meta.get("val")
            kind = placeholders.get(a.name)
            if kind == "param":
                param_bytes += _nbytes(v)
            else:
                in_bytes += _nbytes(v)
                inputs.append((a.name, index_of.get(a.name, -1), _nbytes(v)))
            if a.name in index_of:
                deps.append(index_of[a.name])
        trivial = op in _VIEW_OPS or n.target is operator.getitem
        args_v = torch.fx.node.map_arg(n.args, lambda x: x.meta.get("val"))
        kwargs_v = torch.fx.node.map_arg(n.kwargs, lambda x: x.meta.get("val"))
        flops = 0.0 if trivial else _flops(n.target, op, tuple(args_v), dict(kwargs_v), val)
        shapes, dtypes = _shapes(val)
        index_of[n.name] = len(ops)
        ops.append(OpNode(index=len(ops), name=n.name, op=op, module=path,
                          module_type=mtype or "op", out_shapes=shapes, out_dtypes=dtypes,
                          flops=flops, in_bytes=0 if trivial else in_bytes,
                          out_bytes=0 if trivial else _nbytes(val),
                          param_bytes=0 if trivial else param_bytes, deps=deps,
                          trivial=trivial, inputs=inputs))
    params = [{"name": name, "shape": [int(d) for d in p.shape],
               "dtype": str(p.dtype).removeprefix("torch."),
               "bytes": int(p.numel()) * int(p.element_size())}
              for name, p in model.named_parameters()]
    return OpGraph(ops=ops, params=params, method=method, root_type=type(model).__name__)
