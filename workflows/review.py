"""ReviewWorkflow: `passhat review`, an LLM judge's review of a run's finished trials,
one checkpointed activity per trial (activities/review.py).

It asks once which selected trials this judge has not reviewed yet, then keeps up to
`concurrency` reviews in flight. Before each review starts it looks at what the judge's
calls on the run have cost so far (each finished review reports it): at --max-cost no
review starts, those in flight finish. Cancelled, it cancels the reviews in flight
(their model calls are closed at their next heartbeat) and waits for them to stop.

Started again under the same id (the same command), it plans again from the store: what
was reviewed is not asked for again, a review cut short reads back the calls it kept."""

from __future__ import annotations

import asyncio
from typing import Any

from temporalio import workflow
from temporalio.exceptions import ActivityError

with workflow.unsafe.imports_passed_through():
    from passhat.activities.review import (
        NOT_REVIEWABLE,
        ReviewActivities,
        ReviewOutcome,
        ReviewPlan,
        ReviewRef,
        ReviewRequest,
    )
    from passhat.workflows.activity_options import bookkeeping, model_call


@workflow.defn
class ReviewWorkflow:
    def __init__(self) -> None:
        self._request: ReviewRequest | None = None

    @workflow.query
    def request(self) -> ReviewRequest | None:
        """What is being reviewed: a command that attaches checks it asks the same."""
        return self._request

    @workflow.run
    async def run(self, req: ReviewRequest) -> dict[str, Any]:
        self._request = req
        plan: ReviewPlan = await workflow.execute_activity_method(
            ReviewActivities.review_plan, req, **bookkeeping(req.retry))
        waiting = list(plan.trials)
        pending: dict[asyncio.Task, str] = {}
        spent = plan.spent
        counts = {"reviewed": 0, "not_reviewable": 0, "failed": 0}
        first_error: str | None = None
        stopped: str | None = None
        try:
            while waiting or pending:
                while waiting and len(pending) < max(1, req.concurrency) and stopped is None:
                    if req.max_cost is not None and spent >= req.max_cost:
                        stopped = f"the budget of {req.max_cost:g} USD is spent"
                        break
                    trial_id = waiting.pop(0)
                    task = asyncio.ensure_future(workflow.execute_activity_method(
                        ReviewActivities.review_trial, ReviewRef(request=req, trial_id=trial_id),
                        **model_call(req.retry), summary=f"review {trial_id}"))
                    pending[task] = trial_id
                if not pending:
                    break
                done, _ = await workflow.wait(list(pending), return_when=asyncio.FIRST_COMPLETED)
                for task in done:
                    pending.pop(task)
                    try:
                        outcome: ReviewOutcome = task.result()
                    except ActivityError as err:  # not retryable (a missing key, a refused request)
                        counts["failed"] += 1
                        first_error = first_error or str(err.cause or err)
                        continue
                    counts["not_reviewable" if outcome.status == NOT_REVIEWABLE else "reviewed"] += 1
                    spent = max(spent, outcome.spent)
        except asyncio.CancelledError:
            for task in pending:
                task.cancel()
            await asyncio.gather(*pending, return_exceptions=True)
            raise
        return {"run_id": req.run_id, "review_key": req.review_key(), "judge_model": req.judge_model,
                "prompt_version": req.prompt_version, "already": plan.already, "unfinished": plan.unfinished,
                **counts, "not_started": len(waiting), "cost_usd": spent, "stopped": stopped,
                "first_error": first_error}
