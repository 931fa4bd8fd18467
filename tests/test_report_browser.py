"""The report in a real browser: headless Chromium opens the file, every chart draws, no
script error reaches the console, and a screenshot is taken.

Chromium comes from Debian's ``chromium-headless-shell`` (or ``chromium``) package, which
``.ci/run`` installs when it can; without a browser the test is skipped and says why.
``ECHO_REPORT_SCREENSHOT=PATH`` keeps the screenshot (the README's docs/report.png is made
this way).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.cli_util import run

pytest.importorskip("plotly")

DDP = Path(__file__).parent / "data" / "load" / "echo_real_ddp"
BROWSERS = ("chromium-headless-shell", "chromium", "chromium-browser", "google-chrome")


def _browser() -> str:
    for name in BROWSERS:
        path = shutil.which(name)
        if path:
            return path
    pytest.skip(f"no headless Chromium on PATH ({', '.join(BROWSERS)}): "
                "apt-get install chromium-headless-shell")


def _chrome(browser: str, page: Path, *args: str, profile: Path) -> subprocess.CompletedProcess[str]:
    argv = [browser, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
            "--disable-extensions", f"--user-data-dir={profile}", "--enable-logging=stderr",
            "--v=0", "--virtual-time-budget=20000", *args, page.as_uri()]
    return subprocess.run(argv, capture_output=True, text=True, timeout=120)


def test_report_renders_in_headless_chromium(capsys: Any, tmp_path: Path) -> None:
    browser = _browser()
    page = tmp_path / "report.html"
    code, _, err = run(capsys, "report", DDP, "--output", page, "--simulate", "--dp 4")
    assert code == 0, err
    want = int(re.search(r'data-charts="(\d+)"', page.read_text()).group(1))  # type: ignore[union-attr]

    dom = _chrome(browser, page, "--dump-dom", profile=tmp_path / "p1")
    assert dom.returncode == 0, dom.stderr[-2000:]
    status = re.search(r'id="echo-status">([^<]*)<', dom.stdout)
    assert status and status.group(1) == f"rendered {want} of {want} charts", status
    assert not re.search(r"<body[^>]*data-error=", dom.stdout)
    assert len(re.findall(r'class="[^"]*js-plotly-plot', dom.stdout)) == want
    console = [ln for ln in dom.stderr.splitlines() if "CONSOLE" in ln]
    errors = [ln for ln in console if re.search(r"Uncaught|Error|error", ln)]
    assert not errors, errors

    shot = tmp_path / "report.png"
    got = _chrome(browser, page, "--hide-scrollbars", "--window-size=1280,1700",
                  f"--screenshot={shot}", profile=tmp_path / "p2")
    assert got.returncode == 0, got.stderr[-2000:]
    png = shot.read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 50_000  # charts, not a blank page
    keep = os.environ.get("ECHO_REPORT_SCREENSHOT")
    if keep:
        shutil.copyfile(shot, keep)
