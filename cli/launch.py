"""Validating a run request, starting (or attaching to) its workflow, running the worker
in-process, and following progress. The typer commands in cli.main stay thin."""

from __future__ import annotations

import asyncio
import json
import re
import secrets
from datetime import datetime, timezone
from typing import Any, Callable

from temporalio.client import Client, WorkflowExecutionStatus, WorkflowHandle
from temporalio.common import WorkflowIDReusePolicy
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
    limit: int | None = None,
) -> RunConfig:
    from domains.base import UnknownDomainError
    from domains.registry import get_domain

    if not domains:
        raise UserInputError("give at least one --domain (see `passhat domains`)")
    if not agent_models:
        raise UserInputError("give at least one --agent-model")
    for name, value, low in (("--trials", trials, 1), ("--concurrency", concurrency, 1),
                             ("--max-steps", max_steps, 1), ("--max-errors", max_errors, 1),
                             ("--max-attempts", max_attempts, 1)):
        if value < low:
            raise UserInputError(f"{name} must be at least {low}, got {value}")
    if run_id is not None and not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}", run_id):
        raise UserInputError(
            f"--run-id '{run_id}' must be 1-100 letters, digits, '.', '_' or '-', starting with a letter or digit"
        )
    for model in agent_models:
        check_model(model, "--agent-model")
    check_model(user_model, "--user-model")
    per_domain: dict[str, list[str]] = {}
    for domain_name in dict.fromkeys(domains):
        try:
            domain = get_domain(domain_name)
        except UnknownDomainError as err:
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
        agent_args=parse_json_object(agent_args, "--agent-args"),
        user_args=parse_json_object(user_args, "--user-args"),
        max_steps=max_steps,
        max_errors=max_errors,
        retry={"max_attempts": max_attempts},
    )


def total_trials(config: RunConfig) -> int:
    return len(config.agent_models) * sum(len(t) for t in config.task_ids.values()) * config.trials


async def start_run(
    client: Client, store, config: RunConfig, task_queue: str = TASK_QUEUE  # noqa: ANN001
) -> WorkflowHandle:
    """Start the run's workflow, or attach to it when a run with this id exists.
    A run id reused with a different configuration is refused by the store. If the
    workflow cannot be started, the run record this call created is removed again."""
    from workflows.run import RunRequest, RunWorkflow

    existed = store.get_run(config.run_id) is not None
    store.create_run(config, total_trials(config))
    try:
        return await client.start_workflow(
            RunWorkflow.run,
            RunRequest(config=config),
            id=run_workflow_id(config.run_id),
            task_queue=task_queue,
            id_reuse_policy=WorkflowIDReusePolicy.REJECT_DUPLICATE,
            static_summary=f"passhat run {config.run_id}: {', '.join(config.agent_models)} on {', '.join(config.domains)}, k={config.trials}",
        )
    except WorkflowAlreadyStartedError:
        return client.get_workflow_handle_for(RunWorkflow.run, run_workflow_id(config.run_id))
    except BaseException:
        if not existed:
            store.delete_run(config.run_id)
        raise


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
    return result.result()


async def workflow_status(client: Client, run_id: str) -> str | None:
    try:
        desc = await client.get_workflow_handle(run_workflow_id(run_id)).describe()
    except Exception:
        return None
    status = desc.status
    return status.name.lower() if isinstance(status, WorkflowExecutionStatus) else str(status)

