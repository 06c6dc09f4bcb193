"""Warm start on the embedded default: `passhat server start` leaves a warm process
(passhat.cli.warm_server) beside the Temporal server; a run's command is handed to it and
behaves as if it ran in the `passhat` process itself: same output, exit status, keys,
Ctrl-C. A command whose environment differs runs the usual way and replaces it. Real
processes, a real embedded Temporal server, a real HTTP model."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
from pathlib import Path

import psutil
import pytest

from passhat.infra.store import Store
from passhat.testing.fault_server import FaultServer
from passhat.testing.harness import PASSHAT, free_ports, passhat, until
from passhat.testing.scripted_http import TEST_KEY_ENV, ScriptedResponder, http_args
from tests.helpers import VALID_TASK

WARM_MARK = "warm process took it"
CANARY = "sk-warm-start-canary-0123456789"


def until_sync(predicate, what: str, timeout: float):  # noqa: ANN001, ANN201
    return asyncio.run(until(predicate, what, timeout))


@pytest.fixture(scope="module")
def warm(tmp_path_factory):
    """An embedded server of the module's own (its home, free ports) started with
    `passhat server start`, and the warm process it left, ready."""
    home = tmp_path_factory.mktemp("warm") / "home"
    port, ui_port = free_ports(2)
    env = {k: v for k, v in os.environ.items()
           if k not in ("TEMPORAL_ADDRESS", "PASSHAT_DB_URL", "PASSHAT_TEMPORAL_UI", TEST_KEY_ENV)}
    env.update(PASSHAT_HOME=str(home), PASSHAT_TEMPORAL_PORT=str(port), PASSHAT_UI_PORT=str(ui_port),
               PASSHAT_WARM_START="1", LITELLM_LOCAL_MODEL_COST_MAP="True",
               OPENAI_API_KEY=CANARY)  # in the environment the warm process is started from
    # Started from a folder holding a module: a `passhat` command does not see it there.
    started_in = home.parent / "started-in"
    started_in.mkdir()
    (started_in / "warm_probe_plugin.py").write_text("")
    started = passhat("server", "start", env=env, timeout=180, cwd=started_in)
    assert started.returncode == 0, started.stderr
    try:
        until_sync(lambda: _serving(home), "the warm process to take commands", 180)
        yield env, home
    finally:
        pid = _serving(home)
        passhat("server", "stop", env=env, timeout=120)
    assert pid is not None
    until_sync(lambda: not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE,
               "the warm process to end with `passhat server stop`", 60)


def _serving(home: Path) -> int | None:
    """The pid of the warm process serving `home`, once its socket answers."""
    import socket

    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
        try:
            probe.connect(str(home / "warm.sock"))
        except OSError:
            return None
    return int((home / "warm.lock").read_text().split()[0])


def _marks(log: Path) -> list[str]:
    return [line.rsplit(" ", 1)[0] for line in log.read_text().splitlines()] if log.exists() else []


def _run_args(srv: FaultServer, run_id: str, *more: str) -> list[str]:
    args = json.dumps(http_args(srv.url))
    return ["run", "--domain", "airline", "--task", "1", "--task", "2", "--agent-model", "openai/oracle",
            "--user-model", "openai/oracle", "--agent-args", args, "--user-args", args,
            "--run-id", run_id, "--workers", "2", *more]


def test_a_run_is_taken_by_the_warm_process_with_its_keys_output_and_status(warm, tmp_path):
    env, home = warm
    pid = _serving(home)
    log = tmp_path / "startup.log"
    with FaultServer(responder=ScriptedResponder(["airline"]).answer) as srv:
        # The warm process holds no key: each command brings its own.
        assert not {TEST_KEY_ENV, "OPENAI_API_KEY"} & set(psutil.Process(pid).environ())
        result = passhat(*_run_args(srv, "warm-json", "--output", "json"),
                         env={**env, TEST_KEY_ENV: "warm-test-key-0123456789", "PASSHAT_STARTUP_LOG": str(log)})
        served = srv.served
    assert result.returncode == 0, result.stderr
    assert _marks(log)[0] == WARM_MARK and "imported" in _marks(log)
    body = json.loads(result.stdout)  # stdout holds the one JSON object, as ever
    assert [(r["agent_model"], r["trials"], r["avg_reward"]) for r in body["results"]] == [("openai/oracle", 2, 1.0)]
    assert served > 0
    assert "warm-test-key" not in result.stderr + result.stdout
    # What it recorded is in the home's store, as for a command run here.
    assert {t.status for t in Store(f"sqlite:///{home / 'results.db'}").trials("warm-json")} == {"scored"}
    # Without the key, the command stops at the check, with its one line and status 2.
    refused = passhat(*_run_args(srv, "warm-no-key"), env={**env, "PASSHAT_STARTUP_LOG": str(log)})
    assert refused.returncode == 2 and TEST_KEY_ENV in refused.stderr and "Traceback" not in refused.stderr
    assert _marks(log).count(WARM_MARK) == 2
    assert _serving(home) == pid  # the same warm process took both
    assert f"warm process: pid {pid}, ready" in passhat("server", "status", env=env, timeout=60).stdout


def _started(env: dict, home: Path, args: list[str], run_id: str) -> subprocess.Popen:
    """A run's command, returned once its first model call is on record."""
    proc = subprocess.Popen([str(PASSHAT), *args], env=env, stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    store = Store(f"sqlite:///{home / 'results.db'}")
    until_sync(lambda: proc.poll() is not None or any(store.steps(t.trial_id) for t in store.trials(run_id)),
               "the run's first model step", 180)
    assert proc.poll() is None, proc.communicate()
    return proc


def _command_processes(warm_pid: int) -> list[psutil.Process]:
    return [p for p in psutil.Process(warm_pid).children(recursive=True) if p.status() != psutil.STATUS_ZOMBIE]


def test_a_command_imports_from_where_a_passhat_process_would(warm, tmp_path):
    """The warm process was started in a folder with a module in it: `python -m` would
    put that folder first on its import path, where a `passhat` command has its script's
    folder. A plugin there is not found, warm or not."""
    env, home = warm
    log = tmp_path / "startup.log"
    result = passhat("run", "--domain", "airline", "--task", "1", "--agent-model", "scripted/oracle",
                     "--user-model", "scripted/oracle", "--plugin", "warm_probe_plugin", "--run-id", "probe",
                     env={**env, "PASSHAT_STARTUP_LOG": str(log)}, cwd=tmp_path, timeout=300)
    assert _marks(log)[:1] == [WARM_MARK]
    assert result.returncode == 2, result.stdout + result.stderr
    assert "warm_probe_plugin" in result.stderr and len(result.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("how", ["ctrl-c", "kill"])
def test_stopping_the_command_stops_what_the_warm_process_runs_for_it(warm, how):
    """Ctrl-C reaches the command as on a terminal (exit 130 and how to resume); a
    `passhat` process killed outright takes the command's processes with it. Each
    model call takes 10 s, so the run left alone would last a minute and more."""
    env, home = warm
    pid = _serving(home)
    run_id = f"warm-{how}"
    with FaultServer(responder=ScriptedResponder(["airline"], latency=10)) as srv:
        proc = _started({**env, TEST_KEY_ENV: "warm-test-key-0123456789"}, home, _run_args(srv, run_id), run_id)
        assert _command_processes(pid)  # the command runs in the warm process's children
        proc.send_signal(signal.SIGINT if how == "ctrl-c" else signal.SIGKILL)
        proc.wait(timeout=120)  # not communicate(): the command's processes hold its pipes too
        until_sync(lambda: not _command_processes(pid), "the command's processes to end", 30)
        _, stderr = proc.communicate(timeout=30)
    if how == "ctrl-c":
        assert proc.returncode == 130, stderr
        assert f"passhat resume {run_id}" in stderr and "Traceback" not in stderr
    else:
        assert proc.returncode == -signal.SIGKILL
    assert _serving(home) == pid  # and it goes on serving


def test_a_sigterm_to_the_warm_process_passes_on_to_its_commands(warm):
    """The warm process stopped with a SIGTERM (a shutdown, say) stops the commands it
    runs as a SIGTERM to their own processes would: exit status 143; then it ends."""
    env, home = warm
    pid = _serving(home)
    with FaultServer(responder=ScriptedResponder(["airline"], latency=10)) as srv:
        proc = _started({**env, TEST_KEY_ENV: "warm-test-key-0123456789"}, home,
                        _run_args(srv, "warm-sigterm"), "warm-sigterm")
        os.kill(pid, signal.SIGTERM)
        proc.wait(timeout=60)
        until_sync(lambda: not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE,
                   "the warm process to end", 30)
        proc.communicate(timeout=30)
    assert proc.returncode == 128 + signal.SIGTERM
    # `passhat server start` starts a new one for the tests that follow.
    assert passhat("server", "start", env=env, timeout=180).returncode == 0
    until_sync(lambda: _serving(home), "a new warm process", 180)


def test_a_usage_error_names_the_command_the_user_typed(warm, tmp_path):
    """Click names the program in a usage error; in the warm process's fork it would
    guess `python -m passhat.cli.passhat` from the process's __main__."""
    env, home = warm
    log = tmp_path / "startup.log"
    result = passhat("resume", "no-such-run", "--bogus", env={**env, "PASSHAT_STARTUP_LOG": str(log)}, timeout=120)
    assert _marks(log)[:1] == [WARM_MARK]
    assert result.returncode == 2, result.stderr
    assert result.stderr.endswith("see `passhat resume --help`\n") and "python -m" not in result.stderr


def test_another_environment_runs_here_and_replaces_the_warm_process(warm, tmp_path):
    """Last in this module: the warm process left serves another environment."""
    env, home = warm
    log = tmp_path / "startup.log"
    other = {**env, "SOME_TOOL_SETTING": "changed", "PASSHAT_STARTUP_LOG": str(log)}
    old = _serving(home)
    result = passhat("demo", "--tasks", "1", "--trials", "1", "-o", "json", env=other, timeout=300)
    assert result.returncode == 0, result.stderr
    assert WARM_MARK not in _marks(log)  # it ran in the `passhat` process
    new = until_sync(lambda: (p := _serving(home)) not in (None, old) and p, "a new warm process", 180)
    assert not psutil.pid_exists(old) or psutil.Process(old).status() == psutil.STATUS_ZOMBIE
    log.unlink()
    again = passhat("demo", "--tasks", "1", "--trials", "1", "-o", "json", env=other, timeout=300)
    assert again.returncode == 0, again.stderr
    assert _marks(log)[0] == WARM_MARK
    assert _serving(home) == new


def test_a_warm_process_started_beside_a_checkout_imports_passhat(tmp_path):
    """A run started from the folder that holds a checkout named `passhat` (here a link
    to this one) starts the warm process: it must import the installed passhat, not
    that folder as a namespace package, so a later run from anywhere is taken by it.
    A relative path in a command still means the caller's folder."""
    import passhat as installed

    home = tmp_path / "home"
    port, ui_port = free_ports(2)
    env = {k: v for k, v in os.environ.items()
           if k not in ("TEMPORAL_ADDRESS", "PASSHAT_DB_URL", "PASSHAT_TEMPORAL_UI", TEST_KEY_ENV)}
    env.update(PASSHAT_HOME=str(home), PASSHAT_TEMPORAL_PORT=str(port), PASSHAT_UI_PORT=str(ui_port),
               PASSHAT_WARM_START="1", LITELLM_LOCAL_MODEL_COST_MAP="True")
    work = tmp_path / "work"
    work.mkdir()
    (work / "passhat").symlink_to(Path(installed.__file__).resolve().parent.parent, target_is_directory=True)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "tasks.json").write_text(json.dumps([VALID_TASK]))  # named relative to the caller
    # The server alone first: the run below is what starts the warm process.
    started = passhat("server", "start", env={**env, "PASSHAT_WARM_START": "0"}, timeout=180, cwd=tmp_path)
    assert started.returncode == 0, started.stderr
    try:
        first = passhat("run", "--domain", "airline", "--task", "1", "--agent-model", "scripted/oracle",
                        "--user-model", "scripted/oracle", "--run-id", "from-work", env=env, cwd=work, timeout=300)
        assert first.returncode == 0, first.stderr
        pid = until_sync(lambda: _serving(home), "the warm process to take commands", 180)
        log = tmp_path / "startup.log"
        later = passhat("run", "--domain", "airline", "--task-file", "tasks.json", "--agent-model",
                        "scripted/oracle", "--user-model", "scripted/oracle", "--run-id", "later",
                        env={**env, "PASSHAT_STARTUP_LOG": str(log)}, cwd=elsewhere, timeout=300)
        assert _marks(log)[:1] == [WARM_MARK], later.stderr
        assert later.returncode == 0, later.stderr
        assert [t.task_id for t in Store(f"sqlite:///{home / 'results.db'}").trials("later")] == ["t1"]
        assert _serving(home) == pid
    finally:
        passhat("server", "stop", env=env, timeout=120)
