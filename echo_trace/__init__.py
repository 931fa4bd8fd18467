"""echo_trace: capture distributed PyTorch training as per-rank Chrome traces.

``with echo_trace.capture(out_dir="traces", start_step=2, end_step=5) as cap:`` around a
training loop, or ``TRACE_ON=1`` with no code change. Importing this package reads no
environment variable, registers no hook and touches no CUDA.
"""
