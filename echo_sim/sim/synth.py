"""Zero-trace workloads: a one-GPU echo trace of a model described by its shape.

``python -m echo_sim synth --model gpt --layers 96 --hidden 12288 ...`` writes what echo_trace
would have recorded on one GPU (one rank, a few steps) had the model fit, so ``simulate`` can
lay it out over thousands of GPUs without anyone running it first.

Operators and names follow :class:`examples.models.GPT` (its leaf modules): ``tok_emb``,
``pos_emb``, per block ``blocks.<i>.ln1``, ``.attn.qkv``, ``.attn.core``, ``.attn.proj``,
``.ln2``, ``.mlp.fc1``, ``.mlp.act``, ``.mlp.fc2``; then ``ln_f`` and ``head`` (untied, no
bias). ``attn.core`` stands for the attention math inside ``CausalSelfAttention.forward``
(scores, softmax, weighted sum) as one operator: fused as FlashAttention runs it, or the
separate kernels of ``unfused``/``eager`` attention (:mod:`echo_sim.cost.kernels`).

Its ``out_bytes`` (what the memory model counts as kept for backward) is the core's output
plus the score-sized tensors autograd saves (the ``qkv`` output already holds q, k, v):
``flash`` saves only the log-sum-exp, ``4·b·a·s`` bytes (Dao 2023, Alg. 1); ``unfused``
(Megatron) the softmax output, the 1-byte dropout mask and the dropout output:
``(2e + 1)·b·a·s²`` (Korthikanti et al. 2022 §4.1, the ``5as²b`` term for ``e = 2``);
``eager`` the softmax output ``e·b·a·s²`` (saved once for ``SoftmaxBackward`` and the
second ``bmm``; the scaled and masked scores are temporaries, ``mul`` by a Python scalar and
``masked_fill`` save no tensor of that size) — exactly what
``torch.autograd.graph.saved_tensors_hooks`` reports for ``examples/models.py``.

FLOPs (b = micro-batch, s = sequence, h = hidden, V = vocab; Narayanan et al. 2021,
"Efficient Large-Scale Language Model Training on GPU Clusters Using Megatron-LM", §5.1):

* a Linear over r rows: 2·r·in·out (one multiply-add per weight per row) — what echo_trace
  writes; per block qkv 6bsh², proj 2bsh², fc1 8bsh², fc2 8bsh²: 24bsh² in all;
* attention core: Q·Kᵀ 2bs²h + scores·V 2bs²h = 4bs²h (no causal-mask discount, as there);
* head: 2bshV; embeddings, layer norms and GELU: 0 (echo_trace counts only Linear/Conv);
* backward: 2× forward (gradients of inputs and of weights, Narayanan et al. eq. 2),
  so a step is 3× the forward: 72bsh²L(1 + s/6h) + 6bshV.

Time of an operator: the roofline (Williams et al. 2009, "Roofline: an insightful visual
performance model")::

    dur_us = max(flops / (peak_flops[dtype] · efficiency), bytes_moved / mem_bw)

bytes moved: forward = inputs + outputs + parameters; backward = 2·inputs + outputs +
2·parameters (read input, output gradient and weight; write input and weight gradients).
The attention core is fused (scores never reach memory). Parameters and activations are in
``dtype``.

With ``efficiency=None`` (the default) each kernel is instead priced from its shape by
:mod:`echo_sim.cost.kernels`: Linear forward one tiled GEMM (rows × out × in), backward the
data-gradient (rows × in × out) and weight-gradient (in × out × rows) GEMMs; the attention
core as ``flash`` (SDPA/FlashAttention) or ``unfused`` (materialised scores, Megatron-LM
before 2022), per ``attention``; memory-bound kernels by the bytes they move:

* ``ln1``/``ln2`` stand for the bias-dropout-add of the residual branch before them fused
  with the layer norm (Megatron's ``bias_dropout_add`` + ``LayerNorm`` kernels): forward
  reads branch and residual, writes the sum and a 1-byte dropout mask, the norm reads the
  sum and writes its output (5 activations + mask); backward the same amount;
* ``mlp.act`` is the fused bias-GELU: forward reads and writes the 4h activation, backward
  reads gradient and input and writes the gradient;
* ``head`` adds the fp32 loss of mixed precision (Micikevicius et al. 2018, §3.3: the
  softmax cross-entropy in fp32): logits cast to fp32 and the vocab softmax stored
  (18 bytes per logit forward: read 2, write 4, two 4-byte passes, store 4; 14 backward);
* the embedding's backward writes its whole weight gradient;
* mixed precision keeps fp32 main gradients (Micikevicius et al. 2018 §3.1; Megatron-LM's
  ``main_grad``): each 16-bit weight gradient is added into its fp32 copy after every
  micro-batch's backward — 10 bytes per weight (read 2 + read 4 + write 4).

Optimizer (``UPDATE.AdamW``): memory-bound, per ``optimizer``:

* ``fused`` — one pass (apex ``FusedAdam`` as Megatron-LM uses it, ``torch.optim.AdamW(
  fused=True)``). Mixed-precision Adam keeps 16 bytes per parameter (Rajbhandari et al.
  2020, "ZeRO", §3.1: 2 fp16 weights + 2 fp16 gradients + 12 for fp32 master weights,
  momentum and variance); one step reads gradient, master weight, m and v (2 + 4 + 4 + 4)
  and writes master weight, m, v and the low-precision copy (4 + 4 + 4 + 2): 28 bytes per
  parameter (also 28 in pure fp32: reads p, g, m, v, writes p, m, v).
* ``foreach`` — ``torch.optim.AdamW``'s default on CUDA (``_multi_tensor_adam`` in
  ``torch/optim/adam.py``, no capturable/amsgrad): eight ``torch._foreach_*`` passes over
  tensors of the parameters' element size ``e``, each reading and writing whole lists:
  ``mul_(params)`` 2e, ``lerp_(m, g)`` 3e, ``mul_(v)`` 2e, ``addcmul_(v, g, g)`` 4e,
  ``sqrt(v)`` 2e (a new list), ``div_`` 2e, ``add_(eps)`` 2e, ``addcdiv_(p, m, sqrt)`` 4e:
  ``21·e`` bytes per parameter (84 in fp32), each pass its own kernel launches.

``fused`` is the default: it is what the mixed-precision (master-weight) accounting above
describes; pass ``optimizer="foreach"`` (``--optimizer foreach``) for a plain
``torch.optim.AdamW`` job such as ``examples/train.py``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from echo_sim.cost.hardware import GPU, get_gpu
from echo_sim.cost.kernels import ATTENTION_IMPLS, attention_us, elementwise_us, gemm_us
from echo_sim.errors import ConfigError
from echo_sim.trace.model import Cat, RankInfo, Trace, TraceBuilder

__all__ = [
    "ADAM_BYTES_PER_PARAM",
    "DTYPE_BYTES",
    "OPTIMIZER_IMPLS",
    "GPTShape",
    "SynthConfig",
    "SynthOp",
    "gpt_layer_flops",
    "gpt_ops",
    "gpt_params",
    "attention_saved_bytes",
    "kernel_times_us",
    "optimizer_bytes_per_param",
    "roofline_us",
    "synth_trace",
    "write_synth",
]

DTYPE_BYTES: dict[str, int] = {"fp32": 4, "tf32": 4, "bf16": 2, "fp16": 2}
_TORCH_DTYPE = {"fp32": "float32", "tf32": "float32", "bf16": "bfloat16", "fp16": "float16"}
ADAM_BYTES_PER_PARAM = 28  # fused: read 14 + write 14 bytes per parameter (module docstring)
_FOREACH_ELEMS_PER_PARAM = 21  # foreach: elements moved per parameter (module docstring)
OPTIMIZER_IMPLS: tuple[str, ...] = ("foreach", "fused")
_TOKEN_BYTES = 8  # int64 token / position ids
_MAIN_GRAD_BYTES = 10  # per weight per micro-batch: read 16-bit grad, read + write fp32


@dataclass(frozen=True, kw_only=True)
class GPTShape:
    """A GPT decoder (examples/models.py's ``GPT``): all sizes are counts (tokens, features)."""

    layers: int
    hidden: int
    heads: int
    seq: int
    vocab: int
    micro_batch: int = 1
    mlp_ratio: int = 4

    def __post_init__(self) -> None:
        for name in ("layers", "hidden", "heads", "seq", "vocab", "micro_batch", "mlp_ratio"):
            v = getattr(self, name)
            if not isinstance(v, int) or v < 1:
                raise ConfigError(f"--{name.replace('_', '-')} {v!r} must be a positive integer")
        if self.hidden % self.heads:
            raise ConfigError(f"--hidden {self.hidden} must divide by --heads {self.heads}")


@dataclass(frozen=True, kw_only=True)
class SynthConfig:
    """What to synthesise: ``model`` on one ``gpu`` preset, ``steps`` identical steps."""

    model: GPTShape
    gpu: str = "a100"
    dtype: str = "bf16"
    efficiency: float | None = None  # None: per-kernel shape models (module docstring)
    steps: int = 3
    attention: str = "flash"
    optimizer: str = "fused"  # "foreach": torch.optim.AdamW's default (module docstring)

    def __post_init__(self) -> None:
        get_gpu(self.gpu)
        if self.dtype not in DTYPE_BYTES:
            raise ConfigError(f"--dtype {self.dtype!r}; valid: {', '.join(DTYPE_BYTES)}")
        if self.efficiency is not None and not 0 < self.efficiency <= 1:
            raise ConfigError(f"--efficiency {self.efficiency} must be in (0, 1]")
        if self.attention not in ATTENTION_IMPLS:
            raise ConfigError(f"--attention {self.attention!r}; valid: "
                              f"{', '.join(ATTENTION_IMPLS)}")
        if self.optimizer not in OPTIMIZER_IMPLS:
            raise ConfigError(f"--optimizer {self.optimizer!r}; valid: "
                              f"{', '.join(OPTIMIZER_IMPLS)}")
        if self.steps < 1:
            raise ConfigError(f"--steps {self.steps} must be >= 1")


@dataclass(frozen=True, slots=True)
class SynthOp:
    """One leaf operator: what echo_trace writes for its FW event, plus its backward cost."""

    module: str
    kind: str
    param_bytes: int
    in_bytes: int
    out_bytes: int
    flops: float  # forward FLOPs as written in the trace (0 where echo_trace writes none)
    dims: tuple[int, int, int] = (0, 0, 0)  # Linear: (rows, in, out) of its GEMM
    saved_bytes: int = 0  # attention core: score-sized tensors kept for backward, written
    # into the trace's out_bytes (module docstring), not moved by the roofline's kernel

    @property
    def fw_bytes(self) -> int:
        return self.in_bytes + self.out_bytes + self.param_bytes

    @property
    def bw_bytes(self) -> int:
        return 2 * self.in_bytes + self.out_bytes + 2 * self.param_bytes

    @property
    def bw_flops(self) -> float:
        return 2.0 * self.flops


def gpt_params(shape: GPTShape) -> list[tuple[str, list[int]]]:
    """(name, shape) of every parameter in registration order (as ``named_parameters``)."""
    h, f, v = shape.hidden, shape.mlp_ratio * shape.hidden, shape.vocab
    out: list[tuple[str, list[int]]] = [("tok_emb.weight", [v, h]),
                                        ("pos_emb.weight", [shape.seq, h])]
    for i in range(shape.layers):
        p = f"blocks.{i}."
        out += [(p + "ln1.weight", [h]), (p + "ln1.bias", [h]),
                (p + "attn.qkv.weight", [3 * h, h]), (p + "attn.qkv.bias", [3 * h]),
                (p + "attn.proj.weight", [h, h]), (p + "attn.proj.bias", [h]),
                (p + "ln2.weight", [h]), (p + "ln2.bias", [h]),
                (p + "mlp.fc1.weight", [f, h]), (p + "mlp.fc1.bias", [f]),
                (p + "mlp.fc2.weight", [h, f]), (p + "mlp.fc2.bias", [h])]
    out += [("ln_f.weight", [h]), ("ln_f.bias", [h]), ("head.weight", [v, h])]
    return out


def gpt_layer_flops(shape: GPTShape) -> float:
    """Forward FLOPs of one block: 24·b·s·h² (with mlp_ratio 4) + 4·b·s²·h (Narayanan et al.)."""
    b, s, h, f = shape.micro_batch, shape.seq, shape.hidden, shape.mlp_ratio * shape.hidden
    return 2.0 * b * s * (3 * h * h + h * h + 2 * h * f) + 4.0 * b * s * s * h


def attention_saved_bytes(shape: GPTShape, dtype: str, attention: str) -> int:
    """Score-sized bytes autograd keeps for the attention core's backward (module docstring)."""
    e = DTYPE_BYTES[dtype]
    scores = shape.micro_batch * shape.heads * shape.seq * shape.seq
    if attention == "flash":
        return 4 * shape.micro_batch * shape.heads * shape.seq  # fp32 log-sum-exp
    if attention == "unfused":
        return (2 * e + 1) * scores
    return e * scores


def optimizer_bytes_per_param(dtype: str, optimizer: str) -> int:
    """Bytes one AdamW step moves per parameter (module docstring)."""
    return _FOREACH_ELEMS_PER_PARAM * DTYPE_BYTES[dtype] if optimizer == "foreach" \
        else ADAM_BYTES_PER_PARAM


def gpt_ops(shape: GPTShape, dtype: str = "bf16", attention: str = "flash") -> list[SynthOp]:
    """The forward leaf operators of one micro-batch, in execution order."""
    e = DTYPE_BYTES[dtype]
    b, s, h, v = shape.micro_batch, shape.seq, shape.hidden, shape.vocab
    f = shape.mlp_ratio * h
    rows = b * s
    act = rows * h * e  # one (b, s, h) activation

    def linear(mod: str, fin: int, fout: int, bias: bool = True) -> SynthOp:
        params = (fin * fout + (fout if bias else 0)) * e
        return SynthOp(mod, "Linear", params, rows * fin * e, rows * fout * e,
                       2.0 * rows * fin * fout, (rows, fin, fout))

    def norm(mod: str) -> SynthOp:
        return SynthOp(mod, "LayerNorm", 2 * h * e, act, act, 0.0)

    ops = [SynthOp("tok_emb", "Embedding", v * h * e, rows * _TOKEN_BYTES, act, 0.0),
           SynthOp("pos_emb", "Embedding", s * h * e, s * _TOKEN_BYTES, s * h * e, 0.0)]
    for i in range(shape.layers):
        p = f"blocks.{i}."
        ops += [
            norm(p + "ln1"),
            linear(p + "attn.qkv", h, 3 * h),
            SynthOp(p + "attn.core", "Attention", 0, 3 * act, act, 4.0 * b * s * s * h,
                    saved_bytes=attention_saved_bytes(shape, dtype, attention)),
            linear(p + "attn.proj", h, h),
            norm(p + "ln2"),
            linear(p + "mlp.fc1", h, f),
            SynthOp(p + "mlp.act", "GELU", 0, rows * f * e, rows * f * e, 0.0),
            linear(p + "mlp.fc2", f, h),
        ]
    ops += [norm("ln_f"), linear("head", h, v, bias=False)]
    return ops


def roofline_us(flops: float, nbytes: float, gpu: GPU, dtype: str, efficiency: float) -> float:
    """max(flops / (peak · efficiency), bytes / memory bandwidth), in microseconds."""
    return max(flops / (gpu.peak_flops(dtype) * efficiency) * 1e6,
               nbytes / gpu.mem_bw_bytes_per_us)


def kernel_times_us(o: SynthOp, shape: GPTShape, gpu: GPU, dtype: str,
                    attention: str = "flash") -> tuple[float, float]:
    """(forward, backward) µs of ``o`` from :mod:`echo_sim.cost.kernels` (module docstring)."""
    e = DTYPE_BYTES[dtype]
    rows = shape.micro_batch * shape.seq
    if o.kind == "Linear":
        r, fin, fout = o.dims
        fw = gemm_us(r, fout, fin, gpu, dtype, elem_bytes=e)
        bw = gemm_us(r, fin, fout, gpu, dtype, elem_bytes=e) + \
            gemm_us(fin, fout, r, gpu, dtype, elem_bytes=e)
        if e == 2:  # fp32 main-gradient accumulation (module docstring)
            bw += elementwise_us(o.param_bytes / e * _MAIN_GRAD_BYTES, gpu)
        if o.module == "head":
            logits = float(rows) * shape.vocab
            fw += elementwise_us(logits * 18, gpu)
            bw += elementwise_us(logits * 14, gpu)
        return fw, bw
    if o.kind == "Attention":
        kw = dict(batch=shape.micro_batch, seq=shape.seq, heads=shape.heads,
                  head_dim=shape.hidden // shape.heads, gpu=gpu, dtype=dtype,
                  impl=attention, elem_bytes=e)
        return attention_us(**kw), attention_us(backward=True, **kw)  # type: ignore[arg-type]
    if o.kind == "LayerNorm":
        act = float(o.out_bytes)
        mask = act / e
        if o.module == "ln_f":
            return elementwise_us(2 * act, gpu), elementwise_us(3 * act, gpu)
        return elementwise_us(5 * act + mask, gpu), elementwise_us(5 * act + mask, gpu)
    if o.kind == "GELU":
        return elementwise_us(o.in_bytes + o.out_bytes, gpu), \
            elementwise_us(2 * o.in_bytes + o.out_bytes, gpu)
    if o.kind == "Embedding":
        acc = o.param_bytes / e * _MAIN_GRAD_BYTES if e == 2 else 0.0
        return elementwise_us(o.in_bytes + o.out_bytes, gpu), \
            elementwise_us(o.param_bytes + 2 * o.out_bytes + acc, gpu)
    return elementwise_us(o.fw_bytes, gpu), elementwise_us(o.bw_bytes, gpu)


def _meta(cfg: SynthConfig, gpu: GPU, params: list[tuple[str, list[int]]],
          param_count: int, steps: list[int]) -> dict[str, Any]:
    e = DTYPE_BYTES[cfg.dtype]
    m = cfg.model
    plist = []
    for name, shp in params:
        n = 1
        for d in shp:
            n *= d
        plist.append({"name": name, "shape": shp, "dtype": _TORCH_DTYPE[cfg.dtype],
                      "bytes": n * e})
    return {
        "synthetic": True, "rank_source": "single", "local_world_size": 1,
        "backend": "none", "device_name": gpu.name, "gpu": gpu.name,
        "steps": steps, "step_source": "synthetic", "clock_sync": "none",
        "micro_batch_size": m.micro_batch, "params": plist, "param_bytes": param_count * e,
        "buckets": [], "dtype": _TORCH_DTYPE[cfg.dtype], "efficiency": cfg.efficiency,
        "timer": "roofline" if cfg.efficiency is not None else "kernel-models",
        "attention": cfg.attention, "optimizer": cfg.optimizer,
        "model": {"name": "gpt", "layers": m.layers, "hidden": m.hidden, "heads": m.heads,
                  "seq": m.seq, "vocab": m.vocab, "mlp_ratio": m.mlp_ratio,
                  "micro_batch_size": m.micro_batch, "params": param_count,
                  "param_bytes": param_count * e},
    }


def synth_trace(cfg: SynthConfig) -> Trace:
    """The one-rank trace of ``cfg``: per step FW ops, BW ops in reverse, ``UPDATE.AdamW``,
    and a ``STEP`` marker spanning them; steps back to back from t = 0."""
    gpu = get_gpu(cfg.gpu)
    ops = gpt_ops(cfg.model, cfg.dtype, cfg.attention)
    params = gpt_params(cfg.model)
    count = 0
    for _, shp in params:
        n = 1
        for d in shp:
            n *= d
        count += n
    if cfg.efficiency is None:
        rl = [kernel_times_us(o, cfg.model, gpu, cfg.dtype, cfg.attention) for o in ops]
        update_us = elementwise_us(count * optimizer_bytes_per_param(cfg.dtype, cfg.optimizer),
                                   gpu)
    else:
        eff = cfg.efficiency
        rl = [(roofline_us(o.flops, o.fw_bytes, gpu, cfg.dtype, eff),
               roofline_us(o.bw_flops, o.bw_bytes, gpu, cfg.dtype, eff)) for o in ops]
        update_us = count * optimizer_bytes_per_param(cfg.dtype, cfg.optimizer) \
            / gpu.mem_bw_bytes_per_us
    total_param_bytes = count * DTYPE_BYTES[cfg.dtype]

    tb = TraceBuilder(source_format="synthetic", source=f"synth:gpt/{cfg.gpu}")
    steps = list(range(cfg.steps))
    t = 0.0
    for step in steps:
        start = t
        for o, (fw, _) in zip(ops, rl, strict=True):
            tb.add(rank=0, name="FW." + o.module, cat=Cat.FW, ts_us=t, dur_us=fw, step=step,
                   occ=0, kind=o.kind, param_bytes=o.param_bytes, in_bytes=o.in_bytes,
                   out_bytes=o.out_bytes + o.saved_bytes, flops=o.flops)
            t += fw
        for o, (_, bw) in zip(reversed(ops), reversed(rl), strict=True):
            tb.add(rank=0, name="BW." + o.module, cat=Cat.BW, ts_us=t, dur_us=bw, step=step,
                   occ=0, kind=o.kind, param_bytes=o.param_bytes)
            t += bw
        tb.add(rank=0, name="UPDATE.AdamW", cat=Cat.UPDATE, ts_us=t, dur_us=update_us,
               step=step, occ=0, param_bytes=total_param_bytes)
        t += update_us
        tb.add(rank=0, name="STEP", cat=Cat.STEP, ts_us=start, dur_us=t - start, step=step,
               tid=1, occ=0)
    device = "cpu" if gpu.name == "cpu" else "cuda"
    tb.ranks[0] = RankInfo(rank=0, world_size=1, host="synthetic", device=device,
                           backend="none", source=tb.source,
                           meta=_meta(cfg, gpu, params, count, steps))
    return tb.build(steps)


def write_synth(cfg: SynthConfig, out_dir: str | Path, *, overwrite: bool = False) -> Path:
    """Write the trace of ``cfg`` as an echo trace directory tree; returns the rank directory."""
    from echo_sim.trace.export import write_echo_dirs

    return write_echo_dirs(synth_trace(cfg), out_dir, overwrite=overwrite)[0]
