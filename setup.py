"""Build hook: ship ``echo_trace.pth`` at the root of site-packages.

The ``.pth`` file makes ``TRACE_ON=1`` work with no code change: the interpreter
imports ``echo_trace._autostart`` at start-up, which returns at once unless
``TRACE_ON=1``. Metadata lives in ``setup.cfg``.
"""

import os

from setuptools import setup
from setuptools.command.build_py import build_py


class BuildPyWithPth(build_py):
    def run(self) -> None:
        super().run()
        self.copy_file("echo_trace.pth", os.path.join(self.build_lib, "echo_trace.pth"))


setup(cmdclass={"build_py": BuildPyWithPth})
