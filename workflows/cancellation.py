"""Stopping a workflow between its steps once it has been asked to stop.

Temporal delivers a workflow's cancel request as one asyncio cancellation of whatever the
workflow awaits at that moment. When that is an activity that then completes anyway (a
model call that answers before its next heartbeat carries the request to it, a tool step,
a store read), the SDK returns the activity's result and the cancellation is spent: a loop
that goes on to its next step would run to its end (a conversation to --max-steps, paying
for every call). So the loops check, before each step, whether a cancel request has
arrived (workflow.cancellation_reason is set for the rest of the execution) and stop.

patched: the check is recorded (a marker) only when it stops a workflow, so histories of
uncancelled workflows are unchanged, and a history written before the check existed (its
cancelled conversation ran on) replays as it was written."""

from __future__ import annotations

import asyncio

from temporalio import workflow

STOP_ON_CANCEL_PATCH = "stop-on-cancel"


def stop_if_cancelled() -> None:
    """Raise asyncio.CancelledError if this workflow was asked to stop; else nothing."""
    if workflow.cancellation_reason() is not None and workflow.patched(STOP_ON_CANCEL_PATCH):
        raise asyncio.CancelledError("the workflow was cancelled")
