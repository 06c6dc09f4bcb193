"""Trials are searchable in Temporal: one visibility query finds a run's failed trials."""

from __future__ import annotations

import asyncio

from passhat.testing.harness import agent_that_succeeds
from tests.runs import config, run_to_end


async def _ids(client, query: str) -> set[str]:
    return {wf.id async for wf in client.list_workflows(query)}


async def test_query_returns_exactly_the_failed_trials(client, sqlite_store):
    store = sqlite_store
    agent = agent_that_succeeds("0.5")
    cfg = config(agent_models=[agent], limit=4, trials=3)
    await run_to_end(client, store, cfg)
    failed = {t.trial_id for t in store.trials(cfg.run_id, failed_only=True)}
    succeeded = {t.trial_id for t in store.trials(cfg.run_id)} - failed
    assert failed and succeeded  # the seeded draws give both kinds

    query = (
        f'PasshatRun="{cfg.run_id}" AND PasshatOutcome="failure" '
        f'AND PasshatAgentModel="{agent}" AND PasshatDomain="airline"'
    )
    # Visibility is updated asynchronously after a workflow closes: poll, bounded.
    deadline = asyncio.get_running_loop().time() + 30
    while (found := await _ids(client, query)) != failed:
        assert asyncio.get_running_loop().time() < deadline, f"query found {found}, expected {failed}"
        await asyncio.sleep(0.2)
    assert await _ids(client, f'PasshatRun="{cfg.run_id}" AND PasshatOutcome="success"') == succeeded

    # The memo carries reward and termination reason for the UI.
    some = next(iter(failed))
    desc = await client.get_workflow_handle(some).describe()
    memo = await desc.memo()
    assert memo["outcome"] == "failure" and memo["reward"] == 0.0
    reason = store.get_trial(some).termination_reason  # agent_error (26.3's noisy), user_stop (faulty)
    assert reason and memo["termination_reason"] == reason
