"""The review activities (`passhat review`, workflows/review.py): which trials a review
still has to do, and the review of one trial, a checkpointed model call or two.

A review is keyed by (trial, review key): the judge model, its args and the prompt
version (ReviewRequest.review_key). Each judge call is kept with its answer and cost as
soon as it is answered (infra/review_store), before the activity reports; an activity
that finds a call kept reads it back instead of calling again, and one that finds the
review kept returns it. So a killed worker, a retried activity or the same review
started again pays for no answer twice: only calls in flight at a crash are made again.

The judge's call is an ordinary model call of passhat (activities/conversation.call_model:
litellm, the trial's metadata, a span, tokens and cost), and its provider errors are the
run's: transient ones are left to Temporal's retry with the run's backoff, deterministic
ones fail the review's activity.

Whose reviewer reads the trial is the review's prompt version: passhat's own
(PassHatReviewer, tau2 26.3) or the installed tau2 1.0.x's (Tau2Reviewer: tau2's request
and tau2's reading of the reply, the call still passhat's; then, as tau2's full mode does,
tau2's authentication classification of the trial, a judge call of its own, AUTH_CALL)."""

from __future__ import annotations

import asyncio
import json
from typing import Any, Optional

from pydantic import BaseModel, Field
from temporalio import activity
from temporalio.exceptions import ApplicationError

from passhat.activities.conversation import (
    ConversationActivities,
    Heartbeat,
    call_model,
    heartbeat_every_s,
    infrastructure_failure,
)
from passhat.contracts import RetryConfig, StepRef, TrialSpec, stable_hash
from passhat.messages import Message
from passhat.outcomes import TRIAL_RUNNING, TRIAL_SCORED
from passhat.domains import review as judging
from passhat.domains import tau2_review
from passhat.domains.registry import get_domain
from passhat.domains.tau2_version import installed_rules
from passhat.infra import llm, review_store
from passhat.infra.store import Store

REVIEWED = "reviewed"
NOT_REVIEWABLE = "not_reviewable"
# The judge calls of one review, each kept under its number: the review's (0, and 1 when
# it is resent), then tau2 1.0.x's authentication classification.
AUTH_CALL = 2


class ReviewRequest(BaseModel):
    """What `passhat review` asks for: a run, the trials, the judge, the limits."""

    run_id: str
    judge_model: str
    judge_args: dict[str, Any] = Field(default_factory=dict)
    failed_only: bool = True
    tasks: list[str] = Field(default_factory=list)  # task ids, or domain/task; none: every task
    max_cost: Optional[float] = None
    concurrency: int = 8
    retry: RetryConfig = Field(default_factory=RetryConfig)  # the run's
    # Whose reviewer: passhat's own prompt (26.3) or the installed tau2's (1.0.x).
    prompt_version: str = Field(default_factory=lambda: default_prompt_version())

    def review_key(self) -> str:
        """The judge and what it is asked: reviews under another key are other reviews."""
        return stable_hash(f"{self.judge_model}/{json.dumps(self.judge_args, sort_keys=True)}/"
                           f"{self.prompt_version}")[:16]

    def workflow_id(self) -> str:
        return review_workflow_id(self.run_id)

    def wants(self, trial) -> bool:  # noqa: ANN001 - a TrialRow
        """Whether the request selects this finished trial."""
        if trial.status != TRIAL_SCORED or (self.failed_only and trial.success):
            return False
        return not self.tasks or trial.task_id in self.tasks or f"{trial.domain}/{trial.task_id}" in self.tasks


def default_prompt_version() -> str:
    """The reviewer the installed tau2 calls for: its own on 1.0.x, passhat's on 26.3."""
    return tau2_review.prompt_version() if installed_rules().reviewer == "tau2" else judging.PROMPT_VERSION


def review_workflow_id(run_id: str) -> str:
    """The workflow of a run's review (one at a time per run; `passhat cancel` takes it)."""
    return f"{run_id}~review"


class ReviewPlan(BaseModel):
    trials: list[str]  # still to review, in the run's order
    already: int  # selected and reviewed before, by the same judge
    unfinished: int  # trials of the run not ended yet (not reviewed now)
    spent: float  # what this judge's calls on the run have cost so far


class ReviewRef(BaseModel):
    request: ReviewRequest
    trial_id: str


class ReviewOutcome(BaseModel):
    status: str
    blame: Optional[str] = None
    errors: int = 0
    spent: float = 0.0  # the review's whole cost on the run so far, this trial included


class ReviewActivities:
    def __init__(self, store: Store):
        self.store = store
        # The scripted judges answer through litellm like any provider.
        ConversationActivities(store)

    @activity.defn
    def review_plan(self, req: ReviewRequest) -> ReviewPlan:
        key = req.review_key()
        run = self.store.get_run(req.run_id)
        trials = self.store.trials(req.run_id)
        done = {r.trial_id for r in review_store.reviews(self.store, req.run_id, key)}
        selected = [t for t in trials if req.wants(t)]
        unfinished = sum(t.status == TRIAL_RUNNING for t in trials) + max(0, (run.total_trials if run else 0)
                                                                         - len(trials))
        return ReviewPlan(trials=[t.trial_id for t in selected if t.trial_id not in done],
                          already=sum(t.trial_id in done for t in selected), unfinished=unfinished,
                          spent=review_store.review_cost(self.store, req.run_id, key))

    @activity.defn
    async def review_trial(self, ref: ReviewRef) -> ReviewOutcome:
        req = ref.request
        key = req.review_key()
        rid = review_store.review_id(ref.trial_id, key)
        heartbeat = Heartbeat(max(1.0, req.retry.heartbeat_timeout_s / 3))
        row = await heartbeat.around(asyncio.to_thread(review_store.get_review, self.store, rid))
        if row is None:
            spec, reviewer = await heartbeat.around(asyncio.to_thread(self._reviewer, ref))
            heartbeat.every_s = heartbeat_every_s(spec)
            messages, review, reason = reviewer.request, None, None
            for call in (0, 1):
                answer = await heartbeat.around(asyncio.to_thread(review_store.recorded_call, self.store, rid, call))
                reply = answer.reply if answer is not None else await self._ask(ref, spec, heartbeat, rid, call, messages)
                try:
                    kept = answer or review_store.recorded_call(self.store, rid, call)
                    review = await heartbeat.around(asyncio.to_thread(
                        reviewer.read, reply, kept.cost if kept is not None else None))
                    break
                except judging.ReviewRejected as err:
                    reason = f"{err.kind}: {err}"
                    messages = reviewer.resend(reply, str(err))
            auth = None
            if isinstance(reviewer, Tau2Reviewer):  # tau2's full mode: its authentication classification
                answer = await heartbeat.around(asyncio.to_thread(review_store.recorded_call, self.store, rid,
                                                                  AUTH_CALL))
                reply = answer.reply if answer is not None else await self._ask(
                    ref, spec, heartbeat, rid, AUTH_CALL, reviewer.auth_request)
                kept = answer or review_store.recorded_call(self.store, rid, AUTH_CALL)
                auth = await heartbeat.around(asyncio.to_thread(
                    reviewer.classify, reply, kept.cost if kept is not None else None))
            await heartbeat.around(asyncio.to_thread(self._keep, ref, rid, review, reason, auth))
            row = review_store.get_review(self.store, rid)
        spent = await asyncio.to_thread(review_store.review_cost, self.store, req.run_id, key)
        return ReviewOutcome(status=row.status, blame=row.blame, errors=len(row.errors()), spent=spent)

    def _reviewer(self, ref: ReviewRef) -> tuple[TrialSpec, PassHatReviewer | Tau2Reviewer]:
        trial = self.store.get_trial(ref.trial_id)
        config = self.store.get_run(trial.run_id).run_config()
        unit = next(u for u in config.units() if (u.agent_model, u.domain, u.task_id, u.user_persona)
                    == (trial.agent_model, trial.domain, trial.task_id, trial.user_persona))
        spec = unit.trial(trial.trial_index).model_copy(update={"retry": ref.request.retry})
        domain = get_domain(trial.domain)
        steps = [(row.step, row.message_list()) for row in self.store.steps(trial.trial_id)]
        if tau2_review.is_tau2_prompt(ref.request.prompt_version):
            if ref.request.prompt_version != tau2_review.prompt_version():
                raise ApplicationError(f"this review asks for the reviewer of {ref.request.prompt_version}, "
                                       f"but the worker runs {tau2_review.prompt_version()}", non_retryable=True)
            return spec, Tau2Reviewer(domain, trial.task_id, steps, unit.user_persona_text)
        return spec, PassHatReviewer(domain, trial, steps, unit.user_persona_text)

    async def _ask(self, ref: ReviewRef, spec: TrialSpec, heartbeat: Heartbeat, rid: str, call: int,
                   messages: list[dict]) -> str | None:
        """Call the judge and keep its answer (the first kept answer wins a race)."""
        req = ref.request
        step = StepRef(trial=spec, step=call)
        try:
            reply = await heartbeat.around(call_model(
                step, "review", req.judge_model, messages, tools=None, model_args=req.judge_args,
                seed=None, empty_retries=0))
        except llm.ModelCallError as err:
            if err.model_failure:  # the judge's own failure (a context overflow, a filter)
                return None  # an answer that is not a review: resent once, then not reviewable
            raise infrastructure_failure(err, step) from None
        await heartbeat.around(asyncio.to_thread(
            review_store.record_call, self.store, review_key=req.review_key(), rid=rid, run_id=req.run_id,
            call=call, model=reply.model or req.judge_model, reply=reply.message.content,
            input_tokens=reply.input_tokens, output_tokens=reply.output_tokens, cost=reply.cost,
            latency_s=reply.latency_s))
        kept = review_store.recorded_call(self.store, rid, call)
        return kept.reply if kept is not None else reply.message.content

    def _keep(self, ref: ReviewRef, rid: str, review: dict | None, reason: str | None,
              auth: dict | None) -> None:
        req = ref.request
        calls = [c for c in (review_store.recorded_call(self.store, rid, n) for n in (0, 1, AUTH_CALL))
                 if c is not None]
        review_store.record_review(
            self.store, id=rid, review_key=req.review_key(), run_id=req.run_id, trial_id=ref.trial_id,
            judge_model=req.judge_model, judge_args_json=json.dumps(req.judge_args, sort_keys=True),
            prompt_version=req.prompt_version,
            status=REVIEWED if review is not None else NOT_REVIEWABLE,
            blame=review["blame"] if review is not None else None,
            errors_json=json.dumps(review["errors"] if review is not None else []),
            tau2_review_json=review.get("tau2") if review is not None else None,
            auth_classification_json=json.dumps(auth) if auth is not None else None,
            reason=None if review is not None else reason, calls=len(calls),
            input_tokens=sum(c.input_tokens for c in calls), output_tokens=sum(c.output_tokens for c in calls),
            cost=sum(c.cost for c in calls))


class PassHatReviewer:
    """passhat's own review (tau2 26.3): passhat's prompt, taxonomy and checks."""

    def __init__(self, domain, trial, steps: list[tuple[int, list[Message]]],  # noqa: ANN001
                 persona: str | None):
        self.steps = steps
        outcome = (f"ended: {trial.termination_reason}; reward {trial.reward}; "
                   f"{'success' if trial.success else 'failure'} by the benchmark's check")
        self.request = judging.request_messages(domain.policy(), domain.task(trial.task_id), steps, outcome,
                                                persona)

    def read(self, reply: str | None, cost: float | None) -> dict[str, Any]:
        return judging.parse_review(reply, self.steps)

    def resend(self, reply: str | None, reason: str) -> list[dict]:
        return judging.resend_messages(self.request, reply, reason)


class Tau2Reviewer:
    """tau2 1.0.x's own reviewer: its request, its reading of the reply; the review kept
    both in passhat's shape and as tau2's Review (for tau2 exports)."""

    def __init__(self, domain, task_id: str, steps: list[tuple[int, list[Message]]],  # noqa: ANN001
                 persona: str | None):
        self.domain, self.task_id = domain, task_id
        self.trajectory = tau2_review.Trajectory(steps, persona)
        self.request = tau2_review.request_messages(domain, task_id, self.trajectory)
        self.auth_request = tau2_review.auth_request_messages(self.trajectory)

    def read(self, reply: str | None, cost: float | None) -> dict[str, Any]:
        review = tau2_review.read_review(reply, cost, self.domain, self.task_id, self.trajectory)
        return {"errors": tau2_review.as_errors(review, self.trajectory), "blame": tau2_review.blame(review),
                "tau2": review.model_dump_json()}

    def resend(self, reply: str | None, reason: str) -> list[dict]:
        return tau2_review.resend_messages(self.request, reply, reason)

    def classify(self, reply: str | None, cost: float | None) -> dict[str, Any]:
        """tau2's authentication classification of the trial from the judge's reply."""
        return tau2_review.read_auth(reply, cost, self.trajectory)
