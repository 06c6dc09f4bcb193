"""What a run command says when it is cut short by something outside it: the Temporal
server stopped under it (`passhat server stop` in another shell), or Ctrl-C before the
run was recorded. Each is one line that says what is true, with an exit code that means
it (docs/cli.md): 4 for the server, 130 for Ctrl-C. Real commands on their own embedded
server (a fresh PASSHAT_HOME, free ports)."""

from __future__ import annotations

import os
import signal
import subprocess

import pytest

from passhat.infra.store import Store
from passhat.testing.harness import PASSHAT, free_ports, passhat
from tests.helpers import PLUGIN_MODULES

DEADLINE_S = 300


@pytest.fixture
def env(tmp_path):
    port, ui_port = free_ports(2)
    env = dict(os.environ, PASSHAT_HOME=str(tmp_path / "home"), PASSHAT_TEMPORAL_PORT=str(port),
               PASSHAT_UI_PORT=str(ui_port), LITELLM_LOCAL_MODEL_COST_MAP="True",
               PYTHONPATH=str(PLUGIN_MODULES))
    for name in ("TEMPORAL_ADDRESS", "PASSHAT_DB_URL", "PASSHAT_TEMPORAL_UI"):
        env.pop(name, None)
    yield env
    passhat("server", "stop", env=env, timeout=120)


def start(env: dict, *args: str) -> subprocess.Popen:
    return subprocess.Popen([str(PASSHAT), *args], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, stdin=subprocess.DEVNULL)


def wait_for(proc: subprocess.Popen, ready, what: str) -> None:  # noqa: ANN001
    """Poll `ready()` until it holds, while the command runs (bounded)."""
    import time

    deadline = time.monotonic() + DEADLINE_S
    while not ready():
        assert proc.poll() is None, f"the command ended before {what}: {proc.communicate()}"
        assert time.monotonic() < deadline, f"no {what} in {DEADLINE_S}s"
        time.sleep(0.2)


def test_a_server_stopped_under_a_run_is_one_line_and_exit_4(env, tmp_path):
    run_id = "server-gone"
    proc = start(env, "run", "-d", "airline", "--num-tasks", "5", "-m", "scripted/oracle",
                 "-u", "scripted/oracle", "--agent-args", '{"latency": 2}', "--trials", "2",
                 "--run-id", run_id, "--yes")
    try:
        results = tmp_path / "home" / "results.db"
        wait_for(proc, lambda: results.exists() and Store(f"sqlite:///{results}").trials(run_id), "trials")
        stopped = passhat("server", "stop", env=env, timeout=120)
        assert stopped.returncode == 0, stopped.stderr
        out, err = proc.communicate(timeout=DEADLINE_S)
    finally:
        proc.kill()
    assert proc.returncode == 4, err
    assert "Traceback" not in err and "RPCError" not in err, err
    [line] = [x for x in err.splitlines() if x.startswith("error:")]
    assert line.startswith(f"error: run {run_id}: the Temporal server stopped answering (")
    assert line.endswith(f"what was recorded is kept: once it is back (`passhat server start` starts the "
                         f"embedded one), `passhat resume {run_id}` carries on")
    # As it says: the run is recorded, and resume finishes it.
    resumed = passhat("resume", run_id, env=env, timeout=DEADLINE_S)
    assert resumed.returncode == 0, resumed.stderr
    assert all(t.reward == 1.0 for t in Store(f"sqlite:///{tmp_path / 'home' / 'results.db'}").trials(run_id))


def test_ctrl_c_before_the_run_is_recorded_says_nothing_was_started(env, tmp_path):
    run_id = "cut-short"
    importing = tmp_path / "importing"
    proc = start({**env, "PASSHAT_TEST_IMPORTING": str(importing)}, "run", "--plugin", "blocking_plugin",
                 "-d", "airline", "--num-tasks", "1", "-m", "scripted/oracle", "-u", "scripted/oracle",
                 "--run-id", run_id, "--yes")
    try:
        wait_for(proc, importing.exists, "plugin import")
        proc.send_signal(signal.SIGINT)  # Ctrl-C
        out, err = proc.communicate(timeout=DEADLINE_S)
    finally:
        proc.kill()
    assert proc.returncode == 130, err
    assert err.strip().splitlines()[-1] == (
        f"error: interrupted before run {run_id} was recorded: nothing of it was started")
    status = passhat("status", run_id, env=env, timeout=120)
    assert status.returncode == 2 and f"no run '{run_id}'" in status.stderr, status.stderr
