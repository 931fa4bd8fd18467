"""Byte counts as people read them, in binary units: KiB = 2**10, MiB = 2**20, GiB = 2**30
bytes (what ``nvidia-smi``, ``torch.cuda.memory_summary`` and the memory limits the CLI
parses use)."""

from __future__ import annotations

__all__ = ["fmt_bytes"]

_UNITS = (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10))


def fmt_bytes(n: float, digits: int = 2) -> str:
    """``n`` bytes in the largest unit its magnitude reaches, ``digits`` decimals and
    thousands grouped: ``fmt_bytes(1536) == "1.50 KiB"``, ``fmt_bytes(25 * 2**20, 1) ==
    "25.0 MiB"``; under 1 KiB whole bytes (``"512 B"``)."""
    for unit, size in _UNITS:
        if abs(n) >= size:
            return f"{n / size:,.{digits}f} {unit}"
    return f"{n:,.0f} B"
