"""The passhat worker: what it registers, and how it is built. It sits above the
workflows and the activities because it assembles both."""

from __future__ import annotations

import asyncio
import ctypes
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager

from temporalio.client import Client
from temporalio.worker import Worker

from passhat.activities.conversation import ConversationActivities
from passhat.activities.results import ResultActivities
from passhat.contracts import TASK_QUEUE, ProviderLimit, provider_task_queue
from passhat.infra import settings
from passhat.infra.store import Store
from passhat.workflows.run import RunWorkflow
from passhat.workflows.task import TaskWorkflow
from passhat.workflows.trial import TrialWorkflow

WORKFLOWS = [RunWorkflow, TaskWorkflow, TrialWorkflow]


class WorkerGroup:
    """The run's worker and, for each capped provider, a worker on that provider's task
    queue: started, run and stopped together, like one temporalio Worker."""

    def __init__(self, workers: list[Worker]):
        self.workers = workers

    async def __aenter__(self) -> "WorkerGroup":
        for w in self.workers:
            await w.__aenter__()
        return self

    async def __aexit__(self, *exc: object) -> None:
        for w in reversed(self.workers):
            await w.__aexit__(*exc)

    async def run(self) -> None:
        await asyncio.gather(*(w.run() for w in self.workers))


def build_worker(
    client: Client,
    store: Store,
    *,
    task_queue: str = TASK_QUEUE,
    max_concurrent_activities: int = 64,
    provider_limits: dict[str, ProviderLimit] | None = None,
) -> WorkerGroup:
    conversation = ConversationActivities(store)
    results = ResultActivities(store)
    # The model-call activities run on the event loop and do their store and prompt work
    # in the loop's default executor; asyncio's (cores + 4 threads) would make them queue
    # behind each other, late for their heartbeats.
    asyncio.get_running_loop().set_default_executor(
        ThreadPoolExecutor(max_workers=max_concurrent_activities, thread_name_prefix="passhat-async")
    )
    model_calls = [conversation.agent_turn, conversation.user_turn]
    workers = [Worker(
        client,
        task_queue=task_queue,
        workflows=WORKFLOWS,
        activities=[
            *model_calls,
            conversation.tool_turn,
            results.open_trial,
            results.recorded_steps,
            results.score_trial,
            results.mark_not_evaluable,
            results.mark_cancelled,
            results.record_task,
            results.summarize_run,
            results.close_run,
            results.run_cost,
            results.close_run_over_budget,
        ],
        # Tool execution, scoring and store writes are synchronous: they run in threads.
        activity_executor=ThreadPoolExecutor(max_workers=max_concurrent_activities),
        max_concurrent_activities=max_concurrent_activities,
    )]
    for provider, limit in sorted((provider_limits or {}).items()):
        if limit.per_minute is None:
            continue  # calls in flight are capped by the run workflow, on the run's queue
        workers.append(Worker(
            client,
            task_queue=provider_task_queue(provider),
            activities=model_calls,
            max_concurrent_activities=max_concurrent_activities,
            # Sent with every poll; the server holds the queue to it whichever worker
            # polls, so the cap is the run's, not this process's.
            max_task_queue_activities_per_second=limit.per_minute / 60,
        ))
    return WorkerGroup(workers)


# ---------------------------------------------------------------------------------------
# More worker processes: one Python process runs on one core, so a machine's cores are
# used by starting more workers on the same task queue. Temporal spreads the workflow
# and activity tasks over every poller; nothing here schedules work.

# Set in the environment of a worker process started by another passhat process: the
# parent's pid, so the child exits when the parent does, however it ends.
PARENT_PID_ENV = "PASSHAT_WORKER_PARENT_PID"
_PR_SET_PDEATHSIG = 1  # linux/prctl.h


def default_process_count() -> int:
    return os.cpu_count() or 1


def start_worker_processes(
    n: int, *, max_concurrent_activities: int, worker_args: list[str] | None = None
) -> list[subprocess.Popen]:
    """Start n `passhat worker` processes on the default task queue, with worker_args
    (the run's provider caps) added to their command line. They inherit this process's
    environment (results store, Temporal address, provider keys) and end with it. Their
    output goes to worker-<pid>.log files in PASSHAT_HOME/logs."""
    logs = settings.home() / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, PARENT_PID_ENV: str(os.getpid())}
    procs = []
    for _ in range(n):
        log = open(logs / f"worker-{os.getpid()}-{len(procs)}.log", "ab")  # noqa: SIM115
        with log:
            procs.append(subprocess.Popen(
                [sys.executable, "-m", "passhat.cli.main", "worker",
                 "--max-concurrent-activities", str(max_concurrent_activities), *(worker_args or [])],
                env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
            ))
    return procs


def stop_worker_processes(procs: list[subprocess.Popen], grace_s: float = 10.0) -> None:
    """SIGTERM, then SIGKILL whatever is still running after grace_s."""
    for p in procs:
        if p.poll() is None:
            p.terminate()
    deadline = time.monotonic() + grace_s
    for p in procs:
        try:
            p.wait(max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


@contextmanager
def worker_processes(
    n: int, *, max_concurrent_activities: int, worker_args: list[str] | None = None
) -> Iterator[list[subprocess.Popen]]:
    procs = start_worker_processes(
        n, max_concurrent_activities=max_concurrent_activities, worker_args=worker_args
    ) if n > 0 else []
    try:
        yield procs
    finally:
        stop_worker_processes(procs)


def end_with_parent() -> None:
    """In a worker a passhat process started: exit when that parent does (Linux sends
    the signal even when the parent is SIGKILLed). Nothing to do in other workers."""
    parent = os.environ.get(PARENT_PID_ENV)
    if not parent:
        return
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
    if os.getppid() != int(parent):  # the parent ended before the line above
        sys.exit(0)
