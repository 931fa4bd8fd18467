"""Memory model: ZeRO model-state closed forms, Korthikanti activations, pipeline in-flight."""

from __future__ import annotations

import pytest

from echo_sim.cost.memory_model import (
    activation_bytes,
    dtype_bytes,
    korthikanti_activation_bytes,
    model_state_bytes,
    optimizer_states,
    parse_bytes,
)
from echo_sim.errors import ConfigError
from echo_sim.sim.simulate import SimConfig, simulate
from echo_sim.trace.model import TraceBuilder
from echo_sim.workload import extract_workload
from tests.test_workload import LinearComm, chain_trace, gpt_modules, gpt_trace, make_trace

PSI = 1_000_000  # parameters


def test_zero_model_states_mixed_precision_adam_is_16_psi():
    p, g, o = model_state_bytes(2 * PSI, elem_bytes=2, states=2, mixed=True)
    assert (p, g, o) == (2 * PSI, 2 * PSI, 12 * PSI)  # ZeRO §3.1: 2Ψ + 2Ψ + 12Ψ
    p, g, o = model_state_bytes(2 * PSI, elem_bytes=2, states=2, mixed=True, shard=8)
    assert p + g + o == pytest.approx(16 * PSI / 8)  # ZeRO-3: (2 + 2 + K)Ψ / Nd
    p, g, o = model_state_bytes(4 * PSI, elem_bytes=4, states=2, mixed=False)
    assert (p, g, o) == (4 * PSI, 4 * PSI, 8 * PSI)
    assert optimizer_states("UPDATE.AdamW") == 2 and optimizer_states("UPDATE.SGD") == 1
    assert dtype_bytes("torch.bfloat16") == 2 and dtype_bytes("float32") == 4


def test_korthikanti_closed_forms():
    kw = dict(seq=2048, batch=1, hidden=12288, heads=96)
    sbh = 2048 * 12288
    assert korthikanti_activation_bytes(**kw) == sbh * (34 + 80)  # 5as/h = 80
    assert korthikanti_activation_bytes(**kw, tp=8) == sbh * (10 + 3 + 10)
    assert korthikanti_activation_bytes(**kw, tp=8, sequence_parallel=True) == \
        pytest.approx(sbh / 8 * 114)
    assert korthikanti_activation_bytes(**kw, recompute=True, layers=96) == 2 * sbh * 96


def test_activation_bytes_from_out_bytes():
    wl = extract_workload(gpt_trace(2))
    act = 2 * 4 * 8 * 4
    # per block: ln1 a, qkv 3a, proj a, ln2 a, fc1 4a, gelu 4a, fc2 a = 15a;
    # tok a, pos seq·h·4 = a/2, ln_f a, head 2·4·16·4 = 2a
    assert activation_bytes(wl.fw_ops) == 2 * 15 * act + act + act // 2 + act + 2 * act
    # tp 2: qkv, fc1, gelu and head outputs are sharded
    assert activation_bytes(wl.fw_ops, tp=2) == \
        2 * (15 - 1.5 - 2 - 2) * act + act + act // 2 + act + act
    # recompute: block inputs kept + one block's working set; outside blocks kept
    assert activation_bytes(wl.fw_ops, recompute=True) == \
        2 * act + 15 * act + act + act // 2 + act + 2 * act
    assert activation_bytes(wl.fw_ops, mb_scale=3.0) == 3 * activation_bytes(wl.fw_ops)


def test_pipeline_stage_holds_pp_minus_s_micro_batches():
    tr = chain_trace(4)
    res = simulate(tr, SimConfig(pp=4, global_batch=16, micro_batch=2, cluster="cpu-gloo"),
                   comm=LinearComm())
    acts = [r.memory["activations"] for r in sorted(res.ranks, key=lambda r: r.stage)]
    assert acts == [64 * (4 - s) for s in range(4)]  # one 64-byte output per stage
    gp = simulate(tr, SimConfig(pp=4, global_batch=16, micro_batch=2, schedule="gpipe",
                                cluster="cpu-gloo"), comm=LinearComm())
    assert all(r.memory["activations"] == 64 * 8 for r in gp.ranks)


def test_fsdp_and_ddp_rank_memory():
    mods = gpt_modules(2)
    total = sum(d["p"] for d in mods)
    tr = gpt_trace(2)
    ddp = simulate(tr, SimConfig(dp=4, cluster="cpu-gloo", gpus_per_node=4), comm=LinearComm())
    m = ddp.ranks[0].memory
    assert (m["params"], m["grads"], m["optimizer"], m["buffers"]) == \
        (total, total, 2 * total, total)  # fp32 AdamW: 2 states; DDP buckets = grads
    fsdp = simulate(tr, SimConfig(dp=4, fsdp=True, cluster="cpu-gloo", gpus_per_node=4),
                    comm=LinearComm())
    m = fsdp.ranks[0].memory
    block = sum(d["p"] for d in mods if d["m"].startswith("blocks.0."))
    assert m["params"] == total // 4 and m["optimizer"] == 2 * total // 4
    root = sum(d["p"] for d in mods if not d["m"].startswith("blocks."))
    # CPU: the root stays gathered, one block unit gathered, its collective's staging
    # (S all-gather output or reduce-scatter input + S/dp copy-in or output)
    assert m["buffers"] == pytest.approx(root + block + block * (1 + 1 / 4))


def test_baseline_calibration_and_oom_verdict():
    tr = gpt_trace(1)
    wl = extract_workload(tr)
    b = TraceBuilder()
    # rebuild the same trace with an RSS counter: the traced peak becomes the anchor
    for r in range(len(tr.events)):
        ev = tr.events
        b.add(rank=0, name=tr.name_of(r), cat=int(ev.cat[r]), ts_us=float(ev.ts_us[r]),
              dur_us=float(ev.dur_us[r]), step=int(ev.step[r]), tid=int(ev.tid[r]),
              kind=tr.kinds[ev.kind[r]] if ev.kind[r] >= 0 else None,
              param_bytes=int(ev.param_bytes[r]), in_bytes=int(ev.in_bytes[r]),
              out_bytes=int(ev.out_bytes[r]), flops=float(ev.flops[r]))
    b.add_counter(rank=0, ts_us=1.0, series="rss_bytes", value=300e6)
    b.ranks[0] = tr.ranks[0]
    tr2 = b.build()
    res = simulate(tr2, SimConfig(cluster="cpu-gloo"))
    assert res.max_peak_memory_bytes == 300_000_000  # the traced run predicts its own peak
    assert any("baseline" in m for m in res.models)
    assert wl.peak_memory_bytes == 0
    small = simulate(tr2, SimConfig(cluster="cpu-gloo", memory_limit_bytes=1000))
    assert small.oom and not res.oom
    assert not any("not carried" in m for m in res.models)
    # a GPU target ignores a CPU process's RSS, and says so
    gpu = simulate(tr2, SimConfig(cluster="dgx-h100", gpus_per_node=1))
    assert gpu.max_peak_memory_bytes < 1_000_000
    assert [m for m in gpu.models if "not carried" in m] == [
        "memory: the traced CPU process's peak (286.10 MiB, rss_bytes) is not carried to "
        "GPUs: a peak there is this model's states, activations and buffers, without the "
        "traced run's baseline"]


def test_parse_bytes():
    assert parse_bytes("80GB") == 80 * 10**9
    assert parse_bytes("80GiB") == 80 * 2**30
    assert parse_bytes("512 MiB") == 512 * 2**20
    assert parse_bytes("1e9") == 10**9
    for bad in ("lots", "-3GB", "80XB", ""):
        with pytest.raises(ConfigError):
            parse_bytes(bad)


def test_recompute_trades_memory_for_time():
    tr = make_trace(gpt_modules(2), fw_us=10.0, bw_us=20.0)
    base = simulate(tr, SimConfig(cluster="cpu-gloo"))
    rc = simulate(tr, SimConfig(cluster="cpu-gloo", recompute=True))
    assert rc.iteration_time_us == pytest.approx(base.iteration_time_us + 18 * 10.0)
    assert rc.ranks[0].memory["activations"] < base.ranks[0].memory["activations"]


def test_recompute_working_set_counts_once_not_per_micro_batch() -> None:
    from echo_sim.cost.memory_model import activation_bytes, recompute_working_bytes
    from echo_sim.sim.synth import GPTShape, SynthConfig, synth_trace
    from echo_sim.workload.ops import extract_workload

    shape = GPTShape(layers=2, hidden=256, heads=4, seq=128, vocab=512)
    fw = extract_workload(synth_trace(SynthConfig(model=shape, steps=1))).fw_ops
    full = activation_bytes(fw, recompute="full")
    kept = activation_bytes(fw, recompute="full", include_working=False)
    work = recompute_working_bytes(fw, recompute="full")
    assert work > 0 and full == kept + work
    assert recompute_working_bytes(fw, recompute="selective") == 0.0
    # one block keeps only its input: far less than every activation
    assert kept < activation_bytes(fw, recompute="none")


def test_sequence_parallel_shards_block_activations() -> None:
    from echo_sim.cost.memory_model import activation_bytes
    from echo_sim.sim.synth import GPTShape, SynthConfig, synth_trace
    from echo_sim.workload.ops import extract_workload

    shape = GPTShape(layers=2, hidden=256, heads=4, seq=128, vocab=512)
    fw = extract_workload(synth_trace(SynthConfig(model=shape, steps=1))).fw_ops
    plain = activation_bytes(fw, tp=4)
    sp = activation_bytes(fw, tp=4, sequence_parallel=True)
    outside = sum(o.out_bytes / (4 if o.role == "vocab" and o.kind != "Embedding" else 1)
                  for o in fw if o.block < 0)
    inside = sum(o.out_bytes for o in fw if o.block >= 0)
    assert sp == pytest.approx(outside + inside / 4)
    assert sp < plain
