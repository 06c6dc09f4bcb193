"""tau2's task sets and splits: every task set of tau2's registry runs, with `tau2 run`'s
--task-set-name, --task-split-name and --num-tasks (flags and sweep-file keys), the
tasks chosen exactly as tau2 chooses them; `passhat domains` lists the task sets and
`passhat tasks NAME` lists a task set's tasks. telecom-workflow (tau2's telecom with its
workflow policy) is a domain of its own."""

from __future__ import annotations

import json

import pytest

from passhat.cli import sweep_config
from passhat.cli.run_config import build_config
from passhat.cli.run_options import RunOptions, UserInputError
from passhat.domains.registry import get_domain
from passhat.domains.task_sets import split_variant, variant_name
from passhat.testing.harness import Passhat, stopping_workers

ORACLE = dict(agent_models=["scripted/oracle"], user_model="scripted/oracle")


def tau2_ids(task_set: str, split: str | None) -> list[str]:
    from tau2.registry import registry

    loader = registry.get_tasks_loader(task_set)
    return [t.id for t in (loader() if split is None else loader(task_split_name=split))]


@pytest.mark.parametrize("domain,task_set,split,name", [
    ("telecom", "telecom_full", None, "telecom:telecom_full"),
    ("telecom-workflow", "telecom_small", None, "telecom-workflow:telecom_small"),
    ("airline", None, "test", "airline:airline/test"),
    ("telecom", "telecom", "train", "telecom:telecom/train"),
])
def test_a_task_set_and_split_hold_the_tasks_tau2_loads(domain, task_set, split, name):
    assert variant_name(domain, task_set, split) == name
    assert split_variant(name) == (domain, task_set or domain, split)
    d = get_domain(name)
    assert d.task_ids() == tau2_ids(task_set or domain, split)
    assert d.agent_tools() == get_domain(domain).agent_tools()  # the domain's own tools
    assert d.policy() == get_domain(domain).policy()


def test_telecom_workflow_is_telecom_with_the_workflow_policy():
    workflow, manual = get_domain("telecom-workflow"), get_domain("telecom")
    assert workflow.task_ids() == manual.task_ids()
    assert workflow.policy() != manual.policy() and "workflow" in workflow.policy().lower()


def test_options_choose_the_tasks_as_tau2_run_does():
    config = build_config(RunOptions(domains=["telecom"], task_set_name="telecom_small", num_tasks=3, **ORACLE))
    assert config.domains == ["telecom:telecom_small"]
    assert config.task_ids["telecom:telecom_small"] == tau2_ids("telecom_small", None)[:3]
    # --num-tasks applies after --task, as in tau2 run.
    wanted = tau2_ids("airline", "test")[5:9]
    config = build_config(RunOptions(domains=["airline"], task_split_name="test", task_ids=wanted,
                                     num_tasks=2, **ORACLE))
    assert config.task_ids == {"airline:airline/test": wanted[:2]}
    # A split changes the run's identity; the domain's default is the plain domain.
    plain = build_config(RunOptions(domains=["airline"], task_ids=["0"], **ORACLE))
    assert plain.domains == ["airline"]


def test_a_sweep_file_takes_the_task_set_keys(tmp_path):
    path = tmp_path / "sweep.toml"
    path.write_text('domains = ["telecom"]\ntask_set_name = "telecom_small"\ntask_split_name = "small"\n'
                    'num_tasks = 2\n[user]\nmodel = "scripted/oracle"\n[[agents]]\nmodel = "scripted/oracle"\n')
    sweep = sweep_config.load(str(path))
    assert (sweep.values["task_set_name"], sweep.values["task_split_name"], sweep.values["num_tasks"]) == (
        "telecom_small", "small", 2)
    with pytest.raises(UserInputError, match="task set telecom_small has no splits: leave out --task-split-name"):
        build_config(sweep_config.merge(sweep, RunOptions(), set()))


@pytest.mark.parametrize("options,message", [
    (dict(domains=["telecom"], task_set_name="telecom_huge"), "tau2's registry has no task set 'telecom_huge'; task sets: mock, airline"),
    (dict(domains=["airline"], task_split_name="nope"), "task set airline has no split 'nope'; its splits: train, test, base"),
    (dict(domains=["telecom", "airline"], task_set_name="telecom_full"), "give exactly one --domain with it"),
    (dict(domains=["airline"], task_set_name="airline", task_file="x.json"), "give one or the other"),
    (dict(domains=["airline"], num_tasks=0), "--num-tasks must be at least 1, got 0"),
])
def test_bad_task_set_options_are_one_line(options, message):
    with pytest.raises(UserInputError) as err:
        build_config(RunOptions(**{**ORACLE, **options}))
    assert message in str(err.value)
    assert "\n" not in str(err.value)


@pytest.fixture
def ph(temporal_server, tmp_path):
    yield from stopping_workers(Passhat(tmp_path / "home", temporal_server.address))


def test_listed_and_run_through_the_command(ph):
    listed = ph.cli("domains")
    assert listed.returncode == 0, listed.stderr
    lines = listed.stdout.splitlines()
    assert "telecom-workflow\t114 tasks" in lines
    assert f"telecom_small\t{len(tau2_ids('telecom_small', None))} tasks\ttask set (--task-set-name telecom_small)" in lines
    assert "telecom_full\t2285 tasks\ttask set (--task-set-name telecom_full)" in lines
    tasks = ph.cli("tasks", "telecom_small")
    assert [line.split("\t")[0] for line in tasks.stdout.splitlines()] == tau2_ids("telecom_small", None)
    run = ph.cli("run", "--domain", "telecom-workflow", "--task-set-name", "telecom_small", "--num-tasks", "2",
                 "--agent-model", "scripted/oracle", "--user-model", "scripted/oracle", "--trials", "1",
                 "--run-id", "small-set", "--output", "json", timeout=600)
    assert run.returncode == 0, run.stderr
    (result,) = json.loads(run.stdout)["results"]
    assert result["domain"] == "telecom-workflow:telecom_small"
    assert result["tasks"] == 2 and result["evaluable"] == 2
