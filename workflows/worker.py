"""A passhat worker: the workflows and activities it registers, its build id, and one
process's run of it. It sits with the workflows because it assembles them with the
activities they call, which are a layer below."""

from __future__ import annotations

import asyncio
import gc
import hashlib
import sys
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from pathlib import Path

from temporalio.client import Client
from temporalio.worker import UnsandboxedWorkflowRunner, Worker

from passhat.activities.conversation import ConversationActivities
from passhat.activities.rediagnosis import RediagnosisActivities
from passhat.activities.results import ResultActivities
from passhat.activities.review import ReviewActivities
from passhat.contracts import ProviderLimit, plugin_task_queue, provider_task_queue
from passhat.infra.store import Store
from passhat.workflows.round_choice import choose_round, measure_record
from passhat.workflows.rediagnosis import RediagnosisWorkflow
from passhat.workflows.review import ReviewWorkflow
from passhat.workflows.rounds import RoundsWorkflow
from passhat.workflows.run import RunWorkflow
from passhat.workflows.task import TaskWorkflow
from passhat.workflows.trial import TrialWorkflow

WORKFLOWS = [RunWorkflow, TaskWorkflow, TrialWorkflow, RoundsWorkflow, ReviewWorkflow, RediagnosisWorkflow]
SWITCH_INTERVAL_S = 0.0005
# The collector's thresholds while a worker runs. The command line raised them for its
# start-up; a run's garbage (cycles among a model call's objects) must not pile up.
RUN_GC_THRESHOLDS = (700, 10, 10)  # Python's defaults


def build_id() -> str:
    """The worker's build id: passhat's version and a digest of the source files of the
    code a worker runs (the contracts, workflows, activities, domains and infra).
    Without one, temporalio hashes the bytecode of every module loaded (litellm, tau2,
    openai: thousands), reading each from disk before the worker can poll, in every
    worker process. The id is informational here (no worker versioning); what decides
    a replay is passhat's workflow code, which the digest covers."""
    import passhat.activities
    import passhat.domains
    import passhat.infra
    import passhat.workflows

    digest = hashlib.md5(usedforsecurity=False)
    # Package by package, file by file: the same digest from a source checkout (a
    # folder per layer) and from an installed wheel (subfolders of passhat/).
    for package in (passhat, passhat.workflows, passhat.activities, passhat.domains, passhat.infra):
        for source in sorted(Path(f) for folder in package.__path__ for f in Path(folder).glob("*.py")):
            digest.update(f"{package.__name__}.{source.stem}".encode())
            digest.update(source.read_bytes())
    return f"passhat-{passhat.__version__}-{digest.hexdigest()[:12]}"


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


# A cancel request reaches an activity only in the answer to one of its heartbeats. The
# SDK holds a heartbeat back for up to 0.8 of the heartbeat timeout after the previous
# one (8 s by default); a model call heartbeats every third of the timeout, and each of
# those goes out when the hold is shorter than that, so a cancel closes a slow call
# within seconds. Calls that answer sooner send no heartbeat at all (Heartbeat).
HEARTBEAT_THROTTLE = timedelta(seconds=1)


def build_worker(
    client: Client,
    store: Store,
    *,
    task_queue: str | None = None,
    max_concurrent_activities: int = 64,
    provider_limits: dict[str, ProviderLimit] | None = None,
    plugins: list[str] | None = None,
) -> WorkerGroup:
    """The workers of one process: on `task_queue`, by default the queue of the runs
    that need exactly `plugins` (which the caller has imported), and on the capped
    providers' queues of those runs."""
    task_queue = task_queue or plugin_task_queue(plugins or [])
    conversation = ConversationActivities(store)
    results = ResultActivities(store)
    review = ReviewActivities(store)
    # The event loop (model calls, Temporal's polls and heartbeats) needs the GIL for a
    # moment many times per call; behind a thread running a tool step or a scoring it
    # waits the whole switch interval each time (5 ms by default).
    sys.setswitchinterval(SWITCH_INTERVAL_S)
    gc.set_threshold(*RUN_GC_THRESHOLDS)
    # The model-call activities run on the event loop and do their store and prompt work
    # in the loop's default executor; asyncio's (cores + 4 threads) would make them queue
    # behind each other, late for their heartbeats.
    asyncio.get_running_loop().set_default_executor(
        ThreadPoolExecutor(max_workers=max_concurrent_activities, thread_name_prefix="passhat-async")
    )
    model_calls = [conversation.agent_turn, conversation.user_turn, conversation.judge_turn]
    build = build_id()
    workers = [Worker(
        client,
        task_queue=task_queue,
        build_id=build,
        workflows=WORKFLOWS,
        activities=[
            *model_calls,
            conversation.tool_turn,
            conversation.record_mcp_call,
            results.open_trial,
            results.recorded_steps,
            results.score_trial,
            results.mark_not_evaluable,
            results.restart_trial,
            results.set_attempt_aside,
            results.set_judge_aside,
            results.mark_cancelled,
            results.record_task,
            results.summarize_run,
            results.close_run,
            results.run_cost,
            results.close_run_over_budget,
            results.round_outcomes,
            results.runs_cost,
            results.open_round,
            results.round_state,
            results.round_continuation,
            choose_round,
            measure_record,
            review.review_plan,
            review.review_trial,
            RediagnosisActivities(store).rediagnose_run,
        ],
        # Tool execution, scoring and store writes are synchronous: they run in threads.
        activity_executor=ThreadPoolExecutor(max_workers=max_concurrent_activities),
        max_concurrent_activities=max_concurrent_activities,
        # Temporal's sandbox re-imports workflow code per workflow and swaps the import
        # machinery on every activation, a large share of a worker's CPU. Workers run
        # the workflows without it; the tests replay every kind of workflow history
        # under the sandbox (tests/durability/test_replay.py), which is where a
        # nondeterministic call would be caught.
        workflow_runner=UnsandboxedWorkflowRunner(),
        max_heartbeat_throttle_interval=HEARTBEAT_THROTTLE,
    )]
    for provider, limit in sorted((provider_limits or {}).items()):
        if limit.per_minute is None:
            continue  # calls in flight are capped by the run workflow, on the run's queue
        workers.append(Worker(
            client,
            task_queue=provider_task_queue(provider, plugins),
            build_id=build,
            activities=model_calls,
            max_concurrent_activities=max_concurrent_activities,
            # Sent with every poll; the server holds the queue to it whichever worker
            # polls, so the cap is the run's, not this process's.
            max_task_queue_activities_per_second=limit.per_minute / 60,
            max_heartbeat_throttle_interval=HEARTBEAT_THROTTLE,
        ))
    return WorkerGroup(workers)


async def serve(*, max_concurrent_activities: int, provider_limits: dict[str, ProviderLimit],
                announce: bool = False, plugins: list[str] | None = None) -> None:
    """Run one worker process's workers until cancelled. `plugins` are imported first
    (a forked worker has them already); the worker serves the runs that need them."""
    from passhat.domains.plugins import load_plugins
    from passhat.infra.temporal_client import connect

    load_plugins(plugins or [])
    client = await connect()
    group = build_worker(client, Store(), max_concurrent_activities=max_concurrent_activities,
                         provider_limits=provider_limits, plugins=plugins)
    if announce:
        queues = [plugin_task_queue(plugins or []),
                  *(provider_task_queue(p, plugins) for p in sorted(provider_limits))]
        print(f"passhat worker polling task queue(s) {', '.join(queues)}", file=sys.stderr)
    await group.run()


def preload(domains: list[str], plugins: list[str] | None = None) -> None:
    """Load, in this process, what every worker needs before its first activity: the
    plugins, the model client, tau2, and the domains' data (so forked workers share
    it). A plugin that fails to import raises PluginError."""
    from passhat.domains.plugins import load_plugins
    from passhat.domains.registry import get_domain
    from passhat.domains.tau2_data import import_tau2
    from passhat.infra import llm

    load_plugins(plugins or [])
    llm.load_client_modules()
    import_tau2()
    for name in domains:
        try:
            get_domain(name).task_ids()
        except Exception:  # noqa: BLE001 - a worker reports it when a trial needs the domain
            continue
