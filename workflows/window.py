"""The run's sliding window of trials: `--concurrency` conversations in flight for as
long as trials remain, whichever task each belongs to.

The run workflow starts the trial workflows itself, as its children, in the run's order
(tasks by expected length, then trial index). As one ends the next starts, in the same
workflow task; a task's pass^k is recorded (a local activity) in the workflow task that
sees its last trial end. This is Temporal's sliding-window pattern for large fan-out:

  * the history stays bounded: one execution starts at most `batch` trials, then
    continues as new, carrying the trials still running, the tallies of the tasks not
    yet recorded and where it got to (a few hundred bytes per trial in flight);
  * there is no drain at that boundary: trials are started with the ABANDON parent close
    policy, so they run on across continue-as-new, and every trial signals the run (by
    workflow id: whichever execution is current) when it ends. The execution that
    started a trial also awaits its result, which covers a trial that ended without
    signalling (terminated, failed before it could); the first of the two counts;
  * pending children stay at most the window, far below Temporal's limit per workflow.

A gate's curtailed round (RunConfig.curtail, passhat.curtailment) runs each task's trials
one after another, and passes the rest of a task's trials once its blocks are decided.
"""

from __future__ import annotations

import asyncio
from typing import Optional

from pydantic import BaseModel
from temporalio import workflow
from temporalio.exceptions import ActivityError, ChildWorkflowError, is_cancelled_exception
from temporalio.workflow import ParentClosePolicy

with workflow.unsafe.imports_passed_through():
    from passhat import curtailment, metrics
    from passhat.activities.results import ResultActivities
    from passhat.contracts import RunConfig, TaskUnit, TrialSpec
    from passhat.outcomes import TrialOutcome, is_success
    from passhat.workflows.activity_options import bookkeeping
    from passhat.workflows.task import trial_search_attributes
    from passhat.workflows.trial import REPORT_TO_MEMO, TrialEnded, TrialWorkflow

# Trials started per execution: each adds about 6 events to the run's history (start,
# started, signal, end, and its share of workflow tasks), so ~6k events an execution.
TRIAL_BATCH = 1000
# Temporal refuses more than 2000 pending children per workflow (its default limit).
MAX_WINDOW = 1500


class Tally(BaseModel):
    """A task's trials that have ended so far, while some have not."""

    ended: int = 0
    rewards: list[float] = []  # of its evaluable trials
    # A curtailed run's (RunConfig.curtail): each trial's success, None when not
    # evaluable, in the order they ran (one after another).
    outcomes: list[Optional[bool]] = []


class WindowState(BaseModel):
    """What one execution hands the next at continue-as-new."""

    cursor: int = 0  # every trial before this index (in the run's order) has started
    ahead: list[int] = []  # trials past the cursor that started (a capped provider's waited)
    running: list[str] = []  # trial ids started by earlier executions, not ended yet
    tallies: dict[int, Tally] = {}  # by unit index: tasks with trials ended, not recorded


class TrialWindow:
    """The scheduler of one execution of the run workflow."""

    def __init__(self, config: RunConfig, state: WindowState, slots, run_workflow_id: str,  # noqa: ANN001
                 ended: list[TrialOutcome] = ()) -> None:
        self.config = config
        # Trials whose outcome stands (RunRequest.ended): they end as soon as their turn comes.
        self.ended = {o.trial_id: o for o in ended}
        self.units: list[TaskUnit] = config.units()
        self.specs: list[tuple[int, TrialSpec]] = [
            (u, unit.trial(i)) for u, unit in enumerate(self.units) for i in range(unit.trials)
        ]
        self.index = {spec.trial_id: n for n, (_, spec) in enumerate(self.specs)}
        # Where each task's trials begin in self.specs (a task's trials are consecutive).
        self.first = [0]
        for unit in self.units:
            self.first.append(self.first[-1] + unit.trials)
        self.curtail = list(config.curtail)
        self.state = state
        self.ahead = set(state.ahead)
        self.slots = slots
        # One conversation takes a slot of every capped provider it calls.
        self.needs: list[dict[str, int]] = []
        for unit in self.units:
            caps = unit.concurrency_caps(unit.agent_model)
            slots.caps.update(caps)
            self.needs.append({provider: 1 for provider in caps})
        self.run_workflow_id = run_workflow_id
        self.window = min(MAX_WINDOW, max(1, config.concurrency))
        # Trials in flight: ours (their tasks) and those carried from earlier executions
        # (None: only their signal tells us they ended).
        self.running: dict[str, asyncio.Task | None] = {}
        for trial_id in state.running:
            self.running[trial_id] = None
            self.slots.take(trial_id, self._needs(trial_id))
        self.started: set[str] = set()  # ours whose child workflow the server has started
        self.reports: list[TrialEnded] = []  # ends not processed yet, in arrival order
        self.recording: list[asyncio.Task] = []
        self.failed: list[str] = []
        self.started_here = 0

    # ---- what is left
    def remaining(self) -> bool:
        return self.state.cursor < len(self.specs)

    def next_fit(self) -> int | None:
        """The first trial in order not started whose capped providers have room."""
        if len(self.running) >= self.window:
            return None
        for n in range(self.state.cursor, len(self.specs)):
            if (n not in self.ahead and (not self.curtail or self._turn(n))
                    and self.slots.fits(self._needs(self.specs[n][1].trial_id))):
                return n
        return None

    def _turn(self, n: int) -> bool:
        """A curtailed run (passhat.curtailment): a task's trial starts once every trial
        before it has ended; a task whose blocks are decided is closed in take_reports."""
        u, spec = self.specs[n]
        tally = self.state.tallies.get(u)
        return spec.trial_index == (tally.ended if tally else 0)

    def _needs(self, trial_id: str) -> dict[str, int]:
        return self.needs[self.specs[self.index[trial_id]][0]]

    # ---- starting
    def start(self, n: int) -> None:
        spec = self.specs[n][1]
        self.ahead.add(n)
        self._advance()
        self.slots.take(spec.trial_id, self._needs(spec.trial_id))
        stands = self.ended.get(spec.trial_id)
        self.running[spec.trial_id] = asyncio.create_task(self._trial(spec) if stands is None else self._stands(stands))
        self.started_here += 1

    async def _stands(self, outcome: TrialOutcome) -> None:
        """A trial that ended before and is not run again: it ends with its outcome."""
        self.started.add(outcome.trial_id)
        self.reports.append(TrialEnded(trial_id=outcome.trial_id, outcome=outcome))

    async def _trial(self, spec: TrialSpec) -> None:
        handle = await workflow.start_child_workflow(
            TrialWorkflow.run,
            spec,
            id=spec.trial_id,
            memo={REPORT_TO_MEMO: self.run_workflow_id},
            search_attributes=trial_search_attributes(spec),
            static_summary=f"{spec.agent_model} on {spec.domain} task {spec.task_id}, trial {spec.trial_index}",
            # It runs on when this execution continues as new, and reports to the next.
            parent_close_policy=ParentClosePolicy.ABANDON,
        )
        self.started.add(spec.trial_id)
        try:
            outcome = await handle
        except ChildWorkflowError as err:
            if is_cancelled_exception(err):
                raise
            outcome = None  # not evaluable (it recorded why), or terminated
        self.reports.append(TrialEnded(trial_id=spec.trial_id, outcome=outcome))

    # ---- ends
    def take_reports(self) -> None:
        """Free the slots of the trials that ended; record each task whose last trial
        that was."""
        reports, self.reports = self.reports, []
        for report in reports:
            if report.trial_id not in self.running:
                continue  # its other notice (signal or result) came first
            del self.running[report.trial_id]
            self.slots.release(report.trial_id)
            u = self.specs[self.index[report.trial_id]][0]
            tally = self.state.tallies.setdefault(u, Tally())
            tally.ended += 1
            o = report.outcome
            evaluable = o is not None and o.evaluable and o.reward is not None
            if evaluable:
                tally.rewards.append(o.reward)
            if self.curtail:
                tally.outcomes.append(is_success(o.reward) if evaluable else None)
            if tally.ended == self.units[u].trials or (
                    self.curtail and not curtailment.wanted(tally.outcomes, self.curtail, max(self.curtail))):
                self._skip_rest(u, tally.ended)
                del self.state.tallies[u]
                self.recording.append(asyncio.create_task(self._record(self.units[u], tally)))

    def _skip_rest(self, u: int, ended: int) -> None:
        """A task's trials past `ended` will not run: the cursor passes them."""
        self.ahead.update(range(self.first[u] + ended, self.first[u + 1]))
        self._advance()

    def _advance(self) -> None:
        """Move the cursor past the trials started (or passed) ahead of it."""
        while self.state.cursor in self.ahead:
            self.ahead.discard(self.state.cursor)
            self.state.cursor += 1

    async def _record(self, unit: TaskUnit, tally: Tally) -> None:
        outcome = metrics.task_outcome(unit, tally.rewards, trials=tally.ended)
        try:
            await workflow.execute_local_activity_method(
                ResultActivities.record_task, outcome, **bookkeeping(unit.retry)
            )
        except ActivityError as err:
            # The store stayed down past the bookkeeping window: the run fails in the
            # end, naming the task, and resume records it.
            workflow.logger.warning("task %s could not be recorded: %s", unit.task_workflow_id, err)
            self.failed.append(unit.task_workflow_id)

    async def settle(self) -> None:
        """Wait for the task records under way."""
        while self.recording:
            batch, self.recording = self.recording, []
            await asyncio.gather(*batch)

    # ---- continue-as-new
    def should_hand_over(self, batch: int) -> bool:
        return self.remaining() and (
            self.started_here >= batch or workflow.info().is_continue_as_new_suggested()
        )

    async def hand_over(self) -> WindowState:
        """The state for the next execution, once every trial this one started is
        running on the server (a start command not yet carried out would be lost)."""
        await workflow.wait_condition(lambda: all(
            t in self.started for t, task in self.running.items() if task is not None and not task.done()
        ))
        await self.settle()
        self.take_reports()
        return WindowState(
            cursor=self.state.cursor,
            ahead=sorted(self.ahead),
            running=list(self.running),
            tallies=self.state.tallies,
        )

    # ---- cancel
    async def cancel(self) -> None:
        """Cancel every trial in flight; ours are awaited (each records itself as
        cancelled), the carried ones are asked to stop."""
        ours = [task for task in self.running.values() if task is not None]
        for task in ours:
            task.cancel()
        for trial_id, task in self.running.items():
            if task is None:
                try:
                    await workflow.get_external_workflow_handle(trial_id).cancel()
                except Exception as err:  # noqa: BLE001 - it ended meanwhile
                    workflow.logger.info("trial %s not cancelled: %s", trial_id, err)
        await asyncio.gather(*ours, return_exceptions=True)
