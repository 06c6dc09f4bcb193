"""Runs through real Temporal workflows on a dev server, with both store back ends."""

from __future__ import annotations

import json

import pytest

from passhat import metrics
from passhat.outcomes import is_success
from passhat.testing.fault_server import FaultServer
from passhat.testing.harness import activity_types, agent_that_succeeds
from passhat.testing.scripted_http import ScriptedResponder, http_args
from passhat.workflows.client import follow, start_run
from tests.runs import config, run_to_end, worker_for


async def test_oracle_scores_every_trial(client, store):
    cfg = config(limit=4, trials=2, concurrency=2)  # a window of one task at a time
    summary = await run_to_end(client, store, cfg)
    [row] = summary.results
    assert (row.tasks, row.trials, row.evaluable) == (4, 8, 8)
    assert row.pass_hat_k == {"1": 1.0, "2": 1.0}
    assert row.avg_reward == 1.0
    trials = store.trials(cfg.run_id)
    assert len(trials) == 8 and all(t.status == "scored" and t.reward == 1.0 for t in trials)
    assert all(t.termination_reason == "user_stop" for t in trials)
    # Every step is recorded once, with tokens from the model calls.
    for t in trials:
        steps = store.steps(t.trial_id)
        assert [s.step for s in steps] == list(range(len(steps)))
        assert t.input_tokens > 0 and t.output_tokens > 0
    assert store.get_run(cfg.run_id).status == "completed"


async def test_noisy_agent_pass_hat_matches_recorded_rewards(client, sqlite_store):
    store = sqlite_store
    agent = agent_that_succeeds("0.7")
    cfg = config(agent_models=[agent], limit=10, trials=4, concurrency=40)
    summary = await run_to_end(client, store, cfg)
    [row] = summary.results
    assert row.evaluable == 40
    per_task = {}
    for t in store.trials(cfg.run_id):
        per_task.setdefault(t.task_id, []).append(t.reward)
    curves = [
        metrics.pass_hat_curve(sum(is_success(r) for r in rewards), len(rewards))
        for rewards in per_task.values()
    ]
    assert row.pass_hat_k == pytest.approx(metrics.mean_over_tasks(curves))
    assert 0.5 <= row.pass_hat_k["1"] <= 0.9  # 40 seeded draws at p = 0.7
    assert row.pass_hat_k["4"] < row.pass_hat_k["1"]
    failures = [t for t in store.trials(cfg.run_id) if t.reward == 0.0]
    assert failures
    if agent.startswith("scripted/noisy"):  # its empty reply: tau2 26.3 ends it as agent_error
        assert all(t.termination_reason == "agent_error" for t in failures)


async def test_same_run_id_attaches_and_resume_reruns_nothing(client, sqlite_store):
    """Starting a finished run's id again attaches to its result; resuming it runs its
    workflows again, and every trial finds its score and stops there: no model call
    reaches the provider, no step is written, no activity but the opening one runs."""
    store = sqlite_store
    responder = ScriptedResponder(["airline"])
    with FaultServer(responder=responder.answer) as srv:
        http = json.dumps(http_args(srv.url))
        cfg = config(agent_models=["openai/oracle"], user_model="openai/oracle",
                     agent_args=http, user_args=http, limit=2, trials=2)
        first = await run_to_end(client, store, cfg)
        assert first.results[0].pass_hat_k == {"1": 1.0, "2": 1.0}
        calls = srv.received
        steps = {t.trial_id: len(store.steps(t.trial_id)) for t in store.trials(cfg.run_id)}

        assert await run_to_end(client, store, cfg) == first
        assert srv.received == calls

        async with worker_for(client, store) as queue:
            handle = await start_run(client, store, cfg, task_queue=queue, resume=True)
            resumed = await follow(handle, store, cfg.run_id, lambda *a: None, poll_s=0.2)
        assert resumed == first
        assert srv.received == calls, "resuming a finished run called the provider"
    assert {t.trial_id: len(store.steps(t.trial_id)) for t in store.trials(cfg.run_id)} == steps
    for trial_id in steps:
        # The trial workflow's newest execution (the resumed one) only opened the trial.
        history = await client.get_workflow_handle(trial_id).fetch_history()
        activities = activity_types(history)
        assert activities == ["open_trial"], activities


async def test_task_with_an_initial_conversation_continues_from_it(client, sqlite_store):
    cfg = config(domains=["mock"], task_ids=["update_task_with_message_history"])
    summary = await run_to_end(client, sqlite_store, cfg)
    assert summary.results[0].avg_reward == 1.0
    [trial] = sqlite_store.trials(cfg.run_id)
    opening = sqlite_store.steps(trial.trial_id)[0].message_list()
    assert len(opening) > 1 and opening[0].role == "user"  # step 0 is the task's history


async def test_a_key_missing_on_the_worker_is_not_evaluable_at_once(client, sqlite_store, monkeypatch):
    """The run's checks passed elsewhere (a --detach run, its key forgotten on the
    worker): openai's client finds no OPENAI_API_KEY and litellm reports an HTTP 500.
    The trial is not evaluable after that one attempt, not after 15 minutes of retries,
    and says which variable to set; no request reached the server."""
    import asyncio

    store = sqlite_store
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with FaultServer(responder=ScriptedResponder(["airline"])) as srv:
        cfg = config(agent_models=["openai/oracle"], task_ids=["0"], trials=1,
                     agent_args=json.dumps({"api_base": srv.url + "/v1"}))
        assert cfg.retry.retry_for_s >= 900  # retried, it would not end within the wait below
        async with worker_for(client, store) as queue:
            handle = await start_run(client, store, cfg, task_queue=queue)
            # Without a non-retryable classification this wait runs out.
            summary = await asyncio.wait_for(follow(handle, store, cfg.run_id, lambda *a: None, poll_s=0.2), 240)
        assert srv.received == 0
    assert summary.results[0].evaluable == 0
    [trial] = store.trials(cfg.run_id)
    assert (trial.status, trial.error_class) == ("not_evaluable", "MissingApiKey")
    assert "MissingApiKey calling openai/oracle: OPENAI_API_KEY is not set on this worker" in trial.error
    assert "\n" not in trial.error
