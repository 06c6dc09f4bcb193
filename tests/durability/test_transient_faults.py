"""Flaky provider APIs don't corrupt the numbers: a quarter of all model calls fail with
every kind of transient fault (429 with Retry-After, 500, 503, a dropped connection, a
request held past the client's timeout) and the run scores exactly as a clean one, with
the retries on record in Temporal.

The run goes through the Python API (the CLI has no option for the model-call timeout),
with a worker in this process on a task queue of the test's own.

What Temporal records of retries (temporalio 1.35, dev server 1.32): a retried attempt
adds no events to the history. The activity's one ActivityTaskStarted event is written
when the attempt that finally completes starts; it carries that attempt's number and the
failure of the attempt before it (`last_failure`, with the provider's error class as the
application failure type). While an activity waits for its next attempt, describe()
shows it as a pending activity with its attempt number and last failure.
"""

from __future__ import annotations

import asyncio
import json
from collections import Counter

from temporalio.api.enums.v1 import EventType

from passhat.contracts import EMPTY_REPLY_RETRIES
from passhat.messages import EMPTY_REPLY
from passhat.testing.harness import (
    TASKS,
    expected_rewards,
    model_steps,
    rewards,
    store_integrity,
    trial_specs,
    until,
)
from passhat.testing.fault_server import Fault, RandomFaults
from passhat.testing.scripted_http import http_args, request_key
from passhat.workflows.client import follow, start_run
from tests.runs import config, worker_for
from tests.helpers import needs_agent_errors

# Drawn per request, not per arrival: the eight conversations interleave differently in
# every run, and the failure each retried call saw last (asserted below) must not depend
# on that.
FAULTS = RandomFaults(
    rate=0.25,
    kinds=[Fault("429", retry_after=1), "500", Fault("503", retry_after=1), "drop", "timeout"],
    seed=11,
    key=request_key,
)


def sparing_empty_answers(responder):  # noqa: ANN001, ANN201
    """FAULTS, except on requests the scripted agent answers empty: those are asked again
    within one activity (tau2's resends), and a fault there would start the resends over,
    which the exact count of served calls below does not model."""
    FAULTS.reset()

    def plan(n: int, body: dict):  # noqa: ANN202
        reply = responder.answer(body)
        if not (reply.get("content") or "").strip() and not reply.get("tool_calls"):
            return None
        return FAULTS(n, body)

    return plan
# What infra.llm classifies each fault as: the failure type recorded in Temporal.
ERROR_CLASS = {
    "429": "RateLimitError",
    "500": "InternalServerError",
    "503": "ServiceUnavailableError",
    "drop": "APIConnectionError",
    "timeout": "Timeout",
}


async def retry_seen_while_pending(client, cfg) -> tuple[int, str] | None:  # noqa: ANN001
    """(attempt, failure type) of some model call that is waiting to be retried."""
    for spec in trial_specs(cfg):
        try:
            desc = await client.get_workflow_handle(spec.trial_id).describe()
        except Exception:
            continue  # not started yet
        for act in desc.raw_description.pending_activities:
            if act.attempt > 1 and act.last_failure.HasField("application_failure_info"):
                return act.attempt, act.last_failure.application_failure_info.type
    return None


@needs_agent_errors
async def test_transient_faults_are_retried_never_scored(client, sqlite_store, model_server, responder):
    store, srv = sqlite_store, model_server
    responder.latency = 0.05
    args = json.dumps(http_args(srv.url))
    cfg = config(
        task_ids=TASKS, agent_models=["openai/noisy-0.7"],
        user_model="openai/oracle", trials=2, concurrency=8, agent_args=args, user_args=args,
    )
    # Short enough that a held request ("timeout") costs two seconds, not five minutes.
    cfg.retry.model_call_timeout_s = 2.0
    cfg.retry.initial_interval_s = 0.2
    cfg.retry.max_interval_s = 2.0
    cfg.retry.max_attempts = 20  # 0.25^20: no call may run out of attempts
    srv.set_faults(sparing_empty_answers(responder))

    async with worker_for(client, store) as queue:
        handle = await start_run(client, store, cfg, task_queue=queue)
        done = asyncio.ensure_future(follow(handle, store, cfg.run_id, lambda *a: None, poll_s=0.2))
        pending = await until(lambda: retry_seen_while_pending(client, cfg), "a model call waiting for a retry", 120, poll=0.2)
        summary = await asyncio.wait_for(done, 300)

    # While it waited, the pending activity showed which provider error it retries.
    attempt, error_class = pending
    assert attempt >= 2 and error_class in ERROR_CLASS.values()

    # Every kind of fault was injected, a quarter of the calls or so.
    faults = {k: n for k, n in srv.counts.items() if k != "ok"}
    assert set(faults) == set(ERROR_CLASS), srv.counts
    assert 0.15 <= sum(faults.values()) / srv.received <= 0.35

    # Not one trial scored (or left out) because of a fault: the clean run's rewards.
    assert store_integrity(store, cfg) == []
    want = expected_rewards(cfg)
    assert rewards(store, cfg.run_id) == want
    assert 0 < sum(want.values()) < len(want)  # both outcomes occur
    assert sum(r.evaluable for r in summary.results) == len(trial_specs(cfg))

    # Each failed request is one failed attempt: the attempts recorded in the histories
    # add up to exactly the faults the server injected, and the last failures name the
    # provider errors of every kind.
    extra_attempts, last_failures = 0, Counter()
    for spec in trial_specs(cfg):
        async for event in client.get_workflow_handle(spec.trial_id).fetch_history_events():
            if event.event_type != EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED:
                continue
            started = event.activity_task_started_event_attributes
            extra_attempts += started.attempt - 1
            if started.attempt > 1:
                last_failures[started.last_failure.application_failure_info.type] += 1
    assert extra_attempts == sum(faults.values())
    assert set(last_failures) <= set(ERROR_CLASS.values()) and len(last_failures) >= 4, last_failures
    # No model call was answered twice: retries happen only for failed requests. A step
    # whose answers stayed empty was asked 1 + EMPTY_REPLY_RETRIES times by design.
    empty = sum(
        s.failure_class == EMPTY_REPLY for t in trial_specs(cfg) for s in store.steps(t.trial_id)
    )
    assert empty > 0
    assert srv.served == model_steps(store, cfg.run_id) + EMPTY_REPLY_RETRIES * empty
