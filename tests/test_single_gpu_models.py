"""One-GPU cost and memory models held to what PyTorch really runs and saves.

Split-K GEMMs, PyTorch-eager attention (time and saved tensors), ``torch.optim.AdamW``'s
foreach passes, selective recomputation of the saved scores, and the own-run validation
rows (benchmarks/validation/own_runs.py).
"""

from __future__ import annotations

import math

import pytest

from echo_sim.cost.hardware import get_gpu
from echo_sim.cost.kernels import (
    K_OVERHEAD,
    STREAM_FRACTION,
    SUSTAINED,
    attention_us,
    eager_attention_bytes,
    elementwise_us,
    gemm_us,
)
from echo_sim.cost.memory_model import activation_bytes
from echo_sim.sim.synth import (
    GPTShape,
    SynthConfig,
    attention_saved_bytes,
    gpt_ops,
    gpt_params,
    optimizer_bytes_per_param,
    synth_trace,
)
from echo_sim.workload.ops import extract_workload

H100 = get_gpu("h100")


def test_split_k_fills_the_gpu_for_small_outputs_with_long_k() -> None:
    # weight gradient of a 768 -> 3072 Linear over 4096 rows: 72 output tiles of 256x128
    # on 132 SMs. Unsplit, one wave of 4096 + K_OVERHEAD deep tiles; the model must do
    # better by splitting k and paying the fp32 partials' reduction.
    m, n, k = 768, 3072, 4096
    per_sm = H100.peak_flops("fp32") * SUSTAINED / H100.sms
    unsplit = 2.0 * 256 * 128 * (k + K_OVERHEAD) / per_sm * 1e6
    t = gemm_us(m, n, k, H100, "fp32", elem_bytes=4)
    assert t < 0.75 * unsplit
    # split s = 9 of the 128x256 tile: 648 blocks = 5 waves of 456 + 64 deep, + reduction
    s9 = 5 * 2.0 * 128 * 256 * (math.ceil(k / 9) + K_OVERHEAD) / per_sm * 1e6 \
        + (4 * 9 + 4) * m * n / (H100.mem_bw_bytes_per_us * STREAM_FRACTION)
    assert t <= s9 + 1e-9


def test_split_k_leaves_outputs_of_a_wave_or_more_alone() -> None:
    # 8192 x 8192 output: 2048 tiles of 256x128, many waves: the plain tiled time
    m = n = 8192
    k = 8192
    per_sm = H100.peak_flops("bf16") * SUSTAINED / H100.sms
    plain = min(math.ceil(math.ceil(m / tm) * math.ceil(n / tn) / H100.sms) * 2.0 * tm * tn
                * (k + K_OVERHEAD) / (per_sm * min(1.0, tm * tn / (tm + tn) / 64))
                for tm, tn in ((256, 128), (128, 256), (128, 128), (128, 64), (64, 128),
                               (64, 64))) * 1e6
    assert gemm_us(m, n, k, H100, "bf16") == pytest.approx(plain, rel=1e-12)


def test_eager_attention_time_is_gemms_plus_score_passes() -> None:
    kw = dict(batch=8, seq=512, heads=12, head_dim=64, gpu=H100, dtype="fp32", elem_bytes=4)
    S = 4.0 * 8 * 12 * 512 * 512
    A = 4.0 * 8 * 512 * 768
    assert eager_attention_bytes(batch=8, seq=512, heads=12, head_dim=64,
                                 elem_bytes=4) == 8 * S + 8 * A
    assert eager_attention_bytes(batch=8, seq=512, heads=12, head_dim=64, elem_bytes=4,
                                 backward=True) == 12 * S + 41 * A
    gemms = gemm_us(512, 512, 64, H100, "fp32", batch=96, elem_bytes=4) + \
        gemm_us(512, 64, 512, H100, "fp32", batch=96, elem_bytes=4)
    fw = attention_us(impl="eager", **kw)  # type: ignore[arg-type]
    bw = attention_us(impl="eager", backward=True, **kw)  # type: ignore[arg-type]
    assert fw == pytest.approx(gemms + elementwise_us(8 * S + 8 * A, H100))
    assert bw == pytest.approx(2 * gemms + elementwise_us(12 * S + 41 * A, H100))
    # the score passes dominate at this shape: eager costs more than Megatron's fused one
    assert fw > attention_us(impl="unfused", **kw)  # type: ignore[arg-type]


def _saved_storages(fn):  # type: ignore[no-untyped-def]
    torch = pytest.importorskip("torch")
    seen: dict[int, int] = {}

    def pack(t):  # type: ignore[no-untyped-def]
        st = t.untyped_storage()
        seen[st.data_ptr()] = st.nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = fn()
    return seen, out


def test_eager_attention_saves_what_autograd_saves() -> None:
    torch = pytest.importorskip("torch")
    from examples.models import CausalSelfAttention, GPTConfig

    b, s, h, a = 2, 32, 64, 4
    cfg = GPTConfig(vocab_size=50, seq_len=s, hidden=h, layers=1, heads=a)
    attn = CausalSelfAttention(cfg)
    x = torch.randn(b, s, h, requires_grad=True)
    seen, _ = _saved_storages(lambda: attn(x))
    skip = {p.untyped_storage().data_ptr() for p in attn.parameters()}
    skip.add(x.untyped_storage().data_ptr())  # the block input: ln1's output in synth
    real = sum(n for ptr, n in seen.items() if ptr not in skip)
    shape = GPTShape(layers=1, hidden=h, heads=a, seq=s, vocab=50, micro_batch=b)
    ops = {o.module: o for o in gpt_ops(shape, "fp32", "eager")}
    synth = ops["blocks.0.attn.qkv"].out_bytes + ops["blocks.0.attn.core"].out_bytes \
        + ops["blocks.0.attn.core"].saved_bytes
    mask = s * s  # the causal mask (bool) masked_fill keeps
    assert real == synth + mask
    assert attention_saved_bytes(shape, "fp32", "eager") == 4 * b * a * s * s


def test_synth_activations_match_autograd_for_the_whole_gpt() -> None:
    torch = pytest.importorskip("torch")
    import torch.nn.functional as F

    from examples.models import GPT, GPTConfig

    b, s, h, a, v, L = 2, 64, 64, 4, 100, 2
    model = GPT(GPTConfig(vocab_size=v, seq_len=s, hidden=h, layers=L, heads=a))
    x = torch.randint(0, v, (b, s))
    y = torch.randint(0, v, (b, s))

    def step():  # type: ignore[no-untyped-def]
        out = model(x)
        return F.cross_entropy(out.reshape(-1, v), y.reshape(-1))

    seen, _ = _saved_storages(step)
    params = {p.untyped_storage().data_ptr() for p in model.parameters()}
    real = sum(n for ptr, n in seen.items() if ptr not in params)
    shape = GPTShape(layers=L, hidden=h, heads=a, seq=s, vocab=v, micro_batch=b)
    wl = extract_workload(synth_trace(SynthConfig(model=shape, gpu="h100", dtype="fp32",
                                                  attention="eager", steps=1)))
    synth = activation_bytes(wl.fw_ops)
    assert synth == pytest.approx(real, rel=0.05)
    # without the saved scores the model would miss a fifth of them at this shape
    flash = extract_workload(synth_trace(SynthConfig(model=shape, gpu="h100", dtype="fp32",
                                                     attention="flash", steps=1)))
    assert activation_bytes(flash.fw_ops) < 0.85 * real


def test_adamw_foreach_bytes_match_torch_passes() -> None:
    torch = pytest.importorskip("torch")
    from torch.utils._python_dispatch import TorchDispatchMode

    params = [torch.nn.Parameter(torch.randn(64, 32)), torch.nn.Parameter(torch.randn(96))]
    for p in params:
        p.grad = torch.randn_like(p)
    opt = torch.optim.AdamW(params, lr=1e-3, foreach=True)
    opt.step()  # create the state (first-step zeros) outside the count
    count = sum(p.numel() for p in params)
    moved = [0]

    def nbytes(x: object) -> int:
        if isinstance(x, torch.Tensor):
            return x.numel() * x.element_size() if x.numel() > 1 else 0  # not step scalars
        if isinstance(x, (list, tuple)):
            return sum(nbytes(i) for i in x)
        return 0

    class Count(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore
            out = func(*args, **(kwargs or {}))
            if str(func.name()).startswith("aten::_foreach"):
                inplace = str(func.name()).split("::")[1].split(".")[0].endswith("_")
                # reads: every tensor operand; writes: the result (in place: the first list)
                moved[0] += nbytes(args) + (nbytes(args[0]) if inplace else nbytes(out))
            return out

    with Count():
        opt.step()
    assert moved[0] == optimizer_bytes_per_param("fp32", "foreach") * count
    assert optimizer_bytes_per_param("fp32", "fused") == 28


def test_foreach_update_is_three_times_the_fused_pass() -> None:
    shape = GPTShape(layers=2, hidden=256, heads=4, seq=64, vocab=512, micro_batch=2)
    n = sum(math.prod(s) for _, s in gpt_params(shape))

    def update_us(opt: str) -> float:
        wl = extract_workload(synth_trace(SynthConfig(model=shape, gpu="h100", dtype="fp32",
                                                      optimizer=opt, steps=1)))
        (upd,) = wl.update_ops
        return upd.dur_us

    assert update_us("foreach") == pytest.approx(elementwise_us(84 * n, H100))
    assert update_us("fused") == pytest.approx(elementwise_us(28 * n, H100))


def test_selective_recompute_drops_the_saved_scores() -> None:
    shape = GPTShape(layers=2, hidden=256, heads=4, seq=128, vocab=512, micro_batch=2)
    wl = extract_workload(synth_trace(SynthConfig(model=shape, gpu="a100", dtype="bf16",
                                                  attention="unfused", steps=1)))
    full = activation_bytes(wl.fw_ops)
    sel = activation_bytes(wl.fw_ops, recompute="selective")
    # Korthikanti et al. 2022: 5·a·s²·b bytes per layer for 16-bit Megatron attention
    assert full - sel == pytest.approx(2 * 5 * 4 * 128 * 128 * 2)


def test_interval_error_scores_against_the_nearer_bound() -> None:
    from benchmarks.validation.own_runs import interval_error

    assert interval_error(5.0, 4.0, 6.0) == 0.0
    assert interval_error(3.0, 4.0, 6.0) == pytest.approx(-0.25)
    assert interval_error(9.0, 4.0, 6.0) == pytest.approx(0.5)


def test_own_h100_run_reads_its_recordings_and_is_predicted() -> None:
    from benchmarks.validation.own_runs import OWN_RUNS, predict_own, summarise_own

    run = next(r for r in OWN_RUNS if r.id == "h100-gpt12-fp32")
    steps = run.step_times_s()
    assert len(steps) == 8 and 0.087 < min(steps) and max(steps) < 0.097
    lo, hi = run.memory_bounds()
    assert (lo, hi) == (3_637_107_200, 5_616_173_056)
    res = predict_own(run)
    assert res["measured_step_s"] == pytest.approx(0.08997, abs=1e-4)
    # the GPU work of the step (76 ms of kernels in the H100's torch.profiler trace) is
    # predicted within 5 %; the script's host-side data generation (~10 ms) is not modelled
    assert 0.072 < res["predicted_step_s"] < 0.080
    assert lo <= res["synth_peak_bytes"] <= hi
    assert summarise_own([res])["rows"] == 1
    # the CPU capture of the same shape carries autograd's saved tensors: its memory,
    # re-timed to the H100, lies in the recorded allocator bounds and above the older GPU
    # capture's leaf-output estimate (which misses the attention core's tensors)
    assert lo <= res["cpu_capture_peak_bytes"] <= hi
    assert res["cpu_capture_peak_bytes"] > 1.2 * res["recorded_peak_bytes"]


def test_replayed_allocator_peak_lies_in_the_recorded_bounds() -> None:
    pytest.importorskip("torch")
    from benchmarks.validation.own_runs import OWN_RUNS, replay_peak_bytes

    run = OWN_RUNS[0]
    lo, hi = run.memory_bounds()
    replay = replay_peak_bytes(run)
    assert replay is not None and lo < replay < hi
    wl = extract_workload(synth_trace(SynthConfig(
        model=GPTShape(layers=run.layers, hidden=run.hidden, heads=run.heads, seq=run.seq,
                       vocab=run.vocab, micro_batch=run.micro_batch),
        gpu=run.gpu, dtype=run.dtype, attention=run.attention, steps=1)))
    # activations alone: the replay holds them plus params, optimizer state and the loss
    assert activation_bytes(wl.fw_ops) < replay
