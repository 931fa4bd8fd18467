"""The model-by-name command: ``python -m echo_trace.profile`` (``echo-trace profile``).

:mod:`.cli` parses the flags and runs one of two modes: :mod:`.runtime` trains a few steps of
the model under :func:`echo_trace.capture` and times them, graph mode
(:mod:`echo_trace.graph_mode`) writes its operator graph without training. :mod:`.models`
builds the model (a user's ``module:callable`` or a transformers config, no download);
:mod:`.meta` adds the training facts a framework knows to a finished trace's ``meta.json``
(the integrations use it too). Importing this package imports neither torch nor
transformers.
"""

from __future__ import annotations

from echo_trace.profile.cli import build_parser, main

__all__ = ["build_parser", "main"]
