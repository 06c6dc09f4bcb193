"""Plugins: `--plugin MODULE` imports the user's module (which registers domains), the
run records it, and only workers that imported the same plugins take the run's work
(the run's task queue is its plugin set's own). A plugin that fails to import is one
line, with nothing recorded.

The plugins are modules in tests/plugin_modules, put on PYTHONPATH as a user would.
"""

from __future__ import annotations

import asyncio
import json

import pytest
from temporalio.api.enums.v1 import EventType

from passhat.contracts import TASK_QUEUE, plugin_task_queue
from passhat.domains import plugins as plugin_loading
from passhat.infra.store import Store
from passhat.infra.temporal_client import connect
from passhat.testing.harness import Passhat, agent_that_succeeds, passhat, stopping_workers, until
from tests.helpers import PLUGIN_MODULES, one_error_line, store_rows

RUN = ("--domain", "plugged", "--task", "create_task_1", "--task", "update_task_1",
       "--agent-model", "scripted/oracle", "--user-model", "scripted/oracle", "--trials", "2")


@pytest.fixture
def ph(temporal_server, tmp_path, monkeypatch):
    monkeypatch.setenv("PYTHONPATH", str(PLUGIN_MODULES))
    yield from stopping_workers(Passhat(tmp_path / "home", temporal_server.address))


def test_a_plugin_that_does_not_import_is_one_line_and_nothing_is_recorded(ph):
    line = one_error_line(ph.cli("run", "--plugin", "broken_plugin", *RUN))
    # The module and the last line of its error (the message has two lines).
    assert line == "error: plugin broken_plugin failed to import: RuntimeError: set PHARMACY_URL first"
    line = one_error_line(ph.cli("run", "--plugin", "no_such_plugin", *RUN))
    assert "plugin no_such_plugin failed to import: ModuleNotFoundError: No module named 'no_such_plugin'" in line
    assert Store(ph.db_url).list_runs() == []
    # A worker says which module and which worker, and serves nothing.
    worker = ph.start_worker("--plugin", "no_such_plugin")
    worker.proc.wait(120)
    assert worker.proc.returncode == 2
    assert "plugin no_such_plugin failed to import" in worker.output()
    assert f"pid {worker.pid}" in worker.output()


def test_a_run_is_served_only_by_workers_with_its_plugins(ph):
    async def check() -> None:
        plain = ph.start_worker()
        await plain.ready()
        started = ph.cli("run", "--plugin", "plugged_mock", *RUN, "--run-id", "plugged-1", "--detach")
        assert started.returncode == 0, started.stderr
        assert "passhat worker --plugin plugged_mock" in started.stderr
        config = Store(ph.db_url).get_run("plugged-1").run_config()
        assert config.plugins == ["plugged_mock"]
        queue = plugin_task_queue(["plugged_mock"])
        client = await connect(ph.temporal_address)
        assert (await client.get_workflow_handle("plugged-1").describe()).task_queue == queue
        # The plain worker polls its own queue, never the run's: status says what to start.
        status = ph.cli("status", "plugged-1")
        assert f"no worker has polled task queue '{queue}'" in status.stdout, status.stdout
        assert "`passhat worker --plugin plugged_mock`" in status.stdout
        with_plugin = ph.start_worker("--plugin", "plugged_mock")
        await with_plugin.ready()
        assert queue in with_plugin.output()
        store = Store(ph.db_url)
        await until(lambda: store.get_run("plugged-1").status == "completed", "the run to complete", 240)
        rewards = [t.reward for t in store.trials("plugged-1")]
        assert rewards == [1.0] * 4, rewards
        # Every activity of every workflow of the run ran on the worker with the plugin.
        identities = await activity_workers(client, "plugged-1")
        assert identities and all(i.startswith(f"{with_plugin.pid}@") for i in identities), identities

    asyncio.run(check())


async def activity_workers(client, run_id: str) -> set[str]:  # noqa: ANN001
    """The identities ("pid@host") of the workers that ran any activity of the run."""
    identities = set()
    async for wf in client.list_workflows(f"PasshatRun = '{run_id}'"):
        history = await client.get_workflow_handle(wf.id).fetch_history()
        identities |= {e.activity_task_started_event_attributes.identity for e in history.events
                       if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED}
    return identities


def test_resume_keeps_the_runs_plugins_and_its_queue(ph):
    """A plugin run, stopped before any work (no worker with its plugin), is resumed.
    Without the plugin importable: one line naming the run and the module. With a
    --plugin set other than the recorded one (another module added, or a module that
    fails to import instead of the run's): refused in one line naming the difference,
    before anything is imported, and nothing recorded changes. With the same set, or
    with no --plugin at all, the run goes on on its plugin set's queue, served by the
    resuming process, while a worker without plugins (polling the plain queue) takes
    none of it."""
    async def check() -> None:
        store = Store(ph.db_url)
        client = await connect(ph.temporal_address)
        queue = plugin_task_queue(["plugged_mock"])
        started = ph.cli("run", "--plugin", "plugged_mock", *RUN, "--run-id", "again", "--detach")
        assert started.returncode == 0, started.stderr
        assert ph.cli("cancel", "again").returncode == 0
        before = store_rows(store)
        assert store.get_run("again").status == "cancelled"

        no_path = {k: v for k, v in ph.env().items() if k != "PYTHONPATH"}
        assert one_error_line(passhat("resume", "again", env=no_path)) == (
            "error: run again needs plugin plugged_mock, which does not import here: ModuleNotFoundError: "
            "No module named 'plugged_mock'; put its folder on PYTHONPATH (or install it) and resume again")
        refusal = ("error: run again was started with plugins plugged_mock and keeps them; --plugin names "
                   "another set ({}): resume it without --plugin (its plugins are imported anyway), or "
                   "start a new --run-id with the other set")
        line = one_error_line(ph.cli("resume", "again", "--plugin", "plugged_mock", "--plugin", "home_internet"))
        assert line == refusal.format("adds home_internet")
        # broken_plugin would fail as it imports: the refusal comes first
        line = one_error_line(ph.cli("resume", "again", "--plugin", "broken_plugin"))
        assert line == refusal.format("adds broken_plugin; leaves out plugged_mock")
        assert store_rows(store) == before
        assert (await client.get_workflow_handle("again").describe()).status.name == "TERMINATED"

        # The same set, detached: the run's workflow is back on the plugin set's queue.
        plain = ph.start_worker()
        await plain.ready()
        resumed = ph.cli("resume", "again", "--plugin", "plugged_mock", "--detach")
        assert resumed.returncode == 0, resumed.stderr
        assert "`passhat worker --plugin plugged_mock`" in resumed.stderr
        assert (await client.get_workflow_handle("again").describe()).task_queue == queue
        # No --plugin: this process imports the recorded plugin and serves the queue.
        served = ph.cli("resume", "again", "--output", "json", timeout=300)
        assert served.returncode == 0, served.stderr
        assert store.get_run("again").status == "completed"
        assert [t.reward for t in store.trials("again")] == [1.0] * 4
        workers = await activity_workers(client, "again")
        assert workers and not any(w.startswith(f"{plain.pid}@") for w in workers), workers
        assert store.get_run("again").run_config().plugins == ["plugged_mock"]

    asyncio.run(check())


def test_forked_workers_of_a_run_have_its_plugins(ph):
    result = ph.cli("run", "--plugin", "plugged_mock", *RUN, "--workers", "2", "--run-id", "forked",
                    timeout=300)
    assert result.returncode == 0, result.stderr
    assert [t.reward for t in Store(ph.db_url).trials("forked")] == [1.0] * 4


def test_entry_points_are_plugins_and_the_queue_is_the_set(tmp_path, monkeypatch):
    dist = tmp_path / "passhat_example_plugin-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: passhat-example-plugin\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text("[passhat.plugins]\nexample = plugged_mock\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert plugin_loading.entry_point_plugins() == ["plugged_mock"]
    assert plugin_loading.run_plugins(["b", "a", "b"]) == ["a", "b", "plugged_mock"]
    assert plugin_task_queue([]) == TASK_QUEUE
    assert plugin_task_queue(["a", "b"]) == plugin_task_queue(["b", "a"]) != plugin_task_queue(["a"])


def test_a_tau2_contract_domain_with_user_tools_and_sync_tools_runs_end_to_end(ph):
    """tests/plugin_modules/home_internet (user tools, a user database, write tools, an
    overridden sync_tools), every task, with the scripted oracle: every trial scores 1.0
    by tau2's evaluator, and the user's speed test shows the plan the agent's write
    tool set, carried over by the domain's sync_tools."""
    result = ph.cli("run", "--plugin", "home_internet", "--domain", "home_internet",
                    "--agent-model", "scripted/oracle", "--user-model", "scripted/oracle",
                    "--trials", "2", "--run-id", "home", timeout=600)
    assert result.returncode == 0, result.stderr
    store = Store(ph.db_url)
    trials = store.trials("home")
    assert sorted(t.task_id for t in trials) == sorted(
        ["upgrade_to_fiber", "connection_down", "down_and_slow", "which_plan"] * 2)
    assert [t.reward for t in trials] == [1.0] * 8, [(t.task_id, t.reward, t.error) for t in trials]
    down = next(t for t in trials if t.task_id == "down_and_slow")
    answers = [m for step in store.steps(down.trial_id) for m in step.message_list()
               if m.role == "tool" and m.requestor == "user"]
    assert [m.content for m in answers] == ["The router restarted", "1000 Mbps"], answers


def test_a_domain_of_passhats_own_protocol_from_a_plugin_runs_end_to_end(ph):
    """tests/plugin_modules/refund_desk: a domain that is not tau2's (passhat's Domain
    protocol, registered with passhat.domains.register_domain). `domains` and `tasks`
    list it, `domains check` finds its evaluations sound, and a run scores it with the
    domain's own scoring, its write tool changing the order book."""
    listed = ph.cli("domains", "--plugin", "refund_desk")
    assert listed.returncode == 0 and "refund_desk\t2 tasks" in listed.stdout, listed.stdout + listed.stderr
    tasks = ph.cli("tasks", "refund_desk", "--plugin", "refund_desk")
    assert [line.split("\t")[0] for line in tasks.stdout.splitlines()] == ["refund_kettle", "blender_not_delivered"]
    checked = ph.cli("domains", "check", "refund_desk", "--plugin", "refund_desk")
    assert checked.returncode == 0 and "2 task(s) checked, 0 with findings" in checked.stdout, checked.stdout

    result = ph.cli("run", "--plugin", "refund_desk", "--domain", "refund_desk",
                    "--agent-model", "scripted/oracle", "--user-model", "scripted/oracle",
                    "--trials", "2", "--run-id", "refunds", timeout=300)
    assert result.returncode == 0, result.stderr
    store = Store(ph.db_url)
    config = store.get_run("refunds").run_config()
    assert config.plugins == ["refund_desk"] and config.tau2_data is None
    assert set(config.domain_digests["refund_desk"]) == {"policy", "tools", "db", "tasks"}
    trials = store.trials("refunds")
    assert sorted(t.task_id for t in trials) == sorted(["refund_kettle", "blender_not_delivered"] * 2)
    assert [t.reward for t in trials] == [1.0] * 4, [(t.task_id, t.reward, t.error) for t in trials]
    kettle = next(t for t in trials if t.task_id == "refund_kettle")
    answers = [m.content for step in store.steps(kettle.trial_id) for m in step.message_list() if m.role == "tool"]
    assert [json.loads(a)["status"] for a in answers] == ["delivered", "refunded"], answers


def test_a_plugin_domains_run_is_read_exported_and_rescored_by_tau2(ph, tmp_path, monkeypatch):
    """A run of tests/plugin_modules/home_internet (user tools, its own sync_tools): the
    commands that read results import its recorded plugin themselves, as resume does.
    Its tau2-format export, re-scored by tau2's own evaluator with the plugin imported,
    gives passhat's rewards; imported back (with --plugin), it reports the same."""
    result = ph.cli("run", "--plugin", "home_internet", "--domain", "home_internet",
                    "--agent-model", agent_that_succeeds("0.5"), "--user-model", "scripted/oracle",
                    "--trials", "2", "--run-id", "home-export", timeout=600)  # "home" is another test's workflow on the shared server
    assert result.returncode == 0, result.stderr
    trials = Store(ph.db_url).trials("home-export")
    rewards = {(t.task_id, t.trial_index): t.reward for t in trials}
    assert set(rewards.values()) == {0.0, 1.0}, rewards  # a re-score that agrees is not luck
    for args in (("report", "home-export"), ("trials", "home-export"), ("show", trials[0].trial_id), ("runs",)):
        shown = ph.cli(*args)
        assert shown.returncode == 0 and "Traceback" not in shown.stderr, (args, shown.stderr)
    out = tmp_path / "out"
    exported = ph.cli("export", "home-export", "--output-dir", str(out))
    assert exported.returncode == 0, exported.stderr
    [path] = out.glob("*.json")

    monkeypatch.syspath_prepend(str(PLUGIN_MODULES))
    import home_internet  # noqa: F401 - registers the domain with tau2's registry
    from tau2.data_model.simulation import Results
    from tau2.evaluator.evaluator import EvaluationType, evaluate_simulation

    results = Results.model_validate_json(path.read_text())
    tasks = {task.id: task for task in results.tasks}
    rescored = {(s.task_id, s.trial): evaluate_simulation(
        simulation=s, task=tasks[s.task_id], evaluation_type=EvaluationType.ALL,
        solo_mode=False, domain="home_internet").reward for s in results.simulations}
    assert rescored == rewards

    # Without the plugin, a tau2 file of its domain is one line naming what is missing.
    refused = ph.cli("import", str(path), "--run-id", "home-bare")
    assert refused.returncode == 2
    assert one_error_line(refused).endswith(
        "domain 'home_internet' is not one passhat has (airline, retail, telecom, mock, "
        "telecom-workflow, or one a --plugin registers)")
    imported = ph.cli("import", str(path), "--plugin", "home_internet", "--run-id", "home-again")
    assert imported.returncode == 0, imported.stderr
    assert Store(ph.db_url).get_run("home-again").run_config().plugins == ["home_internet"]
    for args in (("report", "home-again"), ("trials", "home-again"),
                 ("export", "home-again", "--output-dir", str(tmp_path / "again"))):
        again = ph.cli(*args)
        assert again.returncode == 0 and "Traceback" not in again.stderr, (args, again.stderr)
    assert [p.name.replace("home-again", "home-export") for p in (tmp_path / "again").glob("*.json")] == [path.name]
    # Where the plugin does not import, an export is one line saying so, and loses nothing.
    monkeypatch.delenv("PYTHONPATH")
    lost = ph.cli("export", "home-export", "--output-dir", str(tmp_path / "lost"))
    assert lost.returncode == 2
    assert one_error_line(lost) == (
        "error: run home-export needs plugin home_internet, which does not import here: ModuleNotFoundError: "
        "No module named 'home_internet'; put its folder on PYTHONPATH (or install it) and run the command again")
    assert not (tmp_path / "lost").exists() and len(Store(ph.db_url).trials("home-export")) == len(trials)
