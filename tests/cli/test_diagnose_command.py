"""`passhat diagnose RUN`: the failed trials of a run scored without a diagnosis, or with
an older one, are diagnosed again in a worker, as the scoring would diagnose them now;
trials already current are left alone."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path

from passhat.domains.diagnosis import DIAGNOSIS_VERSION
from passhat.infra.store import Store
from passhat.testing.harness import passhat


def test_missing_and_older_diagnoses_are_made_again_and_current_ones_kept(env):
    ran = passhat("run", "--domain", "airline", "--num-tasks", "8", "--trials", "2",
                  "--agent-model", "scripted/faulty-1.0", "--user-model", "scripted/oracle",
                  "--run-id", "older", "--yes", env=env)
    assert ran.returncode in (0, 1), ran.stderr
    store = Store(f"sqlite:///{Path(env['PASSHAT_HOME']) / 'results.db'}")
    failed = [t for t in store.trials("older") if t.success is False]
    assert len(failed) >= 4
    made = {t.trial_id: store.trial_diagnosis("older", t.trial_id) for t in failed}
    # As an older passhat left them: one with none, one of version 1, the rest current.
    store.set_trial_diagnosis(failed[0].trial_id, None)
    store.set_trial_diagnosis(failed[1].trial_id, {**made[failed[1].trial_id], "version": 1, "db_differences": []})
    store.close()

    done = passhat("diagnose", "older", "-o", "json", env=env)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"run_id": "older", "diagnosed": 2, "current": len(failed) - 2,
                                       "not_diagnosable": 0}
    store = Store(f"sqlite:///{Path(env['PASSHAT_HOME']) / 'results.db'}")
    again = {t.trial_id: store.trial_diagnosis("older", t.trial_id) for t in failed}
    store.close()
    assert again == made and all(d["version"] == DIAGNOSIS_VERSION for d in again.values())

    text = passhat("diagnose", "older", env=env)
    assert text.returncode == 0 and f"diagnosed 0 failed trial(s); {len(failed)} already current" in text.stdout
    asyncio.run(_replays(env["TEMPORAL_ADDRESS"], "older~diagnose"))


async def _replays(address: str, workflow_id: str) -> None:
    """The workflow's history replays against the code that made it (and is kept under
    tests/durability/histories when PASSHAT_RECORD_HISTORIES=1)."""
    from passhat.infra.temporal_client import connect
    from tests.durability.test_replay import HISTORIES, replayer

    history = await (await connect(address)).get_workflow_handle(workflow_id).fetch_history()
    await replayer().replay_workflow(history)
    if os.environ.get("PASSHAT_RECORD_HISTORIES") == "1":
        (HISTORIES / "rediagnosis.json").write_text(history.to_json())


def test_an_unknown_run_is_one_line(env):
    done = passhat("diagnose", "no-such-run", env=env)
    assert done.returncode != 0
    assert len(done.stderr.strip().splitlines()) == 1 and "no-such-run" in done.stderr
