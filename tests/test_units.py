"""``echo_sim.units.fmt_bytes``: the one byte formatter the CLI tables, errors and report use."""

from __future__ import annotations

import pytest

from echo_sim.units import fmt_bytes


@pytest.mark.parametrize("n, digits, text", [
    (0, 2, "0 B"),
    (1023, 2, "1,023 B"),
    (1536, 2, "1.50 KiB"),
    (25 * 2**20, 1, "25.0 MiB"),  # a small model's peak: not "0.0 GiB"
    (80 * 2**30, 2, "80.00 GiB"),
    (1.5 * 2**40, 1, "1,536.0 GiB"),
    (-3 * 2**20, 2, "-3.00 MiB"),  # a delta below the baseline keeps its sign and unit
])
def test_binary_units_at_the_largest_unit_reached(n: float, digits: int, text: str) -> None:
    assert fmt_bytes(n, digits) == text
