"""The layers of docs/architecture.md, kept true: each package imports only downward, and no
module imports itself back through others (no import circle), counting every import (module
level, inside functions, and under ``TYPE_CHECKING``)."""

from __future__ import annotations

import ast
from pathlib import Path

import networkx as nx
import pytest

REPO = Path(__file__).resolve().parent.parent

#: Top layer first. A unit is a subpackage or a top-level module of the package; a unit may
#: import units of its own layer and of every layer below, never one above.
LAYERS: dict[str, list[tuple[str, set[str]]]] = {
    "echo_sim": [
        ("interface", {"__main__", "cli", "commands"}),
        ("analysis", {"analysis", "render", "search", "outofcore"}),
        ("simulation", {"sim", "workload", "cost", "measure"}),
        ("loading", {"load", "store"}),
        ("trace model", {"trace"}),
        ("base", {"__init__", "errors", "textsafe", "progress", "units"}),
    ],
    "echo_trace": [
        ("commands", {"run", "profile", "graph_mode", "_autostart", "__init__"}),
        ("capture", {"capture"}),
        ("instruments", {"hooks", "comm", "gpu", "timing"}),
        ("core", {"config", "ranks", "recorder", "writer", "meta", "dag", "pacing",
                  "byteprofile"}),
        ("contract", {"contract"}),
    ],
}
#: what echo_sim may import of echo_trace: the contract in the middle, torch-free
SHARED = {"echo_trace.contract"}


def _modules(pkg: str) -> dict[str, Path]:
    out = {}
    for p in (REPO / pkg).rglob("*.py"):
        parts = list(p.relative_to(REPO).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = p
    return out


def _imports(name: str, path: Path, mods: dict[str, Path]) -> set[str]:
    """The project modules ``name`` imports (relative imports resolved; ``from pkg import
    sub`` is an import of ``pkg.sub``, not of ``pkg``'s ``__init__``)."""

    def resolve(target: str) -> str:
        while target and target not in mods:  # `from pkg.mod import Name` -> pkg.mod
            target = target.rpartition(".")[0]
        return target

    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(resolve(a.name) for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            mod = node.module or ""
            if node.level:
                base = name.split(".")
                if path.name != "__init__.py":
                    base = base[:-1]
                base = base[:len(base) - node.level + 1]
                mod = ".".join([*base, *([mod] if mod else [])])
            for a in node.names:
                sub = f"{mod}.{a.name}"
                found.add(sub if sub in mods else resolve(mod))
    found.discard("")
    found.discard(name)
    return found


def _graph() -> nx.DiGraph:
    mods = {**_modules("echo_sim"), **_modules("echo_trace")}
    g = nx.DiGraph()
    for name, path in mods.items():
        g.add_node(name)
        g.add_edges_from((name, target) for target in _imports(name, path, mods))
    return g


def _unit(pkg: str, module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def _layer(pkg: str, module: str) -> int:
    unit = _unit(pkg, module)
    for i, (_, units) in enumerate(LAYERS[pkg]):
        if unit in units:
            return i
    raise AssertionError(f"{module}: unit {unit!r} of {pkg} is in no layer of "
                         "tests/test_architecture.py (add it where it belongs, and to "
                         "docs/architecture.md)")


def test_no_import_circle() -> None:
    cycles = [c for c in nx.simple_cycles(_graph()) if len(c) > 1]
    assert not cycles, f"import circles: {sorted(cycles, key=len)[:5]}"


@pytest.mark.parametrize("pkg", sorted(LAYERS))
def test_each_package_imports_only_downward(pkg: str) -> None:
    g = _graph()
    up = []
    for src, dst in g.edges:
        if not (src.startswith(pkg + ".") or src == pkg):
            continue
        if not (dst.startswith(pkg + ".") or dst == pkg):
            continue
        if _layer(pkg, src) > _layer(pkg, dst):  # a lower layer importing a higher one
            up.append(f"{src} -> {dst}")
    assert not up, f"{pkg}: imports from a lower layer to a higher one: {up[:10]}"


def test_the_packages_meet_only_at_the_contract() -> None:
    g = _graph()
    trace_to_sim = [(a, b) for a, b in g.edges
                    if a.startswith("echo_trace") and b.startswith("echo_sim")]
    assert not trace_to_sim, trace_to_sim  # echo_trace never imports echo_sim
    sim_to_trace = {b for a, b in g.edges
                    if a.startswith("echo_sim") and b.startswith("echo_trace")}
    assert sim_to_trace <= SHARED, sim_to_trace


def test_the_architecture_page_names_every_layer() -> None:
    page = (REPO / "docs" / "architecture.md").read_text()
    for pkg, layers in LAYERS.items():
        for name, units in layers:
            assert name in page, (pkg, name)
            for unit in units - {"__init__", "__main__"}:
                assert f"`{unit}" in page, (pkg, unit)


def test_nothing_shipped_or_benchmarked_imports_the_tests() -> None:
    """The tests sit on top: the packages, integrations, examples and benchmarks run without
    them (a benchmark's launchers are :mod:`benchmarks.launch`, which the tests reuse)."""
    bad = []
    for top in ("echo_sim", "echo_trace", "integrations", "examples", "benchmarks"):
        for p in (REPO / top).rglob("*.py"):
            for node in ast.walk(ast.parse(p.read_text(), str(p))):
                names = ([a.name for a in node.names] if isinstance(node, ast.Import) else
                         [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
                bad += [f"{p.relative_to(REPO)}: {n}" for n in names
                        if n == "tests" or n.startswith("tests.")]
    assert not bad, bad
