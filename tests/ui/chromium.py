"""Headless Chromium for the UI tests: dump a page's DOM after its scripts ran, or take
a screenshot. Shared by tests/ui's modules."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"
# Flags for a closed network: no background fetches, no component updates, no sync.
CHROMIUM_FLAGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--hide-scrollbars", "--window-size=1600,1000", "--virtual-time-budget=20000",
]


def chromium(args: list[str], profile: Path) -> subprocess.CompletedProcess:
    binary = shutil.which("chromium")
    if binary is None:
        pytest.fail("chromium is not installed: run the README's test command (bash tests/run.sh), which installs it")
    return subprocess.run(
        [binary, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", *args],
        capture_output=True, text=True, timeout=120,
    )
