"""A trial's Temporal history grows linearly with its steps: activities get references,
not the conversation."""

from __future__ import annotations

from tests.runs import config, run_to_end


async def trial_history(client, store, domain: str, task: str) -> tuple[int, int, int]:
    cfg = config(domains=[domain], task_ids=[task])
    await run_to_end(client, store, cfg)
    [trial] = store.trials(cfg.run_id)
    history = await client.get_workflow_handle(trial.trial_id).fetch_history()
    return len(store.steps(trial.trial_id)), len(history.events), sum(e.ByteSize() for e in history.events)


async def test_history_is_linear_in_steps(client, sqlite_store):
    short_steps, short_events, short_bytes = await trial_history(client, sqlite_store, "airline", "17")
    long_steps, long_events, long_bytes = await trial_history(client, sqlite_store, "retail", "4")
    assert long_steps >= 2.5 * short_steps
    # Each step is one activity: scheduled, started, completed, plus a workflow task.
    assert long_events <= 7 * long_steps + 30
    # Bytes per step stay flat as the conversation grows (quadratic growth would show
    # here as a ratio near long_steps / short_steps).
    per_step_short = short_bytes / short_steps
    per_step_long = long_bytes / long_steps
    assert per_step_long < 1.5 * per_step_short, (per_step_short, per_step_long)


async def test_large_runs_continue_as_new_in_batches(client, sqlite_store):
    """A run starts `trial_batch` trials per execution, so its history stays bounded
    however many trials it has; the next execution takes over the trials in flight."""
    from passhat.workflows.client import follow
    from tests.runs import worker_for
    from passhat.workflows.run import RunRequest, RunWorkflow
    from temporalio.api.enums.v1 import EventType

    store = sqlite_store
    cfg = config(limit=5, concurrency=2)
    store.create_run(cfg, 5)
    async with worker_for(client, store) as queue:
        handle = await client.start_workflow(
            RunWorkflow.run, RunRequest(config=cfg, trial_batch=2), id=cfg.run_id, task_queue=queue
        )
        summary = await follow(handle, store, cfg.run_id, lambda *a: None, poll_s=0.2)
    assert (summary.results[0].tasks, summary.results[0].evaluable) == (5, 5)
    # Three executions: trials 0-1, 2-3, 4; the first two ended by continuing as new.
    first = await client.get_workflow_handle(cfg.run_id, run_id=handle.first_execution_run_id).fetch_history()
    assert first.events[-1].event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW
    started = [e for e in first.events if e.event_type == EventType.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED]
    assert len(started) == 2


async def test_a_task_records_its_outcome_in_the_workflow_task_that_saw_its_trials_end(client, sqlite_store):
    """The run writes the task's outcome by a local activity, in the workflow task that
    saw its last trial end: no activity task of its own."""
    from temporalio.api.enums.v1 import EventType

    cfg = config(task_ids=["1"], trials=2)
    await run_to_end(client, sqlite_store, cfg)
    history = await client.get_workflow_handle(cfg.run_id).fetch_history()
    scheduled = [e.activity_task_scheduled_event_attributes.activity_type.name
                 for e in history.events if e.HasField("activity_task_scheduled_event_attributes")]
    markers = [e.marker_recorded_event_attributes.marker_name for e in history.events
               if e.event_type == EventType.EVENT_TYPE_MARKER_RECORDED]
    assert scheduled == ["close_run", "summarize_run"]
    assert "core_local_activity" in markers
    [outcome] = sqlite_store.task_results(cfg.run_id)  # and it was recorded
    assert (outcome.task_id, outcome.trials) == ("1", 2)
