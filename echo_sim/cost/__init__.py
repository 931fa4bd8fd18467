"""Cost models: pure functions of hardware, topology and sizes (collectives, compute scaling,
batch scaling, memory), each citing the formula it implements."""
