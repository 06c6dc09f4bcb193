"""`passhat report` on real runs: scripted sweeps through Temporal in this process
(tests.runs), then the command as a user runs it, a subprocess against the run's SQLite
store with no Temporal server to talk to (a report needs none)."""

from __future__ import annotations

import csv
import io
import json
from types import SimpleNamespace

import pytest
from rich.console import Console

from passhat.cli import report_text
from passhat.results.report import Report, build_report
from passhat.infra.store import Store
from passhat.infra.temporal_client import connect
from passhat.testing.fault_server import FaultServer
from passhat.workflows.client import start_run
from passhat.testing.harness import agent_that_succeeds, passhat
from tests.helpers import cli_env, one_error_line
from tests.runs import config, run_to_end, worker_for
from tests.runs import HoldTask, cancel_midway

# The second agent succeeds half the time and fails with reward 0, on either tau2.
MODELS = ["scripted/oracle", agent_that_succeeds("0.5")]


@pytest.fixture(scope="module")
async def runs(temporal_server, tmp_path_factory):
    """A sweep of two models (4 airline tasks, k=3) and a second run of the oracle
    alone (k=1), in one SQLite store."""
    home = tmp_path_factory.mktemp("report")
    url = f"sqlite:///{home / 'results.db'}"
    store = Store(url)
    client = await connect(temporal_server.address)
    sweep = config(agent_models=MODELS, limit=4, trials=3)
    await run_to_end(client, store, sweep)
    other = config(agent_models=["scripted/oracle"], limit=4, trials=1)
    await run_to_end(client, store, other)
    store.close()
    return SimpleNamespace(url=url, home=home, sweep=sweep.run_id, other=other.run_id)


@pytest.fixture
def env(runs, tmp_path):
    return cli_env(runs.url, tmp_path)


def report_of(runs, *run_ids: str) -> Report:
    store = Store(runs.url)
    try:
        return build_report(store, list(run_ids))
    finally:
        store.close()


def test_json_follows_the_schema(runs, env):
    result = passhat("report", runs.sweep, "-o", "json", env=env)
    assert result.returncode == 0, result.stderr
    report = Report.model_validate_json(result.stdout)  # the documented schema
    [run] = report.runs
    assert run.completeness.complete and run.completeness.note == "complete: 24 of 24 trials scored"
    oracle, noisy = run.groups
    assert [oracle.agent_model, noisy.agent_model] == MODELS  # the run's order
    assert (oracle.tasks, oracle.trials, oracle.evaluable, oracle.unfinished) == (4, 12, 12, 0)
    assert {k: (e.value, e.low, e.high) for k, e in oracle.pass_hat_k.items()} == {
        k: (1.0, 1.0, 1.0) for k in ("1", "2", "3")}
    assert oracle.failures.below_one == 0 and oracle.failures.termination == {"user_stop": 12}
    # The noisy model's numbers agree with its trials, counted here from the store.
    store = Store(runs.url)
    trials = store.trials(runs.sweep, agent_model=MODELS[1])
    store.close()
    failed = [t for t in trials if not t.success]
    assert noisy.failures.below_one == len(failed)
    # scripted/noisy's failure is an empty reply (26.3); scripted/faulty's a planned mistake
    empty_replies = MODELS[1].startswith("scripted/noisy") and failed
    assert noisy.failures.model_errors == ({"agent EmptyReply": len(failed)} if empty_replies else {})
    assert noisy.avg_reward == pytest.approx(sum(t.reward for t in trials) / 12)
    for task in noisy.task_results:
        mine = [t for t in trials if t.task_id == task.task_id]
        assert task.outcomes == ["success" if t.success else "failure" for t in mine]
    est = noisy.pass_hat_k["1"]
    assert est.low <= est.value <= est.high
    assert noisy.input_tokens_per_trial > 0 and noisy.cost_per_trial == 0.0


def test_table_fits_80_columns(runs):
    for by in ("model", "task"):
        console = Console(width=80, file=io.StringIO(), record=True, color_system=None)
        report_text.report_table(report_of(runs, runs.sweep, runs.other), by, console)
        text = console.export_text()
        assert max(map(len, text.splitlines())) <= 80, text
        assert "…" not in text, text
        for model in MODELS:  # ids whole, on one line
            assert f"{runs.sweep}:{model} (user scripted/oracle) on airline" in text, text
        if by == "model":
            assert "│ 3 │  1.000 │ 1.000-1.000 │  1.000 │" in text, text  # the oracle's pass^3
        else:  # one row per task: its outcome grid, successes/n, pass^1 and pass^k
            assert "│ +++    │  3/3 │  1.000 │  1.000 │" in text and "pass^3" in text, text


def test_csv_and_markdown(runs, env):
    result = passhat("report", runs.sweep, "-o", "csv", env=env)
    assert result.returncode == 0, result.stderr
    rows = list(csv.DictReader(io.StringIO(result.stdout)))
    assert [r["agent_model"] for r in rows] == MODELS
    assert rows[0]["pass^3"] == "1.0" and rows[0]["pass^3_low"] == "1.0" and rows[0]["complete"] == "True"
    by_task = list(csv.DictReader(io.StringIO(passhat("report", runs.sweep, "-o", "csv", "--by", "task", env=env).stdout)))
    assert len(by_task) == 8 and by_task[0]["outcomes"] == "success success success"

    md = passhat("report", runs.sweep, "-o", "markdown", env=env)
    assert md.returncode == 0, md.stderr
    assert f"# passhat report {runs.sweep}" in md.stdout
    assert "| k | pass^k | 95% CI | pass@k |" in md.stdout
    assert "| 3 | 1.000 | 1.000-1.000 | 1.000 |" in md.stdout


def test_paired_comparisons_within_and_across_runs(runs, env):
    result = passhat("report", runs.sweep, runs.other, "-o", "json", env=env)
    assert result.returncode == 0, result.stderr
    report = Report.model_validate_json(result.stdout)
    pairs = {(c.a.run_id, c.a.agent_model, c.b.run_id, c.b.agent_model): c for c in report.comparisons}
    assert len(pairs) == 3  # every pair of the three (run, model) groups on airline
    same = pairs[(runs.sweep, "scripted/oracle", runs.other, "scripted/oracle")]
    assert (same.difference.value, same.difference.low, same.difference.high) == (0.0, 0.0, 0.0)
    assert not same.distinguishable and "not distinguishable from noise" in same.statement
    # oracle - noisy: the mean over tasks of the per-task pass^1 difference.
    vs = pairs[(runs.sweep, "scripted/oracle", runs.sweep, MODELS[1])]
    noisy = report.runs[0].groups[1]
    assert vs.shared_tasks == 4
    assert vs.difference.value == pytest.approx(sum(1 - t.pass_hat_k["1"] for t in noisy.task_results) / 4)
    assert vs.distinguishable == (vs.difference.low > 0 or vs.difference.high < 0)
    table = passhat("report", runs.sweep, runs.other, env=env)
    assert (f"  a {runs.sweep}:scripted/oracle\n  b {runs.other}:scripted/oracle on airline\n"
            "    a - b: pass^1 +0.000") in table.stdout


def test_bad_options_are_one_line(runs, env):
    assert "--output must be one of table, json, csv, markdown, html, got 'xml'" in one_error_line(
        passhat("report", runs.sweep, "-o", "xml", env=env))
    assert "--by must be one of model, task" in one_error_line(passhat("report", runs.sweep, "--by", "x", env=env))
    assert "no run 'nope'" in one_error_line(passhat("report", runs.sweep, "nope", env=env))
    assert "--plot must name a .png" in one_error_line(passhat("report", runs.sweep, "--plot", "a.gif", env=env))


def test_plot_is_written(runs, env, tmp_path):
    plot = tmp_path / "curves.png"
    result = passhat("report", runs.sweep, "--plot", str(plot), env=env)
    assert result.returncode == 0, result.stderr
    data = plot.read_bytes()
    assert data.startswith(b"\x89PNG") and len(data) > 10_000


async def test_cancelled_run_reports_what_it_scored(client, sqlite_store, tmp_path):
    """Task 0's two trials are scored, task 1's wait on the agent when the run is
    cancelled: the report shows the two and says the run is partial."""
    store = sqlite_store
    agent = HoldTask("1")
    with FaultServer(responder=agent) as srv:
        async with worker_for(client, store) as queue:
            cfg = await cancel_midway(client, store, srv, agent, queue)
        agent.release.set()
    env = cli_env(f"sqlite:///{tmp_path / 'results.db'}", tmp_path)
    result = passhat("report", cfg.run_id, env=env)
    assert result.returncode == 0, result.stderr
    note = "PARTIAL: run cancelled, 2 of 4 trials scored, 2 missing (2 cancelled)"
    assert note in result.stdout
    assert "1 │  1.000 │ 1.000-1.000" in result.stdout  # the scored trials' pass^1
    body = json.loads(passhat("report", cfg.run_id, "-o", "json", env=env).stdout)
    [group] = body["runs"][0]["groups"]
    assert body["runs"][0]["completeness"]["complete"] is False
    assert (group["evaluable"], group["unfinished"]) == (2, 2)
    assert [t["outcomes"] for t in group["task_results"]] == [["success", "success"], ["cancelled", "cancelled"]]
    csv_run = passhat("report", cfg.run_id, "-o", "csv", env=env)
    assert "PARTIAL" in csv_run.stderr and "2 of 4 trials scored" in csv_run.stderr


async def test_run_not_yet_started_is_partial(client, sqlite_store, tmp_path):
    """A run whose workflow waits for a worker: every trial is missing, none started."""
    cfg = config(limit=2, trials=1)
    handle = await start_run(client, sqlite_store, cfg, task_queue="nobody-polls-this")
    try:
        env = cli_env(f"sqlite:///{tmp_path / 'results.db'}", tmp_path)
        result = passhat("report", cfg.run_id, env=env)
        assert result.returncode == 0, result.stderr
        assert "PARTIAL: run running, 0 of 2 trials scored, 2 missing (2 never started)" in result.stdout
        assert "scripted/oracle (user scripted/oracle) on airline" in result.stdout
    finally:
        await handle.terminate("test over")
