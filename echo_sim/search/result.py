"""What a search returns: one :class:`Candidate` per timed layout, ranked, in a
:class:`SearchResult` with the counts of what was pruned and why."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from echo_sim.search.space import ParallelLayout

__all__ = ["Candidate", "SearchResult", "candidate_from_sim", "score"]


def score(objective: str, iteration_time_us: float, layout: ParallelLayout,
          global_batch: int) -> float:
    """Lower is better. ``time``/``throughput``: iteration µs (one global batch per step, so
    both rank alike); ``cost``: device-µs per sample, ``world · T / global_batch``."""
    if objective == "cost":
        return layout.world * iteration_time_us / global_batch
    return iteration_time_us


@dataclass(frozen=True, kw_only=True)
class Candidate:
    """A timed layout: prediction, memory verdict and the breakdown of its busiest rank
    (compute, exposed communication, pipeline bubble, idle; µs, summing to the iteration)."""

    layout: ParallelLayout
    iteration_time_us: float
    samples_per_s: float
    tokens_per_s: float | None
    peak_memory_bytes: int
    memory_limit_bytes: int
    compute_us: float
    exposed_comm_us: float
    bubble_us: float
    idle_us: float
    micro_batches: int
    score: float

    @property
    def fits(self) -> bool:
        return self.peak_memory_bytes <= self.memory_limit_bytes

    @property
    def gpu_hours_per_step(self) -> float:
        return self.layout.world * self.iteration_time_us / 3.6e9

    def to_dict(self) -> dict[str, Any]:
        return {"layout": self.layout.to_dict(), "label": self.layout.label,
                "world_size": self.layout.world,
                "iteration_time_us": self.iteration_time_us,
                "samples_per_s": self.samples_per_s, "tokens_per_s": self.tokens_per_s,
                "peak_memory_bytes": self.peak_memory_bytes,
                "memory_limit_bytes": self.memory_limit_bytes, "fits": self.fits,
                "compute_us": self.compute_us, "exposed_comm_us": self.exposed_comm_us,
                "bubble_us": self.bubble_us, "idle_us": self.idle_us,
                "micro_batches": self.micro_batches, "score": self.score}


def candidate_from_sim(layout: ParallelLayout, res: Any, objective: str,
                       global_batch: int) -> Candidate:
    """A :class:`Candidate` from a :class:`~echo_sim.sim.simulate.SimResult`."""
    busiest = min(res.ranks, key=lambda r: (r.idle_us, r.rank))
    return Candidate(
        layout=layout, iteration_time_us=float(res.iteration_time_us),
        samples_per_s=float(res.samples_per_s),
        tokens_per_s=None if res.tokens_per_s is None else float(res.tokens_per_s),
        peak_memory_bytes=int(res.max_peak_memory_bytes),
        memory_limit_bytes=int(res.memory_limit_bytes), compute_us=float(busiest.compute_us),
        exposed_comm_us=float(busiest.exposed_comm_us), bubble_us=float(busiest.bubble_us),
        idle_us=float(busiest.idle_us), micro_batches=int(res.micro_batches),
        score=score(objective, float(res.iteration_time_us), layout, global_batch))


@dataclass
class SearchResult:
    """Ranked candidates (fitting first, then by objective) and what the search skipped.

    ``enumerated``: valid layouts; ``pruned_memory``: dropped because even a lower bound
    of their memory exceeds the limit; ``pruned_bound``: dropped because a lower bound of
    their objective is worse than the ``top``-th fitting candidate; ``invalid``: layouts
    simulate rejected, with its reason; ``simulated``: full simulations run.
    """

    space: Any
    objective: str
    candidates: list[Candidate]
    enumerated: int
    pruned_memory: int
    pruned_bound: int
    simulated: int
    probes: int
    invalid: list[tuple[str, str]] = field(default_factory=list)
    wall_s: float = 0.0
    workers: str = "1"

    @property
    def best(self) -> Candidate | None:
        """The best fitting candidate, or None when nothing fits."""
        return self.candidates[0] if self.candidates and self.candidates[0].fits else None

    def to_dict(self, top: int | None = None) -> dict[str, Any]:
        cands = self.candidates if top is None else self.candidates[:top]
        s = self.space
        return {
            "objective": self.objective,
            "space": {"gpus": s.gpus, "global_batch": s.global_batch,
                      "gpus_per_node": s.gpus_per_node, "cluster": s.cluster,
                      "memory_limit_bytes": s.memory_limit_bytes, "dims": list(s.dims)},
            "counts": {"enumerated": self.enumerated, "pruned_memory": self.pruned_memory,
                       "pruned_bound": self.pruned_bound, "simulated": self.simulated,
                       "probes": self.probes, "invalid": len(self.invalid)},
            "wall_s": self.wall_s, "workers": self.workers,
            "best": self.best.to_dict() if self.best else None,
            "ranked": [c.to_dict() for c in cands],
        }
