"""Shape-based GPU kernel models (echo_sim.cost.kernels) and their use in synth/build."""

from __future__ import annotations

import math

import numpy as np
import pytest

from echo_sim.cost.hardware import get_gpu
from echo_sim.cost.kernels import (
    K_OVERHEAD,
    STREAM_FRACTION,
    SUSTAINED,
    attention_us,
    elementwise_us,
    gemm_efficiency,
    gemm_us,
)
from echo_sim.sim.synth import GPTShape, SynthConfig, gpt_ops, kernel_times_us, synth_trace
from echo_sim.workload.build import Layout, make_plan, recompute_mode
from echo_sim.workload.ops import extract_workload

A100 = get_gpu("a100")


def test_large_gemm_approaches_sustained_rate() -> None:
    # one full wave of 256x128 tiles with a long k: efficiency -> SUSTAINED·k/(k+K_OVERHEAD)
    m, n, k = 256 * 108, 128, 65536
    eff = gemm_efficiency(m, n, k, A100, "bf16")
    assert eff == pytest.approx(SUSTAINED * k / (k + K_OVERHEAD), rel=1e-9)
    assert gemm_efficiency(8192, 8192, 8192, A100, "bf16") < SUSTAINED


def test_wave_quantisation_steps_time_up() -> None:
    # 108 tiles of 256x128 fill one wave on 108 SMs; one more row of tiles needs a second
    full = gemm_us(256 * 108, 128, 4096, A100, "bf16")
    over = gemm_us(256 * 108 + 256, 128, 4096, A100, "bf16")
    assert over > 1.2 * full
    # tile quantisation: one row past a full wave (768 x 4096 = 96 tiles of 256x128) costs
    # a whole extra (partial) wave, however the tiles are chosen
    assert gemm_us(769, 4096, 4096, A100, "bf16") > 1.2 * gemm_us(768, 4096, 4096, A100, "bf16")


def test_efficiency_grows_with_size_and_small_gemms_are_memory_bound() -> None:
    sizes = [256, 1024, 4096, 16384]
    effs = [gemm_efficiency(s, s, s, A100, "bf16") for s in sizes]
    assert effs == sorted(effs)
    # a skinny GEMM (k = 8) moves more bytes than it computes: bytes / bandwidth
    m = n = 8192
    t = gemm_us(m, n, 8, A100, "bf16")
    assert t == pytest.approx((m * 8 + 8 * n + m * n) * 2 / A100.mem_bw_bytes_per_us)


def test_elementwise_by_bytes() -> None:
    assert elementwise_us(2.039e9, A100) == pytest.approx(1e3 / STREAM_FRACTION)
    assert elementwise_us(0, A100) == 0.0


def test_attention_unfused_pays_for_scores() -> None:
    kw = dict(batch=1, seq=2048, heads=12, head_dim=128, gpu=A100, dtype="bf16")
    flash = attention_us(**kw)  # type: ignore[arg-type]
    unfused = attention_us(impl="unfused", **kw)  # type: ignore[arg-type]
    scores = 12 * 2048 * 2048
    assert unfused > flash + elementwise_us(9 * scores, A100) * 0.99
    assert attention_us(backward=True, **kw) == pytest.approx(2.5 * flash)  # type: ignore
    with pytest.raises(ValueError, match="valid: flash, unfused"):
        attention_us(impl="naive", **kw)  # type: ignore[arg-type]


SHAPE = GPTShape(layers=2, hidden=1024, heads=16, seq=512, vocab=8192, micro_batch=2)


def test_synth_defaults_to_kernel_models_with_fp32_main_grads() -> None:
    tr = synth_trace(SynthConfig(model=SHAPE, gpu="a100", steps=1))
    assert tr.ranks[0].meta["timer"] == "kernel-models"
    fc1 = next(o for o in gpt_ops(SHAPE, "bf16") if o.module == "blocks.0.mlp.fc1")
    fw, bw = kernel_times_us(fc1, SHAPE, A100, "bf16")
    rows, fin, fout = fc1.dims
    assert fw == pytest.approx(gemm_us(rows, fout, fin, A100, "bf16"))
    grads = gemm_us(rows, fin, fout, A100, "bf16") + gemm_us(fin, fout, rows, A100, "bf16")
    main_grad = elementwise_us(fc1.param_bytes / 2 * 10, A100)
    assert bw == pytest.approx(grads + main_grad)
    # fp32: no master-gradient pass
    fc1_32 = next(o for o in gpt_ops(SHAPE, "fp32") if o.module == "blocks.0.mlp.fc1")
    _, bw32 = kernel_times_us(fc1_32, SHAPE, A100, "fp32")
    assert bw32 == pytest.approx(gemm_us(rows, fin, fout, A100, "fp32", elem_bytes=4)
                                 + gemm_us(fin, fout, rows, A100, "fp32", elem_bytes=4))


def test_selective_recompute_reruns_only_attention() -> None:
    wl = extract_workload(synth_trace(SynthConfig(model=SHAPE, gpu="a100", steps=1)))
    base = np.array([o.time_us for o in wl.ops])
    lay = Layout()
    plans = {m: make_plan(wl, lay, base, recompute=m) for m in ("none", "selective", "full")}
    extra = {m: float(p.time_us.sum() - base.sum()) for m, p in plans.items()}
    attn_fw = sum(o.time_us for o in wl.ops if o.phase == "F" and o.kind == "Attention")
    fw_all = sum(o.time_us for o in wl.ops if o.phase == "F" and o.module in
                 {b.module for b in wl.ops if b.phase == "B"})
    assert extra["none"] == 0.0
    assert extra["selective"] == pytest.approx(attn_fw)
    assert extra["full"] == pytest.approx(fw_all)
    assert recompute_mode(True) == "full" and recompute_mode(False) == "none"


def test_sequence_parallel_shards_replicated_block_ops() -> None:
    wl = extract_workload(synth_trace(SynthConfig(model=SHAPE, gpu="a100", steps=1)))
    base = np.array([o.time_us for o in wl.ops])
    lay = Layout(tp=4)
    plain = make_plan(wl, lay, base).time_us
    sp = make_plan(wl, lay, base, sequence_parallel=True).time_us
    ln = next(o for o in wl.ops if o.module == "blocks.0.ln1" and o.phase == "F")
    assert sp[ln.index] == pytest.approx(plain[ln.index] / 4)
    head = next(o for o in wl.ops if o.module == "head" and o.phase == "F")
    assert sp[head.index] == plain[head.index]
    assert math.isfinite(float(sp.sum()))


def test_zero3_fetch_path_bounds_deepspeed_2021_collectives() -> None:
    from echo_sim.cost.zero3 import FETCH_GBPS, fetch_us
    from echo_sim.errors import ConfigError

    s = 3.6e9  # one GPT-175B layer of fp16 parameters
    assert fetch_us(s, 1536, "fsdp2") == 0.0
    assert fetch_us(s, 1536, "deepspeed-2021") == pytest.approx(
        1535 / 1536 * s / (FETCH_GBPS * 1e3))
    assert fetch_us(s, 1, "deepspeed-2021") == 0.0
    with pytest.raises(ConfigError, match="valid: fsdp2, deepspeed-2021"):
        fetch_us(s, 8, "zero-infinity")


def test_deepspeed_zero3_is_slower_than_fsdp2_at_scale() -> None:
    from echo_sim.sim.simulate import SimConfig, simulate

    shape = GPTShape(layers=4, hidden=4096, heads=32, seq=1024, vocab=8192, micro_batch=1)
    tr = synth_trace(SynthConfig(model=shape, gpu="a100", steps=1))
    common = dict(dp=64, micro_batch=1, global_batch=64, cluster="dgx-a100", fsdp=True,
                  recompute="full")
    fsdp2 = simulate(tr, SimConfig(**common), keep=False)  # type: ignore[arg-type]
    ds = simulate(tr, SimConfig(fsdp_impl="deepspeed-2021", **common),  # type: ignore
                  keep=False)
    assert ds.iteration_time_us > 1.5 * fsdp2.iteration_time_us


def test_post_backward_all_reduce_is_one_bucket_after_backward() -> None:
    from echo_sim.workload.data_parallel import apply_data_parallel

    wl = extract_workload(synth_trace(SynthConfig(model=SHAPE, gpu="a100", steps=1)))
    bw = [o for o in wl.ops if o.phase == "B"]
    params = [(n, float(b)) for n, b, _ in wl.params]
    hooks = apply_data_parallel(bw, params, mode="post")
    assert len(hooks) == 1
    h = hooks[0]
    assert h.collective == "all_reduce" and h.issue == bw[-1].index and h.when == "last"
    assert h.nbytes == int(sum(b for _, b in params))
    assert len(apply_data_parallel(bw, params, mode="ddp")) > 1


def test_comm_model_prices_at_achieved_nccl_bandwidth() -> None:
    from echo_sim.cost.collectives import CommModel, achieved_cluster, collective_time_us
    from echo_sim.cost.hardware import get_cluster

    c = get_cluster("dgx-a100")
    a = achieved_cluster(c)
    assert a.intra_bw_gbps == pytest.approx(300.0 * c.intra_efficiency)
    assert a.inter_bw_gbps == pytest.approx(25.0 * c.inter_efficiency)
    assert achieved_cluster(get_cluster("cpu-gloo")) is get_cluster("cpu-gloo")
    big = 1 << 30
    ranks = list(range(8))
    # the simulator's model is slower than the link-rate formula by 1 / efficiency
    ratio = CommModel(c).time_us("all_reduce", big, ranks) / \
        collective_time_us("all_reduce", big, ranks, c)
    assert ratio == pytest.approx(1 / c.intra_efficiency, rel=0.01)
    assert get_cluster("jeanzay-a100").inter_bw_gbps == 6.25
