"""The passhat worker: what it registers, and how it is built. It sits above the
workflows and the activities because it assembles both."""

from __future__ import annotations

import asyncio
import ctypes
import gc
import hashlib
import os
import signal
import sys
import threading
import time
import traceback
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import NoReturn

from temporalio.client import Client
from temporalio.worker import UnsandboxedWorkflowRunner, Worker

from passhat.activities.conversation import ConversationActivities
from passhat.activities.results import ResultActivities
from passhat.contracts import TASK_QUEUE, ProviderLimit, provider_task_queue
from passhat.infra import settings
from passhat.infra.store import Store
from passhat.workflows.run import RunWorkflow
from passhat.workflows.task import TaskWorkflow
from passhat.workflows.trial import TrialWorkflow

WORKFLOWS = [RunWorkflow, TaskWorkflow, TrialWorkflow]
SWITCH_INTERVAL_S = 0.0005
# The collector's thresholds while a worker runs. The command line raised them for its
# start-up; a run's garbage (cycles among a model call's objects) must not pile up.
RUN_GC_THRESHOLDS = (700, 10, 10)  # Python's defaults


def build_id() -> str:
    """The worker's build id: passhat's version and a digest of its own source files.
    Without one, temporalio hashes the bytecode of every module loaded (litellm, tau2,
    openai: thousands), reading each from disk: 0.27 s before the run's worker could
    poll (timed), in every worker process. The id is informational here (no worker
    versioning); what decides a replay is passhat's workflow code, which the digest
    covers."""
    import passhat.activities
    import passhat.cli
    import passhat.domains
    import passhat.infra
    import passhat.workflows

    digest = hashlib.md5(usedforsecurity=False)
    # Package by package, file by file: the same digest from a source checkout (a
    # folder per layer) and from an installed wheel (subfolders of passhat/).
    for package in (passhat, passhat.cli, passhat.workflows, passhat.activities,
                    passhat.domains, passhat.infra):
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
    model_calls = [conversation.agent_turn, conversation.user_turn]
    build = build_id()
    workers = [Worker(
        client,
        task_queue=task_queue,
        build_id=build,
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
        # Temporal's sandbox re-imports workflow code per workflow and swaps the import
        # machinery on every activation: a fifth of a worker's CPU on the throughput
        # bench (py-spy). Workers run the workflows without it; the tests replay every
        # kind of workflow history under the sandbox (tests/durability/test_replay.py),
        # which is where a nondeterministic call would be caught.
        workflow_runner=UnsandboxedWorkflowRunner(),
    )]
    for provider, limit in sorted((provider_limits or {}).items()):
        if limit.per_minute is None:
            continue  # calls in flight are capped by the run workflow, on the run's queue
        workers.append(Worker(
            client,
            task_queue=provider_task_queue(provider),
            build_id=build,
            activities=model_calls,
            max_concurrent_activities=max_concurrent_activities,
            # Sent with every poll; the server holds the queue to it whichever worker
            # polls, so the cap is the run's, not this process's.
            max_task_queue_activities_per_second=limit.per_minute / 60,
        ))
    return WorkerGroup(workers)


# ---------------------------------------------------------------------------------------
# More worker processes: one Python process runs on one core, so a machine's cores are
# used by running more workers on the same task queue. Temporal spreads the workflow
# and activity tasks over every poller; nothing here schedules work.
#
# The extra workers are forked from the process that starts them, once it has imported
# litellm and tau2 and loaded the run's domains: a fresh interpreter spends about 6 CPU
# seconds on that (measured: `/usr/bin/time python -c "import litellm, tau2.registry ..."`),
# more than a whole conversation's work. The fork happens before this process has a
# Temporal client, an event loop or a second thread; each child makes its own.

_PR_SET_PDEATHSIG = 1  # linux/prctl.h


def default_process_count() -> int:
    return os.cpu_count() or 1


async def serve(*, max_concurrent_activities: int, provider_limits: dict[str, ProviderLimit],
                announce: bool = False) -> None:
    """Run one worker process's workers until cancelled."""
    from passhat.infra.temporal_server import connect

    client = await connect()
    group = build_worker(client, Store(), max_concurrent_activities=max_concurrent_activities,
                         provider_limits=provider_limits)
    if announce:
        queues = [TASK_QUEUE, *(provider_task_queue(p) for p in sorted(provider_limits))]
        print(f"passhat worker polling task queue(s) {', '.join(queues)}", file=sys.stderr)
    await group.run()


def preload(domains: list[str]) -> None:
    """Load, in this process, what every worker needs before its first activity: the
    model client, tau2, and the domains' data (so forked workers share it)."""
    from passhat.domains.registry import get_domain
    from passhat.domains.tau2_domain import import_tau2
    from passhat.infra import llm

    llm.load_client_modules()
    import_tau2()
    for name in domains:
        try:
            get_domain(name).task_ids()
        except Exception:  # noqa: BLE001 - a worker reports it when a trial needs the domain
            continue


def start_worker_processes(
    n: int, *, max_concurrent_activities: int, provider_limits: dict[str, ProviderLimit] | None = None
) -> list[int]:
    """Fork n worker processes on the default task queue (and the capped providers'
    queues). They share this process's environment (results store, Temporal address,
    provider keys) and end with it. Their output goes to worker-<pid>-<i>.log files in
    PASSHAT_HOME/logs. Returns their pids."""
    if n <= 0:
        return []
    if threading.active_count() > 1:  # a thread's locks would stay locked in the child
        raise RuntimeError("worker processes must be forked before any thread starts")
    logs = settings.home() / "logs"
    try:
        logs.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        from passhat.cli.launch import UserInputError

        raise UserInputError(f"cannot create the worker log folder {logs}: {err.strerror}; "
                             "check PASSHAT_HOME") from None
    parent = os.getpid()
    sys.stdout.flush()
    sys.stderr.flush()
    # What is loaded now stays shared with the children: the collector never scans it
    # (a scan would write to, and so copy, every page it visits).
    gc.freeze()
    pids = []
    for i in range(n):
        pid = os.fork()
        if pid == 0:
            _worker_child(logs / f"worker-{parent}-{i}.log", parent, max_concurrent_activities,
                          provider_limits or {})
        pids.append(pid)
    return pids


def _worker_child(log: Path, parent: int, max_concurrent_activities: int,
                  provider_limits: dict[str, ProviderLimit]) -> NoReturn:
    status = 1
    try:
        fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        os.close(fd)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.close(null)
        if sys.platform.startswith("linux"):  # end with the parent, even a SIGKILLed one
            ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
        if os.getppid() != parent:  # it ended before the line above
            os._exit(0)
        # Stopped (by the parent, or the parent's death): send the spans still buffered,
        # such as the root spans of trials this process scored, then end at once.
        signal.signal(signal.SIGTERM, _flush_and_exit)
        asyncio.run(serve(max_concurrent_activities=max_concurrent_activities,
                          provider_limits=provider_limits))
        status = 0
    except KeyboardInterrupt:
        status = 0  # Ctrl-C reaches the whole process group: the parent says what to do
    except BaseException:  # noqa: BLE001 - into the worker's log, then out
        traceback.print_exc()
    finally:
        from passhat.infra import tracing

        tracing.shutdown()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(status)  # never return into the parent's code


def _flush_and_exit(*_: object) -> NoReturn:
    from passhat.infra import tracing

    tracing.shutdown()
    os._exit(0)


def stop_worker_processes(pids: list[int], grace_s: float = 10.0) -> None:
    """SIGTERM, then SIGKILL whatever is still running after grace_s; reap them all."""
    for pid in pids:
        _signal(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    left = set(pids)
    while left:
        for pid in list(left):
            try:
                done, _ = os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                done = pid
            if done:
                left.discard(pid)
        if left and time.monotonic() >= deadline:
            for pid in left:
                _signal(pid, signal.SIGKILL)
                try:
                    os.waitpid(pid, 0)
                except ChildProcessError:
                    pass
            return
        if left:
            time.sleep(0.05)


def _signal(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        pass


@contextmanager
def worker_processes(
    n: int, *, max_concurrent_activities: int, provider_limits: dict[str, ProviderLimit] | None = None
) -> Iterator[list[int]]:
    pids = start_worker_processes(
        n, max_concurrent_activities=max_concurrent_activities, provider_limits=provider_limits
    )
    try:
        yield pids
    finally:
        stop_worker_processes(pids)
