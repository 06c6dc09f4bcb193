"""RunWorkflow: expands a run into (agent model, domain, task) units and their trials,
keeps `--concurrency` conversations in flight until every trial has ended
(workflows/window.py: a sliding window of trial workflows, whichever task each belongs
to), and aggregates.

With a budget (RunConfig.max_cost) it asks the store for the run's recorded cost before
it starts new trials; once that reaches the budget it starts no more, lets the trials in
flight finish, and closes the run as budget_exhausted (resume continues it).

Executions recorded before the window (TRIAL_WINDOW_PATCH) replay on the earlier shape:
one TaskWorkflow per task, `concurrency // k` tasks at once, at most BATCH tasks per
execution, each batch drained before continuing as new."""

from __future__ import annotations

import asyncio

from pydantic import BaseModel
from temporalio import workflow
from temporalio.exceptions import ApplicationError, ChildWorkflowError, is_cancelled_exception

with workflow.unsafe.imports_passed_through():
    from passhat.activities.results import ResultActivities
    from passhat.contracts import RunConfig, TaskUnit
    from passhat.outcomes import RunSummary, TrialOutcome
    from passhat.workflows.activity_options import bookkeeping
    from passhat.workflows.cancellation import stop_if_cancelled
    from passhat.workflows.task import TaskWorkflow
    from passhat.workflows.trial import TRIAL_ENDED_SIGNAL, TrialEnded
    from passhat.workflows.window import TRIAL_BATCH, TrialWindow, WindowState

BATCH = 250  # task workflows per execution: ~8 history events each, far below the limits
# Marks the executions that check the run's budget before each task (RunConfig.max_cost).
BUDGET_PATCH = "max-cost"
# Marks the executions that schedule trials in a sliding window (workflows/window.py).
TRIAL_WINDOW_PATCH = "trial-window"


class RunRequest(BaseModel):
    config: RunConfig
    offset: int = 0  # units already handled by earlier executions (continue-as-new)
    batch: int = BATCH
    failed: list[str] = []  # task workflows that failed in earlier executions
    trial_batch: int = TRIAL_BATCH  # trials started per execution (the window)
    window: WindowState | None = None  # carried from the previous execution (the window)
    # Trials whose outcome stands: counted as they ended, never started again (a round's
    # run continuing its not-evaluable trials, workflows/rounds.py).
    ended: list[TrialOutcome] = []


@workflow.defn
class RunWorkflow:
    def __init__(self) -> None:
        self._window: TrialWindow | None = None
        self._early: list[TrialEnded] = []  # ends signalled before the window was set up

    @workflow.signal(name=TRIAL_ENDED_SIGNAL)
    def trial_ended(self, report: TrialEnded) -> None:
        (self._window.reports if self._window is not None else self._early).append(report)

    @workflow.run
    async def run(self, req: RunRequest) -> RunSummary:
        if workflow.patched(TRIAL_WINDOW_PATCH):
            return await self._run_window(req)
        return await self._run_tasks(req)

    async def _run_window(self, req: RunRequest) -> RunSummary:
        config = req.config
        # A run continued from an execution of the earlier shape: its first `offset`
        # tasks were handled there.
        state = req.window or WindowState(cursor=sum(u.trials for u in config.units()[: req.offset]))
        win = self._window = TrialWindow(config, state, ProviderSlots(), workflow.info().workflow_id, req.ended)
        win.reports += self._early
        budgeted = config.max_cost is not None and workflow.patched(BUDGET_PATCH)
        over_budget = False
        try:
            while True:
                win.take_reports()
                # A cancel that arrived during an activity that then completed starts
                # no more trials.
                stop_if_cancelled()
                if not over_budget and win.next_fit() is not None and budgeted:
                    # One look at the cost for every trial started in this workflow task.
                    if await self._spent(config) >= config.max_cost:
                        workflow.logger.info("run %s reached its budget of %s USD", config.run_id, config.max_cost)
                        over_budget = True
                    win.take_reports()
                    stop_if_cancelled()
                while not over_budget and (n := win.next_fit()) is not None:
                    win.start(n)
                if not win.running and (over_budget or not win.remaining()):
                    break
                if not over_budget and win.should_hand_over(req.trial_batch):
                    carried = await win.hand_over()
                    workflow.continue_as_new(req.model_copy(update={
                        "window": carried, "failed": req.failed + win.failed, "offset": 0,
                    }))
                await workflow.wait_condition(lambda: bool(win.reports))
            await win.settle()
        except asyncio.CancelledError:
            # Stop every trial in flight, so nothing of the run runs once it is cancelled.
            await win.cancel()
            raise
        return await self._close(config, req.failed + win.failed, over_budget)

    async def _run_tasks(self, req: RunRequest) -> RunSummary:
        """The shape before the window: task workflows, drained at every batch."""
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
                unit = next((u for u in waiting if slots.fits(slots.needs(u))), None)
                if len(pending) >= window or (unit is None and pending):
                    done, _ = await workflow.wait(pending, return_when=asyncio.FIRST_COMPLETED)
                    failed += _failures(done)
                    pending = [task for task in pending if task not in done]
                    slots.release_tasks(done)
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
                slots.take(task, slots.needs(unit))
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
        return await self._close(config, failed, over_budget)

    async def _close(self, config: RunConfig, failed: list[str], over_budget: bool) -> RunSummary:
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
    (`--max-concurrent`), over the whole run: this workflow starts every trial (or task),
    whichever worker runs it. A trial of the window takes one slot of each capped
    provider it calls; a task workflow (the earlier shape) as many as it runs
    conversations at once (its k trials, or fewer when the cap is below k: TaskWorkflow
    then runs them in turn)."""

    def __init__(self, caps: dict[str, int] | None = None) -> None:
        self.caps: dict[str, int] = dict(caps or {})
        self.in_flight: dict[str, int] = {}
        self.held: dict = {}  # holder (trial id or asyncio task) -> its slots

    def needs(self, unit: TaskUnit) -> dict[str, int]:
        """A task workflow's slots (the earlier shape)."""
        caps = unit.concurrency_caps(unit.agent_model)
        self.caps.update(caps)
        at_once = min([unit.trials, *caps.values()])
        return {provider: at_once for provider in caps}

    def fits(self, needs: dict[str, int]) -> bool:
        return all(self.in_flight.get(p, 0) + n <= self.caps[p] for p, n in needs.items())

    def take(self, holder, needs: dict[str, int]) -> None:  # noqa: ANN001
        self.held[holder] = needs
        for provider, n in needs.items():
            self.in_flight[provider] = self.in_flight.get(provider, 0) + n

    def release(self, holder) -> None:  # noqa: ANN001
        for provider, n in self.held.pop(holder, {}).items():
            self.in_flight[provider] -= n

    def release_tasks(self, done) -> None:  # noqa: ANN001 - task workflows that finished
        for task in done:
            self.release(task)


def _failures(done) -> list[str]:  # noqa: ANN001
    """The ids of the task workflows among `done` that failed: they must fail the run in
    the end, not vanish from its results."""
    return [task.result() for task in done if task.result() is not None]
