"""Time of one GPU kernel from its shape: tiled GEMMs, attention, memory-bound elementwise.

One constant efficiency for every operator (``flops / (peak · 0.5)``) is wrong in both
directions: large GEMMs run near the tensor cores' sustained rate while small or skinny ones,
attention with materialised scores and every elementwise kernel run far below it. These
models derive each kernel's time from its shape and the device's datasheet figures
(:class:`~echo_sim.cost.hardware.GPU`: peak FLOP/s per dtype, memory bandwidth, SM count).

**GEMM** ``C[m,n] = A[m,k]·B[k,n]`` (optionally ``batch`` independent ones), after NVIDIA's
"Matrix Multiplication Background User's Guide" (DU-09799-001, 2023, §2.3 typical cuBLAS
tiles, §3.1 tile quantisation, §3.2 wave quantisation): the output is cut into ``tm × tn``
tiles, one thread block each; blocks run in waves of ``sms`` (one resident block per SM for
the large tiles); each tile loops over ``k``. So with ``T = batch·⌈m/tm⌉·⌈n/tn⌉`` tiles::

    t_tile  = 2·tm·tn·(k + K_OVERHEAD) / (peak · SUSTAINED / sms · reuse(tm, tn))
    t_gemm  = min over tiles of ⌈T / sms⌉ · t_tile,   then max(t_gemm, bytes / mem_bw)

``K_OVERHEAD`` elements of k stand for each tile's pipeline prologue and epilogue (loading
the first operand slices, writing ``C``); ``reuse`` is the operand reuse of the tile, its
arithmetic intensity ``tm·tn/(tm+tn)`` relative to a 128×128 tile's (64), capped at 1:
narrower tiles re-read operands from L2 more often than the SM's shared memory can hide.
cuBLAS's heuristic picks among these tiles; we take the fastest, as it aims to.

**Split-K** (CUTLASS "Efficient GEMM in CUDA", §Parallelized Reductions; cuBLAS(Lt)'s
``splitKreduce_kernel``): when the output has fewer tiles than the GPU has SMs (less
than one wave) but ``k`` is long — the weight-gradient GEMMs ``in × out × rows`` of small layers — the ``k`` loop is
cut into ``s`` slices run by separate thread blocks, then reduced: ``s`` times the tiles,
``⌈k/s⌉`` deep each, plus a memory-bound reduction reading the ``s`` fp32 partial outputs
and writing ``C`` (``4·s·m·n + e·m·n`` bytes); more slices also fill the last, partial
wave. Outputs of a wave or more are not split. We take the fastest ``s`` in ``1..SPLIT_K_MAX`` (slices at least ``K_OVERHEAD``
deep) per tile, as the heuristic aims to; ``s = 1`` is the plain GEMM.

**Attention** over ``b`` sequences of ``s`` tokens, ``a`` heads of width ``d``:

* ``flash`` (FlashAttention / SDPA; Dao et al. 2022, Dao 2023): two batched GEMMs per head
  (``Q·Kᵀ``: s×s×d; ``P·V``: s×d×s), scores never reach memory; backward re-computes
  ``Q·Kᵀ`` and runs four more GEMMs: 5/2 of the forward's GEMM work.
* ``unfused`` (Megatron-LM 2021/2022, before FlashAttention): the same two batched GEMMs
  plus memory-bound passes over the ``b·a·s²`` score matrix in 16-bit: fused
  scale-mask-softmax (read + write, 4 bytes per score) and dropout (read, write, 1-byte
  mask: 5 bytes); backward: dropout (5) and softmax (6: read grad and probabilities, write
  grad) and twice the GEMMs.
* ``eager`` (PyTorch eager, written out as ``examples/models.py``'s
  ``CausalSelfAttention``: ``q @ kᵀ``, ``* scale``, ``masked_fill``, ``softmax``,
  ``@ v``; no dropout): every step is its own kernel over the ``b·a·s²`` scores of ``e``
  bytes (``S = e·b·a·s²`` bytes per pass; :func:`eager_attention_bytes`). Forward: scale
  (read + write: 2S), ``masked_fill`` out of place = clone + in-place fill (4S), softmax
  (2S): 8S; plus the ``.contiguous()`` copies ``matmul`` makes of the strided q, k, v
  views and the output transpose (``reshape`` of a non-viewable tensor, read + write:
  4 × 2 = 8 activations of ``A = e·b·s·h``). Backward (``torch/csrc/autograd/
  FunctionsManual.cpp`` / ``derivatives.yaml``): softmax (``_softmax_backward_data``:
  ``grad·out`` then the row reduction: 2 × 3S), ``masked_fill`` (clone + fill: 4S), scale
  (2S): 12S; the q/k/v ``select`` backward (``select_backward``: a zeroed ``3A`` tensor
  plus a slice copy, three times, and two accumulating adds of ``3A``: 9A + 6A + 18A) and
  the copies back through the ``view``/``reshape`` (6A + 2A): 41A.

**Elementwise** kernels (layer norm, GELU, bias-dropout-add, optimizer) move bytes:
``nbytes / (mem_bw · STREAM_FRACTION)``.

Constants (one set for every device and job; none fitted to a validation row):
``SUSTAINED`` = 0.80 — the fraction of the datasheet's dense peak a large, aligned GEMM
sustains (the user's guide's measured large-GEMM throughput on A100/V100 sits near 80 % of
the boost-clock peak: power/clock limits and instruction issue overheads);
``STREAM_FRACTION`` = 0.85 — achievable fraction of HBM bandwidth for a streaming kernel
(STREAM-like copy/scale kernels reach 85-90 % of the HBM datasheet rate);
``K_OVERHEAD`` = 64 elements — two 32-deep k-steps of prologue/epilogue per tile;
``SPLIT_K_MAX`` = 16 — the deepest split CUTLASS's split-K examples and cuBLAS's
heuristics use.

SIMT fp32 (no tensor cores, ``--dtype fp32``: cuBLAS's ``sgemm``/``ffma`` kernels) uses the
same tiles and the same ``SUSTAINED`` fraction of the datasheet fp32 peak: the limits it
stands for (boost clock not held under load, operand-load instructions between the FMAs)
apply to the FMA pipes as to the tensor cores.
"""

from __future__ import annotations

import math

from echo_sim.cost.hardware import GPU

__all__ = [
    "ATTENTION_IMPLS",
    "K_OVERHEAD",
    "SPLIT_K_MAX",
    "STREAM_FRACTION",
    "SUSTAINED",
    "TILES",
    "attention_us",
    "eager_attention_bytes",
    "elementwise_us",
    "gemm_efficiency",
    "gemm_us",
]

SUSTAINED = 0.80
STREAM_FRACTION = 0.85
K_OVERHEAD = 64
SPLIT_K_MAX = 16
TILES: tuple[tuple[int, int], ...] = ((256, 128), (128, 256), (128, 128), (128, 64), (64, 128),
                                      (64, 64))
"""cuBLAS output tiles (user's guide §2.3), largest first."""
_REF_INTENSITY = 128 * 128 / (128 + 128)
ATTENTION_IMPLS: tuple[str, ...] = ("flash", "unfused", "eager")
_SOFTMAX_BYTES_FW, _DROPOUT_BYTES_FW = 4, 5  # per score element (module docstring)
_SOFTMAX_BYTES_BW, _DROPOUT_BYTES_BW = 6, 5


def _reuse(tm: int, tn: int) -> float:
    return min(1.0, tm * tn / (tm + tn) / _REF_INTENSITY)


def _tiled_us(m: int, n: int, k: int, gpu: GPU, dtype: str, batch: int,
              elem_bytes: int = 2) -> float:
    """Compute-side time (µs) of the tiled GEMMs: the fastest tile and split-K's waves."""
    per_sm = gpu.peak_flops(dtype) * SUSTAINED / gpu.sms  # FLOP/s of one SM
    best = math.inf
    for tm, tn in TILES:
        out_tiles = batch * math.ceil(m / tm) * math.ceil(n / tn)
        for split in range(1, SPLIT_K_MAX + 1 if out_tiles < gpu.sms else 2):
            if split > 1 and k < split * K_OVERHEAD:
                break  # slices shorter than their own prologue
            waves = math.ceil(out_tiles * split / gpu.sms)
            kk = math.ceil(k / split)
            t = waves * 2.0 * tm * tn * (kk + K_OVERHEAD) / (per_sm * _reuse(tm, tn))
            if split > 1:  # reduce the fp32 partials (module docstring)
                t += (4.0 * split + elem_bytes) * batch * m * n / (
                    gpu.mem_bw_bytes_per_us * 1e6 * STREAM_FRACTION)
            best = min(best, t)
    return best * 1e6


def gemm_us(m: int, n: int, k: int, gpu: GPU, dtype: str, *, batch: int = 1,
            elem_bytes: int = 2) -> float:
    """Time (µs) of ``batch`` GEMMs of ``m×k`` by ``k×n`` (module docstring)."""
    if min(m, n, k, batch) <= 0:
        return 0.0
    nbytes = batch * (m * k + k * n + m * n) * elem_bytes
    return max(_tiled_us(m, n, k, gpu, dtype, batch, elem_bytes),
               nbytes / gpu.mem_bw_bytes_per_us)


def gemm_efficiency(m: int, n: int, k: int, gpu: GPU, dtype: str, *, batch: int = 1) -> float:
    """Achieved fraction of the datasheet peak: useful FLOPs / (time · peak)."""
    t = gemm_us(m, n, k, gpu, dtype, batch=batch)
    return 2.0 * batch * m * n * k / (t * 1e-6 * gpu.peak_flops(dtype)) if t > 0 else 0.0


def elementwise_us(nbytes: float, gpu: GPU) -> float:
    """A memory-bound kernel moving ``nbytes``: bytes / (bandwidth · STREAM_FRACTION)."""
    return max(nbytes, 0.0) / (gpu.mem_bw_bytes_per_us * STREAM_FRACTION)


def eager_attention_bytes(*, batch: int, seq: int, heads: int, head_dim: int,
                          elem_bytes: int, backward: bool = False) -> float:
    """Bytes the memory-bound kernels of ``eager`` attention move (module docstring):
    forward ``8S + 8A``, backward ``12S + 41A`` with ``S = e·b·a·s²``, ``A = e·b·s·a·d``."""
    scores = float(elem_bytes) * batch * heads * seq * seq
    act = float(elem_bytes) * batch * seq * heads * head_dim
    return 12.0 * scores + 41.0 * act if backward else 8.0 * scores + 8.0 * act


def attention_us(*, batch: int, seq: int, heads: int, head_dim: int, gpu: GPU, dtype: str,
                 impl: str = "flash", backward: bool = False, elem_bytes: int = 2) -> float:
    """Time (µs) of the attention core (scores, softmax, weighted sum) of one micro-batch.

    ``heads``: the heads this device computes (``a / tp`` under tensor parallelism).
    """
    if impl not in ATTENTION_IMPLS:
        raise ValueError(f"attention impl {impl!r}; valid: {', '.join(ATTENTION_IMPLS)}")
    bh = batch * heads
    if min(bh, seq, head_dim) <= 0:
        return 0.0
    if impl == "flash":
        # scores stay on chip: the two GEMMs' compute, no s² memory traffic
        fw = _tiled_us(seq, seq, head_dim, gpu, dtype, bh) + \
            _tiled_us(seq, head_dim, seq, gpu, dtype, bh)
        return 2.5 * fw if backward else fw
    qk = gemm_us(seq, seq, head_dim, gpu, dtype, batch=bh, elem_bytes=elem_bytes)
    pv = gemm_us(seq, head_dim, seq, gpu, dtype, batch=bh, elem_bytes=elem_bytes)
    if impl == "eager":
        moved = eager_attention_bytes(batch=batch, seq=seq, heads=heads, head_dim=head_dim,
                                      elem_bytes=elem_bytes, backward=backward)
        return (2.0 if backward else 1.0) * (qk + pv) + elementwise_us(moved, gpu)
    scores = float(bh) * seq * seq
    if backward:
        return 2.0 * (qk + pv) + elementwise_us(
            scores * (_SOFTMAX_BYTES_BW + _DROPOUT_BYTES_BW), gpu)
    return qk + pv + elementwise_us(scores * (_SOFTMAX_BYTES_FW + _DROPOUT_BYTES_FW), gpu)
