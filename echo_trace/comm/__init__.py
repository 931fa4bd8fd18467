"""Communication capture: one tracer and the three paths a PyTorch job communicates through.

:class:`CommTracer` (:mod:`.tracer`) holds what the paths share (patching and its undoing,
group ranks, sequence numbers, slices that close when the work completes) and installs every
:class:`CommPath` registered with it. Each path module registers itself when imported:
:mod:`.c10d` (Python ``torch.distributed`` collectives and point-to-point ops, FSDP2
included), :mod:`.ddp` (DDP gradient buckets through a comm hook), :mod:`.functional`
(functional collectives: DTensor tensor parallel); :mod:`.sizes` gives bytes and dtype
names. Importing this package registers the three paths with the tracer (it patches nothing
until :meth:`CommTracer.install`) and imports torch.
"""

from __future__ import annotations

# Importing a path module registers it (the tracer imports none of them: no import cycle).
from echo_trace.comm import c10d, ddp, functional  # noqa: F401
from echo_trace.comm.tracer import CommPath, CommTracer, register_path, registered_paths

__all__ = ["CommPath", "CommTracer", "register_path", "registered_paths"]
