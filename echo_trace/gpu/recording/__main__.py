"""``python -m echo_trace.gpu.recording``: see :mod:`echo_trace.gpu.recording.cli`."""

import sys

from echo_trace.gpu.recording.cli import main

sys.exit(main())
