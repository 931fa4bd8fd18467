"""Skips for capabilities a machine really lacks, decided at collection: CUDA, root, pip."""

from __future__ import annotations

import os
from importlib import metadata

import pytest
import torch

HAS_CUDA = torch.cuda.is_available()
IS_ROOT = os.geteuid() == 0

needs_cuda = pytest.mark.skipif(not HAS_CUDA, reason="needs CUDA")
without_cuda = pytest.mark.skipif(HAS_CUDA, reason="checks the CPU-only behaviour; this "
                                                   "machine has CUDA")
needs_root = pytest.mark.skipif(not IS_ROOT, reason="chown to another user needs root")
not_root = pytest.mark.skipif(IS_ROOT, reason="root writes into read-only directories")


def _has_pip() -> bool:
    # by its metadata, not importlib.util.find_spec: setuptools' distutils shim reacts to a
    # lookup of "pip" by switching itself off, which breaks later imports (megatron-core)
    try:
        metadata.version("pip")
    except metadata.PackageNotFoundError:
        return False
    return True


needs_pip = pytest.mark.skipif(not _has_pip(), reason="pip is not installed here")
