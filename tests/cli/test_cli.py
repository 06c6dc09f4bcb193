"""The passhat command as a user runs it: a real process, a real dev server."""

from __future__ import annotations

import json
import subprocess
import sys

from passhat.testing.harness import passhat


def test_help_does_not_import_tau2_or_litellm():
    """The CLI module stays light (startup time is measured by bench/startup.py)."""
    out = subprocess.run(
        [sys.executable, "-c", "import sys; from passhat.cli.main import app; "
         "assert 'tau2' not in sys.modules and 'litellm' not in sys.modules"],
        capture_output=True, text=True,
    )
    assert out.returncode == 0, out.stderr
    result = passhat("--help")
    assert result.returncode == 0 and "run" in result.stdout and "demo" in result.stdout


def test_version():
    from importlib.metadata import version

    result = passhat("--version")
    assert result.returncode == 0, result.stderr
    assert result.stdout == f"passhat {version('passhat')}\n"


def test_dash_o_is_the_output_format_wherever_it_is_an_option():
    """-o is --output (the format of what a command prints) on every command that has
    it; export's directory has only its long name."""
    import typer

    from passhat.cli.main import app

    def commands(group, path=()):  # noqa: ANN001, ANN202
        for name, command in group.commands.items():
            if hasattr(command, "commands"):
                yield from commands(command, (*path, name))
            else:
                yield (*path, name), command

    with_o = {}
    for path, command in commands(typer.main.get_command(app)):
        for param in command.params:
            if "-o" in param.opts:
                with_o[" ".join(path)] = param.opts
    assert {"run", "status", "report"} <= set(with_o), with_o
    assert all(opts == ["--output", "-o"] for opts in with_o.values()), with_o
    assert "export" not in with_o


def test_run_json_prints_exactly_one_object(env):
    result = passhat(
        "run", "--domain", "airline", "--task", "0", "--task", "1",
        "--agent-model", "scripted/oracle", "--user-model", "scripted/oracle",
        "--trials", "2", "--run-id", "cli-json", "--output", "json", env=env,
    )
    assert result.returncode == 0, result.stderr
    body = json.loads(result.stdout)  # the whole of stdout is one JSON object
    assert body["run_id"] == "cli-json"
    [row] = body["results"]
    assert row == {
        "agent_model": "scripted/oracle", "user_model": "scripted/oracle", "domain": "airline",
        "tasks": 2, "trials": 4, "evaluable": 4, "avg_reward": 1.0,
        "pass_hat_k": {"1": 1.0, "2": 1.0}, "pass_at_k": {"1": 1.0, "2": 1.0},
        "pass_hat_k_leaderboard": None,  # set only when some trial is not evaluable
    }
    report = passhat("report", "cli-json", "--output", "json", env=env)
    assert report.returncode == 0, report.stderr
    [group] = json.loads(report.stdout)["runs"][0]["groups"]  # report's own schema (README)
    assert {k: e["value"] for k, e in group["pass_hat_k"].items()} == row["pass_hat_k"]
    assert group["pass_at_k"] == row["pass_at_k"] and group["avg_reward"] == row["avg_reward"]
    status = passhat("status", "cli-json", env=env)
    assert "completed" in status.stdout and "4/4" in status.stdout


def test_domains_and_tasks_listing(env):
    result = passhat("domains", env=env)
    assert result.returncode == 0
    assert "airline\t50 tasks" in result.stdout and "retail\t114 tasks" in result.stdout
    tasks = passhat("tasks", "airline", env=env)
    assert tasks.returncode == 0 and len(tasks.stdout.strip().splitlines()) == 50


def test_ctrl_c_on_run_says_how_to_resume(env, tmp_path):
    """Ctrl-C stops the worker inside `passhat run`: the message names `passhat resume`."""
    import signal
    import time

    from passhat.infra.store import Store

    proc = subprocess.Popen(
        [sys.executable, "-m", "passhat.cli.main", "run", "--domain", "airline", "--task", "1",
         "--agent-model", "scripted/oracle", "--user-model", "scripted/oracle",
         "--agent-args", '{"latency": 2}', "--run-id", "interrupted"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    try:
        # Interrupt once the run is recorded and its first model step is on record.
        store, deadline = None, time.monotonic() + 120
        while time.monotonic() < deadline and proc.poll() is None:
            if store is None and (tmp_path / "home" / "results.db").exists():
                store = Store(f"sqlite:///{tmp_path / 'home' / 'results.db'}")
            if store is not None and any(len(store.steps(t.trial_id)) >= 2 for t in store.trials("interrupted")):
                break
            time.sleep(0.2)
        assert proc.poll() is None, "the run ended before it could be interrupted"
        proc.send_signal(signal.SIGINT)
        _, stderr = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 130, stderr
    assert "passhat resume interrupted" in stderr and "Traceback" not in stderr


async def test_status_says_when_no_worker_polls(fresh_temporal_server, tmp_path):
    """A detached run that no worker executes is "running" in Temporal for ever: status
    says that no worker polls its queue and how to start one, and stops saying it once
    a worker polls."""
    from passhat.testing.harness import Passhat, stopping_workers

    for ph in stopping_workers(Passhat(home=tmp_path / "home", temporal_address=fresh_temporal_server.address)):
        started = ph.cli("run", "--domain", "airline", "--task", "0", "--agent-model", "scripted/oracle",
                         "--user-model", "scripted/oracle", "--run-id", "orphan", "--detach")
        assert started.returncode == 0, started.stderr
        idle = ph.cli("status", "orphan")
        assert idle.returncode == 0, idle.stderr
        assert "workflow running (no worker has polled task queue 'passhat'" in idle.stdout
        assert "`passhat worker`" in idle.stdout and "`passhat resume orphan`" in idle.stdout
        # JSON keeps the state bare and the explanation apart.
        as_json = ph.cli("status", "orphan", "-o", "json")
        assert as_json.returncode == 0, as_json.stderr
        body = json.loads(as_json.stdout)
        assert body["workflow"] == "running"
        assert body["workflow_detail"].startswith("no worker has polled task queue 'passhat'")
        assert "`passhat resume orphan`" in body["workflow_detail"]

        worker = ph.start_worker()
        await worker.ready()
        polled = ph.cli("status", "orphan")
        assert polled.returncode == 0 and "no worker" not in polled.stdout, polled.stdout
        polled_json = json.loads(ph.cli("status", "orphan", "-o", "json").stdout)
        assert polled_json["workflow"] in ("running", "completed") and polled_json["workflow_detail"] is None
