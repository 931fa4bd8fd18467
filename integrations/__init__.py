"""Bridges between echo traces and neighbouring tools' formats.

* :mod:`integrations.triosim`: write one rank and step of an echo trace as TrioSim's
  ``trace.csv`` + ``tensor.csv`` (``python -m integrations.triosim export PATH --output DIR``).
  Reading TrioSim traces is built into echo_sim (:mod:`echo_sim.load.triosim`).
"""

__all__: list[str] = ["triosim"]
