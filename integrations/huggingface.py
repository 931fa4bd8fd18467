"""Trace a Hugging Face ``Trainer`` run: one callback.

    from integrations.huggingface import EchoTraceCallback
    trainer = Trainer(model=model, args=args, train_dataset=ds,
                      callbacks=[EchoTraceCallback(out_dir="traces", start_step=2, end_step=5)])
    trainer.train()

Steps are the Trainer's optimizer steps (``on_step_end``: one per global batch, after
gradient accumulation); each micro-batch's forward/backward appears with its own ``occ``.
meta.json gets ``training`` from ``TrainingArguments``: ``micro_batch_size``
(``per_device_train_batch_size``), ``gradient_accumulation_steps``, ``data_parallel_size``
(``world_size``) and ``global_batch_size`` (their product). Needs ``transformers``
(``pip install 'echo-sim[huggingface]'``); capture errors never stop training.
"""

from __future__ import annotations

import logging
import os
from typing import Any

from transformers import TrainerCallback

import echo_trace
from echo_trace.profile.meta import annotate_written, training_meta

__all__ = ["EchoTraceCallback", "trainer_training_meta"]

log = logging.getLogger("echo_trace")


def trainer_training_meta(args: Any) -> dict[str, Any]:
    """meta.json's ``training`` object from a ``TrainingArguments``."""
    return training_meta(
        framework="huggingface", micro_batch_size=int(args.per_device_train_batch_size),
        gradient_accumulation_steps=int(args.gradient_accumulation_steps),
        data_parallel_size=int(getattr(args, "world_size", 1) or 1))


class EchoTraceCallback(TrainerCallback):
    """Capture optimizer steps ``start_step .. end_step-1`` of ``Trainer.train()``.

    ``capture_kwargs`` go to :func:`echo_trace.capture` (``gzip``, ``depth``, ``overwrite``...).
    """

    def __init__(self, out_dir: str | os.PathLike[str] = "traces", start_step: int = 2,
                 end_step: int | None = 5, **capture_kwargs: Any) -> None:
        self.out_dir = out_dir
        self.start_step = start_step
        self.end_step = end_step
        self.capture_kwargs = capture_kwargs
        self.cap: echo_trace.Capture | None = None
        self._annotated = False
        self._training: dict[str, Any] = {}

    def on_train_begin(self, args: Any, state: Any, control: Any, model: Any = None,
                       **kwargs: Any) -> None:
        try:
            self._training = trainer_training_meta(args)
        except Exception as e:  # noqa: BLE001 - metadata must never stop training
            log.warning("echo_trace: could not read TrainingArguments (%s)", e)
        self.cap = echo_trace.capture(self.out_dir, self.start_step, self.end_step,
                                      model=model, **self.capture_kwargs)
        self.cap.start()

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if self.cap is None:
            return
        self.cap.step()
        self._annotate()

    def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if self.cap is None:
            return
        self.cap.stop()
        self._annotate()

    def _annotate(self) -> None:
        training = self._training
        if not self._annotated and training:
            self._annotated = annotate_written(self.cap, lambda: training)
