"""Activities that open, score and record trials, and aggregate tasks and runs."""

from __future__ import annotations

from temporalio import activity

from domains.base import Message
from domains.registry import get_domain
from infra import tracing
from infra.store import Store
from workflows import metrics
from workflows.specs import (
    AGENT_GREETING,
    ModelDomainSummary,
    RunSummary,
    StepResult,
    TaskOutcome,
    TrialOutcome,
    TrialSpec,
)
from activities.conversation import step_result
from pydantic import BaseModel


class TrialStart(BaseModel):
    """Where a trial stands when its workflow (re)starts: finished, or the steps so far."""

    outcome: TrialOutcome | None = None
    steps: list[StepResult] = []


class ScoreRequest(BaseModel):
    trial: TrialSpec
    termination_reason: str
    n_steps: int


class NotEvaluable(BaseModel):
    trial: TrialSpec
    error: str
    error_class: str


def outcome_of(row) -> TrialOutcome:  # noqa: ANN001 - a TrialRow
    return TrialOutcome(
        trial_id=row.trial_id,
        task_id=row.task_id,
        trial_index=row.trial_index,
        evaluable=row.status == "scored",
        reward=row.reward,
        termination_reason=row.termination_reason,
        error=row.error,
    )


class ResultActivities:
    def __init__(self, store: Store):
        self.store = store

    @activity.defn
    def begin_trial(self, spec: TrialSpec) -> TrialStart:
        """Open the trial record (or reopen it on resume) and write step 0: the task's
        initial conversation, or the agent's greeting."""
        row = self.store.begin_trial(spec)
        if row.status == "scored":
            return TrialStart(outcome=outcome_of(row))
        if tracing.enabled():
            self.store.set_trace_id(spec.trial_id, tracing.trace_id_hex(spec.trial_id))
        if self.store.get_step(spec.trial_id, 0) is None:
            task = get_domain(spec.domain).task(spec.task_id)
            opening = task.initial_messages or [Message(role="assistant", content=AGENT_GREETING)]
            self.store.record_step(spec.trial_id, spec.run_id, 0, opening[-1].role, opening)
        steps = [step_result(s.step, s.message_list()) for s in self.store.steps(spec.trial_id)]
        return TrialStart(steps=steps)

    @activity.defn
    def score_trial(self, req: ScoreRequest) -> TrialOutcome:
        spec = req.trial
        messages = self.store.messages(spec.trial_id)
        with tracing.span("passhat.score", spec.trial_id, tracing.trial_attributes(spec)) as span:
            score = get_domain(spec.domain).score(spec.task_id, messages, req.termination_reason)
            span.set_attributes({
                "passhat.reward": score.reward,
                "passhat.termination_reason": req.termination_reason,
                **{f"passhat.reward.{k}": v for k, v in score.breakdown.items()},
            })
        self.store.finish_trial(
            spec.trial_id,
            reward=score.reward,
            success=metrics.is_success(score.reward),
            reward_info={"breakdown": score.breakdown, **score.info},
            termination_reason=req.termination_reason,
            n_steps=req.n_steps,
        )
        return self._closed(spec)

    @activity.defn
    def mark_not_evaluable(self, req: NotEvaluable) -> TrialOutcome:
        self.store.mark_not_evaluable(req.trial.trial_id, req.error, req.error_class)
        return self._closed(req.trial)

    def _closed(self, spec: TrialSpec) -> TrialOutcome:
        """The trial's outcome, and its root span in the trace."""
        row = self.store.get_trial(spec.trial_id)
        outcome = outcome_of(row)
        tracing.record_trial_root(
            spec.trial_id,
            row.started_at,
            {
                **tracing.trial_attributes(spec),
                "passhat.outcome": "not_evaluable" if not outcome.evaluable
                else ("success" if row.success else "failure"),
                "passhat.reward": row.reward,
                "passhat.termination_reason": row.termination_reason,
                "passhat.error_class": row.error_class,
                "gen_ai.usage.input_tokens": row.input_tokens,
                "gen_ai.usage.output_tokens": row.output_tokens,
            },
            error=row.error,
        )
        return outcome

    @activity.defn
    def record_task(self, outcome: TaskOutcome) -> None:
        self.store.record_task(outcome)

    @activity.defn
    def summarize_run(self, run_id: str) -> RunSummary:
        """Aggregate the recorded task results per (agent model, domain) and close the run."""
        summary = summarize(self.store, run_id)
        self.store.set_run_status(run_id, "completed")
        return summary


def summarize(store: Store, run_id: str) -> RunSummary:
    """Per (agent model, user model, domain): pass^j averaged over tasks, from the store."""
    groups: dict[tuple[str, str, str], list] = {}
    for row in store.task_results(run_id):
        groups.setdefault((row.agent_model, row.user_model, row.domain), []).append(row)
    results = []
    for (agent, user, domain), rows in sorted(groups.items()):
        rewards = [r.avg_reward * r.evaluable for r in rows if r.avg_reward is not None]
        evaluable = sum(r.evaluable for r in rows)
        results.append(
            ModelDomainSummary(
                agent_model=agent,
                user_model=user,
                domain=domain,
                tasks=len(rows),
                trials=sum(r.trials for r in rows),
                evaluable=evaluable,
                avg_reward=sum(rewards) / evaluable if evaluable else None,
                pass_hat_k=metrics.mean_over_tasks([r.pass_hat() for r in rows]),
            )
        )
    return RunSummary(run_id=run_id, results=results)
