"""Two runs of a 3D-parallel job compared role by role (dPRO's ``--option 3dcompare``).

Ranks are lined up by their parallel role (:func:`echo_sim.analysis.roles.rank_roles`:
``meta.json`` coordinates when both runs have them on every rank, else roles read from each
trace's process groups and operators), not by rank number: rank 3 of run A and rank 5 of run
B are compared when both are ``dp1.tp1``. dPRO's 3dcompare "ignores partition ids" the same
way: what a worker does, not where it was numbered.

Per role, :func:`echo_sim.analysis.compare.compare` of A's ranks of that role against B's:
iteration times (median over steps of the slowest of those ranks, µs), ``diff_us = B − A``,
``ratio = B / A``, and the operator-by-operator means. Roles only one run has are listed
with no figures for the other.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass
from typing import Any

from echo_sim.analysis.compare import Comparison, compare
from echo_sim.analysis.roles import Role, rank_roles
from echo_sim.errors import EchoError
from echo_sim.trace.model import Trace

__all__ = ["RoleComparison", "RoleDiff", "compare_by_role"]


@dataclass(frozen=True)
class RoleDiff:
    """One role on both sides; ``comparison`` is None when a side lacks the role."""

    label: str
    ranks_a: list[int]
    ranks_b: list[int]
    comparison: Comparison | None

    @property
    def iteration_a_us(self) -> float | None:
        return self.comparison.iteration_a_us if self.comparison else None

    @property
    def iteration_b_us(self) -> float | None:
        return self.comparison.iteration_b_us if self.comparison else None

    @property
    def iteration_diff_us(self) -> float | None:
        c = self.comparison
        return c.iteration_b_us - c.iteration_a_us if c else None

    @property
    def iteration_ratio(self) -> float | None:
        return self.comparison.iteration_ratio if self.comparison else None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"role": self.label, "ranks_a": self.ranks_a,
                               "ranks_b": self.ranks_b, "iteration_a_us": self.iteration_a_us,
                               "iteration_b_us": self.iteration_b_us,
                               "iteration_diff_us": self.iteration_diff_us,
                               "iteration_ratio": self.iteration_ratio}
        if self.comparison is not None:
            d = self.comparison.to_dict()
            out["num_ops"], out["ops"] = d["num_ops"], d["ops"]
        return out


@dataclass(frozen=True)
class RoleComparison:
    """What :func:`compare_by_role` returns; ``to_dict`` is the ``--json`` form."""

    label_a: str
    label_b: str
    role_source: str  # "meta" or "trace"
    roles: list[RoleDiff]

    def to_dict(self) -> dict[str, Any]:
        return {"a": self.label_a, "b": self.label_b, "by": "role",
                "role_source": self.role_source, "roles": [r.to_dict() for r in self.roles]}


def _groups(roles: dict[int, Role]) -> dict[Hashable, tuple[str, list[int]]]:
    out: dict[Hashable, tuple[str, list[int]]] = {}
    for rank, role in sorted(roles.items()):
        out.setdefault(role.key, (role.label, []))[1].append(rank)
    return out


def compare_by_role(a: Trace, b: Trace, *, sort: str = "diff", head: int | None = None,
                    label_a: str = "A", label_b: str = "B") -> RoleComparison:
    """``a`` and ``b`` compared role by role (see the module doc); ``sort`` and ``head`` as
    :func:`~echo_sim.analysis.compare.compare` takes them, per role."""
    ra, rb = rank_roles(a), rank_roles(b)
    sources = {x.source for x in (*ra.values(), *rb.values())}
    if len(sources) > 1:  # one run has meta.json coordinates, the other not: read both traces
        ra, rb = rank_roles(a, source="trace"), rank_roles(b, source="trace")
    ga, gb = _groups(ra), _groups(rb)
    if not set(ga) & set(gb):
        raise EchoError(f"no parallel role of {label_a} ({', '.join(v[0] for v in ga.values())}) "
                        f"is in {label_b} ({', '.join(v[0] for v in gb.values())}); the runs "
                        "differ in layout or model")
    diffs = []
    for key in [*ga, *(k for k in gb if k not in ga)]:
        la, ranks_a = ga.get(key, ("", []))
        lb, ranks_b = gb.get(key, ("", []))
        cmp = (compare(a, b, ranks_a=ranks_a, ranks_b=ranks_b, sort=sort, head=head,
                       label_a=f"{label_a} ranks {ranks_a}", label_b=f"{label_b} ranks {ranks_b}")
               if ranks_a and ranks_b else None)
        diffs.append(RoleDiff(label=la or lb, ranks_a=ranks_a, ranks_b=ranks_b, comparison=cmp))
    source = next(iter(ra.values())).source if ra else "trace"
    return RoleComparison(label_a=label_a, label_b=label_b, role_source=source, roles=diffs)
