"""TaskWorkflow: the parent of the k trials of one (agent model, domain, task); computes
the task's pass^j for every j <= number of evaluable trials once they finish."""

from __future__ import annotations

import asyncio

from temporalio import workflow
from temporalio.common import SearchAttributePair, TypedSearchAttributes
from temporalio.exceptions import is_cancelled_exception

with workflow.unsafe.imports_passed_through():
    from passhat import metrics
    from passhat.activities.results import ResultActivities
    from passhat.contracts import TaskUnit, TrialSpec
    from passhat.outcomes import TRIAL_RUNNING, TaskOutcome, TrialOutcome
    from passhat.infra import search_attributes as sa
    from passhat.workflows.activity_options import bookkeeping
    from passhat.workflows.trial import TrialWorkflow

# The task's outcome is recorded by a local activity, in the workflow task that saw its
# last trial end, so the run can start its next task without one more workflow task
# (and its round trips to the server) per task. patched: a history written with it as
# an ordinary activity (by an earlier passhat) replays as written.
LOCAL_RECORD_PATCH = "local-record-task"


def trial_search_attributes(spec) -> TypedSearchAttributes:  # noqa: ANN001
    """What makes "all failed trials of this model on airline" one query in the UI."""
    return TypedSearchAttributes([
        SearchAttributePair(sa.RUN, spec.run_id),
        SearchAttributePair(sa.AGENT_MODEL, spec.agent_model),
        SearchAttributePair(sa.DOMAIN, spec.domain),
        SearchAttributePair(sa.TASK, spec.task_id),
        SearchAttributePair(sa.OUTCOME, TRIAL_RUNNING),
    ])


@workflow.defn
class TaskWorkflow:
    @workflow.run
    async def run(self, unit: TaskUnit) -> TaskOutcome:
        trials = [unit.trial(i) for i in range(unit.trials)]
        # All k at once, unless a provider the conversations call caps its calls in
        # flight below k. Acquiring a free slot does not yield, so the trials start in
        # the same order, in the same workflow task, as they always have.
        slots = asyncio.Semaphore(min(unit.concurrency_caps(unit.agent_model).values(), default=len(trials)))

        async def trial(spec: TrialSpec) -> TrialOutcome:
            async with slots:
                return await workflow.execute_child_workflow(
                    TrialWorkflow.run,
                    spec,
                    id=spec.trial_id,
                    search_attributes=trial_search_attributes(spec),
                    static_summary=f"{spec.agent_model} on {spec.domain} task {spec.task_id}, trial {spec.trial_index}",
                )

        outcomes = await asyncio.gather(*(trial(spec) for spec in trials), return_exceptions=True)
        # A trial workflow that failed was not evaluable (it recorded why): it is left
        # out of pass^k and never fails its siblings or the run.
        for result in outcomes:
            if isinstance(result, BaseException) and is_cancelled_exception(result):
                raise result
        rewards = [
            o.reward for o in outcomes
            if isinstance(o, TrialOutcome) and o.evaluable and o.reward is not None
        ]
        outcome = metrics.task_outcome(unit, rewards, trials=len(outcomes))
        record = (workflow.execute_local_activity_method if workflow.patched(LOCAL_RECORD_PATCH)
                  else workflow.execute_activity_method)
        await record(ResultActivities.record_task, outcome, **bookkeeping(unit.retry))
        return outcome
