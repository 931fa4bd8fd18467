"""GPU timing: Kineto/CUPTI activity attributed to echo's module, optimizer and comm ranges.

:mod:`~echo_trace.gpu.attribute` holds the torch-free rule, :mod:`~echo_trace.gpu.backend`
the timer that feeds it during a capture, :mod:`~echo_trace.gpu.kineto_json` an adapter
for torch.profiler traces (offline use and tests).
"""

__all__: list[str] = []
