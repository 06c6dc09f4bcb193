"""RunWorkflow: expands a run into (agent model, domain, task) units, runs a TaskWorkflow
for each with bounded concurrency, and aggregates once all have finished.

To stay inside Temporal's history limits on large runs it handles at most BATCH tasks per
execution and continues as new with the remaining ones; results live in the store, so
nothing needs to be carried across."""

from __future__ import annotations

import asyncio
from datetime import timedelta

from pydantic import BaseModel
from temporalio import workflow
from temporalio.common import RetryPolicy

with workflow.unsafe.imports_passed_through():
    from activities.results import ResultActivities
    from workflows.specs import RunConfig, RunSummary, TaskUnit
    from workflows.task import TaskWorkflow

BATCH = 250  # task workflows per execution: ~8 history events each, far below the limits


class RunRequest(BaseModel):
    config: RunConfig
    offset: int = 0  # units already handled by earlier executions (continue-as-new)
    batch: int = BATCH


def expand(config: RunConfig) -> list[TaskUnit]:
    """Every (agent model, domain, task) of the run, in a stable order."""
    return [
        TaskUnit(
            run_id=config.run_id,
            agent_model=model,
            user_model=config.user_model,
            domain=domain,
            task_id=task_id,
            trials=config.trials,
            agent_args=config.agent_args,
            user_args=config.user_args,
            max_steps=config.max_steps,
            max_errors=config.max_errors,
            retry=config.retry,
        )
        for model in config.agent_models
        for domain in config.domains
        for task_id in config.task_ids[domain]
    ]


@workflow.defn
class RunWorkflow:
    def __init__(self) -> None:
        self.finished = 0

    @workflow.run
    async def run(self, req: RunRequest) -> RunSummary:
        config = req.config
        units = expand(config)
        batch = units[req.offset : req.offset + req.batch]
        # Concurrency counts conversations in flight; each task runs all its trials at once.
        window = max(1, config.concurrency // max(1, config.trials))
        pending: set = set()
        for unit in batch:
            if len(pending) >= window:
                done, still_running = await workflow.wait(pending, return_when=asyncio.FIRST_COMPLETED)
                _raise_failures(done)
                pending = set(still_running)
            pending.add(asyncio.create_task(self._task(unit)))
        if pending:
            done, _ = await workflow.wait(pending)
            _raise_failures(done)
        if req.offset + req.batch < len(units):
            workflow.continue_as_new(req.model_copy(update={"offset": req.offset + req.batch}))
        return await workflow.execute_activity_method(
            ResultActivities.summarize_run,
            config.run_id,
            start_to_close_timeout=timedelta(seconds=60),
            retry_policy=RetryPolicy(maximum_attempts=10),
        )

    async def _task(self, unit: TaskUnit) -> None:
        await workflow.execute_child_workflow(
            TaskWorkflow.run,
            unit,
            id=unit.task_workflow_id,
            static_summary=f"{unit.agent_model} on {unit.domain} task {unit.task_id}, {unit.trials} trials",
        )
        self.finished += 1

    @workflow.query
    def tasks_finished(self) -> int:
        return self.finished


def _raise_failures(done) -> None:  # noqa: ANN001
    """A task workflow that failed must fail the run, not vanish from its results."""
    for task in done:
        task.result()
