"""Driving a run's workflow from outside it, as a Temporal client: start (or attach to)
the run, follow its progress to its result, cancel it, and read its status and whether
any worker serves its task queue."""

from __future__ import annotations

import asyncio
import time
from datetime import datetime, timezone
from typing import Any, Callable

from temporalio.api.enums.v1 import PendingWorkflowTaskState, TaskQueueType
from temporalio.api.taskqueue.v1 import TaskQueue
from temporalio.api.workflowservice.v1 import DescribeTaskQueueRequest
from temporalio.client import Client, WorkflowExecutionStatus, WorkflowFailureError, WorkflowHandle
from temporalio.common import WorkflowIDConflictPolicy, WorkflowIDReusePolicy
from temporalio.exceptions import WorkflowAlreadyStartedError
from temporalio.service import RPCError

from passhat.contracts import RunConfig
from passhat.outcomes import RUN_CANCELLED, RUN_RUNNING, TRIAL_NOT_EVALUABLE, TRIAL_RUNNING, RunSummary
# BudgetChangeRefused is importable from here as before.
from passhat.run_identity import BudgetChangeRefused, ConfigMismatchError, budget_refusal  # noqa: F401 - (BudgetChangeRefused)


class RunEnded(Exception):
    """The run's workflow closed without a result (cancelled, terminated, failed)."""


async def start_run(
    client: Client,
    store,  # noqa: ANN001
    config: RunConfig,
    task_queue: str | None = None,
    *,
    resume: bool = False,
) -> WorkflowHandle:
    """Start the run's workflow, or attach to it when it is running. A new run whose id
    was used before attaches to that run (the same experiment) or is refused, naming what
    differs (passhat.run_identity); `resume` starts a closed run's workflow again, and the
    trials already scored return at once. If the workflow cannot be started, the run
    record this call created is removed again, so nothing half-written is left behind.
    The run goes to the task queue of its plugin set unless `task_queue` says another."""
    # Imported here: the workflow modules load the activities and what they use, which
    # the commands that only read a run's status must not wait for.
    from passhat.workflows.run import RunRequest, RunWorkflow
    from passhat.activities.results import check_run, record_run

    checked = check_run(store, config)  # refused before anything is written
    stored = checked.stored
    existed = stored is not None
    if stored is not None:
        running = resume and await _workflow_running(client, config.run_id)
        refusal = budget_refusal(stored.run_config(), config, resume=resume, running=running)
        if refusal is not None:
            raise refusal
    record_run(store, config, checked)
    try:
        handle = await client.start_workflow(
            RunWorkflow.run,
            RunRequest(config=config),
            id=config.run_id,
            task_queue=task_queue or config.task_queue(),
            # A workflow of this id that this store has no run of is another store's (a
            # Temporal server shared by several homes or teams): a closed one is not this
            # run's result, so a new run starts; a running one is refused below.
            id_reuse_policy=WorkflowIDReusePolicy.ALLOW_DUPLICATE
            if resume or not existed
            else WorkflowIDReusePolicy.REJECT_DUPLICATE,
            id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING
            if existed
            else WorkflowIDConflictPolicy.FAIL,
            static_summary=f"passhat run {config.run_id}: {', '.join(config.agent_models)} on {', '.join(config.domains)}, k={config.trials}",
        )
    except WorkflowAlreadyStartedError:
        if not existed:
            store.delete_run(config.run_id)
            raise ConfigMismatchError(
                f"a run '{config.run_id}' that this results store does not hold is running on the Temporal "
                f"server (another PASSHAT_HOME or results store); give another --run-id") from None
        return client.get_workflow_handle_for(RunWorkflow.run, config.run_id)  # closed: show its result
    except BaseException:
        # Interrupted or refused: remove the record only if no workflow started (the
        # server may have accepted the start just before the interruption).
        if not existed and not await _workflow_exists(client, config.run_id):
            store.delete_run(config.run_id)
        raise
    if resume:
        if stored is not None and stored.run_config().max_cost != config.max_cost:
            store.set_run_budget(config.run_id, config.max_cost)
        store.set_run_status(config.run_id, RUN_RUNNING)
    return handle


async def start_rounds(client: Client, store, req, task_queue: str | None = None) -> WorkflowHandle:  # noqa: ANN001 - a Store, a RoundsRequest
    """Start a measurement in rounds (workflows/rounds.py) under its id, or attach to it:
    running, or finished (its result is its record). One that failed, was cancelled or
    terminated starts again and reads back the rounds it recorded. The same id with
    another measurement, or used by a plain run, is refused."""
    from passhat.workflows.rounds import RoundsWorkflow

    run_id = req.config.run_id
    if store.get_run(run_id) is not None:
        raise ConfigMismatchError(f"'{run_id}' is the id of a run, not of a gate or an adaptive run; "
                                  "give another --run-id")
    fingerprint = req.fingerprint()
    try:
        handle = await client.start_workflow(
            RoundsWorkflow.run, req, id=run_id, task_queue=task_queue or req.config.task_queue(),
            # A finished measurement of this id whose rounds this store does not hold is
            # another store's (a shared Temporal server): its result is not this one's.
            id_reuse_policy=WorkflowIDReusePolicy.ALLOW_DUPLICATE_FAILED_ONLY
            if rounds_of(store, run_id) else WorkflowIDReusePolicy.ALLOW_DUPLICATE,
            id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
            memo={"fingerprint": fingerprint},
            static_summary=f"passhat {req.measure.kind} {run_id}: {', '.join(req.config.agent_models)} "
                           f"on {', '.join(req.config.domains)}",
        )
    except WorkflowAlreadyStartedError:  # finished before: its result is the record
        handle = client.get_workflow_handle_for(RoundsWorkflow.run, run_id)
    memo = await (await handle.describe()).memo()
    if memo.get("fingerprint") != fingerprint:
        raise ConfigMismatchError(
            f"{run_id} was started with other settings (criteria, suite, models or seeds); give another "
            "--run-id, or the same command it was started with"
        )
    return handle


async def start_review(client: Client, req, task_queue: str) -> WorkflowHandle:  # noqa: ANN001 - a ReviewRequest
    """Start a run's review (workflows/review.py), or attach to the one running with the
    same judge. A finished one starts again: it plans from the store, so it reviews only
    what is left. Another review of the run still running is refused (one at a time)."""
    from passhat.workflows.review import ReviewWorkflow

    key = req.review_key()
    handle = await client.start_workflow(
        ReviewWorkflow.run, req, id=req.workflow_id(), task_queue=task_queue,
        id_reuse_policy=WorkflowIDReusePolicy.ALLOW_DUPLICATE,
        id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING, memo={"review_key": key},
        static_summary=f"passhat review {req.run_id}: judge {req.judge_model}",
    )
    memo = await (await handle.describe()).memo()
    if memo.get("review_key") != key:
        raise ConfigMismatchError(
            f"another review of {req.run_id} (another judge, args or selection) is running as {req.workflow_id()}; "
            f"wait for it, or stop it with `passhat cancel {req.workflow_id()}`")
    return handle


async def _workflow_running(client: Client, run_id: str) -> bool:
    try:
        status = (await client.get_workflow_handle(run_id).describe()).status
    except RPCError:  # no workflow left (e.g. past the namespace's retention): not running
        return False
    return status == WorkflowExecutionStatus.RUNNING


class Eta:
    """Time left in a run, from the pace of the trials finished since following began
    (trials an earlier attempt finished, seen at once on resume, do not set the pace)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self.start: tuple[float, int] | None = None

    def __call__(self, done: int, total: int) -> float | None:
        """Seconds left, or None while there is no pace to go by yet."""
        now = self.clock()
        if self.start is None:
            self.start = (now, done)
        if done >= total:
            return 0.0
        since, done_then = self.start
        if done <= done_then or now <= since:
            return None
        return (total - done) * (now - since) / (done - done_then)


async def follow(
    handle: WorkflowHandle,
    store,  # noqa: ANN001
    run_id: str,
    on_progress: Callable[..., None],
    poll_s: float = 0.5,
    on_not_evaluable: Callable[[Any], None] | None = None,
) -> RunSummary:
    """Wait for the run's result, calling on_progress(RunProgress, ETA in seconds or
    None) as it goes, and on_not_evaluable(trial row) once for each trial that becomes
    not evaluable meanwhile (not for those an earlier attempt left so: a resumed trial
    that fails again has a new attempt number and is reported again).
    The store is read in a thread: a worker in this process (`passhat run` runs one)
    shares the event loop, and a slow read must never delay its heartbeats."""
    result = asyncio.ensure_future(handle.result())
    eta = Eta()
    reported: set[tuple[str, int]] | None = None
    last_seen: tuple[int, int] | None = None  # (not evaluable, their attempts)

    async def poll() -> None:
        nonlocal reported, last_seen
        progress = await asyncio.to_thread(store.run_progress, run_id)
        # The trials are read only when their counts moved (a trial that finished, or
        # one that failed again after resume reopened it).
        seen, last_seen = last_seen, (progress.not_evaluable, progress.not_evaluable_attempts)
        if on_not_evaluable is not None and (reported is None or (
                progress.not_evaluable and last_seen != seen)):
            rows = await asyncio.to_thread(store.trials, run_id, status=TRIAL_NOT_EVALUABLE)
            if reported is None:  # the first look: what is there already was reported before
                reported = {(r.trial_id, r.attempts) for r in rows}
            for row in rows:
                if (row.trial_id, row.attempts) not in reported:
                    reported.add((row.trial_id, row.attempts))
                    on_not_evaluable(row)
        on_progress(progress, eta(progress.done, progress.total))

    while not result.done():
        await poll()
        await asyncio.wait({result}, timeout=poll_s)
    await poll()
    try:
        return result.result()
    except WorkflowFailureError as err:
        raise RunEnded(
            f"run {run_id} ended without finishing ({err.cause or err}); "
            f"`passhat resume {run_id}` runs what is missing"
        ) from err


async def cancel_run(
    client: Client,
    store,  # noqa: ANN001
    run_id: str,
    wait_s: float = 60.0,
    say: Callable[[str], None] = lambda line: None,
) -> str:
    """Stop the run and return once it has stopped: no model call starts after the
    request, the calls in flight are closed, and every unfinished trial is recorded as
    cancelled (keeping its steps; resume continues it). say(line) tells, before the wait,
    what is being done. Without a worker to act on the request, the workflows are
    terminated at once and the store marks their trials cancelled."""
    handle = client.get_workflow_handle(run_id)
    desc = await handle.describe()
    status = desc.status
    if status != WorkflowExecutionStatus.RUNNING:
        return f"not running (its workflow is {status.name.lower() if status else 'unknown'})"
    if not await has_live_worker(client, desc.task_queue):
        say("no worker is running: terminating its workflows")
        await _terminate(client, handle, "no worker was running", store)
        how = "terminated (no worker was running)"
    else:
        say("stopping its conversations (model calls in flight are closed) ...")
        await handle.cancel()
        result = asyncio.ensure_future(handle.result())
        try:
            idle = await _until_done_or_unattended(handle, result, wait_s)
            if idle is None:
                result.result()
                return "finished before the cancel request arrived"
            await _terminate(client, handle, "no worker acted on the cancel request", store)
            how = f"terminated (no worker took the request up within {idle:.0f} s)"
        except WorkflowFailureError:
            how = "cancelled"
        finally:
            result.cancel()
    # A terminated trial workflow could not record itself; a cancelled one has. A gate's
    # (or an adaptive run's) runs are its rounds: the one that was running stops with it.
    if store.get_run(run_id) is not None:
        for trial in store.trials(run_id, status=TRIAL_RUNNING):
            store.mark_cancelled(trial.trial_id)
        store.set_run_status(run_id, RUN_CANCELLED)
        return how
    for rid in rounds_of(store, run_id):
        for trial in store.trials(rid, status=TRIAL_RUNNING):
            store.mark_cancelled(trial.trial_id)
        if store.get_run(rid).status == RUN_RUNNING:
            store.set_run_status(rid, RUN_CANCELLED)
    return how


def rounds_of(store, run_id: str) -> list[str]:  # noqa: ANN001 - a Store
    """The round runs recorded for a measurement in rounds (workflows/rounds.py), in order."""
    from passhat.workflows.rounds import round_id

    runs: list[str] = []
    while store.get_run(round_id(run_id, len(runs))) is not None:
        runs.append(round_id(run_id, len(runs)))
    return runs


# A live worker takes up a workflow task within a moment (on a busy machine, a few
# seconds). One left waiting this long means the worker that polled lately has gone (a
# killed worker is listed among the task queue's pollers for minutes).
UNATTENDED_S = 15.0


async def _until_done_or_unattended(handle: WorkflowHandle, result: asyncio.Future, wait_s: float,
                                    poll_s: float = 1.0) -> float | None:
    """Wait for the run's workflow to close: None once it has (the result is in
    `result`), or the seconds waited when no worker acts on it (one workflow task waits
    longer than UNATTENDED_S to be taken up, or it is still running after wait_s). Timed
    on this machine's clock: the server's may differ."""
    start = time.monotonic()
    waiting: tuple[Any, float] | None = None  # (the task waiting, seen since)
    while not result.done():
        now = time.monotonic()
        if now - start >= wait_s:
            return now - start
        task = (await handle.describe()).raw_description.pending_workflow_task
        if task.state != PendingWorkflowTaskState.PENDING_WORKFLOW_TASK_STATE_SCHEDULED:
            waiting = None
        elif waiting is None or waiting[0] != task.original_scheduled_time:
            waiting = (task.original_scheduled_time, now)
        elif now - waiting[1] > UNATTENDED_S:
            return now - start
        await asyncio.wait({result}, timeout=poll_s)
    return None


async def _terminate(client: Client, handle: WorkflowHandle, why: str, store) -> None:  # noqa: ANN001
    """Terminate the run's workflow and its trials. The server terminates the task and
    trial workflows of the earlier shape with it (their parent close policy); the
    window's trials run on across continue-as-new (ABANDON), so each trial the store
    says is unfinished is terminated by its id."""
    reason = f"passhat cancel: {why}"
    await handle.terminate(reason=reason)
    runs = [handle.id] if store.get_run(handle.id) is not None else rounds_of(store, handle.id)
    for trial in (t for rid in runs for t in store.trials(rid, status=TRIAL_RUNNING)):
        try:
            await client.get_workflow_handle(trial.trial_id).terminate(reason=reason)
        except RPCError:  # not running (ended, or never started)
            pass


async def _workflow_exists(client: Client, workflow_id: str) -> bool:
    try:
        await client.get_workflow_handle(workflow_id).describe()
    except Exception:
        return False
    return True


async def workflow_status(client: Client, run_id: str, plugins: list[str] | None = None
                          ) -> tuple[str, str | None] | None:
    """The run workflow's state (lower case, bare: "running", "completed", ...) and what
    a user should know about it: for a running one with no worker to execute it, that
    it waits and how to serve it (with the run's `plugins`: a worker without them does
    not poll its queue). None when Temporal has no such workflow."""
    try:
        desc = await client.get_workflow_handle(run_id).describe()
    except Exception:
        return None
    status = desc.status
    name = status.name.lower() if isinstance(status, WorkflowExecutionStatus) else str(status)
    if status == WorkflowExecutionStatus.RUNNING and not await has_live_worker(client, desc.task_queue):
        worker = " ".join(["passhat worker", *(f"--plugin {p}" for p in plugins or [])])
        return name, (f"no worker has polled task queue {desc.task_queue!r} for "
                      f"{POLLER_FRESH_S // 60:g} minutes: start one with `{worker}`, or serve "
                      f"the run from this shell with `passhat resume {run_id}`")
    return name, None


# A live worker's long polls return within about a minute and it polls again at once, so
# a poller unseen for longer than this is gone (Temporal lists pollers for 5 minutes).
POLLER_FRESH_S = 120


async def has_live_worker(client: Client, task_queue: str) -> bool:
    """Whether some worker polled the queue, for workflow or for activity tasks, lately."""
    now = datetime.now(timezone.utc)
    for kind in (TaskQueueType.TASK_QUEUE_TYPE_WORKFLOW, TaskQueueType.TASK_QUEUE_TYPE_ACTIVITY):
        resp = await client.workflow_service.describe_task_queue(DescribeTaskQueueRequest(
            namespace=client.namespace, task_queue=TaskQueue(name=task_queue), task_queue_type=kind,
        ))
        if any((now - p.last_access_time.ToDatetime(timezone.utc)).total_seconds() < POLLER_FRESH_S
               for p in resp.pollers):
            return True
    return False

