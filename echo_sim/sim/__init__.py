"""Simulators: the one discrete-event engine and the graphs fed to it (replay of a measured
trace, simulation of a workload at another layout, synthetic traces from a model's shape)."""
