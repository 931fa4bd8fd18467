"""Forward and backward timing of modules: ``FW.<path>`` and ``BW.<path>`` events.

Forward: global module forward pre/post hooks (installed only while the step window is
open; they take every module call off PyTorch's fast path). Backward, as
``torch.utils.module_tracker.ModuleTracker`` does it and never with full backward hooks
(those wrap tensors in views and break in-place ops): a grad hook on the module's outputs
marks BW start (gradients of the outputs ready) and one on its inputs marks BW end
(gradients with respect to the inputs ready); a module whose inputs need no gradient
(an embedding, the first layer) ends when the gradients of its parameters are ready.
On one autograd thread the backward of distinct traced modules never overlaps, so a BW
still open when another compute event starts is closed at that moment: BW slices stay
sequential on the compute track even when an input's gradient is summed over branches
(q/k/v projections of one input).

With the Kineto GPU timer (:mod:`echo_trace.gpu.backend`) the hooks only mark CPU ranges:
container modules get a range too (so GPU work a parent runs between its children is
attributed to it) and no backward hook is installed (backward GPU work is attributed
through autograd sequence numbers), which also takes their cost off the step.

Traced modules: leaf modules (no children) by default; with ``depth=d`` the modules ``d``
levels below the outermost module plus the leaves above that level (a partition of the
tree, so FW slices do not nest). Levels count modules that run: a ``ModuleList`` /
``ModuleDict`` is never called, so it is no level of its own (``TRACE_DEPTH=1`` on a GPT gives
``blocks.0``, ``blocks.1``..., not a ``blocks`` that never runs). Module paths come from ``named_modules()`` of the
outermost module, with DDP/DataParallel's ``module.`` prefix and FSDP/checkpoint/compile
wrapper components stripped. Per-module static facts are cached by module id (checked
with a weak reference, so a reused id is recognised).
"""

from __future__ import annotations

import logging
import threading
import weakref
from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from echo_trace.hooks.flops import LINEAR, flops_kind, forward_flops
from echo_trace.hooks.saved import attribute, storage_key, walk_saved
from echo_trace.recorder import Recorder

__all__ = ["WRAPPER_TYPES", "ModuleTracer", "forward_flops"]  # forward_flops: from flops

log = logging.getLogger("echo_trace")

WRAPPER_TYPES = frozenset({
    "DistributedDataParallel", "DataParallel", "FullyShardedDataParallel", "CheckpointWrapper",
    "OptimizedModule",
})
# modules whose forward does not call their children: traced as leaves
_OPAQUE_TYPES: tuple[type[nn.Module], ...] = (nn.MultiheadAttention,)
# holders that are never called: their children run, they do not (no level of their own)
_CONTAINER_TYPES: tuple[type[nn.Module], ...] = (nn.ModuleList, nn.ModuleDict)
_WRAPPER_PARTS = frozenset({"_fsdp_wrapped_module", "_checkpoint_wrapped_module", "_orig_mod"})

class _Info:
    """Static facts about one module, computed once."""

    __slots__ = ("path", "fw_name", "bw_name", "traced", "static_args", "flops_kind",
                 "flops_const", "in_features", "params_fn", "ref")

    def __init__(self, mod: nn.Module, path: str, traced: bool) -> None:
        self.ref = weakref.ref(mod)  # the key is id(mod): this tells a reused id apart
        self.path = path
        self.fw_name = "FW." + path
        self.bw_name = "BW." + path
        self.traced = traced
        leaf = next(iter(mod.children()), None) is None
        params = list(mod.parameters(recurse=not leaf))
        param_bytes = sum(p.numel() * p.element_size() for p in params)
        #: shared by every FW/BW record of this module (never mutated)
        self.static_args = {"module": path, "type": type(mod).__name__,
                            "param_bytes": param_bytes}
        self.flops_kind, self.flops_const = flops_kind(mod)
        self.in_features = getattr(mod, "in_features", 1) if self.flops_kind == LINEAR else 1
        ref = self.ref
        if leaf:
            def params_fn() -> list[torch.Tensor]:
                m = ref()
                if m is None:
                    return []
                return [p for p in m._parameters.values() if p is not None and p.requires_grad]
        else:
            def params_fn() -> list[torch.Tensor]:
                m = ref()
                return [] if m is None else [p for p in m.parameters() if p.requires_grad]
        self.params_fn = params_fn


_WAIT, _OPEN, _DONE, _ENDED_EARLY = 0, 1, 2, 3


class _Call:
    """One traced module call, alive from forward until its backward ends.

    ``begin``/``end`` are the grad hooks (outputs ready / inputs ready); see
    :class:`ModuleTracer` for the state machine. ``in_node`` is ``id()`` of the autograd
    node of a single tensor input (else 0); ``skipped``: its ``end`` hook was left out
    (see :meth:`ModuleTracer._pre`)."""

    __slots__ = ("info", "tracer", "t0", "in_bytes", "first_in", "bw_start", "state",
                 "from_params", "in_node", "skipped")

    def __init__(self, info: _Info, tracer: ModuleTracer, in_bytes: int,
                 first_in: torch.Tensor | None) -> None:
        self.info = info
        self.tracer = tracer
        self.in_bytes = in_bytes
        self.first_in = first_in
        self.t0: Any = None
        self.bw_start: Any = None
        self.state = _WAIT
        self.from_params = False
        self.in_node = 0
        self.skipped = False

    def begin(self, _grads: Any) -> None:
        tracer = self.tracer
        rec = tracer.rec
        if not (rec.enabled and rec.recording):
            return
        try:
            state = self.state
            if state == _WAIT:
                t = tracer.timer.now()
                if tracer._open_bw:
                    tracer._close_open_bw(t)
                self.bw_start = t
                self.state = _OPEN
                tracer._open_bw.append(self)
            elif state == _ENDED_EARLY:  # an output is an input (Identity): no backward work
                t = tracer.timer.now()
                self.state = _DONE
                info = self.info
                tracer.timer.emit(info.bw_name, "BW", t, t, info.static_args)
        except Exception as e:  # noqa: BLE001 - same as rec.guard, without its cost
            rec.fail("backward hook", e)

    def end(self, _grads: Any) -> None:
        tracer = self.tracer
        rec = tracer.rec
        if not (rec.enabled and rec.recording):
            return
        try:
            state = self.state
            if state == _OPEN:
                self.state = _DONE
                tracer._open_bw.remove(self)
                info = self.info
                tracer.timer.emit(info.bw_name, "BW", self.bw_start, tracer.timer.now(),
                                  info.static_args)
            elif state == _WAIT:
                self.state = _ENDED_EARLY
        except Exception as e:  # noqa: BLE001
            rec.fail("backward hook", e)


#: keyword names of a model's main input, in order of preference (Hugging Face's
#: ``input_ids`` / ``pixel_values`` / ``input_values`` / ``inputs_embeds`` and common others)
INPUT_KEYWORDS = ("input_ids", "pixel_values", "input_values", "input_features",
                  "inputs_embeds", "x", "input", "inputs", "images", "tokens")


def _scan(obj: Any, grads: list[torch.Tensor], depth: int = 0) -> tuple[int, torch.Tensor | None]:
    """(tensor bytes, first tensor) of ``obj``; appends tensors that require grad."""
    if isinstance(obj, torch.Tensor):
        if obj.requires_grad:
            grads.append(obj)
        return obj.nbytes, obj
    if depth > 2:
        return 0, None
    if isinstance(obj, (list, tuple)):
        items: Any = obj
    elif isinstance(obj, dict):
        items = obj.values()
    else:
        return 0, None
    nbytes = 0
    first: torch.Tensor | None = None
    for a in items:
        n, f = _scan(a, grads, depth + 1)
        nbytes += n
        if first is None:
            first = f
    return nbytes, first


def _node_of(t: torch.Tensor) -> Any:
    """The autograd node to hook for ``t``'s gradient: a view's base's node when it has
    one (an in-place op on the view later replaces the view's own node), else ``t``'s."""
    base = t._base
    if base is not None:
        node = base.grad_fn
        if node is not None:
            return node
    return t.grad_fn


def _join_nodes(nodes: list[Any], fn: Callable[[Any], None]) -> None:
    """Pre-hooks on several autograd nodes calling ``fn`` once all that will run have run
    (per backward call, like ``register_multi_grad_hook``'s "all" mode)."""
    counts: dict[int, list[int]] = {}
    lock = threading.Lock()

    def hook(_grads: Any) -> None:
        task = torch._C._current_graph_task_id()
        with lock:
            st = counts.get(task)
            if st is None:
                need = sum(bool(torch._C._will_engine_execute_node(n)) for n in nodes)
                st = counts[task] = [need, 0]
            st[1] += 1
            done = st[1] >= st[0]
            if done:
                del counts[task]
        if done:
            fn(None)

    for n in nodes:
        n.register_prehook(hook)


def _is_leaf(mod: nn.Module) -> bool:
    """No children, or a module whose forward does not call its children."""
    return next(iter(mod.children()), None) is None or isinstance(mod, _OPAQUE_TYPES)


def _level(name: str, root_is_wrapper: bool, containers: set[str]) -> int:
    """How many modules that run lie on the path to ``name`` (itself included; the root is
    0): its components less wrapper components and never-called containers."""
    parts = name.split(".") if name else []
    level = 0
    for i, part in enumerate(parts):
        if part in _WRAPPER_PARTS or (root_is_wrapper and i == 0 and part == "module"):
            continue
        if ".".join(parts[: i + 1]) not in containers:
            level += 1
    return level


def _strip(name: str, root_is_wrapper: bool) -> str:
    parts = [p for p in name.split(".") if p and p not in _WRAPPER_PARTS]
    if root_is_wrapper and parts and parts[0] == "module":
        parts = parts[1:]
    return ".".join(parts)


class ModuleTracer:
    """Installs the global forward hooks; emits FW/BW events through ``timer``.

    ``on_module(mod)`` is called once for every module first seen (the capture uses it to
    attach DDP comm hooks). ``depth`` as in :class:`~echo_trace.config.CaptureConfig`.

    Cost per module call (this is on every forward): the hooks return at once outside the
    window; an untraced module (a container) costs one dict look-up and a stack push/pop;
    a traced one one ``_Call``, one event tuple and one autograd node pre-hook per tensor
    side (outputs, inputs). The input pre-hook is left out when the input is the output of
    the traced call just before (``ln → qkv``, ``fc1 → act → fc2``): that node already
    carries the earlier call's BW-start hook, which closes every open BW at the same
    moment (see :meth:`_pre`).
    """

    def __init__(self, rec: Recorder, timer: Any, *, depth: int | None = None,
                 root: nn.Module | None = None,
                 on_module: Callable[[nn.Module], None] | None = None) -> None:
        self.rec = rec
        self.timer = timer
        self.depth = depth
        self.on_module = on_module
        self._infos: dict[int, _Info] = {}  # id(module) -> facts (checked by _Info.ref)
        self._stack: list[_Info | _Call] = []  # modules in forward now (calls if traced)
        self._open_bw: list[_Call] = []
        self._leaf_handles: list[Any] = []
        self._handles: list[Any] = []
        self._kw_handle: Any = None  # the root's keyword-input hook (see _note_batch)
        self._primary: weakref.ref[nn.Module] | None = None
        # the output of the last traced call whose node got a BW-start hook, and that node
        self._last_out: weakref.ref[torch.Tensor] | None = None
        self._last_node = 0
        self.micro_batch_size: int | None = None
        self.tokens: int | None = None  # micro-batch × sequence when the input is token ids
        self._warned_no_grad = False
        self._warned_compiled = False
        # bytes autograd saves for backward per traced call (echo_trace.hooks.saved): measured
        # at the end of the window's first forward with autograd
        self._saved_pending = False
        self._saved_calls: list[tuple[str, int]] = []  # (path, last sequence number)
        #: ``[[module path, saved bytes], ...]`` per traced call of that forward
        #: (echo_trace.hooks.saved.attribute), or None
        self.saved_per_call: list[list[Any]] | None = None
        self.saved_total_bytes: int | None = None
        self._warned_saved = False
        # the GPU (Kineto) timer attributes kernels to the innermost module: it needs the
        # CPU ranges of containers too
        self._mark_containers = bool(getattr(timer, "marks_containers", False))
        # ... and finds backward GPU time through autograd sequence numbers: no BW hooks
        self._bw_hooks = not getattr(timer, "backward_from_sequence", False)
        if root is not None:
            self._add_root(root, primary=True)

    # ------------------------------------------------------------------ setup
    @property
    def primary_root(self) -> nn.Module | None:
        return None if self._primary is None else self._primary()

    def install(self) -> None:
        """Register the global forward hooks (idempotent)."""
        if self._handles:
            return
        from torch.nn.modules.module import (
            register_module_forward_hook,
            register_module_forward_pre_hook,
        )

        self._handles = [register_module_forward_pre_hook(self._pre),
                         register_module_forward_hook(self._post, always_call=True)]
        if self.saved_per_call is None:
            self._saved_pending = True
            self._saved_calls = []

    def remove(self) -> None:
        """Remove every hook this tracer registered (idempotent)."""
        for h in self._handles:
            h.remove()
        self._handles = []
        if self._kw_handle:
            self._kw_handle.remove()
            self._kw_handle = None
        self.end_step()

    def end_step(self) -> None:
        """Step boundary: forget open calls; drop grad hooks left on leaf tensors."""
        self._stack.clear()
        self._open_bw.clear()
        self._last_out = None
        self._last_node = 0
        for h in self._leaf_handles:
            h.remove()
        self._leaf_handles.clear()

    def param_table(self) -> list[dict[str, Any]]:
        """``[{"name", "shape", "dtype", "bytes"}]`` for the primary root's parameters."""
        return self._tensor_table("named_parameters")

    def buffer_table(self) -> list[dict[str, Any]]:
        """The same for the primary root's buffers (persistent or not: DDP broadcasts every
        one of them before each forward)."""
        return self._tensor_table("named_buffers")

    def _tensor_table(self, named: str) -> list[dict[str, Any]]:
        """One row per tensor of the primary root's ``named`` iterator (``named_parameters``,
        ``named_buffers``), named without a wrapper's prefix."""
        root = self.primary_root
        if root is None:
            return []
        wrapper = type(root).__name__ in WRAPPER_TYPES
        return [{"name": _strip(name, wrapper), "shape": list(t.shape),
                 "dtype": str(t.dtype).removeprefix("torch."),
                 "bytes": t.numel() * t.element_size()}
                for name, t in getattr(root, named)()]

    def _info(self, mod: nn.Module) -> _Info | None:
        info = self._infos.get(id(mod))
        return info if info is not None and info.ref() is mod else None

    def _add_root(self, root: nn.Module, *, primary: bool) -> None:
        wrapper = type(root).__name__ in WRAPPER_TYPES
        prefix = "" if primary else type(root).__name__
        if primary:
            self._primary = weakref.ref(root)
            if self._kw_handle is None and self.micro_batch_size is None:
                # a model called with keywords only (``model(input_ids=x, labels=x)``):
                # global hooks see no keywords, so the root gets a hook of its own (from its
                # next call on when it was found during one)
                self._kw_handle = root.register_forward_pre_hook(self._note_kwargs,
                                                                 with_kwargs=True)
        depth = self.depth
        opaque: list[str] = []  # names of modules whose children never run on their own
        containers = ({name for name, mod in root.named_modules()
                       if isinstance(mod, _CONTAINER_TYPES)} if depth is not None else set())
        for name, mod in root.named_modules():
            if self._info(mod) is not None:
                continue
            if type(mod).__name__ == "OptimizedModule" and not self._warned_compiled:
                self._warned_compiled = True
                log.warning("echo_trace: the model is torch.compile'd; modules inside the "
                            "compiled graph run no hooks, so their time shows under the "
                            "module that calls the graph (FW.%s), not per module",
                            prefix or type(getattr(mod, "_orig_mod", mod)).__name__)
            path = _strip(name, wrapper)
            inside_opaque = any(name.startswith(o + ".") for o in opaque)
            if isinstance(mod, _OPAQUE_TYPES):
                opaque.append(name)
            if type(mod).__name__ in WRAPPER_TYPES or (wrapper and name == "") \
                    or inside_opaque or isinstance(mod, _CONTAINER_TYPES):
                traced = False
            else:
                level = _level(name, wrapper, containers)
                leaf = _is_leaf(mod)
                traced = leaf if depth is None else (level == depth or (level < depth and leaf))
            if prefix:
                path = prefix + ("." + path if path else "")
            elif not path:
                path = type(mod).__name__
            self._infos[id(mod)] = _Info(mod, path, traced)
            if self.on_module is not None:
                self.on_module(mod)

    def _note_batch(self, mod: nn.Module, args: Any) -> None:
        """micro_batch_size: dim 0 of the primary root's first tensor input; ``tokens``:
        its element count when it is a 2-d integer tensor (token ids, batch × seq)."""
        if self._primary is None or self._primary() is not mod:
            return
        _, first = _scan(args, [])
        self._set_batch(first)  # none: called with keywords only, see _note_kwargs

    def _set_batch(self, first: torch.Tensor | None) -> None:
        if first is not None and first.dim() > 0:
            self.micro_batch_size = int(first.shape[0])
            if first.dim() == 2 and not first.is_floating_point() and not first.is_complex() \
                    and first.dtype != torch.bool:
                self.tokens = int(first.numel())

    def _note_kwargs(self, mod: nn.Module, args: Any, kwargs: dict[str, Any]) -> None:
        """The root's keyword inputs: the model's input by its conventional name
        (:data:`INPUT_KEYWORDS`), else the first tensor among them. Removes itself."""
        try:
            h, self._kw_handle = self._kw_handle, False  # False: measured, never again
            if h:
                h.remove()
            if self.micro_batch_size is not None:
                return
            first = next((kwargs[k] for k in INPUT_KEYWORDS
                          if isinstance(kwargs.get(k), torch.Tensor)), None)
            if first is None:
                _, first = _scan(args, [])
            if first is None:
                _, first = _scan(list(kwargs.values()), [])
            self._set_batch(first)
        except Exception as e:  # noqa: BLE001 - a measurement, never the job's problem
            log.debug("echo_trace: micro-batch from keyword inputs failed: %s", e)

    def _note_root_call(self, mod: nn.Module) -> None:
        """Warn once when a forward without autograd (``no_grad`` / ``eval()``) runs inside
        the window: it has FW events and no BW, and is counted in the step's time."""
        if self._warned_no_grad or (torch.is_grad_enabled() and mod.training):
            return
        self._warned_no_grad = True
        why = "torch.no_grad()" if not torch.is_grad_enabled() else "eval() mode"
        log.warning("echo_trace: a forward of %s under %s ran inside the capture window "
                    "(evaluation?); its FW events have no backward and its time counts in "
                    "the step", type(mod).__name__, why)

    def _discover(self, mod: nn.Module, args: Any) -> _Info:
        if not self._stack:
            has_children = next(iter(mod.children()), None) is not None
            primary = self._primary is None and has_children
            self._add_root(mod, primary=primary)
            info = self._info(mod)
            if info is not None:
                return info
        parent = ""
        if self._stack:
            top = self._stack[-1]
            parent = (top.info if isinstance(top, _Call) else top).path + "."
        info = _Info(mod, parent + type(mod).__name__, _is_leaf(mod))
        self._infos[id(mod)] = info
        if self.on_module is not None:
            self.on_module(mod)
        return info

    # ------------------------------------------------------------------ hooks
    def _pre(self, mod: nn.Module, args: Any) -> None:
        rec = self.rec
        if not (rec.enabled and rec.recording):
            return
        try:
            info = self._infos.get(id(mod))
            if info is None or info.ref() is not mod:
                info = self._discover(mod, args)
            stack = self._stack
            if not stack:
                if self.micro_batch_size is None:
                    self._note_batch(mod, args)
                self._note_root_call(mod)
            if not info.traced:  # a container: only remembered for _post and paths
                stack.append(info)
                if self._mark_containers:
                    self.timer.open_range(info.fw_name)
                return
            grads: list[torch.Tensor]
            first: torch.Tensor | None
            call: _Call
            if len(args) == 1 and isinstance(args[0], torch.Tensor):
                first = x = args[0]
                call = _Call(info, self, x.nbytes, x if info.flops_kind else None)
                if x.requires_grad and self._bw_hooks:
                    node = _node_of(x)
                    if node is None:  # a leaf input
                        self._hook([x], call.end)
                    else:
                        call.in_node = id(node)
                        last = self._last_out
                        if last is not None and last() is x and call.in_node == self._last_node:
                            # x is the previous traced call's output, and its node carries
                            # that call's BW-start hook, which closes this BW at that moment
                            call.skipped = True
                        else:
                            node.register_prehook(call.end)
                else:
                    call.from_params = True  # BW ends when the parameters' grads are ready
            else:
                grads = []
                in_bytes, first = _scan(args, grads)
                call = _Call(info, self, in_bytes, first if info.flops_kind else None)
                if grads and self._bw_hooks:
                    self._hook(grads, call.end)
                else:
                    call.from_params = True
            stack.append(call)
            t = call.t0 = self.timer.now()
            if self._open_bw:
                self._close_open_bw(t)
        except Exception as e:  # noqa: BLE001 - same as rec.guard, without its cost
            rec.fail("forward pre-hook", e)

    def _post(self, mod: nn.Module, args: Any, output: Any) -> None:
        rec = self.rec
        if not (rec.enabled and rec.recording):
            return
        try:
            stack = self._stack
            if not stack:
                return
            top = stack.pop()
            if top.__class__ is _Call:
                info = top.info
            else:
                info = top  # type: ignore[assignment]
            if info.ref() is not mod:  # inner calls raised: unwind to this module's entry
                stack.append(top)
                found = self._info(mod)
                if found is None:
                    return
                while stack:
                    top = stack.pop()
                    if top is found or (top.__class__ is _Call
                                        and top.info is found):
                        break
                else:
                    return
                info = found
            if top.__class__ is not _Call:
                if self._mark_containers:
                    self.timer.close_range()
                if not stack and self._saved_pending:
                    self._measure_saved(output)
                return  # not traced
            t1 = self.timer.now()
            call: _Call = top
            if output is None:
                return
            out_node: Any = None
            grads: list[torch.Tensor] = []
            if isinstance(output, torch.Tensor):
                out_bytes = output.nbytes
                first_out: torch.Tensor | None = output
                if output.requires_grad:
                    out_node = _node_of(output)
                    if out_node is None:  # a leaf returned as is
                        grads.append(output)
            else:
                out_bytes, first_out = _scan(output, grads)
            if self._saved_pending:
                self._note_saved_call(info.path, [output] if isinstance(output, torch.Tensor)
                                      else grads)
            extra = {"in_bytes": call.in_bytes, "out_bytes": out_bytes}
            if info.flops_kind:
                flops = forward_flops(info.flops_kind, info.flops_const, call.first_in,
                                      first_out, info.in_features)
                call.first_in = None
                if flops is not None:
                    extra["flops"] = flops
            self.timer.emit(info.fw_name, "FW", call.t0, t1, info.static_args, extra=extra)
            self._last_out = None
            if (out_node is None and not grads) or not self._bw_hooks:
                return
            if call.from_params:
                params = info.params_fn()
                if not params:
                    return
                self._hook(params, call.end, leaf=True)
            same = out_node is not None and id(out_node) == call.in_node  # Identity-like
            if call.skipped and (same or out_node is None):
                # the left-out input hook is needed after all: it must run before this
                # call's BW-start hook on a node they share
                self._hook([args[0]], call.end)
            if out_node is None:
                self._hook(grads, call.begin)
                return
            out_node.register_prehook(call.begin)
            if not same and (call.in_node or call.from_params):
                # the next traced call may leave out its input hook on out_node (see _pre)
                self._last_out = weakref.ref(output)
                self._last_node = id(out_node)
        except Exception as e:  # noqa: BLE001
            rec.fail("forward hook", e)

    def _note_saved_call(self, path: str, outputs: list[torch.Tensor]) -> None:
        """Remember a traced call's last autograd sequence number: its outputs' own
        ``grad_fn`` (a view's, not its base's as for the BW hooks)."""
        try:
            seqs = [t.grad_fn._sequence_nr() for t in outputs if t.grad_fn is not None]
        except Exception as e:  # noqa: BLE001 - a measurement: give it up, keep capturing
            self._saved_pending = False
            self._saved_calls = []
            self._warn_saved(e)
            return
        if seqs:
            self._saved_calls.append((path, int(max(seqs))))

    def _measure_saved(self, output: Any) -> None:
        """End of a root forward: measure what autograd saved (echo_trace.hooks.saved), once."""
        calls, self._saved_calls = self._saved_calls, []
        if not calls or not torch.is_grad_enabled():
            return  # a forward without autograd: wait for one with it
        self._saved_pending = False
        try:
            grads: list[torch.Tensor] = []
            if isinstance(output, torch.Tensor):
                grads = [output] if output.requires_grad else []
            else:
                _scan(output, grads)
            roots = [g.grad_fn for g in grads if g.grad_fn is not None]
            if not roots:
                return
            exclude: set[int] = set()
            root = self.primary_root
            if root is not None:
                for t in (*root.parameters(), *root.buffers()):
                    key = storage_key(t)
                    if key is not None:
                        exclude.add(key[0])
            found = walk_saved(roots, exclude)
            seqs: list[int] = []
            for _, seq in calls:  # a running max: an Identity-like call reuses a node
                seqs.append(max(seq, seqs[-1]) if seqs else seq)
            per = attribute(found, seqs)
            self.saved_per_call = [[path, b] for (path, _), b in zip(calls, per, strict=True)]
            self.saved_total_bytes = int(sum(found.nbytes.values()))
        except Exception as e:  # noqa: BLE001 - a measurement, never the job's problem
            self._warn_saved(e)

    def _warn_saved(self, e: Exception) -> None:
        if not self._warned_saved:
            self._warned_saved = True
            log.warning("echo_trace: could not measure the bytes saved for backward "
                        "(%s: %s); meta.json leaves them out", type(e).__name__, e)

    def _hook(self, tensors: list[torch.Tensor], fn: Callable[[Any], None],
              leaf: bool = False) -> None:
        """Call ``fn`` once the gradients of all ``tensors`` are ready (this backward).

        Non-leaf tensors are hooked through their autograd node (a node pre-hook), and a
        view through its base's node: an in-place op on a view later rewrites the view's
        history (its old node leaves the graph and tensor hooks on it never fire), while
        the base's node stays in the graph. Leaf tensors use tensor hooks, removed at the
        step boundary because they outlive the graph.
        """
        nodes: list[Any] = []
        leaves: list[torch.Tensor] = []
        for t in tensors:
            node = None if leaf else _node_of(t)
            if node is None:
                leaves.append(t)
            elif all(n is not node for n in nodes):
                nodes.append(node)
        if leaves:
            if len(leaves) == 1 and not nodes:
                h = leaves[0].register_hook(fn)
            else:
                h = torch.autograd.graph.register_multi_grad_hook(tensors, fn)
            self._leaf_handles.append(h)
        elif len(nodes) == 1:
            nodes[0].register_prehook(fn)
        else:
            _join_nodes(nodes, fn)

    # ------------------------------------------------------------------ backward
    def close_open_bw(self, t: Any) -> None:
        """Another compute event starts at ``t``: end every BW still open there."""
        if self._open_bw:
            self._close_open_bw(t)

    def _close_open_bw(self, t: Any) -> None:
        emit = self.timer.emit
        for call in self._open_bw:
            call.state = _DONE
            info = call.info
            emit(info.bw_name, "BW", call.bw_start, t, info.static_args)
        self._open_bw.clear()
