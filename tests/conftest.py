"""Session hooks: the order in which the parallel pass hands test modules to its workers.

``pytest -n 2 --dist loadscope`` gives each worker whole modules, one at a time as it frees
up. By default xdist hands them out by number of tests, most first, which put the modules of
one or two long end-to-end tests last: in a clean-clone run (2026-11-28)
``test_readme_examples`` (59 s, one test) and ``test_demo`` (34 s, two) started last and one
worker idled 52 s at the end of a 708 s pass. With ``--no-loadscope-reorder`` (pyproject's
``addopts``) xdist keeps collection order, and this hook puts the modules holding a ``slow``
test (1011 of that pass's 1362 worker-seconds) first, so the tail is the short unit-test
modules; within each group the order stays alphabetical.
"""

from __future__ import annotations

import pytest

__all__: list[str] = []


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    slow = {item.nodeid.split("::", 1)[0] for item in items if item.get_closest_marker("slow")}
    items.sort(key=lambda item: item.nodeid.split("::", 1)[0] not in slow)  # stable sort
