"""``python -m echo_trace.profile``: the command of :mod:`echo_trace.profile.cli`."""

from __future__ import annotations

import sys

from echo_trace.profile.cli import main

__all__: list[str] = []

sys.exit(main())
