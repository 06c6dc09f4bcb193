"""Validating a run request, starting (or attaching to) its workflow, running the worker
in-process, and following progress. The typer commands in cli.main stay thin."""

from __future__ import annotations

import asyncio
import json
import re
import secrets
from datetime import datetime, timezone
from typing import Any, Callable

from temporalio.client import Client, WorkflowExecutionStatus, WorkflowFailureError, WorkflowHandle
from temporalio.common import WorkflowIDConflictPolicy, WorkflowIDReusePolicy
from temporalio.exceptions import WorkflowAlreadyStartedError

from workflows.specs import RunConfig, RunSummary, TASK_QUEUE, run_workflow_id


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


def check_model(model: str, option: str) -> None:
    """Refuse a model string litellm cannot route before anything is started."""
    from infra import llm  # noqa: F401  (sets litellm's offline price list)
    from infra import scripted

    if model.startswith(f"{scripted.PROVIDER}/"):
        try:
            scripted.parse_name(model.split("/", 1)[1])
        except scripted.ScriptedModelError as err:
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


def new_run_id() -> str:
    return datetime.now(timezone.utc).strftime("run-%Y%m%d-%H%M%S-") + secrets.token_hex(2)


def build_config(
    *,
    run_id: str | None,
    domains: list[str],
    task_ids: list[str],
    agent_models: list[str],
    user_model: str,
    trials: int,
    concurrency: int,
    agent_args: str | None,
    user_args: str | None,
    max_steps: int,
    max_errors: int,
    max_attempts: int,
    model_timeout: float = 300.0,
    limit: int | None = None,
    task_file: str | None = None,
) -> RunConfig:
    from domains.base import UnknownDomainError
    from domains.registry import get_domain
    from domains.task_file import TaskFileError, custom_domain_name, split_domain_name

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
    for name, value, low in (("--trials", trials, 1), ("--concurrency", concurrency, 1),
                             ("--max-steps", max_steps, 1), ("--max-errors", max_errors, 1),
                             ("--max-attempts", max_attempts, 1), ("--model-timeout", model_timeout, 1)):
        if value < low:
            raise UserInputError(f"{name} must be at least {low}, got {value}")
    if run_id is not None and not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}", run_id):
        raise UserInputError(
            f"--run-id '{run_id}' must be 1-100 letters, digits, '.', '_' or '-', starting with a letter or digit"
        )
    # Cheap checks first: loading a domain takes seconds.
    parsed_agent_args = parse_json_object(agent_args, "--agent-args")
    parsed_user_args = parse_json_object(user_args, "--user-args")
    for model in agent_models:
        check_model(model, "--agent-model")
    check_model(user_model, "--user-model")
    per_domain: dict[str, list[str]] = {}
    for domain_name in dict.fromkeys(domains):
        try:
            domain = get_domain(domain_name)
        except (UnknownDomainError, TaskFileError) as err:
            raise UserInputError(str(err))
        known = domain.task_ids()
        if task_ids:
            missing = [t for t in task_ids if t not in set(known)]
            if len(domains) == 1 and missing:
                raise UserInputError(
                    f"unknown task id(s) for domain {domain_name}: {', '.join(missing)} "
                    f"(see `passhat tasks {domain_name}`)"
                )
            chosen = [t for t in known if t in set(task_ids)]
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
        max_steps=max_steps,
        max_errors=max_errors,
        retry={"max_attempts": max_attempts, "model_call_timeout_s": model_timeout},
    )


def total_trials(config: RunConfig) -> int:
    return len(config.agent_models) * sum(len(t) for t in config.task_ids.values()) * config.trials


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
    from workflows.run import RunRequest, RunWorkflow

    existed = store.get_run(config.run_id) is not None
    store.create_run(config, total_trials(config))
    try:
        handle = await client.start_workflow(
            RunWorkflow.run,
            RunRequest(config=config),
            id=run_workflow_id(config.run_id),
            task_queue=task_queue,
            id_reuse_policy=WorkflowIDReusePolicy.ALLOW_DUPLICATE
            if resume
            else WorkflowIDReusePolicy.REJECT_DUPLICATE,
            id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
            static_summary=f"passhat run {config.run_id}: {', '.join(config.agent_models)} on {', '.join(config.domains)}, k={config.trials}",
        )
    except WorkflowAlreadyStartedError:  # a closed run with this id: show its result
        return client.get_workflow_handle_for(RunWorkflow.run, run_workflow_id(config.run_id))
    except BaseException:
        if not existed:
            store.delete_run(config.run_id)
        raise
    if resume:
        store.set_run_status(config.run_id, "running")
    return handle


async def follow(
    handle: WorkflowHandle,
    store,  # noqa: ANN001
    run_id: str,
    on_progress: Callable[[int, int, float | None], None],
    poll_s: float = 0.5,
) -> RunSummary:
    """Wait for the run's result, reporting (done, total, running pass^1) as it goes."""
    result = asyncio.ensure_future(handle.result())
    while not result.done():
        on_progress(*store.progress(run_id))
        await asyncio.wait({result}, timeout=poll_s)
    on_progress(*store.progress(run_id))
    try:
        return result.result()
    except WorkflowFailureError as err:
        raise RunEnded(
            f"run {run_id} ended without finishing ({err.cause or err}); "
            f"`passhat resume {run_id}` runs what is missing"
        ) from err


async def cancel_run(client: Client, store, run_id: str, wait_s: float = 15.0) -> str:  # noqa: ANN001
    """Ask the run to stop; its trials stop at their next step and keep what they
    recorded. Without a worker to act on the request, the workflows are terminated."""
    handle = client.get_workflow_handle(run_workflow_id(run_id))
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


async def workflow_status(client: Client, run_id: str) -> str | None:
    try:
        desc = await client.get_workflow_handle(run_workflow_id(run_id)).describe()
    except Exception:
        return None
    status = desc.status
    return status.name.lower() if isinstance(status, WorkflowExecutionStatus) else str(status)

