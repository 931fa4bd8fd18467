"""The Hugging Face Trainer callback with the real Trainer on CPU (tiny GPT-2, random weights)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("transformers", reason="transformers is not installed "
                    "(pip install 'echo-sim[huggingface]')")
pytest.importorskip("accelerate", reason="Trainer needs accelerate (pip install accelerate)")


def test_trainer_callback_records_steps_and_batches(tmp_path: Path) -> None:
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel, Trainer, TrainingArguments

    from echo_sim.load import load_trace
    from echo_sim.trace.validate import validate
    from integrations.huggingface import EchoTraceCallback

    torch.manual_seed(0)
    model = GPT2LMHeadModel(GPT2Config(n_layer=2, n_embd=32, n_head=2, vocab_size=128,
                                       n_positions=16))
    gen = torch.Generator().manual_seed(0)
    data = []
    for _ in range(32):
        ids = torch.randint(0, 128, (16,), generator=gen)
        data.append({"input_ids": ids, "labels": ids})
    args = TrainingArguments(output_dir=str(tmp_path / "out"), per_device_train_batch_size=2,
                             gradient_accumulation_steps=2, max_steps=6, use_cpu=True,
                             report_to=[], save_strategy="no", logging_strategy="no",
                             disable_tqdm=True, dataloader_num_workers=0)
    cb = EchoTraceCallback(out_dir=tmp_path / "trace", start_step=2, end_step=5)
    Trainer(model=model, args=args, train_dataset=data, callbacks=[cb]).train()

    trace = load_trace(tmp_path / "trace")
    assert [v for v in validate(trace) if v.fatal] == []
    assert trace.steps == [2, 3, 4]
    meta = json.loads((tmp_path / "trace" / "0_0" / "meta.json").read_text())
    assert meta["step_source"] == "user"
    assert meta["training"] == {"framework": "huggingface", "micro_batch_size": 2,
                                "gradient_accumulation_steps": 2, "data_parallel_size": 1,
                                "global_batch_size": 4}
    assert meta["global_batch_size"] == 4
    # two micro-batches per optimizer step: every leaf module runs twice in each step
    ev = trace.events
    name = trace.names.index("FW.transformer.h.0.mlp.c_fc")
    for step in trace.steps:
        assert int(((ev.name == name) & (ev.step == step)).sum()) == 2
    # simulate takes the Trainer's figures: micro-batch 2, two micro-batches per step (their
    # ops folded into one pass), so --dp 4 is global batch 16, not 4 (issue 16)
    from echo_sim.sim.simulate import SimConfig, simulate

    own = simulate(trace, SimConfig())
    assert (own.micro_batch, own.global_batch, own.micro_batches) == (2, 4, 2)
    assert any(m.startswith("micro-batch 2:") and "from the HF Trainer" in m for m in own.models)
    wide = simulate(trace, SimConfig(dp=4))
    assert (wide.micro_batch, wide.global_batch) == (2, 16)
