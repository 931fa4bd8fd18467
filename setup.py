"""Build hooks: ship ``echo_trace.pth`` at the root of site-packages, in regular *and*
editable installs.

The ``.pth`` file makes ``TRACE_ON=1`` work with no code change (see
``echo_trace/_autostart.py``; it imports nothing of echo_trace until torch is imported).
A regular wheel gets it from ``build_py`` (copied to the root of ``build_lib``). An
editable install (``pip install -e .``, PEP 660) does not ship ``build_lib``: setuptools'
``editable_wheel`` writes the wheel through a "strategy" object called with the open
wheel, so the hook wraps that strategy and adds the file to the same wheel (its RECORD
then lists it, and ``pip uninstall`` removes it). ``_select_strategy`` is setuptools
internals (>= 64, checked with 84): if it ever disappears the editable install still
works, without the ``.pth``, and says so. Metadata lives in ``setup.cfg``.
"""

from __future__ import annotations

import os
from typing import Any

from setuptools import setup
from setuptools.command.build_py import build_py

PTH = "echo_trace.pth"
HERE = os.path.dirname(os.path.abspath(__file__))


class BuildPyWithPth(build_py):
    def run(self) -> None:
        super().run()
        self.copy_file(os.path.join(HERE, PTH), os.path.join(self.build_lib, PTH))


class _StrategyWithPth:
    """Wraps setuptools' editable strategy: same files, plus ``echo_trace.pth``."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    def __call__(self, wheel: Any, files: Any, mapping: Any) -> Any:
        result = self.inner(wheel, files, mapping)
        with open(os.path.join(HERE, PTH), "rb") as f:
            wheel.writestr(PTH, f.read())
        return result

    def __enter__(self) -> Any:
        self.inner.__enter__()
        return self

    def __exit__(self, *exc: Any) -> Any:
        return self.inner.__exit__(*exc)


cmdclass: dict[str, Any] = {"build_py": BuildPyWithPth}
try:
    from setuptools.command.editable_wheel import editable_wheel
except ImportError:  # setuptools < 64: no PEP 660 editable wheels
    editable_wheel = None

if editable_wheel is not None:

    class EditableWheelWithPth(editable_wheel):  # type: ignore[misc,valid-type]
        def _select_strategy(self, *args: Any, **kwargs: Any) -> Any:
            inner = super()._select_strategy(*args, **kwargs)
            return _StrategyWithPth(inner)

    if hasattr(editable_wheel, "_select_strategy"):
        cmdclass["editable_wheel"] = EditableWheelWithPth
    else:
        print(f"warning: this setuptools has no editable_wheel._select_strategy; {PTH} is "
              "not installed, so TRACE_ON=1 needs `python -m echo_trace.run`")

setup(cmdclass=cmdclass)
