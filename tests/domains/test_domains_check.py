"""`passhat domains check`: the example domain passes, the built-in domains are checked
on a subset (the full check of every task is slow: its findings are in the issue's
closing note), a mistake planted in a task is found, and the plugin domain written to
tau2's contract runs with a tool that raises answered as tau2 answers it."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from passhat.domains.tau2_version import installed_family
from passhat.testing.harness import passhat
from tests.helpers import PLUGIN_MODULES

ROOT = Path(__file__).parents[2]
EXAMPLES = ROOT / "examples"


@pytest.fixture
def env(tmp_path):
    e = dict(os.environ, PASSHAT_HOME=str(tmp_path / "home"), LITELLM_LOCAL_MODEL_COST_MAP="True",
             PYTHONPATH=f"{EXAMPLES}{os.pathsep}{PLUGIN_MODULES}")
    return e


def check(env: dict, *args: str) -> subprocess.CompletedProcess:
    return passhat("domains", "check", *args, env=env, timeout=900)


def test_the_example_domain_passes_its_check(env):
    result = check(env, "pharmacy", "--plugin", "pharmacy")
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.strip().splitlines()[-1] == "pharmacy: 5 task(s) checked, 0 with findings (0 in all)"


@pytest.mark.parametrize("domain, tasks, findings", [
    # Tasks 0 and 1 change nothing (the agent must refuse): an agent that does nothing
    # and says nothing scores 1.0 on them. So does task 2 on tau2 1.0.x, whose gold
    # actions lost 26.3's send_certificate (its user must not be offered one there).
    ("airline", ["0", "1", "2"], [
        f"airline\t{task}\tevaluation_criteria: still scores 1.0 when the agent communicates nothing"
        for task in {"26.3": ["0", "1"], "1.0": ["0", "1", "2"]}[installed_family()]
    ]),
    ("retail", ["0", "1"], None),
    ("telecom", None, None),
    ("mock", ["create_task_1", "create_task_1_nl_eval", "update_task_with_history_and_env_assertions"], [
        "mock\tcreate_task_1_nl_eval\tevaluation_criteria: still scores 1.0 when the agent communicates nothing",
        "mock\tupdate_task_with_history_and_env_assertions\tevaluation_criteria.actions: its gold actions score 0, not 1.0",
    ]),
])
def test_the_built_in_domains_are_checked(env, domain, tasks, findings):
    if tasks is None:  # telecom's ids are long: its first two
        listed = passhat("tasks", domain, env=env, timeout=300)
        tasks = [line.split("\t")[0] for line in listed.stdout.splitlines()[:2]]
    result = check(env, domain, *(a for t in tasks for a in ("--task", t)))
    lines = result.stdout.strip().splitlines()
    assert lines[-1].startswith(f"{domain}: {len(tasks)} task(s) checked"), result.stdout + result.stderr
    assert lines[:-1] == (findings or []), result.stdout
    assert result.returncode == (1 if findings else 0)


def test_a_planted_mistake_is_found(env, tmp_path):
    tasks = json.loads((EXAMPLES / "pharmacy" / "tasks.json").read_text())
    typo = tasks[0]
    typo["evaluation_criteria"]["actions"][-1]["arguments"]["store_id"] = "s9"  # no such store
    unguarded = tasks[2]  # read-only, and nothing to communicate any more
    unguarded["evaluation_criteria"]["communicate_info"] = []
    unguarded["evaluation_criteria"]["reward_basis"] = ["DB"]
    path = tmp_path / "tasks.json"
    path.write_text(json.dumps([typo, unguarded]))
    result = check(env, f"pharmacy@{path}", "--plugin", "pharmacy")
    assert result.returncode == 1, result.stdout + result.stderr
    assert f"\t{typo['id']}\tevaluation_criteria.actions.2: still scores 1.0 without its last state-changing gold action (request_refill)" in result.stdout
    assert f"\t{unguarded['id']}\tevaluation_criteria: still scores 1.0 when the agent communicates nothing" in result.stdout


def test_a_domain_whose_environment_fails_to_build_is_one_line(env):
    result = passhat("tasks", "unbuildable", "--plugin", "unbuildable_domain", env=env, timeout=300)
    assert result.returncode == 2, result.stdout + result.stderr
    assert result.stderr.strip() == ("error: domain unbuildable failed to load (its environment or tasks): "
                                     "FileNotFoundError: db.json: no such file")


def test_the_domain_list_names_a_domain_that_cannot_load_and_goes_on(env):
    # (tau2 1.0.x's banking_knowledge needs rank_bm25, which its base install lacks)
    result = passhat("domains", "--plugin", "unbuildable_domain", env=env, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "unbuildable\tcannot load\tFileNotFoundError: db.json: no such file\n" in result.stdout
    assert "airline\t50 tasks\n" in result.stdout


def test_a_tool_that_raises_answers_with_an_error_tool_message(env):
    script = (
        "import pharmacy\n"
        "from passhat.messages import ToolCall\n"
        "from passhat.domains.registry import get_domain\n"
        "d = get_domain('pharmacy')\n"
        "[m] = d.execute('controlled_refused', [], [ToolCall(id='c1', name='request_refill',"
        " arguments={'rx_id': 'rx2', 'store_id': 's1'})])\n"
        "print(m.error, m.content)\n"
    )
    import sys

    out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300)
    assert out.stdout.strip() == "True Error: Controlled substances cannot be refilled here", out.stderr


def test_communicate_info_that_any_reply_meets_is_a_finding(env, tmp_path):
    """tau2's COMMUNICATE check looks for each string in the agent's messages: one common
    word ("already", "address", "pending") is met by replies that name no task data, so
    the check passes by chance. Each is a finding that names the rule; the task's own
    strings (its data) are not."""
    tasks = json.loads((EXAMPLES / "pharmacy" / "tasks.json").read_text())
    task = next(t for t in tasks if t["evaluation_criteria"]["communicate_info"])
    own = list(task["evaluation_criteria"]["communicate_info"])
    task["evaluation_criteria"]["communicate_info"] = [*own, "already", "Address", "pending"]
    path = tmp_path / "tasks.json"
    path.write_text(json.dumps([task]))
    result = check(env, f"pharmacy@{path}", "--plugin", "pharmacy")
    assert result.returncode == 1, result.stdout + result.stderr
    findings = [line.split("\t")[2] for line in result.stdout.strip().splitlines()[:-1]]
    assert findings == [
        f"evaluation_criteria.communicate_info.{n}: {word!r} is met by chance: tau2 looks for it in the agent's messages "
        f"(any case), and a reply naming no task data already has it ({reply!r}); "
        "name the task's data (an amount, an id, a date) instead"
        for n, word, reply in (
            (len(own), "already", "I have already checked: your request is pending and will be processed shortly."),
            (len(own) + 1, "Address", "Could you confirm your name, your user id or the email address on the account?"),
            (len(own) + 2, "pending", "I have already checked: your request is pending and will be processed shortly."),
        )], result.stdout


# A plugin of a team's own, as a team writes one: a package that reads its tasks from
# the tasks.json beside it and validates them itself (pharmacy's tools and data).
OWN_PLUGIN = '''
import json
from pathlib import Path
from tau2.data_model.tasks import Task
from tau2.registry import registry
import pharmacy

def get_tasks(task_split_name=None):
    return [Task.model_validate(t) for t in json.loads((Path(__file__).parent / "tasks.json").read_text())]

registry.register_domain(pharmacy.get_environment, "library")
registry.register_tasks(get_tasks, "library")
'''


def _own_tasks(cut):  # noqa: ANN001, ANN202 - a function that breaks the example's task list
    tasks = json.loads((EXAMPLES / "pharmacy" / "tasks.json").read_text())
    return cut(tasks) or tasks


def _set(path: str, value):  # noqa: ANN001, ANN202
    def cut(tasks):  # noqa: ANN001, ANN202
        *keys, last = path.split("/")
        target = tasks
        for key in keys:
            target = target[int(key) if key.isdigit() else key]
        if value is None:
            del target[last]
        else:
            target[int(last) if last.isdigit() else last] = value
    return cut


@pytest.mark.parametrize("tasks, code, line", [
    # Structural mistakes are findings (exit 1) naming the task and the field, not what
    # playing the broken task leads to ("still scores 1.0 without ... (extend_pickup)").
    pytest.param(_own_tasks(_set("1/evaluation_criteria/actions/3/name", "extend_pickup")), 1,
                 "library\trefill_then_move\tevaluation_criteria.actions.3.name: the library domain has no "
                 "agent tool 'extend_pickup'; its agent tools are: change_pickup_store, find_patient, "
                 "get_prescription, list_stores, request_refill, transfer_to_pharmacist", id="unknown-tool"),
    pytest.param(_own_tasks(_set("0/evaluation_criteria/actions/2/arguments", {"rx": "rx1", "store_id": "s1"})), 1,
                 "library\trefill_main_street\tevaluation_criteria.actions.2 (request_refill): argument 'rx': "
                 "the tool has no such parameter; its parameters are: rx_id, store_id", id="wrong-argument-name"),
    # Mistakes that keep the tasks from loading are one error line (exit 2), as for a task file.
    pytest.param(_own_tasks(_set("1/id", "refill_main_street")), 2,
                 "error: domain library failed to load (its environment or tasks): the task at index 1 "
                 "(id 'refill_main_street') repeats the id of the task at index 0; task ids must be unique "
                 "(one of them would silently be lost)", id="duplicate-id"),
    pytest.param(_own_tasks(_set("2/user_scenario", None)), 2,
                 "error: domain library failed to load (its environment or tasks): task file {tasks}: the task "
                 "at index 2 (id 'controlled_refused'): user_scenario: Field required", id="missing-user-scenario"),
    pytest.param('[{"id": "a",\n  "user_scenario": }]', 2,
                 "error: domain library failed to load (its environment or tasks): {tasks} is not valid JSON: "
                 "Expecting value at line 2, column 20", id="json-error"),
])
def test_a_plugins_own_tasks_are_held_to_what_a_task_file_is(env, tmp_path, tasks, code, line):
    plugin = tmp_path / "plugins" / "library"
    plugin.mkdir(parents=True)
    (plugin / "__init__.py").write_text(OWN_PLUGIN)
    path = plugin / "tasks.json"
    path.write_text(tasks if isinstance(tasks, str) else json.dumps(tasks, indent=1))
    env = {**env, "PYTHONPATH": f"{tmp_path / 'plugins'}{os.pathsep}{env['PYTHONPATH']}"}
    result = check(env, "library", "--plugin", "library")
    assert result.returncode == code, result.stdout + result.stderr
    shown = result.stdout if code == 1 else result.stderr
    assert line.format(tasks=path) in shown.splitlines(), shown
