"""A model's forward operator graph with shapes, FLOPs and bytes per operator (no run needed).

:func:`operator_graph` exports ``model(batch)`` (and its loss) with ``torch.export``
(non-strict), falling back to ``torch.fx.symbolic_trace`` + shape propagation when export
fails (positional inputs only; leaf modules stay whole and the loss is left out). Export
runs on fake tensors, so nothing is computed on real data.

Per operator (:class:`OpNode`):

* ``module``: the innermost module that ran it (``nn_module_stack``), relative to the model;
  ``""`` for ops of the loss outside the model;
* ``flops``: matrix products only, as echo_trace counts them (docs/trace-format.md: Linear
  ``2·in·out·rows``): ``torch.utils.flop_counter``'s registry (mm, addmm, bmm, conv, ...)
  plus ``linear`` = 2·rows·in·out, ``conv1d/2d/3d`` = 2·outputs·(in/groups)·kernel and
  ``scaled_dot_product_attention`` = 4·b·h·sq·sk·d
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
    if op in ("conv1d", "conv2d", "conv3d") and len(args) >= 2 \
            and isinstance(args[1], torch.Tensor) and isinstance(out, torch.Tensor):
        # weight [out, in/groups, *kernel]: one multiply-add per weight per output element
        return 2.0 * out.numel() * math.prod(int(d) for d in args[1].shape[1:])
    if op == "scaled_dot_product_attention" and len(args) >= 3:
        q, k = args[0], args[1]
        b_h = math.prod(int(d) for d in q.shape[:-2])
        return 4.0 * b_h * q.shape[-2] * k.shape[-2] * q.shape[-1]
    return None


def _module_flops(mod: Any, out: Any) -> float:
    """FLOPs of a whole leaf module (FX graphs): Linear 2·rows·in·out; Conv 2·out·(in/groups)·
    kernel (one multiply-add per weight per output element); else 0."""
    import torch

    if not isinstance(out, torch.Tensor):
        return 0.0
    if isinstance(mod, torch.nn.Linear):
        rows = out.numel() // max(1, mod.out_features)
        return 2.0 * rows * mod.in_features * mod.out_features
    if isinstance(mod, torch.nn.modules.conv._ConvNd):
        per_out = mod.in_channels // mod.groups * math.prod(mod.kernel_size)
        return 2.0 * out.numel() * per_out
    return 0.0


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

        from echo_trace.profile.models import loss_of

        class LossOf(torch.nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.model = model

            def forward(self, *args: Any, **kwargs: Any) -> Any:
                return loss_of(self.model(*args, **kwargs), loss_fn)

        return LossOf()


def _export(wrapper: Any, args: tuple[Any, ...], kwargs: dict[str, Any], method: str,
            ) -> tuple[Any, str, set[str]]:
    """(fx graph module with ``meta['val']`` on nodes, method name, names of the placeholders
    that hold parameters or buffers). ``method``: ``auto`` (export, else FX), ``export``,
    ``fx``."""
    import torch

    export_error: Exception | None = None
    if method in ("auto", "export"):
        try:
            ep = torch.export.export(wrapper, args=args, kwargs=kwargs, strict=False)
            sig = ep.graph_signature
            state = set(sig.inputs_to_parameters) | set(sig.inputs_to_buffers)
            state |= set(getattr(sig, "inputs_to_lifted_tensor_constants", {}) or {})
            return ep.graph_module, "torch.export", state
        except Exception as e:  # noqa: BLE001 - any export failure: try FX
            if method == "export":
                raise RuntimeError(f"torch.export failed: {e}") from None
            export_error = e
    try:
        return _fx_trace(wrapper.model, args, kwargs), "torch.fx", set()
    except Exception as fx_error:  # noqa: BLE001
        why = f"torch.export failed ({export_error}); " if export_error else ""
        raise RuntimeError(f"{why}FX symbolic trace failed ({fx_error})") from None


def _fx_trace(model: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """``torch.fx.symbolic_trace(model)`` + shape propagation (positional inputs only; the
    loss is not part of an FX graph)."""
    import torch
    from torch.fx.passes.shape_prop import ShapeProp

    if kwargs:
        raise ValueError("FX tracing takes positional inputs only (the batch is a dict)")
    gm = torch.fx.symbolic_trace(model)
    ShapeProp(gm).propagate(*args)
    for n in gm.graph.nodes:  # ShapeProp stores tensor metadata, not values
        n.meta.setdefault("val", _meta_value(n))
    return gm


def _meta_value(node: Any) -> Any:
    import torch

    tm = node.meta.get("tensor_meta")
    if tm is None:
        return None
    if hasattr(tm, "shape"):
        return torch.empty(tm.shape, dtype=tm.dtype, device="meta")
    return None


def operator_graph(model: Any, batch: Any, loss_fn: Callable[[Any], Any] | None = None,
                   *, method: str = "auto") -> OpGraph:
    """Export ``loss(model(batch))`` and describe every operator (module docstring).

    ``method``: ``auto`` (torch.export, else FX), ``export`` or ``fx``.
    """
    if method not in ("auto", "export", "fx"):
        raise ValueError(f"method={method!r}: expected auto, export or fx")
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
    gm, used, state = _export(wrapper, args, kwargs, method)
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
        sub = gm.get_submodule(n.target) if n.op == "call_module" else None
        if sub is not None:  # FX keeps leaf modules whole
            path, mtype, op = "model." + str(n.target), type(sub).__name__, type(sub).__name__
        elif used == "torch.fx":
            path = "model"
        elif stack:
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
        if sub is not None:
            param_bytes += sum(_nbytes(p) for p in sub.parameters(recurse=False))
            flops = _module_flops(sub, val)
        else:
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
    return OpGraph(ops=ops, params=params, method=used, root_type=type(model).__name__)
