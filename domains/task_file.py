"""Custom task files: a tau2 domain's tools, policy and database with the user's own tasks.

A task file is a JSON list of tasks in tau2's format (the shape of tau2's tasks.json).
A run records such a domain by name as "airline@/absolute/path/tasks.json": the name is
all that travels through Temporal, so any worker process, wherever it runs, resolves it
through domains.registry.get_domain and loads the same file. The path is made absolute
before it is recorded because workers need not share the CLI's working directory.

Validation happens once per process, when the domain is first resolved; the CLI resolves
it before starting anything, so a broken file is refused with a message that names the
file, the task and the field, and no run is created.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from passhat.domains.input_files import first_problem, read_text
from passhat.run_identity import tasks_digest

SEPARATOR = "@"


class TaskFileError(ValueError):
    """A task file that cannot be used; the message says where and why."""


def custom_domain_name(domain: str, path: str | Path) -> str:
    """The registry name of `domain` with the tasks of the file at `path`."""
    return f"{domain}{SEPARATOR}{Path(path).expanduser().absolute()}"


def split_domain_name(name: str) -> tuple[str, str | None]:
    """("airline", "/path/tasks.json") for "airline@/path/tasks.json"; (name, None) for a
    plain name. Domain names never contain the separator, so a path may."""
    base, sep, path = name.partition(SEPARATOR)
    return (base, path) if sep else (name, None)


def read_task_list(path: str | Path) -> list[Any]:
    """The file's JSON list of tasks, unvalidated. Cheap (no tau2), so a missing or
    malformed file is refused before the domain's data loads."""
    where = f"task file {Path(path)}"
    text = read_text(path, where, error=TaskFileError, on_directory="is a directory, not a JSON file")
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as err:
        raise TaskFileError(
            f"{where} is not valid JSON: {err.msg.removesuffix(' at')} at line {err.lineno}, column {err.colno}"
        ) from None
    if not isinstance(raw, list):
        raise TaskFileError(
            f"{where} must hold a JSON list of tasks (the format of tau2's tasks.json), "
            f"not a JSON {_json_type(raw)}"
        )
    if not raw:
        raise TaskFileError(f"{where} holds an empty list: give at least one task")
    return raw


def validate_tasks(
    path: str | Path,
    raw: list[Any],
    *,
    domain: str,
    agent_tools: dict[str, dict[str, Any]],
    user_tools: dict[str, dict[str, Any]] | None,
) -> list[Any]:
    """`raw` (from read_task_list) as tau2 Task models, or TaskFileError.

    The tools are the domain's, by name, each with the JSON schema of its parameters.
    Gold actions must name tools the domain has (the assistant's or, for actions the
    user performs, the user's) and give them arguments their schema accepts: a typo
    there would otherwise surface only as every trial scoring 0, or worse, as an
    oracle that replays the same wrong call and scores 1.
    """
    where = f"task file {path}"
    tasks = parse_tasks(where, raw)
    for index, task in enumerate(tasks):
        actions = task.evaluation_criteria.actions if task.evaluation_criteria else None
        for field, problem in gold_action_problems(actions or [], domain, agent_tools, user_tools):
            raise TaskFileError(f"{where}: {_task_label(index, raw[index])}: {field}: {problem}")
    return tasks


def parse_tasks(where: str, raw: list[Any]) -> list[Any]:
    """`raw` as tau2 Task models, each a JSON object of tau2's task format with an id of
    its own; else TaskFileError naming `where`, the task and the field."""
    from pydantic import ValidationError
    from tau2.data_model.tasks import Task

    tasks: list[Any] = []
    first_index: dict[str, int] = {}
    for index, item in enumerate(raw):
        label = _task_label(index, item)
        if not isinstance(item, dict):
            raise TaskFileError(
                f"{where}: {label} must be a JSON object, not a JSON {_json_type(item)}"
            )
        try:
            task = Task.model_validate(item)
        except ValidationError as err:
            raise TaskFileError(f"{where}: {label}: {first_problem(err, '(the task)')}") from None
        if task.id in first_index:
            raise TaskFileError(
                f"{where}: {label} repeats the id of the task at index "
                f"{first_index[task.id]}; task ids must be unique"
            )
        first_index[task.id] = index
        tasks.append(task)
    return tasks


def gold_action_problems(
    actions: list[Any],
    domain: str,
    agent_tools: dict[str, dict[str, Any]],
    user_tools: dict[str, dict[str, Any]] | None,
) -> list[tuple[str, str]]:
    """What is wrong with a task's gold actions (each with `name`, `arguments` and
    `requestor`, as tau2's and passhat's are) for the domain's tools, as (field, problem):
    a tool the requestor does not have, or arguments its JSON schema refuses."""
    problems = []
    for n, action in enumerate(actions):
        field = f"evaluation_criteria.actions.{n}.name"
        if action.requestor == "user":
            if user_tools is None:
                problems.append((field, f"the action {action.name!r} is the user's, "
                                        f"but the {domain} domain gives the user no tools"))
                continue
            known, whose = user_tools, "user"
        else:
            known, whose = agent_tools, "agent"
        if action.name not in known:
            problems.append((field, f"the {domain} domain has no {whose} tool {action.name!r}; "
                                    f"its {whose} tools are: {', '.join(sorted(known))}"))
            continue
        problem = argument_problem(action.arguments, known[action.name])
        if problem:
            problems.append((f"evaluation_criteria.actions.{n} ({action.name})", problem))
    return problems


def tool_schemas(tools: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Each tool's JSON schema of its parameters, by the tool's name (from OpenAI
    function-tool schemas, as Domain.agent_tools gives them)."""
    return {t["function"]["name"]: t["function"].get("parameters", {}) for t in tools}


def argument_problem(arguments: dict[str, Any], schema: dict[str, Any]) -> str | None:
    """What is wrong with a tool call's arguments for a tool whose parameters have JSON
    schema `schema`, naming the argument; None when they fit. tau2's schemas allow
    parameters they do not list, so unknown ones are looked for here."""
    from jsonschema import Draft202012Validator
    from jsonschema.exceptions import best_match

    params = schema.get("properties", {})
    listed = ", ".join(params) or "none"
    for name in arguments:
        if name not in params:
            return f"argument {name!r}: the tool has no such parameter; its parameters are: {listed}"
    for name in schema.get("required", []):
        if name not in arguments:
            return f"argument {name!r}: the tool requires it, and it is missing"
    error = best_match(Draft202012Validator(schema).iter_errors(arguments))
    if error is None:
        return None
    path = ".".join(str(p) for p in error.absolute_path)
    return f"argument {path!r}: {' '.join(error.message.split())[:200]}"


def _task_label(index: int, item: Any) -> str:
    task_id = item.get("id") if isinstance(item, dict) else None
    if isinstance(task_id, str):
        return f"the task at index {index} (id {task_id!r})"
    return f"the task at index {index}"


def _json_type(value: Any) -> str:
    return {
        dict: "object", list: "list", str: "string", bool: "boolean",
        int: "number", float: "number", type(None): "null",
    }.get(type(value), type(value).__name__)


def task_files_now(domains: list[str]) -> dict[str, tuple[str, list[Any]]]:
    """The tasks each task file of a run's domains holds now, with their digest
    (run_identity.tasks_digest), by domain name: what a run keeps when it is recorded,
    and what run_identity compares with what it kept when it is attached to."""
    current: dict[str, tuple[str, list[Any]]] = {}
    for domain in domains:
        path = split_domain_name(domain)[1]
        if path is not None:
            tasks = read_task_list(path)
            current[domain] = (tasks_digest(tasks), tasks)
    return current
