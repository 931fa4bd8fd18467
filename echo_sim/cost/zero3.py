"""Parameter-fetch cost of DeepSpeed ZeRO-3 as released in 2021 (``deepspeed-2021``).

PyTorch FSDP2 gathers one flat buffer per unit with one NCCL collective, so its cost is the
network's (:mod:`echo_sim.cost.collectives`). DeepSpeed's ZeRO-3 of 2021 (v0.3-0.5)
fetched parameters module by module through its partitioned-parameter path (per-module
all-gathers, then flatten/copy into the module's tensors), and that path, not the network,
bound it: DeepSpeed issue #1174 (2021-06, "ZeRO3 is slow, even with nvlink for
all-gather") measures a 5B-parameter BERT on one 8 x A100 NVLink node at 480 ms per forward
with ZeRO-3 vs 60 ms with ZeRO-2; the 420 ms difference is the gather of 7/8 of 10 GB of
fp16 parameters, i.e. ``FETCH_GBPS`` ≈ 8.75e9 / 0.42 s ≈ 21 GB/s per GPU, well below
NVLink's 300 GB/s. We price each ZeRO-3 collective of that implementation at::

    t = max(network model, (n-1)/n · S / FETCH_GBPS)

for every pass over the parameters: the forward fetch, the fetch for the backward, a second
fetch for the recomputed forward under full activation recomputation (a transformer layer of
these models, > 1e9 parameters, exceeds ZeRO-3's default reuse distance, so parameters
released after the recompute are fetched again for the gradient) and the gradient
reduce-scatter through the same partitioned path.

The rate comes from that independent measurement, not from any validation row.
"""

from __future__ import annotations

from echo_sim.errors import ConfigError

__all__ = ["FETCH_GBPS", "FSDP_IMPLS", "fetch_us"]

FETCH_GBPS = 21.0
FSDP_IMPLS: tuple[str, ...] = ("fsdp2", "deepspeed-2021")


def fetch_us(nbytes: float, n: int, impl: str) -> float:
    """Lower bound (µs) on one ZeRO-3 collective of ``nbytes`` (gathered size) over ``n``
    ranks for ``impl``: 0 for ``fsdp2`` (network-bound only), the fetch path otherwise."""
    if impl not in FSDP_IMPLS:
        raise ConfigError(f"fsdp_impl={impl!r}; valid: {', '.join(FSDP_IMPLS)}")
    if impl == "fsdp2" or n < 2:
        return 0.0
    return (n - 1) / n * nbytes / (FETCH_GBPS * 1e3)
