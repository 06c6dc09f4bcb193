"""Custom task files: a tau2 domain's tools and policy with the user's own tasks, resolved
by name ("airline@/abs/path.json") in any process. Real tau2, real files, no mocks."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from passhat.messages import Message, ToolCall
from passhat.domains.base import UnknownDomainError
from passhat.domains.registry import get_domain, register_domain
from passhat.testing.harness import passhat
from tests.helpers import VALID_TASK
from passhat.domains.task_file import (
    TaskFileError,
    custom_domain_name,
    read_task_list,
    split_domain_name,
    validate_tasks,
)

REPO = Path(__file__).resolve().parents[2]


def tau2_tasks(domain: str) -> dict[str, dict]:
    """tau2's own tasks of `domain` as the JSON a user would copy into a task file."""
    from tau2.registry import registry

    return {
        t.id: t.model_dump(mode="json") for t in registry.get_tasks_loader(domain)()
    }


def write(path: Path, content) -> Path:  # noqa: ANN001
    path.write_text(content if isinstance(content, str) else json.dumps(content))
    return path


@pytest.fixture(scope="module")
def airline_tasks() -> dict[str, dict]:
    return tau2_tasks("airline")


@pytest.fixture
def task_file(tmp_path, airline_tasks) -> Path:
    """Two tasks: airline's task 19 (one cancel_reservation) under the id "0", which
    airline's own task 0 also uses but with no gold actions, and task 5 renamed."""
    return write(
        tmp_path / "my_tasks.json",
        [
            {**airline_tasks["19"], "id": "0"},
            {**airline_tasks["5"], "id": "look-up-user"},
        ],
    )


def conversation(domain, task_id: str, *, with_actions: bool) -> list[Message]:  # noqa: ANN001
    """A conversation that performs the task's gold actions (or not) and stops."""
    task = domain.task(task_id)
    messages = [
        Message(role="assistant", content="Hi! How can I help you today?"),
        Message(role="user", content=task.reason_for_call or "Help me."),
    ]
    for i, action in enumerate(task.gold_actions if with_actions else []):
        call = ToolCall(id=f"c{i}", name=action.name, arguments=action.arguments)
        messages.append(Message(role="assistant", tool_calls=[call]))
        messages.extend(domain.execute(task_id, messages, [call]))
    messages.append(Message(role="assistant", content="Done."))
    messages.append(Message(role="user", content="###STOP###"))
    return messages


def test_a_task_file_domain_has_the_files_tasks_and_the_base_domains_tools(task_file):
    name = custom_domain_name("airline", task_file)
    domain = get_domain(name)
    airline = get_domain("airline")

    assert domain.name == name
    assert domain.task_ids() == ["0", "look-up-user"]  # the file's order
    # The file's task 0, not airline's (which has no gold actions).
    assert [a.name for a in domain.task("0").gold_actions] == ["cancel_reservation"]
    assert airline.task("0").gold_actions == []
    assert domain.agent_tools() == airline.agent_tools()
    assert domain.agent_system_prompt() == airline.agent_system_prompt()

    # Scored by tau2 against the file's task: its gold actions succeed, doing nothing fails.
    done = conversation(domain, "0", with_actions=True)
    assert domain.score("0", done, "user_stop").reward == 1.0
    idle = conversation(domain, "0", with_actions=False)
    assert domain.score("0", idle, "user_stop").reward == 0.0


def test_the_file_is_loaded_once_per_process(task_file):
    name = custom_domain_name("airline", task_file)
    first = get_domain(name)
    task_file.unlink()  # later lookups must not read it again
    assert get_domain(name) is first


def test_another_process_in_another_directory_resolves_the_name(task_file, tmp_path):
    """What a worker does: only the recorded name travels through Temporal."""
    name = custom_domain_name("airline", task_file)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    result = subprocess.run(
        [sys.executable, "-c",
         "import sys; from passhat.domains.registry import get_domain; "
         "print(get_domain(sys.argv[1]).task_ids())", name],
        cwd=elsewhere, capture_output=True, text=True, timeout=120,
        env={**os.environ, "PYTHONPATH": str(REPO), "LITELLM_LOCAL_MODEL_COST_MAP": "True"},
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "['0', 'look-up-user']"


def test_names_record_absolute_paths_and_split_back(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    name = custom_domain_name("retail", "tasks@v2.json")
    assert name == f"retail@{tmp_path}/tasks@v2.json"
    # Only the first "@" separates: a path may contain more.
    assert split_domain_name(name) == ("retail", f"{tmp_path}/tasks@v2.json")
    assert split_domain_name("retail") == ("retail", None)


def test_domain_names_with_the_separator_are_refused():
    with pytest.raises(ValueError, match="cannot contain '@'"):
        register_domain("mine@v1", lambda: get_domain("mock"))


def test_task_files_need_a_tau2_domain(task_file):
    with pytest.raises(UnknownDomainError, match="Unknown domain 'nosuch'"):
        get_domain(f"nosuch@{task_file}")


# Each bad file: (its content, a fragment the message must contain). `TASK` is a valid
# airline task with one gold action; the cases break one thing at a time.
TASK = VALID_TASK


def _with(**changes) -> dict:  # noqa: ANN003
    task = json.loads(json.dumps(TASK))
    task.update(changes)
    return task


def _action(**changes) -> dict:  # noqa: ANN003
    return _with(evaluation_criteria={"actions": [{**TASK["evaluation_criteria"]["actions"][0], **changes}]})


BAD_FILES = [
    pytest.param('[{"id": "t1",\n  oops}]', "is not valid JSON: Expecting property name enclosed in double quotes at line 2, column 3", id="not-json"),
    pytest.param(b"\xff\xfe[]", "is not UTF-8 text", id="not-utf8"),
    pytest.param({"tasks": [TASK]}, "must hold a JSON list of tasks", id="object-not-list"),
    pytest.param([], "holds an empty list", id="empty"),
    pytest.param([TASK, "t2"], "the task at index 1 must be a JSON object, not a JSON string", id="item-not-object"),
    pytest.param([TASK, TASK], "the task at index 1 (id 't1') repeats the id of the task at index 0", id="duplicate-ids"),
    pytest.param([{k: v for k, v in TASK.items() if k != "user_scenario"}], "the task at index 0 (id 't1'): user_scenario: Field required", id="missing-field"),
    pytest.param([_with(id=7)], "the task at index 0: id: Input should be a valid string", id="id-not-string"),
    pytest.param([_with(evaluation_criteria={"actions": "cancel"})], "evaluation_criteria.actions: Input should be a valid list", id="actions-not-list"),
    pytest.param([_action(name="fly_me_home")], "evaluation_criteria.actions.0.name: the airline domain has no agent tool 'fly_me_home'; its agent tools are: book_reservation", id="unknown-tool"),
    pytest.param([_action(requestor="user")], "the action 'get_user_details' is the user's, but the airline domain gives the user no tools", id="user-action-without-user-tools"),
    pytest.param([_action(requestor="robot")], "evaluation_criteria.actions.0.requestor: Input should be 'user' or 'assistant'", id="bad-requestor"),
    # Gold arguments are checked against the tool's JSON schema: the oracle would replay
    # the same wrong call and score 1.0.
    pytest.param([_action(name="get_reservation_details", arguments={"reservation": "EHGLP3"})],
                 "evaluation_criteria.actions.0 (get_reservation_details): argument 'reservation': the tool has no such parameter; its parameters are: reservation_id",
                 id="unknown-argument"),
    pytest.param([_action(arguments={})],
                 "evaluation_criteria.actions.0 (get_user_details): argument 'user_id': the tool requires it, and it is missing",
                 id="missing-argument"),
    pytest.param([_action(arguments={"user_id": 7})],
                 "evaluation_criteria.actions.0 (get_user_details): argument 'user_id': 7 is not of type 'string'",
                 id="wrong-type"),
    pytest.param([_action(name="update_reservation_flights", arguments={
                     "reservation_id": "EHGLP3", "cabin": "economy", "payment_id": "gift_card_1",
                     "flights": "HAT001"})],
                 "evaluation_criteria.actions.0 (update_reservation_flights): argument 'flights': 'HAT001' is not of type 'array'",
                 id="wrong-type-nested-schema"),
]


@pytest.mark.parametrize(("content", "fragment"), BAD_FILES)
def test_broken_task_files_are_refused_naming_file_task_and_field(tmp_path, content, fragment):
    path = tmp_path / "tasks.json"
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        write(path, content)
    with pytest.raises(TaskFileError) as err:
        get_domain(custom_domain_name("airline", path))
    assert str(path) in str(err.value) and fragment in str(err.value)


def test_missing_file_and_directory_are_refused(tmp_path):
    with pytest.raises(TaskFileError, match="does not exist"):
        get_domain(custom_domain_name("airline", tmp_path / "nope.json"))
    with pytest.raises(TaskFileError, match="is a directory"):
        get_domain(custom_domain_name("airline", tmp_path))


def test_user_actions_are_checked_against_the_users_tools(tmp_path):
    """telecom gives the user tools: a user action must name one of those."""
    telecom = tau2_tasks("telecom")
    task = next(t for t in telecom.values()
                if any(a["requestor"] == "user" for a in t["evaluation_criteria"]["actions"] or []))
    good = write(tmp_path / "good.json", [task])
    assert get_domain(custom_domain_name("telecom", good)).task_ids() == [task["id"]]

    broken = json.loads(json.dumps(task))
    action = next(a for a in broken["evaluation_criteria"]["actions"] if a["requestor"] == "user")
    action["name"] = "teleport_phone"
    bad = write(tmp_path / "bad.json", [broken])
    with pytest.raises(TaskFileError, match="the telecom domain has no user tool 'teleport_phone'"):
        get_domain(custom_domain_name("telecom", bad))


def test_reading_and_validating_separately_gives_tau2_tasks(tmp_path):
    path = write(tmp_path / "t.json", [TASK])
    raw = read_task_list(path)
    assert raw == [TASK]
    schema = {"properties": {"user_id": {"type": "string"}}, "required": ["user_id"]}
    [task] = validate_tasks(path, raw, domain="airline", agent_tools={"get_user_details": schema}, user_tools=None)
    assert task.id == "t1" and task.evaluation_criteria.actions[0].name == "get_user_details"


def test_cli_runs_a_task_file_with_a_relative_path(temporal_server, tmp_path, task_file):
    env = {**os.environ, "TEMPORAL_ADDRESS": temporal_server.address,
           "PASSHAT_HOME": str(tmp_path / "home"), "LITELLM_LOCAL_MODEL_COST_MAP": "True",
           "PYTHONPATH": str(REPO)}
    env.pop("PASSHAT_DB_URL", None)
    result = passhat(
        "run", "--domain", "airline", "--task-file", task_file.name,
        "--agent-model", "scripted/oracle", "--user-model", "scripted/oracle",
        "--run-id", "custom-tasks", "--output", "json", env=env, cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr
    [row] = json.loads(result.stdout)["results"]
    # Recorded with the absolute path, so a worker anywhere finds the file.
    assert row["domain"] == f"airline@{task_file}"
    assert (row["tasks"], row["evaluable"], row["avg_reward"]) == (2, 2, 1.0)

    listing = passhat("tasks", f"airline@{task_file}", env=env)
    assert listing.returncode == 0, listing.stderr
    assert [line.split("\t")[0] for line in listing.stdout.splitlines()] == ["0", "look-up-user"]


def test_a_run_keeps_its_tasks_when_the_file_changes_or_moves(temporal_server, tmp_path, task_file):
    """The run keeps a copy of the file's tasks: attaching to it (run --run-id, resume)
    with an edited file is refused in one line naming the tasks that differ, nothing
    recorded is lost, and export writes the tasks the run played, even once the file
    has moved."""
    from passhat.infra.store import Store
    from tests.helpers import one_error_line

    env = {**os.environ, "TEMPORAL_ADDRESS": temporal_server.address,
           "PASSHAT_HOME": str(tmp_path / "home"), "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    env.pop("PASSHAT_DB_URL", None)
    run = ("run", "--domain", "airline", "--task-file", str(task_file), "--agent-model", "scripted/oracle",
           "--user-model", "scripted/oracle", "--run-id", "kept-tasks", "--output", "json")
    first = passhat(*run, env=env)
    assert first.returncode == 0, first.stderr
    played = json.loads(task_file.read_text())
    store = Store(f"sqlite:///{tmp_path / 'home' / 'results.db'}")
    recorded = [(t.trial_id, t.status, t.reward) for t in store.trials("kept-tasks")]

    def exported_tasks(out: str) -> list[dict]:
        result = passhat("export", "kept-tasks", "--format", "tau2", "--output-dir", str(tmp_path / out), env=env)
        assert result.returncode == 0, result.stderr
        return json.loads(Path(result.stdout.strip()).read_text())["tasks"]

    expected = exported_tasks("before")
    assert [t["id"] for t in expected] == ["0", "look-up-user"]

    # Reformatting the file changes no task: the run attaches.
    write(task_file, json.dumps(played, indent=4, sort_keys=True))
    assert passhat(*run, env=env).returncode == 0

    # Editing a task's gold action and adding a task: refused, naming both.
    edited = json.loads(json.dumps(played))
    edited[0]["evaluation_criteria"]["actions"][0]["arguments"]["reservation_id"] = "XXXXXX"
    write(task_file, edited + [{**edited[1], "id": "new-one"}])
    for attach in (run, ("resume", "kept-tasks")):
        line = one_error_line(passhat(*attach, env=env))
        assert f"task file {task_file} changed since run kept-tasks recorded its tasks" in line
        assert "(tasks that differ: 0 (changed), new-one (added))" in line
    assert [(t.trial_id, t.status, t.reward) for t in store.trials("kept-tasks")] == recorded

    # Export writes the tasks the run played, not the edited ones, and needs no file.
    assert exported_tasks("edited") == expected
    task_file.rename(tmp_path / "moved.json")
    assert exported_tasks("moved") == expected
    store.close()
