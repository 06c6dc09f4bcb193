"""The Temporal web UI, opened by headless Chromium, shows a run's trial workflows when
filtered by the run's search attribute. The screenshot is kept as a test artifact."""

from __future__ import annotations

import re
from urllib.parse import quote

from tests.runs import config, run_to_end
from tests.ui.chromium import ARTIFACTS, chromium


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
