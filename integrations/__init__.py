"""Bridges between echo traces and neighbouring tools' formats.

* :mod:`integrations.triosim`: write one rank and step of an echo trace as TrioSim's
  ``trace.csv`` + ``tensor.csv`` (``python -m integrations.triosim export PATH --output DIR``).
  Reading TrioSim traces is built into echo_sim (:mod:`echo_sim.load.triosim`).
* Training frameworks (each an optional extra, imported only when used):
  :mod:`integrations.huggingface` (``Trainer`` callback), :mod:`integrations.lightning`
  (callback), :mod:`integrations.deepspeed` (``trace_engine``), :mod:`integrations.megatron`
  (``megatron_trace``): step boundaries and micro/global batch from the framework's config.
"""

__all__: list[str] = ["triosim"]
