"""The Temporal web UI, opened by headless Chromium, shows a run's trial workflows when
filtered by the run's search attribute. The screenshot is kept as a test artifact."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path
from urllib.parse import quote

import pytest

from tests.runs import config, run_to_end

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


async def test_ui_filtered_by_run_lists_its_trials(client, sqlite_store, temporal_server, tmp_path):
    cfg = config(agent_models=["scripted/noisy-0.5"], limit=2, trials=2)
    await run_to_end(client, sqlite_store, cfg)
    trial_ids = [t.trial_id for t in sqlite_store.trials(cfg.run_id)]
    url = (f"{temporal_server.ui_url}/namespaces/default/workflows?query="
           + quote(f'PasshatRun="{cfg.run_id}"', safe=""))

    dom = chromium(["--dump-dom", url], tmp_path / "profile-dom")
    assert dom.returncode == 0, dom.stderr[-2000:]
    # Exactly this run's trial workflows are listed, though the server holds other runs.
    listed = set(re.findall(r"t-[0-9a-f]{8}/[^\"<>\s]+?/trial-\d+", dom.stdout))
    assert listed == set(trial_ids), f"listed {sorted(listed)}"

    ARTIFACTS.mkdir(exist_ok=True)
    shot = ARTIFACTS / "temporal-ui-run-trials.png"
    shot.unlink(missing_ok=True)
    result = chromium([f"--screenshot={shot}", url], tmp_path / "profile-shot")
    assert result.returncode == 0 and shot.stat().st_size > 10_000, result.stderr[-2000:]
