"""The passhat worker: what it registers, and how it is built. It sits above the
workflows and the activities because it assembles both."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from temporalio.client import Client
from temporalio.worker import Worker

from passhat.activities.conversation import ConversationActivities
from passhat.activities.results import ResultActivities
from passhat.contracts import TASK_QUEUE
from passhat.infra.store import Store
from passhat.workflows.run import RunWorkflow
from passhat.workflows.task import TaskWorkflow
from passhat.workflows.trial import TrialWorkflow

WORKFLOWS = [RunWorkflow, TaskWorkflow, TrialWorkflow]


def build_worker(
    client: Client,
    store: Store,
    *,
    task_queue: str = TASK_QUEUE,
    max_concurrent_activities: int = 64,
) -> Worker:
    conversation = ConversationActivities(store)
    results = ResultActivities(store)
    return Worker(
        client,
        task_queue=task_queue,
        workflows=WORKFLOWS,
        activities=[
            conversation.agent_turn,
            conversation.user_turn,
            conversation.tool_turn,
            results.open_trial,
            results.recorded_steps,
            results.score_trial,
            results.mark_not_evaluable,
            results.mark_cancelled,
            results.record_task,
            results.summarize_run,
            results.close_run,
        ],
        # Tool execution, scoring and store writes are synchronous: they run in threads.
        activity_executor=ThreadPoolExecutor(max_workers=max_concurrent_activities),
        max_concurrent_activities=max_concurrent_activities,
    )
