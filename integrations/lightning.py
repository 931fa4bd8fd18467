"""Trace a PyTorch Lightning run: one callback.

    from integrations.lightning import EchoTraceCallback
    trainer = pl.Trainer(max_steps=10, callbacks=[EchoTraceCallback(out_dir="traces")])
    trainer.fit(model, loader)

Steps are Lightning's optimizer steps (``trainer.global_step``; with
``accumulate_grad_batches=k`` one step spans k micro-batches, each with its own ``occ``).
meta.json gets ``training``: ``micro_batch_size`` (dimension 0 of the batch Lightning hands
to ``training_step``), ``gradient_accumulation_steps`` (``trainer.accumulate_grad_batches``),
``data_parallel_size`` (``trainer.world_size``) and ``global_batch_size``. Works with
``lightning`` or ``pytorch_lightning`` (``pip install 'echo-sim[lightning]'``).
"""

from __future__ import annotations

import os
from typing import Any

import echo_trace
from echo_trace.profile.meta import annotate_written, training_meta

try:
    import lightning.pytorch as pl
except ImportError:
    import pytorch_lightning as pl

__all__ = ["EchoTraceCallback", "batch_size_of"]



def batch_size_of(batch: Any) -> int | None:
    """Dimension 0 of the first tensor in ``batch`` (tensors, tuples, lists, dicts)."""
    if hasattr(batch, "shape") and len(batch.shape) > 0:
        return int(batch.shape[0])
    items = batch.values() if isinstance(batch, dict) else batch \
        if isinstance(batch, (tuple, list)) else ()
    for item in items:
        n = batch_size_of(item)
        if n is not None:
            return n
    return None


class EchoTraceCallback(pl.Callback):
    """Capture optimizer steps ``start_step .. end_step-1`` of ``Trainer.fit()``."""

    def __init__(self, out_dir: str | os.PathLike[str] = "traces", start_step: int = 2,
                 end_step: int | None = 5, **capture_kwargs: Any) -> None:
        super().__init__()
        self.out_dir = out_dir
        self.start_step = start_step
        self.end_step = end_step
        self.capture_kwargs = capture_kwargs
        self.cap: echo_trace.Capture | None = None
        self.micro_batch_size: int | None = None
        self._last_step = 0
        self._annotated = False
        self._trainer: Any = None

    def on_train_start(self, trainer: Any, pl_module: Any) -> None:
        self._trainer = trainer
        self._last_step = int(trainer.global_step)
        self.cap = echo_trace.capture(self.out_dir, self.start_step, self.end_step,
                                      model=pl_module, **self.capture_kwargs)
        self.cap.start()

    def on_train_batch_start(self, trainer: Any, pl_module: Any, batch: Any,
                             batch_idx: int) -> None:
        if self.micro_batch_size is None:
            self.micro_batch_size = batch_size_of(batch)

    def on_train_batch_end(self, trainer: Any, pl_module: Any, outputs: Any, batch: Any,
                           batch_idx: int) -> None:
        if self.cap is None:
            return
        step = int(trainer.global_step)
        while self._last_step < step:  # an optimizer step completed
            self._last_step += 1
            self.cap.step()
        self._annotate()

    def on_train_end(self, trainer: Any, pl_module: Any) -> None:
        if self.cap is None:
            return
        self.cap.stop()
        self._annotate()

    def _annotate(self) -> None:
        trainer = self._trainer
        if self._annotated or trainer is None:
            return
        self._annotated = annotate_written(self.cap, lambda: training_meta(
            framework="lightning", micro_batch_size=self.micro_batch_size,
            gradient_accumulation_steps=int(trainer.accumulate_grad_batches),
            data_parallel_size=int(trainer.world_size)))
