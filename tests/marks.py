"""Skips for capabilities a machine really lacks, decided at collection: CUDA, root, pip."""

from __future__ import annotations

import importlib.util
import os

import pytest
import torch

HAS_CUDA = torch.cuda.is_available()
IS_ROOT = os.geteuid() == 0

needs_cuda = pytest.mark.skipif(not HAS_CUDA, reason="needs CUDA")
without_cuda = pytest.mark.skipif(HAS_CUDA, reason="checks the CPU-only behaviour; this "
                                                   "machine has CUDA")
needs_root = pytest.mark.skipif(not IS_ROOT, reason="chown to another user needs root")
not_root = pytest.mark.skipif(IS_ROOT, reason="root writes into read-only directories")
needs_pip = pytest.mark.skipif(importlib.util.find_spec("pip") is None,
                               reason="pip is not importable here")
