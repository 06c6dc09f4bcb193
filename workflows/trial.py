"""TrialWorkflow: one conversation between the agent, the user simulator and the tools.

The workflow holds only the turn-taking state; every model call and tool execution is an
activity that reads the conversation from the results store and records its own step, so
the workflow's history grows linearly with the number of steps."""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError

with workflow.unsafe.imports_passed_through():
    from activities.conversation import ConversationActivities
    from activities.results import NotEvaluable, ResultActivities, ScoreRequest
    from infra import search_attributes as sa
    from workflows import metrics
    from workflows.specs import StepRef, StepResult, TrialOutcome, TrialSpec

# Bookkeeping activities touch only the store and the domain and take well under a
# second: a short timeout is how Temporal notices that the worker running one died (they
# do not heartbeat). A few quick retries, then the trial is recorded as not evaluable
# rather than retried forever.
_BOOKKEEPING = dict(
    start_to_close_timeout=timedelta(seconds=30),
    retry_policy=RetryPolicy(maximum_attempts=5, maximum_interval=timedelta(seconds=10)),
)


class Turns:
    """tau2's turn-taking rules, as a small deterministic state machine."""

    def __init__(self, spec: TrialSpec):
        self.spec = spec
        self.to_role = "user"  # after the agent's greeting, the user speaks
        self.caller = "assistant"  # who made the pending tool calls
        self.steps = 0
        self.errors = 0
        self.termination_reason: str | None = None

    def apply(self, r: StepResult) -> None:
        if r.step == 0:  # the opening: greeting or the task's initial conversation
            self._route(r)
            return
        self.steps += 1
        if r.role == "tool":
            self.errors += r.tool_errors
            self.to_role = self.caller
        elif r.is_empty:
            self.termination_reason = "agent_error" if r.role == "assistant" else "user_error"
            return
        elif r.is_stop:
            self.termination_reason = "user_stop"
            return
        else:
            self._route(r)
        if self.to_role != "env":
            if self.steps >= self.spec.max_steps:
                self.termination_reason = "max_steps"
            if self.errors >= self.spec.max_errors:
                self.termination_reason = "too_many_errors"

    def _route(self, r: StepResult) -> None:
        if r.role == "tool":
            self.to_role = "assistant"
        elif r.is_tool_call:
            self.caller, self.to_role = r.role, "env"
        else:
            self.to_role = "user" if r.role == "assistant" else "assistant"


@workflow.defn
class TrialWorkflow:
    @workflow.run
    async def run(self, spec: TrialSpec) -> TrialOutcome:
        outcome = await self._run(spec)
        # Shown in the UI: the outcome as a search attribute, reward and reason as memo.
        label = (
            ("success" if metrics.is_success(outcome.reward or 0.0) else "failure")
            if outcome.evaluable
            else "not_evaluable"
        )
        workflow.upsert_search_attributes([sa.OUTCOME.value_set(label)])
        workflow.upsert_memo({
            "outcome": label,
            "reward": outcome.reward,
            "termination_reason": outcome.termination_reason,
            "error": outcome.error,
        })
        workflow.set_current_details(
            f"**{label}**: reward {outcome.reward}, {outcome.termination_reason or outcome.error}"
        )
        return outcome

    async def _run(self, spec: TrialSpec) -> TrialOutcome:
        start = await workflow.execute_activity_method(
            ResultActivities.begin_trial, spec, **_BOOKKEEPING
        )
        if start.outcome is not None:  # already scored by an earlier execution: resume skips it
            return start.outcome
        turns = Turns(spec)
        for recorded in start.steps:
            turns.apply(recorded)
        step = len(start.steps)
        try:
            while turns.termination_reason is None:
                turns.apply(await self._step(spec, turns.to_role, step))
                step += 1
            return await workflow.execute_activity_method(
                ResultActivities.score_trial,
                ScoreRequest(trial=spec, termination_reason=turns.termination_reason, n_steps=step),
                **_BOOKKEEPING,
            )
        except ActivityError as err:
            cause = err.cause
            error_class = cause.type if isinstance(cause, ApplicationError) and cause.type else (
                type(cause).__name__ if cause else "ActivityError"
            )
            message = str(cause) if cause else str(err)
            workflow.logger.warning("trial %s not evaluable: %s", spec.trial_id, message)
            return await workflow.execute_activity_method(
                ResultActivities.mark_not_evaluable,
                NotEvaluable(trial=spec, error=message, error_class=error_class),
                **_BOOKKEEPING,
            )

    async def _step(self, spec: TrialSpec, to_role: str, step: int) -> StepResult:
        ref = StepRef(trial=spec, step=step)
        if to_role == "env":
            return await workflow.execute_activity_method(
                ConversationActivities.tool_turn, ref, **_BOOKKEEPING,
                summary=f"tools, step {step}",
            )
        r = spec.retry
        options = dict(
            start_to_close_timeout=timedelta(seconds=r.model_call_timeout_s + 30),
            heartbeat_timeout=timedelta(seconds=r.heartbeat_timeout_s),
            retry_policy=RetryPolicy(
                initial_interval=timedelta(seconds=r.initial_interval_s),
                backoff_coefficient=r.backoff,
                maximum_interval=timedelta(seconds=r.max_interval_s),
                maximum_attempts=r.max_attempts,
            ),
        )
        if to_role == "assistant":
            return await workflow.execute_activity_method(
                ConversationActivities.agent_turn, ref, **options,
                summary=f"agent {spec.agent_model}, step {step}",
            )
        return await workflow.execute_activity_method(
            ConversationActivities.user_turn, ref, **options,
            summary=f"user {spec.user_model}, step {step}",
        )
