"""Validation suite: published at-scale training runs predicted by ``synth`` + ``simulate``."""

__all__: list[str] = []
