"""Trace a Megatron-core training loop.

    from integrations.megatron import megatron_trace
    with megatron_trace(out_dir="traces", model=model, start_step=2, end_step=5) as tr:
        for it in range(iters):
            forward_backward_func(...)      # all micro-batches of one global batch
            optimizer.step()
            tr.step()                       # one Megatron iteration done

meta.json's ``training`` comes from megatron-core's own state: ``micro_batch_size``,
``global_batch_size`` and ``num_microbatches`` (= gradient accumulation) from
``megatron.core.num_microbatches_calculator``, and the tensor / pipeline / data / context
parallel sizes from ``megatron.core.parallel_state``. Tensor-parallel layers'
collectives (``ColumnParallelLinear`` / ``RowParallelLinear`` all-reduces and all-gathers)
are recorded with their process group's ranks.

CPU: megatron-core's ``GPTModel`` attention allocates its scratch buffer on
``torch.cuda.current_device()`` and its pipeline schedules allocate on ``"cuda"``, so
on a CPU-only host the model and the schedules cannot run; ``parallel_state`` (gloo),
the micro-batch calculator and the tensor-parallel layers do, and that is what the CPU
test drives. Install: ``pip install --no-deps megatron-core`` (``echo-sim[megatron]``).
"""

from __future__ import annotations

import os
from types import TracebackType
from typing import Any

import echo_trace
from echo_trace.profile.meta import annotate_written, training_meta
from echo_trace.profile.models import ModelBundle, ProfileError

__all__ = ["MegatronTrace", "build_gpt", "megatron_trace", "megatron_training_meta"]



def megatron_training_meta() -> dict[str, Any]:
    """meta.json's ``training`` from megatron-core's parallel state and micro-batch calculator."""
    from megatron.core import parallel_state as ps

    sizes = {"tensor_parallel_size": 1, "pipeline_parallel_size": 1,
             "context_parallel_size": 1, "data_parallel_size": 1}
    if ps.model_parallel_is_initialized():
        sizes = {"tensor_parallel_size": ps.get_tensor_model_parallel_world_size(),
                 "pipeline_parallel_size": ps.get_pipeline_model_parallel_world_size(),
                 "context_parallel_size": ps.get_context_parallel_world_size(),
                 "data_parallel_size": ps.get_data_parallel_world_size()}
    micro = global_batch = None
    accum = 1
    try:
        from megatron.core import num_microbatches_calculator as nmc

        micro = int(nmc.get_micro_batch_size())
        global_batch = int(nmc.get_current_global_batch_size())
        accum = int(nmc.get_num_microbatches())
    except (AssertionError, AttributeError, TypeError):
        pass  # the calculator was never initialised: the loop sets its own batches
    dp = sizes.pop("data_parallel_size")
    return training_meta(framework="megatron", micro_batch_size=micro,
                         gradient_accumulation_steps=accum, data_parallel_size=dp,
                         global_batch_size=global_batch, **sizes)


class MegatronTrace:
    """Capture Megatron iterations ``start_step .. end_step-1``; call :meth:`step` after
    each iteration's optimizer step. ``capture_kwargs`` go to :func:`echo_trace.capture`."""

    def __init__(self, out_dir: str | os.PathLike[str] = "traces", model: Any = None,
                 start_step: int = 2, end_step: int | None = 5, **capture_kwargs: Any) -> None:
        self.cap = echo_trace.capture(out_dir, start_step, end_step, model=model,
                                      **capture_kwargs)
        self._annotated = False

    def __enter__(self) -> MegatronTrace:
        self.cap.start()
        return self

    def step(self) -> None:
        """One Megatron iteration (global batch) is complete."""
        self.cap.step()
        self._annotate()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.cap.stop()
        self._annotate()

    def _annotate(self) -> None:
        if not self._annotated:
            self._annotated = annotate_written(self.cap, megatron_training_meta,
                                               collectives=True)

def megatron_trace(out_dir: str | os.PathLike[str] = "traces", model: Any = None,
                   start_step: int = 2, end_step: int | None = 5,
                   **capture_kwargs: Any) -> MegatronTrace:
    """``with megatron_trace(...) as tr:`` around the loop; ``tr.step()`` per iteration."""
    return MegatronTrace(out_dir, model, start_step, end_step, **capture_kwargs)


def build_gpt(batch_size: int, seq_len: int, *, tiny: bool = False,
              overrides: dict[str, Any] | None = None) -> ModelBundle:
    """megatron-core's ``GPTModel`` (local layer spec) for ``echo-trace profile --framework
    megatron``; needs CUDA (module docstring). ``tiny``: 2 layers, hidden 64, 2 heads."""
    import torch

    if not torch.cuda.is_available():
        raise ProfileError("--framework megatron needs CUDA: megatron-core's GPTModel "
                           "allocates its attention buffer on torch.cuda.current_device(); "
                           "on CPU use --framework pytorch or huggingface")
    try:
        import torch.distributed as dist
        from megatron.core import parallel_state as ps
        from megatron.core.models.gpt.gpt_layer_specs import get_gpt_layer_local_spec
        from megatron.core.models.gpt.gpt_model import GPTModel
        from megatron.core.transformer.transformer_config import TransformerConfig
    except ImportError:
        raise ProfileError("--framework megatron needs megatron-core "
                           "(pip install --no-deps megatron-core)") from None
    if not dist.is_initialized():
        if "RANK" not in os.environ:
            os.environ.update(RANK="0", WORLD_SIZE="1", MASTER_ADDR="127.0.0.1",
                              MASTER_PORT=os.environ.get("MASTER_PORT", "29500"))
        dist.init_process_group("nccl")
    if not ps.model_parallel_is_initialized():
        ps.initialize_model_parallel()
    shape: dict[str, Any] = ({"num_layers": 2, "hidden_size": 64, "num_attention_heads": 2}
                             if tiny else {"num_layers": 12, "hidden_size": 768,
                                           "num_attention_heads": 12})
    shape.update(overrides or {})
    vocab = int(shape.pop("vocab_size", 1024 if tiny else 50304))
    try:
        cfg = TransformerConfig(**shape)
    except TypeError as e:
        raise ProfileError(f"--config-overrides: {e}") from None
    model = GPTModel(config=cfg, transformer_layer_spec=get_gpt_layer_local_spec(),
                     vocab_size=vocab, max_sequence_length=seq_len)
    gen = torch.Generator().manual_seed(0)
    mask = torch.tril(torch.ones(1, 1, seq_len, seq_len)) < 0.5  # True = masked out
    pos = torch.arange(seq_len).unsqueeze(0).expand(batch_size, -1)

    def make_batch() -> dict[str, Any]:
        ids = torch.randint(0, vocab, (batch_size, seq_len), generator=gen)
        return {"input_ids": ids, "position_ids": pos, "attention_mask": mask, "labels": ids}

    info = {"name": "gpt", "source": "megatron-core", "layers": cfg.num_layers,
            "hidden": cfg.hidden_size, "heads": cfg.num_attention_heads, "seq": seq_len,
            "vocab": vocab, "micro_batch_size": batch_size,
            "params": sum(p.numel() for p in model.parameters())}
    return ModelBundle(model=model, make_batch=make_batch,
                       loss_fn=lambda out: out.float().mean(), info=info)
