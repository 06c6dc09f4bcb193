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
    # and says nothing scores 1.0 on them.
    ("airline", ["0", "1", "2"], [
        "airline\t0\tstill scores 1.0 when the agent communicates nothing",
        "airline\t1\tstill scores 1.0 when the agent communicates nothing",
    ]),
    ("retail", ["0", "1"], None),
    ("telecom", None, None),
    ("mock", ["create_task_1", "create_task_1_nl_eval", "update_task_with_history_and_env_assertions"], [
        "mock\tcreate_task_1_nl_eval\tstill scores 1.0 when the agent communicates nothing",
        "mock\tupdate_task_with_history_and_env_assertions\tits gold actions score 0, not 1.0",
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
    assert f"\t{typo['id']}\tstill scores 1.0 without its last state-changing gold action (request_refill)" in result.stdout
    assert f"\t{unguarded['id']}\tstill scores 1.0 when the agent communicates nothing" in result.stdout


def test_a_domain_whose_environment_fails_to_build_is_one_line(env):
    result = passhat("tasks", "unbuildable", "--plugin", "unbuildable_domain", env=env, timeout=300)
    assert result.returncode == 2, result.stdout + result.stderr
    assert result.stderr.strip() == ("error: domain unbuildable failed to load (its environment or tasks): "
                                     "FileNotFoundError: db.json: no such file")


def test_a_tool_that_raises_answers_with_an_error_tool_message(env):
    script = (
        "import pharmacy\n"
        "from passhat.contracts import ToolCall\n"
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
        f"communicate_info {word!r} is met by chance: tau2 looks for it in the agent's messages "
        f"(any case), and a reply naming no task data already has it ({reply!r}); "
        "name the task's data (an amount, an id, a date) instead"
        for word, reply in (
            ("already", "I have already checked: your request is pending and will be processed shortly."),
            ("Address", "Could you confirm your name, your user id or the email address on the account?"),
            ("pending", "I have already checked: your request is pending and will be processed shortly."),
        )], result.stdout
