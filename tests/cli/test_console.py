"""What the `passhat` command prints and where diagnostics go: one line per trial that
is not evaluable and no tracebacks on the console, details in PASSHAT_HOME/logs/passhat.log
and in `show`, `-v` for more; read-only commands that never start the embedded server;
ports, addresses, filters, links and JSON output. Real processes, a real Temporal."""

from __future__ import annotations

import json
import os
import pty
import re
import select
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from passhat.contracts import RunConfig, TaskUnit
from passhat.infra.store import Store
from passhat.testing.harness import PASSHAT, Passhat, free_port, free_ports, passhat, stopping_workers, until

ANSI = "\x1b["


def _env(home: Path, **extra: str) -> dict[str, str]:
    env = dict(os.environ)
    for name in ("PASSHAT_DB_URL", "TEMPORAL_ADDRESS", "PASSHAT_TEMPORAL_UI", "TEMPORAL_NAMESPACE",
                 "PASSHAT_TEMPORAL_PORT", "PASSHAT_UI_PORT"):
        env.pop(name, None)
    env.update(PASSHAT_HOME=str(home), LITELLM_LOCAL_MODEL_COST_MAP="True", **extra)
    return env


def lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.strip()]


# ---------------------------------------------------------------------------------------
# An unreachable provider: the console stays readable, the details are kept


@pytest.fixture(scope="module")
def unreachable_run(temporal_server, tmp_path_factory):
    """`passhat run -o json` of two trials whose agent model is an OpenAI-compatible
    endpoint on a closed loopback port, retried for 3 s: both are not evaluable."""
    home = tmp_path_factory.mktemp("unreachable") / "home"
    env = _env(home, TEMPORAL_ADDRESS=temporal_server.address,
               OPENAI_API_KEY="sk-console-test-canary-0123456789")
    args = json.dumps({"api_base": f"http://127.0.0.1:{free_port()}/v1"})
    result = passhat("run", "--domain", "airline", "--task", "1", "--task", "2",
                     "--agent-model", "openai/x", "--user-model", "scripted/oracle",
                     "--agent-args", args, "--retry-for", "3s", "--workers", "2",
                     "--run-id", "unreachable", "--output", "json", env=env, timeout=180)
    return env, home, result


def test_unreachable_provider_is_one_line_per_trial(unreachable_run):
    env, home, result = unreachable_run
    assert result.returncode == 1, result.stderr
    body = json.loads(result.stdout)  # stdout is exactly one JSON object
    assert body["run_id"] == "unreachable" and body["results"][0]["evaluable"] == 0
    stderr = result.stderr
    assert "Traceback" not in stderr and ANSI not in stderr and "TMPRL" not in stderr, stderr
    assert not re.search(r"^(INFO|WARNING) ", stderr, re.MULTILINE), stderr
    reported = [line for line in lines(stderr) if line.startswith("not evaluable: ")]
    assert sorted(line.split(": ")[1] for line in reported) == [
        "unreachable/openai/x/airline/1/trial-0", "unreachable/openai/x/airline/2/trial-0"]
    # The trial's error class and message (retries for 3 s ran out: Temporal's timeout).
    assert all(re.fullmatch(r"not evaluable: \S+: \w+[ :].+", line) for line in reported), reported
    assert not any(re.search(r"(\w+)\b.*: \1\b", line.split(": ", 2)[2]) for line in reported), reported
    # Besides those: a line announcing the run and the closing advice, nothing else.
    assert len(lines(stderr)) <= len(reported) + 3, stderr
    # The details went to the log file: the activity failures with their tracebacks.
    log = (home / "logs" / "passhat.log").read_text()
    assert "Completing activity as failed" in log and "Traceback" in log
    assert "sk-console-test-canary" not in log


def test_show_has_the_details_and_no_reward_none(unreachable_run):
    env, _, _ = unreachable_run
    shown = passhat("show", "unreachable/openai/x/airline/1/trial-0", env=env, timeout=180)
    assert shown.returncode == 0, shown.stderr
    as_json = json.loads(passhat("show", "unreachable/openai/x/airline/1/trial-0", "-o", "json", env=env, timeout=180).stdout)
    assert (as_json["status"], as_json["reward"]) == ("not_evaluable", None) and as_json["error_class"]
    assert f"not evaluable: {as_json['error_class']}" in shown.stdout
    assert f"{as_json['error_class']}: {as_json['error_class']}" not in shown.stdout  # named once
    assert "reward None" not in shown.stdout and "(not scored: not evaluable)" in shown.stdout
    assert as_json["messages"][0]["step"] == 0


def test_verbose_resume_shows_the_library_warnings(unreachable_run):
    """-v puts what the log file has on the console too; resume reports each trial that
    fails again once more."""
    env, _, _ = unreachable_run
    result = passhat("-v", "resume", "unreachable", env=env, timeout=180)
    assert result.returncode == 1, result.stderr
    # Temporal's own records (its worker's, its workflow logger's), which the default
    # console leaves to the log file.
    assert re.search(r"^(INFO|WARNING) temporalio\.", result.stderr, re.MULTILINE), result.stderr
    assert len([line for line in lines(result.stderr) if line.startswith("not evaluable: ")]) == 2


def test_status_runs_and_trials_of_the_run(unreachable_run, temporal_server):
    env, _, _ = unreachable_run
    status = passhat("status", "unreachable", "-o", "json", env=env, timeout=180)
    assert status.returncode == 0, status.stderr
    body = json.loads(status.stdout)
    assert (body["run_id"], body["status"], body["done"], body["trials"], body["not_evaluable"]) == (
        "unreachable", "completed", 2, 2, 2)
    assert body["workflow"] == "completed" and body["cost"] == 0.0

    runs = passhat("runs", env=env, timeout=180)
    assert lines(runs.stdout)[0].split("\t")[:3] == ["run", "status", "trials done"]
    assert lines(runs.stdout)[1].startswith("unreachable\tcompleted\t2/2\t-\t2\t")
    assert json.loads(passhat("runs", "-o", "json", env=env, timeout=180).stdout)["runs"][0]["not_evaluable"] == 2

    listed = json.loads(passhat("trials", "unreachable", "-o", "json", env={
        **env, "PASSHAT_TEMPORAL_UI": "http://ui.example:8080/", "TEMPORAL_NAMESPACE": "default"}, timeout=180).stdout)
    trial = listed["trials"][0]
    assert trial["trial_id"] == "unreachable/openai/x/airline/1/trial-0"
    assert trial["outcome"] == "not_evaluable" and trial["error_class"] and trial["error"]
    # The link opens the workflow itself, in the configured namespace.
    assert trial["temporal_ui"] == (
        "http://ui.example:8080/namespaces/default/workflows/unreachable%2Fopenai%2Fx%2Fairline%2F1%2Ftrial-0")

    for option, value, what in (("--domain", "airlin", "domain"), ("--agent-model", "openai/y", "agent model")):
        typo = passhat("trials", "unreachable", option, value, env=env, timeout=180)
        assert typo.returncode == 2 and lines(typo.stderr) == [
            f"error: run unreachable has no {what} '{value}'; its {what}s: "
            + ("airline" if what == "domain" else "openai/x")], typo.stderr


# ---------------------------------------------------------------------------------------
# Read-only commands with no server running


@pytest.fixture
def stored_run(tmp_path):
    """A results store with one run and one not-evaluable and one scored trial, and no
    Temporal server anywhere (PASSHAT_HOME has none, TEMPORAL_ADDRESS is unset)."""
    home = tmp_path / "home"
    store = Store(f"sqlite:///{home / 'results.db'}")
    # Two runs, one with ids longer than a terminal line, one with short ids.
    for run_id in ("short", "stored-" + "x" * 40):
        config = RunConfig(run_id=run_id, agent_models=["scripted/noisy-0.7"],
                           user_model="scripted/oracle", domains=["airline"],
                           task_ids={"airline": ["10", "11"]}, trials=1)
        store.create_run(config, config.total_trials())
        units: list[TaskUnit] = config.units()
        failed, scored = units[0].trial(0), units[1].trial(0)
        store.begin_trial(failed)
        store.mark_not_evaluable(failed.trial_id, "APIConnectionError: Connection refused " + "x" * 100,
                                 "APIConnectionError")
        store.begin_trial(scored)
        store.finish_trial(scored.trial_id, 1.0, True, {}, "user_stop", 3)
    store.close()
    return home, config, failed.trial_id, scored.trial_id


def test_read_only_commands_never_start_the_embedded_server(stored_run):
    home, config, failed, _ = stored_run
    env = _env(home)
    status = passhat("status", config.run_id, env=env, timeout=60)
    assert status.returncode == 0, status.stderr
    assert ("workflow unknown: the embedded Temporal server is not running; "
            "`passhat server start` starts it") in status.stdout
    for args in (("runs",), ("trials", config.run_id), ("show", failed), ("report", config.run_id),
                 ("export", config.run_id, "--partial", "--output-dir", str(home.parent / "out"))):
        result = passhat(*args, env=env, timeout=60)
        assert result.returncode == 0, (args, result.stderr)
    assert not (home / "temporal.db").exists() and not (home / "temporal.pid").exists()


def test_runs_says_when_there_are_none(tmp_path):
    result = passhat("runs", env=_env(tmp_path / "home"), timeout=60)
    assert result.returncode == 0 and result.stdout == ""
    assert lines(result.stderr) == [f"no runs in the results store (sqlite:///{tmp_path / 'home' / 'results.db'})"]
    assert json.loads(passhat("runs", "-o", "json", env=_env(tmp_path / "home"), timeout=180).stdout) == {"runs": []}


def _on_a_terminal(args: list[str], env: dict[str, str], columns: int) -> str:
    """What a command prints on a terminal `columns` wide (a real pseudo-terminal)."""
    master, slave = pty.openpty()
    proc = subprocess.Popen([str(PASSHAT), *args], env={**env, "COLUMNS": str(columns), "TERM": "dumb"},
                            stdin=subprocess.DEVNULL, stdout=slave, stderr=subprocess.PIPE)
    os.close(slave)
    out = b""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        ready, _, _ = select.select([master], [], [], 1)
        if not ready:
            if proc.poll() is not None:
                break
            continue
        try:
            chunk = os.read(master, 65536)
        except OSError:  # the child closed the terminal
            break
        if not chunk:
            break
        out += chunk
    proc.wait(30)
    os.close(master)
    assert proc.returncode == 0, proc.stderr.read()
    return re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", out.decode()).replace("\r", "")


def test_trials_fit_80_columns_with_whole_ids(stored_run):
    home, config, failed, scored = stored_run
    env = _env(home, PASSHAT_TEMPORAL_UI="http://127.0.0.1:8233")
    # Short ids: a table, one line per trial, the reason cut to fit.
    table = _on_a_terminal(["trials", "short"], env, 80).splitlines()
    assert all(len(row) <= 80 for row in table), table
    for trial_id in ("short/scripted/noisy-0.7/airline/10/trial-0", "short/scripted/noisy-0.7/airline/11/trial-0"):
        assert any(row.strip().startswith(f"{trial_id} ") for row in table), table
    assert any("not_evaluable" in row and "  APIConnect" in row and row.endswith("…") for row in table), table
    # Ids longer than the line: each on a line of its own, whole, its details below.
    shown = _on_a_terminal(["trials", config.run_id], env, 80)
    rows = shown.splitlines()
    assert failed in rows and scored in rows, shown
    assert all(len(row) <= 80 for row in rows if row not in (failed, scored)), shown
    assert "http" not in shown and "--links" in shown
    with_links = _on_a_terminal(["trials", config.run_id, "--links"], env, 80).splitlines()
    link = f"Temporal UI: http://127.0.0.1:8233/namespaces/default/workflows/{failed.replace('/', '%2F')}"
    assert any(row.strip() == link for row in with_links), with_links


def test_show_of_a_scored_trial(stored_run):
    home, _, _, scored = stored_run
    shown = passhat("show", scored, env=_env(home), timeout=60)
    assert shown.returncode == 0 and "outcome success, reward 1," in shown.stdout, shown.stdout


# ---------------------------------------------------------------------------------------
# Ports and addresses


def test_port_options_and_busy_port_advice(tmp_path):
    port, ui_port = free_ports(2)
    env = _env(tmp_path / "home", PASSHAT_UI_PORT=str(ui_port))
    try:
        started = passhat("server", "start", "--port", str(port), env=env, timeout=120)
        assert started.returncode == 0, started.stderr
        assert f"127.0.0.1:{port}" in started.stdout and f"http://127.0.0.1:{ui_port}" in started.stdout
        status = passhat("server", "status", env=env, timeout=60)
        assert f"at 127.0.0.1:{port}" in status.stdout
        assert "warm process: off (PASSHAT_WARM_START=0)" in status.stdout  # tests/conftest.py
    finally:
        passhat("server", "stop", env=env, timeout=60)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        busy = passhat("server", "start", "--port", str(taken.getsockname()[1]),
                       env=_env(tmp_path / "other"), timeout=60)
    assert busy.returncode == 2 and len(lines(busy.stderr)) == 1, busy.stderr
    assert "is already in use" in busy.stderr and "--port N --ui-port M" in busy.stderr
    assert "PASSHAT_TEMPORAL_PORT / PASSHAT_UI_PORT" in busy.stderr
    help_text = passhat("server", "start", "--help", env=env, timeout=60).stdout
    assert "--port" in help_text and "--ui-port" in help_text


# ---------------------------------------------------------------------------------------
# Temporal's core logs go to the log file


async def test_temporal_core_warnings_go_to_the_log_file(fresh_temporal_server, tmp_path):
    """A worker whose server went away: Temporal's core warns about its retries, through
    Python logging into PASSHAT_HOME/logs/passhat.log, never on the worker's own output."""
    ph = Passhat(home=tmp_path / "home", temporal_address=fresh_temporal_server.address)
    for ph in stopping_workers(ph):
        worker = ph.start_worker()
        await worker.ready()
        fresh_temporal_server.stop()
        log = ph.home / "logs" / "passhat.log"
        await until(lambda: log.exists() and "temporalio.core" in log.read_text(),
                    "Temporal core's warnings in the log file", 120)
        assert "TMPRL" not in worker.output() and ANSI not in worker.output(), worker.output()
        assert lines(worker.output()) == ["passhat worker polling task queue(s) passhat"]


# ---------------------------------------------------------------------------------------
# Help and startup


COMMANDS_WITH_OPTIONS = [["run"], ["demo"], ["resume"], ["trials"], ["runs"], ["status"], ["show"],
                         ["report"], ["export"], ["import"], ["worker"], ["server", "start"], []]


def test_help_shows_no_python_types_for_flags_and_lists(tmp_path):
    for command in COMMANDS_WITH_OPTIONS:
        result = passhat(*command, "--help", env=_env(tmp_path / "home"), timeout=60)
        assert result.returncode == 0, result.stderr
        assert "<bool>" not in result.stdout and "<list[" not in result.stdout, (command, result.stdout)
    assert "--verbose" in passhat("--help", env=_env(tmp_path / "home"), timeout=180).stdout


def test_help_and_domains_import_neither_tau2_nor_tracing(tmp_path):
    """What keeps `passhat --help` and `passhat domains` fast (bench/startup.py times
    them): they load neither tau2, litellm nor OpenTelemetry."""
    for args in (["--help"], ["domains"]):
        result = subprocess.run([sys.executable, "-X", "importtime", "-m", "passhat.cli.main", *args],
                                env=_env(tmp_path / "home"), capture_output=True, text=True, timeout=60)
        assert result.returncode == 0, result.stderr
        imported = {line.split("|")[-1].strip() for line in result.stderr.splitlines() if "|" in line}
        assert not {m for m in imported if m.split(".")[0] in ("tau2", "litellm", "opentelemetry")}, args
    assert "airline\t50 tasks" in passhat("domains", env=_env(tmp_path / "home"), timeout=180).stdout
