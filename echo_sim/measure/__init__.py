"""Measurement on this machine: the only echo_sim code that imports torch (inside functions)."""
