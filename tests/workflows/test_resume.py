"""Not-evaluable trials, resume and cancel, through real workflows. The agent is served
over real HTTP by the loopback fault server, playing the oracle for the task."""

from __future__ import annotations

import asyncio

from temporalio.testing import ActivityEnvironment

from activities.conversation import ConversationActivities
from activities.results import ResultActivities, ScoreRequest
from cli.launch import cancel_run, follow, start_run
from domains.registry import get_domain
from infra import scripted
from tests.fault_server import FaultServer
from tests.runs import config, run_to_end, worker_for
from workflows.run import expand
from workflows.specs import StepRef

TASK = "0"


def oracle_agent(body: dict) -> dict:
    return scripted.agent_turn(get_domain("airline").task(TASK), body["messages"])


def http_config(srv, **overrides):
    return config(
        agent_models=["openai/agent"], task_ids=[TASK], trials=2,
        agent_args=f'{{"api_base": "{srv.url}/v1", "api_key": "x"}}', **overrides,
    )


async def test_permanent_error_is_not_evaluable_then_resume_completes(client, sqlite_store):
    store = sqlite_store
    with FaultServer(responder=oracle_agent, faults=lambda n, body: "401") as srv:
        cfg = http_config(srv)
        summary = await run_to_end(client, store, cfg)
        [row] = summary.results
        assert (row.trials, row.evaluable, row.pass_hat_k) == (2, 0, {})
        trials = store.trials(cfg.run_id)
        assert all(t.status == "not_evaluable" for t in trials)
        assert all(t.error_class == "AuthenticationError" and "401" in t.error for t in trials)
        assert srv.received == 2  # deterministic errors are not retried
        recorded = {t.trial_id: store.count_steps(t.trial_id) for t in trials}

        srv.set_faults(None)  # the configuration is fixed
        async with worker_for(client, store) as queue:
            handle = await start_run(client, store, cfg, task_queue=queue, resume=True)
            summary = await follow(handle, store, cfg.run_id, lambda *a: None, poll_s=0.2)
    [row] = summary.results
    assert (row.evaluable, row.pass_hat_k) == (2, {"1": 1.0, "2": 1.0})
    for t in store.trials(cfg.run_id):
        assert t.status == "scored" and t.attempts == 2 and t.reward == 1.0
        steps = store.steps(t.trial_id)
        assert [s.step for s in steps] == list(range(len(steps)))
        assert len(steps) > recorded[t.trial_id]  # earlier steps kept, the rest added


async def test_transient_errors_exhausted_are_not_evaluable(client, sqlite_store):
    with FaultServer(responder=oracle_agent, faults=lambda n, body: "503") as srv:
        cfg = http_config(srv, max_attempts=3)
        cfg.retry.initial_interval_s = 0.05
        cfg.retry.max_interval_s = 0.1
        summary = await run_to_end(client, sqlite_store, cfg)
        assert srv.received == 2 * 3  # every attempt reached the provider
    assert summary.results[0].evaluable == 0
    assert {t.error_class for t in sqlite_store.trials(cfg.run_id)} == {"ServiceUnavailableError"}


async def test_cancel_then_resume_finishes_without_redoing_steps(client, sqlite_store):
    store = sqlite_store
    cfg = config(limit=4, trials=2, agent_args='{"latency": 0.3}')
    async with worker_for(client, store) as queue:
        await start_run(client, store, cfg, task_queue=queue)
        deadline = asyncio.get_running_loop().time() + 60
        while store.progress(cfg.run_id)[0] < 2:  # cancel once some trials are done
            assert asyncio.get_running_loop().time() < deadline, "run made no progress"
            await asyncio.sleep(0.1)
        assert await cancel_run(client, store, cfg.run_id) == "cancelled"
    assert store.get_run(cfg.run_id).status == "cancelled"
    done_before = {t.trial_id: store.count_steps(t.trial_id)
                   for t in store.trials(cfg.run_id, status="scored")}
    assert 0 < len(done_before) < 8

    async with worker_for(client, store) as queue:
        handle = await start_run(client, store, cfg, task_queue=queue, resume=True)
        summary = await follow(handle, store, cfg.run_id, lambda *a: None, poll_s=0.2)
    assert summary.results[0].evaluable == 8 and summary.results[0].pass_hat_k["2"] == 1.0
    for trial_id, n in done_before.items():  # finished trials were left untouched
        assert store.count_steps(trial_id) == n and store.get_trial(trial_id).attempts == 1
    assert store.get_run(cfg.run_id).status == "completed"


async def test_recording_activities_run_twice_leave_one_row(client, sqlite_store):
    store = sqlite_store
    cfg = config(task_ids=["1"])  # a task whose gold actions call tools
    await run_to_end(client, store, cfg)
    [trial] = store.trials(cfg.run_id)
    spec = expand(cfg)[0].trial(0)
    env = ActivityEnvironment()
    results = ResultActivities(store)
    req = ScoreRequest(trial=spec, termination_reason="user_stop", n_steps=trial.n_steps)
    first = env.run(results.score_trial, req)
    second = env.run(results.score_trial, req)
    assert first == second and len(store.trials(cfg.run_id)) == 1
    # A tool step re-run for an index already recorded returns the record, runs nothing.
    tool_step = next(s.step for s in store.steps(spec.trial_id) if s.role == "tool")
    n = store.count_steps(spec.trial_id)
    env.run(ConversationActivities(store).tool_turn, StepRef(trial=spec, step=tool_step))
    assert store.count_steps(spec.trial_id) == n
