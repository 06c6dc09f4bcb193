"""TaskWorkflow: the parent of the k trials of one (agent model, domain, task); computes
the task's pass^j for every j <= number of evaluable trials once they finish."""

from __future__ import annotations

import asyncio
from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy, SearchAttributePair, TypedSearchAttributes

with workflow.unsafe.imports_passed_through():
    from activities.results import ResultActivities
    from infra import search_attributes as sa
    from workflows import metrics
    from workflows.specs import TaskOutcome, TaskUnit
    from workflows.trial import TrialWorkflow


def task_outcome(unit: TaskUnit, outcomes) -> TaskOutcome:  # noqa: ANN001
    """Trials that are not evaluable (infrastructure failures) are left out of pass^k."""
    rewards = [o.reward for o in outcomes if o.evaluable and o.reward is not None]
    successes = sum(metrics.is_success(r) for r in rewards)
    return TaskOutcome(
        run_id=unit.run_id,
        agent_model=unit.agent_model,
        user_model=unit.user_model,
        domain=unit.domain,
        task_id=unit.task_id,
        trials=len(outcomes),
        evaluable=len(rewards),
        successes=successes,
        avg_reward=sum(rewards) / len(rewards) if rewards else None,
        pass_hat=metrics.pass_hat_curve(successes, len(rewards)) if rewards else {},
    )


def trial_search_attributes(spec) -> TypedSearchAttributes:  # noqa: ANN001
    """What makes "all failed trials of this model on airline" one query in the UI."""
    return TypedSearchAttributes([
        SearchAttributePair(sa.RUN, spec.run_id),
        SearchAttributePair(sa.AGENT_MODEL, spec.agent_model),
        SearchAttributePair(sa.DOMAIN, spec.domain),
        SearchAttributePair(sa.TASK, spec.task_id),
        SearchAttributePair(sa.OUTCOME, "running"),
    ])


@workflow.defn
class TaskWorkflow:
    @workflow.run
    async def run(self, unit: TaskUnit) -> TaskOutcome:
        trials = [unit.trial(i) for i in range(unit.trials)]
        outcomes = await asyncio.gather(
            *(
                workflow.execute_child_workflow(
                    TrialWorkflow.run,
                    spec,
                    id=spec.trial_id,
                    search_attributes=trial_search_attributes(spec),
                    static_summary=f"{spec.agent_model} on {spec.domain} task {spec.task_id}, trial {spec.trial_index}",
                )
                for spec in trials
            )
        )
        outcome = task_outcome(unit, outcomes)
        await workflow.execute_activity_method(
            ResultActivities.record_task,
            outcome,
            start_to_close_timeout=timedelta(seconds=30),
            retry_policy=RetryPolicy(maximum_attempts=10),
        )
        return outcome
