"""Why a domain of tau2's registry did not load its tasks, in one line that names the
file, the task and the field, as a task file's mistakes are named (domains/task_file.py).

A plugin reads its own files and validates its own tasks (`Task.model_validate` in its
task loader), so what reaches passhat is a bare exception: a JSONDecodeError knows the
line and column but not the file, and pydantic's ValidationError knows the field but
not which task of the list. Both are explained here from the plugin's own folder (the
folders of the modules that define the domain's environment and task loader):

- a JSON error names the file there whose text is the document the parser failed on;
- a task that does not validate is found by checking the JSON task lists there as task
  files are checked; the file whose first problem is the one the plugin hit is named,
  with the task's index, id and field. When no file there holds it, the task's id is
  named when pydantic shows it (a missing field).

Task ids must be unique: the tasks are kept by id, so a second task with the same id
would silently replace the first.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from passhat.domains.input_files import first_problem
from passhat.domains.plugins import last_line
from passhat.domains.task_file import TaskFileError, parse_tasks

# Bounds on the look through a plugin's folder (it runs only when loading failed): a
# single-file plugin may sit in a folder as large as site-packages.
MAX_DEPTH = 2  # the folder and two levels of subfolders
MAX_FOLDERS = 300
MAX_FILE_BYTES = 50_000_000


class TaskListError(ValueError):
    """A domain's task list that cannot be used as it is (its message is the reason)."""


def check_unique_ids(tasks: list[Any]) -> None:
    """TaskListError naming the first id two tasks share, with both indexes."""
    first: dict[str, int] = {}
    for index, task in enumerate(tasks):
        if task.id in first:
            raise TaskListError(
                f"the task at index {index} (id {task.id!r}) repeats the id of the task at index "
                f"{first[task.id]}; task ids must be unique (one of them would silently be lost)")
        first[task.id] = index


def load_failure(name: str, err: BaseException) -> str:
    """One line saying why domain `name` failed to load, naming the file, the task and
    the field where they can be found."""
    from pydantic import ValidationError

    if isinstance(err, TaskListError):
        return str(err)
    if isinstance(err, json.JSONDecodeError):
        path = next((p for p, text in _json_files(name) if text == err.doc), None)
        where = str(path) if path is not None else "a JSON file it reads (not found beside its module)"
        return f"{where} is not valid JSON: {err.msg.removesuffix(' at')} at line {err.lineno}, column {err.colno}"
    if isinstance(err, ValidationError) and err.title == "Task":
        return _task_problem(name, err)
    if isinstance(err, ValidationError):
        return f"{err.title}: {first_problem(err)}"
    return last_line(err)


def _task_problem(name: str, err: Any) -> str:
    """The invalid task: in the JSON task list beside the plugin whose first problem is
    the one the plugin's loader hit, else as pydantic shows it."""
    problem = first_problem(err, "(the task)").split(" (and ", 1)[0]
    for path, text in _json_files(name):
        try:
            raw = json.loads(text)
        except ValueError:
            continue
        if not (isinstance(raw, list) and raw and all(isinstance(t, dict) for t in raw)):
            continue
        try:
            parse_tasks(f"task file {path}", raw)
        except TaskFileError as found:
            if problem in str(found):
                return str(found)
    first = err.errors(include_url=False)[0]
    task = first.get("input") if len(first["loc"]) == 1 else None
    task_id = task.get("id") if isinstance(task, dict) else None
    return f"a task{f' (id {task_id!r})' if isinstance(task_id, str) else ''}: {first_problem(err, '(the task)')}"


def _json_files(name: str) -> list[tuple[Path, str]]:
    """(path, text) of the JSON files in the folders of the modules that define the
    domain's environment and task loader (and below them), in path order."""
    from tau2.registry import registry

    folders = []
    for get in (registry.get_env_constructor, registry.get_tasks_loader):
        try:
            module = sys.modules.get(getattr(get(name), "__module__", ""))
        except Exception:  # noqa: BLE001 - a domain without one: nothing to look at
            continue
        file = getattr(module, "__file__", None)
        if file and Path(file).parent not in folders:
            folders.append(Path(file).parent)
    out: list[tuple[Path, str]] = []
    for path in sorted({p for folder in folders for p in _walk(folder)}):
        try:
            if path.stat().st_size <= MAX_FILE_BYTES:
                out.append((path, path.read_text(encoding="utf-8")))
        except (OSError, UnicodeDecodeError):
            continue
    return out


def _walk(folder: Path) -> list[Path]:
    """The JSON files in `folder` and its subfolders, within the bounds above."""
    import os

    found: list[Path] = []
    visited = 0
    for root, dirs, files in os.walk(folder):
        visited += 1
        depth = len(Path(root).relative_to(folder).parts)
        dirs[:] = [] if depth >= MAX_DEPTH else sorted(d for d in dirs if not d.startswith((".", "__")))
        found += [Path(root) / f for f in files if f.endswith(".json")]
        if visited >= MAX_FOLDERS:
            break
    return found
