"""Validating a run request, starting (or attaching to) its workflow, running the worker
in-process, and following progress. The typer commands in passhat.cli.main stay thin."""

from __future__ import annotations

import asyncio
import json
import re
import secrets
import time
from datetime import datetime, timezone
from typing import Any, Callable

from temporalio.api.enums.v1 import TaskQueueType
from temporalio.api.taskqueue.v1 import TaskQueue
from temporalio.api.workflowservice.v1 import DescribeTaskQueueRequest
from temporalio.client import Client, WorkflowExecutionStatus, WorkflowFailureError, WorkflowHandle
from temporalio.common import WorkflowIDConflictPolicy, WorkflowIDReusePolicy
from temporalio.exceptions import WorkflowAlreadyStartedError
from temporalio.service import RPCError

from passhat.contracts import (
    DEFAULT_MAX_ERRORS,
    DEFAULT_MAX_STEPS,
    DEFAULT_SEED,
    DEFAULT_TEMPERATURE,
    RUN_ID_PATTERN,
    RUN_ID_RULE,
    TASK_QUEUE,
    TRIAL_NOT_EVALUABLE,
    ProviderLimit,
    RetryConfig,
    RunConfig,
    RunSummary,
    provider_of,
)


class UserInputError(Exception):
    """A mistake in what the user asked for; the message says how to fix it."""


def parse_json_object(text: str | None, option: str) -> dict[str, Any]:
    if not text:
        return {}
    try:
        value = json.loads(text)
    except json.JSONDecodeError as err:
        raise UserInputError(f"{option} is not valid JSON ({err.msg} at column {err.colno}): {text}")
    if not isinstance(value, dict):
        raise UserInputError(f'{option} must be a JSON object such as \'{{"temperature": 0}}\', got: {text}')
    return value


def refuse_secrets(args: dict[str, Any], option: str) -> None:
    """Model arguments are stored with the run and are the input of every workflow the
    Temporal UI shows: a key must stay in the workers' environment instead."""
    from passhat.infra import secrets

    fields = secrets.secret_fields(args)
    if fields:
        raise UserInputError(
            f"{option}: {', '.join(fields)} would store a secret with the run (and show it in "
            "the Temporal UI); put the key in an environment variable of the workers and "
            f'pass {{"{secrets.API_KEY_ENV}": "VARIABLE_NAME"}} instead, or use the '
            "provider's usual variable (e.g. OPENAI_API_KEY)"
        )


def check_model(model: str, option: str) -> None:
    """Refuse a model string litellm cannot route before anything is started."""
    from passhat.infra import scripted_provider

    if model.startswith(f"{scripted_provider.PROVIDER}/"):
        try:
            scripted_provider.parse_name(model.split("/", 1)[1])
        except scripted_provider.ScriptedModelError as err:
            raise UserInputError(f"{option}: {err}")
        return
    import litellm

    try:
        litellm.get_llm_provider(model)
    except Exception:
        raise UserInputError(
            f"{option}: unknown model '{model}'. Use a litellm model string with its provider, "
            "e.g. openai/gpt-4.1, anthropic/claude-sonnet-4-5, hosted_vllm/<name>, or scripted/oracle"
        )


def parse_duration(value: str | float, option: str) -> float:
    """Seconds from "900", "90s", "15m" or "2h"."""
    if isinstance(value, (int, float)):
        return float(value)
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smh]?)\s*", value)
    if not match:
        raise UserInputError(f"{option} must be a duration such as 900, 90s, 15m or 2h, got '{value}'")
    return float(match.group(1)) * {"": 1, "s": 1, "m": 60, "h": 3600}[match.group(2)]


_RATE_UNITS = {"s": 60.0, "sec": 60.0, "min": 1.0, "m": 1.0, "h": 1 / 60, "hour": 1 / 60}


def parse_provider_limits(
    rate_limits: list[str], max_concurrent: list[str] | None = None, models: list[str] | None = None
) -> dict[str, ProviderLimit]:
    """Provider caps from `--rate-limit PROVIDER=N/min` and `--max-concurrent PROVIDER=N`.
    With `models`, a provider none of them uses is refused: the cap would hold nothing."""
    limits: dict[str, ProviderLimit] = {}
    for text in rate_limits:
        match = re.fullmatch(r"\s*([\w.-]+)\s*=\s*(\d+(?:\.\d+)?)\s*/\s*(s|sec|m|min|h|hour)\s*", text)
        if not match or float(match.group(2)) <= 0:
            raise UserInputError(
                f"--rate-limit must be PROVIDER=N/min (or N/s, N/h) with N > 0, e.g. openai=60/min; got '{text}'"
            )
        limits.setdefault(match.group(1), ProviderLimit()).per_minute = (
            float(match.group(2)) * _RATE_UNITS[match.group(3)])
    for text in max_concurrent or []:
        match = re.fullmatch(r"\s*([\w.-]+)\s*=\s*(\d+)\s*", text)
        if not match or int(match.group(2)) < 1:
            raise UserInputError(f"--max-concurrent must be PROVIDER=N with N >= 1, e.g. openai=8; got '{text}'")
        limits.setdefault(match.group(1), ProviderLimit()).max_concurrent = int(match.group(2))
    if models is not None:
        used = sorted({provider_of(m) for m in models})
        for provider in limits:
            if provider not in used:
                raise UserInputError(
                    f"no model of the run uses provider '{provider}' (its models use: {', '.join(used)}); "
                    "the provider is the part of the model string before '/'"
                )
    return limits


def provider_limit_args(limits: dict[str, ProviderLimit]) -> list[str]:
    """The `passhat worker` options that give a worker these caps."""
    args: list[str] = []
    for provider, limit in sorted(limits.items()):
        if limit.per_minute is not None:
            args += ["--rate-limit", f"{provider}={limit.per_minute:g}/min"]
    return args


def new_run_id() -> str:
    return datetime.now(timezone.utc).strftime("run-%Y%m%d-%H%M%S-") + secrets.token_hex(2)


def build_config(
    *,
    run_id: str | None,
    domains: list[str],
    task_ids: list[str] | dict[str, list[str]],
    agent_models: list[str],
    user_model: str,
    trials: int,
    concurrency: int,
    agent_args: str | dict[str, Any] | None,
    user_args: str | dict[str, Any] | None,
    max_steps: int = DEFAULT_MAX_STEPS,
    max_errors: int = DEFAULT_MAX_ERRORS,
    max_attempts: int = RetryConfig.model_fields["max_attempts"].default,
    model_timeout: float = RetryConfig.model_fields["model_call_timeout_s"].default,
    retry_for: str | float = RetryConfig.model_fields["retry_for_s"].default,
    limit: int | None = None,
    task_file: str | None = None,
    seed: int = DEFAULT_SEED,
    lenient_tool_args: bool = False,
    agent_model_args: dict[str, dict[str, Any]] | None = None,
    max_cost: float | None = None,
    rate_limits: list[str] | None = None,
    max_concurrent: list[str] | None = None,
) -> RunConfig:
    """A validated RunConfig. `task_ids` is one list for every domain, or per domain (a
    sweep config's tasks; a domain it does not name runs every task). `agent_args` /
    `user_args` are JSON text (the options) or already parsed (a sweep config);
    `agent_model_args` gives agent models args of their own, which replace agent_args for
    them. `limit` (demo's --tasks) takes the first tasks of each domain. `rate_limits`
    and `max_concurrent` are `--rate-limit` and `--max-concurrent` values."""
    from passhat.cli.preview import direct_calls
    from passhat.domains.base import UnknownDomainError
    from passhat.domains.registry import get_domain
    from passhat.domains.task_file import TaskFileError, custom_domain_name, split_domain_name

    if not domains:
        raise UserInputError("give at least one --domain (see `passhat domains`)")
    if task_file is not None:
        if len(set(domains)) != 1 or split_domain_name(domains[0])[1] is not None:
            raise UserInputError(
                "--task-file replaces the tasks of one domain: give exactly one plain "
                "--domain with it, e.g. --domain airline --task-file my_tasks.json"
            )
        domains = [custom_domain_name(domains[0], task_file)]
    # "domain@file" given directly is recorded with an absolute path too: workers may
    # run in another directory.
    domains = [
        custom_domain_name(base, path) if path is not None else base
        for base, path in map(split_domain_name, domains)
    ]
    if not agent_models:
        raise UserInputError("give at least one --agent-model")
    retry_for_s = parse_duration(retry_for, "--retry-for")
    for name, value, low in (("--trials", trials, 1), ("--concurrency", concurrency, 1),
                             ("--max-steps", max_steps, 1), ("--max-errors", max_errors, 1),
                             ("--max-attempts", max_attempts, 0), ("--model-timeout", model_timeout, 1),
                             ("--retry-for", retry_for_s, 1), ("--tasks", 1 if limit is None else limit, 1)):
        if value < low:
            raise UserInputError(f"{name} must be at least {low}, got {value}")
    check_budget(max_cost)
    if run_id is not None and not re.fullmatch(RUN_ID_PATTERN, run_id):
        raise UserInputError(f"--run-id '{run_id}' {RUN_ID_RULE}")
    # Cheap checks first: loading a domain takes seconds.
    parsed_agent_args = _model_args(agent_args, "--agent-args")
    parsed_user_args = _model_args(user_args, "--user-args")
    per_model = {m: _model_args(dict(a), f"the args of agent model {m}")
                 for m, a in (agent_model_args or {}).items()}
    unknown = [m for m in per_model if m not in agent_models]
    if unknown:
        raise UserInputError(f"args given for agent model(s) the run does not have: {', '.join(unknown)}")
    for model in agent_models:
        check_model(model, "--agent-model")
    check_model(user_model, "--user-model")
    provider_limits = parse_provider_limits(rate_limits or [], max_concurrent, models=[*agent_models, user_model])
    per_domain: dict[str, list[str]] = {}
    for domain_name in dict.fromkeys(domains):
        try:
            domain = get_domain(domain_name)
        except (UnknownDomainError, TaskFileError) as err:
            raise UserInputError(str(err))
        known = domain.task_ids()
        if limit is not None and limit > len(known):
            raise UserInputError(
                f"--tasks must be between 1 and {len(known)} ({domain_name} has {len(known)} tasks), got {limit}"
            )
        wanted = task_ids
        if isinstance(task_ids, dict):  # per domain, by its name or its base domain's
            wanted = task_ids.get(domain_name, task_ids.get(split_domain_name(domain_name)[0], []))
        if wanted:
            missing = [t for t in wanted if t not in set(known)]
            if (len(domains) == 1 or isinstance(task_ids, dict)) and missing:
                raise UserInputError(
                    f"unknown task id(s) for domain {domain_name}: {', '.join(missing)} "
                    f"(see `passhat tasks {domain_name}`)"
                )
            chosen = [t for t in known if t in set(wanted)]
        else:
            chosen = known[:limit] if limit else known
        per_domain[domain_name] = chosen
    if task_ids and not any(per_domain.values()):
        raise UserInputError(f"none of the --task ids exist in {', '.join(per_domain)}")
    return RunConfig(
        run_id=run_id or new_run_id(),
        agent_models=list(dict.fromkeys(agent_models)),
        user_model=user_model,
        domains=list(per_domain),
        task_ids=per_domain,
        trials=trials,
        concurrency=concurrency,
        agent_args=parsed_agent_args,
        user_args=parsed_user_args,
        agent_model_args=per_model,
        provider_limits=provider_limits,
        max_steps=max_steps,
        max_errors=max_errors,
        seed=seed,
        lenient_tool_arguments=lenient_tool_args,
        retry={"max_attempts": max_attempts, "model_call_timeout_s": model_timeout,
               "retry_for_s": retry_for_s},
        max_cost=max_cost,
        expected_calls={name: {t: direct_calls(get_domain(name).task(t)) for t in chosen}
                        for name, chosen in per_domain.items()},
    )


def check_budget(max_cost: float | None) -> None:
    if max_cost is not None and not max_cost > 0:  # NaN too
        raise UserInputError(f"--max-cost must be more than 0 (USD), got {max_cost:g}")


def _model_args(args: str | dict[str, Any] | None, option: str) -> dict[str, Any]:
    """litellm args of one side or model, checked: a JSON object (text from an option,
    or already parsed), without secrets, and at temperature 0.0 (tau2 run's default)
    unless it sets one."""
    parsed = dict(args) if isinstance(args, dict) else parse_json_object(args, option)
    refuse_secrets(parsed, option)
    parsed.setdefault("temperature", DEFAULT_TEMPERATURE)
    return parsed


class RunEnded(Exception):
    """The run's workflow closed without a result (cancelled, terminated, failed)."""


async def start_run(
    client: Client,
    store,  # noqa: ANN001
    config: RunConfig,
    task_queue: str = TASK_QUEUE,
    *,
    resume: bool = False,
) -> WorkflowHandle:
    """Start the run's workflow, or attach to it when it is running. A new run whose id
    was used before attaches to that run (same configuration) or is refused by the store
    (different configuration); `resume` starts a closed run's workflow again, and the
    trials already scored return at once. If the workflow cannot be started, the run
    record this call created is removed again, so nothing half-written is left behind."""
    from passhat.workflows.run import RunRequest, RunWorkflow

    stored = store.check_config(config)
    existed = stored is not None
    if stored is not None:
        await _check_budget_change(client, stored.run_config(), config, resume)
    store.create_run(config, config.total_trials())
    try:
        handle = await client.start_workflow(
            RunWorkflow.run,
            RunRequest(config=config),
            id=config.run_id,
            task_queue=task_queue,
            id_reuse_policy=WorkflowIDReusePolicy.ALLOW_DUPLICATE
            if resume
            else WorkflowIDReusePolicy.REJECT_DUPLICATE,
            id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
            static_summary=f"passhat run {config.run_id}: {', '.join(config.agent_models)} on {', '.join(config.domains)}, k={config.trials}",
        )
    except WorkflowAlreadyStartedError:  # a closed run with this id: show its result
        return client.get_workflow_handle_for(RunWorkflow.run, config.run_id)
    except BaseException:
        # Interrupted or refused: remove the record only if no workflow started (the
        # server may have accepted the start just before the interruption).
        if not existed and not await _workflow_exists(client, config.run_id):
            store.delete_run(config.run_id)
        raise
    if resume:
        if stored is not None and stored.run_config().max_cost != config.max_cost:
            store.set_run_budget(config.run_id, config.max_cost)
        store.set_run_status(config.run_id, "running")
    return handle


def describe_budget(max_cost: float | None) -> str:
    return "no budget" if max_cost is None else f"a budget of {max_cost:g} USD"


async def _check_budget_change(client: Client, stored: RunConfig, config: RunConfig, resume: bool) -> None:
    """The budget is not part of what a run measures, but the run's workflow holds it:
    a run takes a new one through resume, once its workflow has stopped."""
    if stored.max_cost == config.max_cost:
        return
    run_id = config.run_id
    if not resume:
        raise UserInputError(
            f"run {run_id} exists with {describe_budget(stored.max_cost)}; "
            f"`passhat resume {run_id} --max-cost USD` continues it with another"
        )
    try:
        status = (await client.get_workflow_handle(run_id).describe()).status
    except RPCError:  # no workflow left (e.g. past the namespace's retention): not running
        status = None
    if status == WorkflowExecutionStatus.RUNNING:
        raise UserInputError(
            f"run {run_id} is running with {describe_budget(stored.max_cost)}: a new budget "
            f"applies once it has stopped (`passhat cancel {run_id}`, then "
            f"`passhat resume {run_id} --max-cost USD`)"
        )


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
    The store is read in a thread: the worker in this process shares the event loop,
    and a slow read must never delay its heartbeats."""
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


async def cancel_run(client: Client, store, run_id: str, wait_s: float = 60.0) -> str:  # noqa: ANN001
    """Ask the run to stop and wait until it has: every model call in flight cancelled,
    every trial recorded as cancelled (keeping its steps; resume continues it). Without
    a worker to act on the request, the workflows are terminated."""
    handle = client.get_workflow_handle(run_id)
    status = (await handle.describe()).status
    if status != WorkflowExecutionStatus.RUNNING:
        return f"not running (its workflow is {status.name.lower() if status else 'unknown'})"
    await handle.cancel()
    try:
        await asyncio.wait_for(handle.result(), wait_s)
        how = "finished before the cancel request arrived"
    except WorkflowFailureError:
        how = "cancelled"
    except TimeoutError:
        await handle.terminate(reason="passhat cancel: no worker acted on the cancel request")
        how = "terminated (no worker was running)"
    store.set_run_status(run_id, "cancelled")
    return how


async def _workflow_exists(client: Client, workflow_id: str) -> bool:
    try:
        await client.get_workflow_handle(workflow_id).describe()
    except Exception:
        return False
    return True


async def workflow_status(client: Client, run_id: str) -> str | None:
    """The run workflow's status; for a running one with no worker to execute it, the
    status says so and how to start one."""
    try:
        desc = await client.get_workflow_handle(run_id).describe()
    except Exception:
        return None
    status = desc.status
    name = status.name.lower() if isinstance(status, WorkflowExecutionStatus) else str(status)
    if status == WorkflowExecutionStatus.RUNNING and not await has_live_worker(client, desc.task_queue):
        name += (f" (but no worker has polled task queue {desc.task_queue!r} for "
                 f"{POLLER_FRESH_S // 60:g} minutes: start one with `passhat worker`)")
    return name


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

