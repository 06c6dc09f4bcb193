"""RunWorkflow: expands a run into (agent model, domain, task) units, runs a TaskWorkflow
for each with bounded concurrency, and aggregates once all have finished.

To stay inside Temporal's history limits on large runs it handles at most BATCH tasks per
execution and continues as new with the remaining ones; results live in the store, so
nothing needs to be carried across.

With a budget (RunConfig.max_cost) it asks the store for the run's recorded cost before
it starts each task; once that reaches the budget it starts no more, lets the tasks in
flight finish, and closes the run as budget_exhausted (resume continues it)."""

from __future__ import annotations

import asyncio

from pydantic import BaseModel
from temporalio import workflow
from temporalio.exceptions import ApplicationError, ChildWorkflowError, is_cancelled_exception

with workflow.unsafe.imports_passed_through():
    from passhat.activities.results import ResultActivities
    from passhat.contracts import RunConfig, RunSummary, TaskUnit
    from passhat.workflows.activity_options import bookkeeping
    from passhat.workflows.cancellation import stop_if_cancelled
    from passhat.workflows.task import TaskWorkflow

BATCH = 250  # task workflows per execution: ~8 history events each, far below the limits
# Marks the executions that check the run's budget before each task (RunConfig.max_cost).
BUDGET_PATCH = "max-cost"


class RunRequest(BaseModel):
    config: RunConfig
    offset: int = 0  # units already handled by earlier executions (continue-as-new)
    batch: int = BATCH
    failed: list[str] = []  # task workflows that failed in earlier executions


@workflow.defn
class RunWorkflow:
    @workflow.run
    async def run(self, req: RunRequest) -> RunSummary:
        config = req.config
        units = config.units()
        batch = units[req.offset : req.offset + req.batch]
        # Concurrency counts conversations in flight; each task runs all its trials at once.
        window = max(1, config.concurrency // max(1, config.trials))
        # A list, not a set: its order is the same on every replay.
        pending: list = []
        failed = list(req.failed)
        # With a budget, the run asks the store what it has spent before each task starts
        # (the store is shared by every worker). patched: a history written without
        # these checks (by a worker of an earlier passhat) replays without them.
        budgeted = config.max_cost is not None and workflow.patched(BUDGET_PATCH)
        over_budget = False
        slots = ProviderSlots()
        waiting = list(batch)
        try:
            while waiting:
                # A cancel that arrived during the budget check (an activity that then
                # completed) starts no more tasks.
                stop_if_cancelled()
                # The first task in order whose capped providers have room: other
                # providers' tasks go ahead of a capped one that must wait.
                unit = next((u for u in waiting if slots.fit(u)), None)
                if len(pending) >= window or (unit is None and pending):
                    done, _ = await workflow.wait(pending, return_when=asyncio.FIRST_COMPLETED)
                    failed += _failures(done)
                    pending = [task for task in pending if task not in done]
                    slots.release(done)
                    continue
                unit = unit or waiting[0]
                if budgeted and await self._spent(config) >= config.max_cost:
                    # No new conversations; those in flight finish and are recorded.
                    workflow.logger.info("run %s reached its budget of %s USD", config.run_id, config.max_cost)
                    over_budget = True
                    break
                waiting.remove(unit)
                task = asyncio.create_task(self._task(unit))
                pending.append(task)
                slots.take(task, unit)
            if pending:
                done, _ = await workflow.wait(pending)
                failed += _failures(done)
        except asyncio.CancelledError:
            # Cancel the task workflows too, and wait until they have stopped (each trial
            # records itself as cancelled), so nothing of the run runs once it is cancelled.
            for task in pending:
                task.cancel()
            await asyncio.gather(*pending, return_exceptions=True)
            raise
        if not over_budget and req.offset + req.batch < len(units):
            workflow.continue_as_new(
                req.model_copy(update={"offset": req.offset + req.batch, "failed": failed})
            )
        if failed:
            # A task workflow fails only when its results could not be recorded (the store
            # stayed down longer than the bookkeeping window). The other tasks have run to
            # their end; the run fails, saying which, and resume runs them again.
            raise ApplicationError(
                f"{len(failed)} task(s) could not be recorded: {', '.join(failed[:5])}"
                + (" ..." if len(failed) > 5 else "")
                + f"; `passhat resume {config.run_id}` runs them again",
                type="TasksFailed",
                non_retryable=True,
            )
        await workflow.execute_activity_method(
            ResultActivities.close_run_over_budget if over_budget else ResultActivities.close_run,
            config.run_id,
            **bookkeeping(config.retry),
        )
        return await workflow.execute_activity_method(
            ResultActivities.summarize_run, config.run_id, **bookkeeping(config.retry)
        )

    async def _spent(self, config: RunConfig) -> float:
        """The run's recorded cost (USD), from the store."""
        return await workflow.execute_activity_method(
            ResultActivities.run_cost, config.run_id, **bookkeeping(config.retry)
        )

    async def _task(self, unit: TaskUnit) -> str | None:
        """Run one task workflow; its id if it failed."""
        try:
            await workflow.execute_child_workflow(
                TaskWorkflow.run,
                unit,
                id=unit.task_workflow_id,
                static_summary=f"{unit.agent_model} on {unit.domain} task {unit.task_id}, {unit.trials} trials",
            )
        except ChildWorkflowError as err:
            if is_cancelled_exception(err):
                raise
            workflow.logger.warning("task %s failed: %s", unit.task_workflow_id, err.cause or err)
            return unit.task_workflow_id
        return None


class ProviderSlots:
    """Conversations in flight per provider that caps its calls in flight
    (`--max-concurrent`), over the whole run: this workflow starts every task, whichever
    worker runs it. A task takes as many slots as it runs conversations at once (its k
    trials, or fewer when the cap is below k: TaskWorkflow then runs them in turn)."""

    def __init__(self) -> None:
        self.in_flight: dict[str, int] = {}
        self.held: dict[asyncio.Task, dict[str, int]] = {}

    @staticmethod
    def needs(unit: TaskUnit) -> dict[str, int]:
        caps = unit.concurrency_caps(unit.agent_model)
        at_once = min([unit.trials, *caps.values()])
        return {provider: at_once for provider in caps}

    def fit(self, unit: TaskUnit) -> bool:
        caps = unit.concurrency_caps(unit.agent_model)
        return all(self.in_flight.get(p, 0) + n <= caps[p] for p, n in self.needs(unit).items())

    def take(self, task: asyncio.Task, unit: TaskUnit) -> None:
        self.held[task] = self.needs(unit)
        for provider, n in self.held[task].items():
            self.in_flight[provider] = self.in_flight.get(provider, 0) + n

    def release(self, done) -> None:  # noqa: ANN001 - tasks that finished
        for task in done:
            for provider, n in self.held.pop(task, {}).items():
                self.in_flight[provider] -= n


def _failures(done) -> list[str]:  # noqa: ANN001
    """The ids of the task workflows among `done` that failed: they must fail the run in
    the end, not vanish from its results."""
    return [task.result() for task in done if task.result() is not None]
