"""The passhat worker: what it registers, and how it is built."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from temporalio.client import Client
from temporalio.worker import Worker

from activities.conversation import ConversationActivities
from activities.results import ResultActivities
from infra.store import Store
from workflows.run import RunWorkflow
from workflows.specs import TASK_QUEUE
from workflows.task import TaskWorkflow
from workflows.trial import TrialWorkflow

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
            results.begin_trial,
            results.score_trial,
            results.mark_not_evaluable,
            results.record_task,
            results.summarize_run,
        ],
        # Tool execution, scoring and store writes are synchronous: they run in threads.
        activity_executor=ThreadPoolExecutor(max_workers=max_concurrent_activities),
        max_concurrent_activities=max_concurrent_activities,
    )
