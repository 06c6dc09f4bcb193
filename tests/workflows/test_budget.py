"""A run's budget (RunConfig.max_cost), through real workflows on a real Temporal server:
the scripted model is served over real HTTP with litellm's custom prices in the model
args, so every model call records a cost, and the RunWorkflow asks the store for the
run's recorded cost before it starts each task."""

from __future__ import annotations

import json

import pytest
from temporalio.client import WorkflowExecutionStatus

from passhat.testing.fault_server import FaultServer
from passhat.testing.harness import TASKS, until
from passhat.testing.scripted_http import ScriptedResponder, http_args
from passhat.workflows.client import BudgetChangeRefused, follow, start_run
from passhat.run_identity import fingerprint
from tests.runs import config, worker_for

# litellm prices a model it has no price for from these model args. The name is the
# scripted oracle's (noisy with P = 1 always succeeds), kept apart from other tests'
# models because litellm registers a price for the whole process.
PRICED_MODEL = "openai/noisy-1.00"
PRICES = {"input_cost_per_token": 1e-6, "output_cost_per_token": 2e-6}


def priced_config(srv, **overrides):
    args = json.dumps(http_args(srv.url, **PRICES))
    return config(**{
        "agent_models": [PRICED_MODEL], "user_model": PRICED_MODEL, "agent_args": args,
        "user_args": args, "task_ids": TASKS, **overrides,
    })


async def run_once(client, store, cfg, *, resume: bool = False):
    async with worker_for(client, store) as queue:
        handle = await start_run(client, store, cfg, task_queue=queue, resume=resume)
        return await follow(handle, store, cfg.run_id, lambda *a: None, poll_s=0.2)


async def test_the_run_stops_at_its_budget_and_resume_with_a_new_one_finishes_it(client, sqlite_store):
    store = sqlite_store
    responder = ScriptedResponder(["airline"])
    with FaultServer(responder=responder) as srv:
        # 4 tasks of 2 trials, 2 tasks at a time; the first finished task is over budget.
        cfg = priced_config(srv, trials=2, concurrency=4, max_cost=1e-9)
        assert cfg.total_trials() == 8
        # Every model call waits until both tasks in the window have started: when the
        # run asked for its cost before each, nothing had been spent.
        responder.freeze()
        async with worker_for(client, store) as queue:
            handle = await start_run(client, store, cfg, task_queue=queue)
            await until(lambda: responder.held == 4, "the first two tasks' conversations to call the model", 120)
            assert store.run_cost(cfg.run_id) == 0.0
            # A running run takes a new budget only once it has stopped.
            with pytest.raises(BudgetChangeRefused, match=f"run {cfg.run_id} is running with a budget of 1e-09 USD"):
                await start_run(client, store, cfg.model_copy(update={"max_cost": 5.0}), task_queue=queue, resume=True)
            responder.thaw()
            summary = await follow(handle, store, cfg.run_id, lambda *a: None, poll_s=0.2)

        row = store.get_run(cfg.run_id)
        assert row.status == "budget_exhausted" and row.total_trials == 8
        trials = store.trials(cfg.run_id)
        # Fewer trials started than planned; the ones in flight at the stop finished.
        assert len(trials) == 4
        assert all(t.status == "scored" and t.reward == 1.0 and t.cost > 0 for t in trials)
        assert store.run_cost(cfg.run_id) == pytest.approx(sum(t.cost for t in trials))
        assert sum(r.tasks for r in summary.results) == 2
        for t in trials:
            desc = await client.get_workflow_handle(t.trial_id).describe()
            assert desc.status == WorkflowExecutionStatus.COMPLETED
        spent = store.run_cost(cfg.run_id)

        # `passhat run` again with another budget is refused: resume changes a budget.
        with pytest.raises(BudgetChangeRefused, match="exists with a budget of 1e-09 USD; `passhat resume"):
            await start_run(client, store, cfg.model_copy(update={"max_cost": 5.0}))

        # Resumed with its stored budget, it stops again before starting anything.
        await run_once(client, store, row.run_config(), resume=True)
        assert store.get_run(cfg.run_id).status == "budget_exhausted"
        assert len(store.trials(cfg.run_id)) == 4 and store.run_cost(cfg.run_id) == spent

        # With a new budget it finishes: the scored trials stay as they were.
        summary = await run_once(client, store, row.run_config().model_copy(update={"max_cost": 1000.0}), resume=True)
    row = store.get_run(cfg.run_id)
    assert row.status == "completed" and row.run_config().max_cost == 1000.0
    after = {t.trial_id: t for t in store.trials(cfg.run_id)}
    assert len(after) == 8 and all(t.status == "scored" and t.reward == 1.0 for t in after.values())
    assert all(after[t.trial_id].attempts == 1 and after[t.trial_id].cost == t.cost for t in trials)
    assert sum(r.tasks for r in summary.results) == 4
    # The identity of the run never changed: the budget is not part of it.
    assert row.fingerprint == fingerprint(cfg)


async def test_a_run_without_a_budget_never_asks_for_its_cost(client, sqlite_store):
    """No budget, no extra activities: the run's history is what it always was."""
    with FaultServer(responder=ScriptedResponder(["airline"]).answer) as srv:
        cfg = priced_config(srv, task_ids=["1"], trials=1)
        await run_once(client, sqlite_store, cfg)
    history = await client.get_workflow_handle(cfg.run_id).fetch_history()
    names = [e.activity_task_scheduled_event_attributes.activity_type.name
             for e in history.events if e.HasField("activity_task_scheduled_event_attributes")]
    assert names == ["close_run", "summarize_run"]
    assert sqlite_store.get_run(cfg.run_id).status == "completed"
