"""Not-evaluable trials, resume and cancel, through real workflows. The agent is served
over real HTTP by the loopback fault server, playing the oracle for the task."""

from __future__ import annotations

import asyncio

import pytest
from temporalio.client import WorkflowExecutionStatus
from temporalio.testing import ActivityEnvironment

from passhat.activities.conversation import ConversationActivities
from passhat.workflows.client import follow, start_run
from passhat.domains.registry import get_domain
from passhat.infra import scripted_provider
from passhat.testing.fault_server import FaultServer
from passhat.testing.harness import trial_specs
from passhat.testing.scripted_http import ScriptedResponder
from tests.runs import HoldTask, cancel_midway, config, http_config, run_to_end, worker_for
from passhat.contracts import StepRef

TASK = "0"  # the task http_config (tests/runs.py) runs by default


def oracle_agent(body: dict) -> dict:
    return scripted_provider.agent_turn(get_domain("airline").task(TASK), body["messages"])


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
        recorded = {t.trial_id: len(store.steps(t.trial_id)) for t in trials}
        # Red in the Temporal UI: each trial workflow failed with the provider's error
        # class, while the run completed.
        for t in trials:
            desc = await client.get_workflow_handle(t.trial_id).describe()
            assert desc.status == WorkflowExecutionStatus.FAILED
            history = await client.get_workflow_handle(t.trial_id).fetch_history()
            failure = history.events[-1].workflow_execution_failed_event_attributes.failure
            assert failure.application_failure_info.type == "AuthenticationError"
            assert "not evaluable" in failure.message and "401" in failure.message
        desc = await client.get_workflow_handle(cfg.run_id).describe()
        assert desc.status == WorkflowExecutionStatus.COMPLETED

        srv.set_faults(None)  # the configuration is fixed
        async with worker_for(client, store) as queue:
            handle = await start_run(client, store, cfg, task_queue=queue, resume=True)
            summary = await follow(handle, store, cfg.run_id, lambda *a: None, poll_s=0.2)
    [row] = summary.results
    assert (row.evaluable, row.pass_hat_k) == (2, {"1": 1.0, "2": 1.0})
    for t in store.trials(cfg.run_id):
        assert t.status == "scored" and t.attempts == 2 and t.reward == 1.0
        desc = await client.get_workflow_handle(t.trial_id).describe()
        assert desc.status == WorkflowExecutionStatus.COMPLETED
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


async def test_a_provider_outage_within_the_retry_window_is_ridden_out(client, sqlite_store):
    """Retries are bounded by time, not a handful of attempts: 12 failures in a row
    (more than the 8 attempts that used to be the limit) and the trial still scores."""
    outage = 12
    with FaultServer(responder=ScriptedResponder(["airline"]).answer,
                     faults=lambda n, body: "503" if n < outage else None) as srv:
        cfg = http_config(srv, trials=1, task_ids=["1"], agent_models=["openai/oracle"])
        assert cfg.retry.max_attempts == 0  # no limit on attempts by default
        cfg.retry.initial_interval_s = 0.05
        cfg.retry.max_interval_s = 0.1
        summary = await run_to_end(client, sqlite_store, cfg)
        assert srv.counts["503"] == outage
    assert (summary.results[0].evaluable, summary.results[0].avg_reward) == (1, 1.0)


async def test_retries_stop_when_the_window_closes(client, sqlite_store):
    # A window long enough for a few attempts even on a busy machine, where scheduling
    # one can take seconds; attempts 0.2 s apart at most.
    with FaultServer(faults=lambda n, body: "503") as srv:
        cfg = http_config(srv, trials=1, retry_for="10s")
        cfg.retry.initial_interval_s = 0.05
        cfg.retry.max_interval_s = 0.2
        summary = await run_to_end(client, sqlite_store, cfg)
        assert srv.received >= 2  # retried within the window ...
    assert summary.results[0].evaluable == 0  # ... then given up: not evaluable
    [trial] = sqlite_store.trials(cfg.run_id)
    assert trial.status == "not_evaluable"


async def test_cancel_then_resume_finishes_without_redoing_steps(client, sqlite_store):
    store = sqlite_store
    agent = HoldTask("1")
    with FaultServer(responder=agent) as srv:
        async with worker_for(client, store) as queue:
            cfg = await cancel_midway(client, store, srv, agent, queue)
            # When cancel returns, nothing of the run runs any more: no trial workflow,
            # no activity, and every unfinished trial is on record as cancelled.
            for spec in trial_specs(cfg):
                desc = await client.get_workflow_handle(spec.trial_id).describe()
                assert desc.status != WorkflowExecutionStatus.RUNNING, spec.trial_id
                assert not desc.raw_description.pending_activities, spec.trial_id
        agent.release.set()
        assert store.get_run(cfg.run_id).status == "cancelled"
        status = {t.trial_id: t.status for t in store.trials(cfg.run_id)}
        task_of = {s.trial_id: s.task_id for s in trial_specs(cfg)}
        assert {t: task_of[t] for t, st in status.items() if st == "scored"} == {
            t: "0" for t in task_of if task_of[t] == "0"}
        assert {st for t, st in status.items() if task_of[t] == "1"} == {"cancelled"}
        done_before = {t: len(store.steps(t)) for t, st in status.items() if st == "scored"}

        async with worker_for(client, store) as queue:
            handle = await start_run(client, store, cfg, task_queue=queue, resume=True)
            summary = await follow(handle, store, cfg.run_id, lambda *a: None, poll_s=0.2)
    [row] = summary.results
    assert (row.evaluable, row.pass_hat_k["2"]) == (4, 1.0)
    for trial_id, n in done_before.items():  # finished trials were left untouched
        assert len(store.steps(trial_id)) == n and store.get_trial(trial_id).attempts == 1
    assert store.get_run(cfg.run_id).status == "completed"


async def test_recorded_steps_are_never_executed_again(client, sqlite_store, monkeypatch):
    """Every step activity re-run for a step that is already recorded (as Temporal does
    when a worker dies between recording and reporting) returns the record: no model
    call reaches the provider and no tool runs."""
    store = sqlite_store
    with FaultServer(responder=ScriptedResponder(["airline"]).answer) as srv:
        cfg = http_config(srv, trials=1, task_ids=["1"], agent_models=["openai/oracle"])
        await run_to_end(client, store, cfg)
        [trial] = store.trials(cfg.run_id)
        assert trial.reward == 1.0
        calls = srv.received
        assert calls > 0
        spec = cfg.units()[0].trial(0)
        executed = []
        airline = get_domain("airline")
        real_execute = airline.execute
        monkeypatch.setattr(airline, "execute", lambda *a, **kw: executed.append(a) or real_execute(*a, **kw))

        env = ActivityEnvironment()
        conversation = ConversationActivities(store)
        turn = {"assistant": conversation.agent_turn, "user": conversation.user_turn,
                "tool": conversation.tool_turn}
        before = [(s.step, s.messages_json) for s in store.steps(spec.trial_id)]
        roles = {s.role for s in store.steps(spec.trial_id)[1:]}
        assert roles == {"assistant", "user", "tool"}
        for step in store.steps(spec.trial_id)[1:]:
            result = env.run(turn[step.role], StepRef(trial=spec, step=step.step))
            if asyncio.iscoroutine(result):
                result = await result
            assert (result.step, result.role) == (step.step, step.role)
        assert srv.received == calls, "a recorded model step called the provider again"
    assert executed == [], "a recorded tool step ran its tools again"
    assert [(s.step, s.messages_json) for s in store.steps(spec.trial_id)] == before


async def test_an_interrupted_start_keeps_the_run_if_its_workflow_started(client, sqlite_store):
    """Ctrl-C can land after the server accepted the start: the run's record stays, so
    the run can be followed and resumed; a start that never happened leaves nothing."""
    class InterruptedAfterStart:
        """A client whose start_workflow reaches the server, then is interrupted."""

        def __init__(self, real, reach_server: bool):  # noqa: ANN001
            self.real, self.reach_server = real, reach_server

        def __getattr__(self, name):  # noqa: ANN001, ANN204
            return getattr(self.real, name)

        async def start_workflow(self, *args, **kwargs):  # noqa: ANN002, ANN003, ANN201
            if self.reach_server:
                await self.real.start_workflow(*args, **kwargs)
            raise asyncio.CancelledError()

    for reach_server in (True, False):
        cfg = config(limit=1, agent_args='{"latency": 1}')
        with pytest.raises(asyncio.CancelledError):
            await start_run(InterruptedAfterStart(client, reach_server), sqlite_store, cfg,
                            task_queue="nobody-polls-this")
        assert (sqlite_store.get_run(cfg.run_id) is not None) == reach_server
        if reach_server:
            await client.get_workflow_handle(cfg.run_id).terminate()
