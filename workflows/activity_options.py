"""How the workflows call their activities: timeouts and retry policies, in one place."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from temporalio.common import RetryPolicy
from temporalio.workflow import ActivityCancellationType

from passhat.contracts import RetryConfig

def bookkeeping(retry: RetryConfig) -> dict[str, Any]:
    """Bookkeeping activities (open, record, score, aggregate, tool steps) touch only the
    store and the domain and take well under a second: a short timeout is how Temporal
    notices that the worker running one died (they do not heartbeat). They are retried
    with backoff for retry.bookkeeping_for_s, so a results store that is down for a few
    minutes is waited out rather than failing the trial."""
    return dict(
        start_to_close_timeout=timedelta(seconds=30),
        schedule_to_close_timeout=timedelta(seconds=retry.bookkeeping_for_s),
        # A cancelled run waits for a step being written: nothing runs after cancel returns.
        cancellation_type=ActivityCancellationType.WAIT_CANCELLATION_COMPLETED,
        retry_policy=RetryPolicy(
            initial_interval=timedelta(seconds=1),
            maximum_interval=timedelta(seconds=30),
            maximum_attempts=0,  # bounded by schedule_to_close_timeout
        ),
    )


def model_call(retry: RetryConfig) -> dict[str, Any]:
    """A model call heartbeats while it waits, so a dead worker's call is retried after the
    heartbeat timeout; transient provider errors back off as the run's RetryConfig says.
    The call and all its retries take at most retry_for_s: then the trial is not
    evaluable."""
    return dict(
        start_to_close_timeout=timedelta(seconds=retry.model_call_timeout_s + 30),
        schedule_to_close_timeout=timedelta(seconds=retry.retry_for_s),
        # A cancelled run waits until the call in flight has been cancelled (its next
        # heartbeat delivers the request, and the HTTP call is closed).
        cancellation_type=ActivityCancellationType.WAIT_CANCELLATION_COMPLETED,
        heartbeat_timeout=timedelta(seconds=retry.heartbeat_timeout_s),
        retry_policy=RetryPolicy(
            initial_interval=timedelta(seconds=retry.initial_interval_s),
            backoff_coefficient=retry.backoff,
            maximum_interval=timedelta(seconds=retry.max_interval_s),
            maximum_attempts=retry.max_attempts,
        ),
    )
