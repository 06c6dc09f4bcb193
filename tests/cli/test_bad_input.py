"""Bad input through the real `passhat` command: every mistake gets one clear "error:" line
on stderr, a non-zero exit, no traceback, and leaves no half-written run behind.

Each row of CASES is a separate process, as a user would run it. Most spend their time
importing litellm and tau2, so the selected rows are launched together on a thread pool
(`outcomes`) and each test only waits for its own; running a subset with -k launches only
that subset.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from passhat.domains.tau2_version import installed_rules
from passhat.infra.store import Store
from passhat.testing.harness import passhat
from tests.helpers import PLUGIN_MODULES, VALID_TASK, store_rows
from tests.fixtures_temporal import free_port

AGENTS = ("--agent-model", "scripted/oracle", "--user-model", "scripted/oracle")
RUN = ("run", "--domain", "airline", *AGENTS)


@dataclass(frozen=True)
class Case:
    id: str
    args: tuple[str, ...]
    error: str  # a fragment of the expected message
    # Extra environment; "{home}", "{files}" and "{closed}" are filled in per case; None
    # unsets a variable.
    env: dict[str, str | None] = field(default_factory=dict)
    code: int = 2
    max_s: float | None = None  # how long the command may take, where that matters


def run(*args: str, run_id: str, **kw) -> Case:  # noqa: ANN003
    """A `passhat run` row; the run id lets the test check nothing was recorded for it."""
    return Case(id=run_id, args=(*RUN, "--run-id", run_id, *args), **kw)


CASES: list[Case] = [
    # -- the command line itself ---------------------------------------------------------
    Case("missing-domain", ("run", *AGENTS), "Missing option '--domain'"),
    Case("missing-agent-model", ("run", "--domain", "airline", "--user-model", "scripted/oracle"),
         "Missing option '--agent-model'"),
    Case("missing-user-model", ("run", "--domain", "airline", "--agent-model", "scripted/oracle"),
         "Missing option '--user-model'"),
    run("--bogus", run_id="unknown-option", error="No such option: --bogus"),
    run("--agent-tools", "mcp", run_id="agent-tools-without-a2a",
        error="--agent-tools is for an agent behind A2A (--agent a2a:URL)"),
    Case("unknown-command", ("nosuchcommand",), "No such command 'nosuchcommand'"),
    Case("tasks-without-domain", ("tasks",), "Missing argument 'domain'"),
    Case("run-with-nothing", ("run",),
         "Missing options '--domain', '--agent-model', '--user-model' (or domains, agents, user in a --config file)"),
    # -- sweep config files (written by the `files` fixture) -------------------------------
    Case("config-missing", ("run", "--config", "{files}/nope.toml"), "{files}/nope.toml: no such config file"),
    Case("config-syntax", ("run", "--config", "{files}/syntax.toml"),
         "{files}/syntax.toml: line 2, column 10: invalid TOML: Invalid value"),
    Case("config-unknown-key", ("run", "--config", "{files}/unknown-key.toml"),
         "{files}/unknown-key.toml: k: unknown key; known keys: agent, agent_prompt, agent_protocol, agent_tools, agents, concurrency,"),
    Case("config-args-string", ("run", "--config", "{files}/args-string.toml"),
         "{files}/args-string.toml: agents[1].args: must be a table, got a string"),
    Case("config-secret", ("run", "--config", "{files}/secret.toml"),
         "{files}/secret.toml: agents[0].args: api_key would store a secret with the run"),
    Case("config-unknown-task", ("run", "--config", "{files}/unknown-task.toml"),
         "{files}/unknown-task.toml: tasks.airline: unknown task id(s) 9999"),
    Case("config-without-user", ("run", "--config", "{files}/good.toml"),
         "Missing option '--user-model' (or user in a --config file)"),
    # -- budget, demo ----------------------------------------------------------------------
    run("--max-cost", "-1", run_id="max-cost-negative", error="--max-cost must be more than 0 (USD), got -1"),
    Case("resume-max-cost-zero", ("resume", "some-run", "--max-cost", "0"),
         "--max-cost must be more than 0 (USD), got 0"),
    Case("demo-no-tasks", ("demo", "--tasks", "0"), "--tasks must be at least 1, got 0"),
    Case("demo-too-many-tasks", ("demo", "--tasks", "51"),
         "--tasks must be between 1 and 50 (airline has 50 tasks), got 51"),
    Case("demo-no-trials", ("demo", "--trials", "0"), "--trials must be at least 1, got 0"),
    # -- what to run -----------------------------------------------------------------------
    Case("unknown-domain", ("run", "--domain", "nosuchdomain", *AGENTS, "--run-id", "unknown-domain"),
         "Unknown domain 'nosuchdomain'; known domains: airline, retail, telecom, mock, telecom-workflow"),
    run("--task", "9999", run_id="unknown-task",
        error="unknown task id(s) for domain airline: 9999 (see `passhat tasks airline`)"),
    run("--trials", "0", run_id="trials-zero", error="--trials must be at least 1, got 0"),
    run("--trials", "-3", run_id="trials-negative", error="--trials must be at least 1, got -3"),
    run("--trials", "two", run_id="trials-not-integer",
        error="Invalid value for '--trials' / '-k'"),
    run("--concurrency", "0", run_id="concurrency-zero", error="--concurrency must be at least 1, got 0"),
    run("--max-steps", "0", run_id="max-steps-zero", error="--max-steps must be at least 1, got 0"),
    run("--timeout", "0", run_id="timeout-zero", error="--timeout must be more than 0 (seconds), got 0"),
    # tau2 26.3 has no time limit on a conversation: passhat offers none there.
    *([run("--timeout", "30", run_id="timeout-on-26.3",
           error="--timeout (a sweep file's timeout) needs tau2 1.0.x: the installed tau2 26.3")]
      if installed_rules().timeout_reason is None else []),
    run("--retry-for", "soon", run_id="retry-for-not-a-duration",
        error="--retry-for must be a duration such as 900, 90s, 15m or 2h, got 'soon'"),
    run("--max-attempts", "-1", run_id="max-attempts-negative",
        error="--max-attempts must be at least 0, got -1"),
    run("--agent-args", '{"api_key": "sk-not-a-real-key-0123456789"}', run_id="agent-args-key",
        error="--agent-args: api_key would store a secret with the run"),
    run("--output", "xml", run_id="output-xml", error="--output must be 'table' or 'json', got 'xml'"),
    # -- model arguments -------------------------------------------------------------------
    run("--agent-args", "{temperature: 0}", run_id="agent-args-not-json",
        error="--agent-args is not valid JSON (Expecting property name enclosed in double quotes at column 2)"),
    run("--user-args", '{"temperature": 0', run_id="user-args-not-json",
        error="--user-args is not valid JSON"),
    run("--agent-args", "[0.5]", run_id="agent-args-list",
        error="--agent-args must be a JSON object such as"),
    run("--user-args", '"hot"', run_id="user-args-string",
        error="--user-args must be a JSON object such as"),
    run("--agent-args", '{"api_base": "htp://127.0.0.1:8000/v1"}', run_id="api-base-not-http",
        error='--agent-args: api_base "htp://127.0.0.1:8000/v1" is not an http(s) URL such as http://127.0.0.1:8000/v1'),
    run("--user-args", '{"api_base": "http://127.0.0.1:99999/v1"}', run_id="api-base-bad-port",
        error='--user-args: api_base "http://127.0.0.1:99999/v1" is not an http(s) URL'),
    Case("unknown-provider",
         ("run", "--domain", "airline", "--agent-model", "nosuchprovider/x",
          "--user-model", "scripted/oracle", "--run-id", "unknown-provider"),
         "--agent-model: unknown model 'nosuchprovider/x'. Use a litellm model string with its provider"),
    Case("unknown-user-provider",
         ("run", "--domain", "airline", "--agent-model", "scripted/oracle",
          "--user-model", "nosuchprovider/y", "--run-id", "unknown-user-provider"),
         "--user-model: unknown model 'nosuchprovider/y'"),
    # litellm prints "Provider List: ..." on stdout for a model it cannot route, where
    # -o json promises one JSON object (the test checks stdout stays empty).
    Case("unknown-model-json",
         ("run", "--domain", "airline", "--agent-model", "gpt-99-ultra", "--user-model", "scripted/oracle",
          "--run-id", "unknown-model-json", "-o", "json"),
         "--agent-model: unknown model 'gpt-99-ultra'"),
    # A key that is not there: every call would fail (as an HTTP 500, retried for 15 min).
    Case("provider-key-unset",
         ("run", "--domain", "airline", "--agent-model", "openai/gpt-4.1-mini", "--user-model", "scripted/oracle",
          "--agent-args", '{"api_base": "http://127.0.0.1:{closed}/v1"}', "--run-id", "provider-key-unset"),
         "OPENAI_API_KEY (for the agent model openai/gpt-4.1-mini) is not set in this environment; export it",
         env={"OPENAI_API_KEY": None}),
    Case("api-key-env-unset",
         ("run", "--domain", "airline", "--agent-model", "scripted/oracle", "--user-model", "openai/sim",
          "--user-args", '{"api_key_env": "PASSHAT_NO_SUCH_KEY"}', "--run-id", "api-key-env-unset"),
         "PASSHAT_NO_SUCH_KEY (for the user model openai/sim) is not set in this environment",
         env={"PASSHAT_NO_SUCH_KEY": None}),
    Case("scripted-noisy-out-of-range",
         ("run", "--domain", "airline", "--agent-model", "scripted/noisy-1.5",
          "--user-model", "scripted/oracle", "--run-id", "scripted-noisy-out-of-range"),
         "unknown scripted model 'scripted/noisy-1.5': use scripted/oracle, scripted/parallel, "
         "scripted/customer, scripted/judge, "
         "scripted/reviewer, or one with 0 <= P <= 1: scripted/noisy-P"),
    Case("scripted-faulty-out-of-range",
         ("run", "--domain", "airline", "--agent-model", "scripted/faulty-2",
          "--user-model", "scripted/oracle", "--run-id", "scripted-faulty-out-of-range"),
         "unknown scripted model 'scripted/faulty-2'"),
    Case("scripted-bogus",
         ("run", "--domain", "airline", "--agent-model", "scripted/bogus",
          "--user-model", "scripted/oracle", "--run-id", "scripted-bogus"),
         "unknown scripted model 'scripted/bogus'"),
    # -- run ids ---------------------------------------------------------------------------
    Case("run-id-with-space", (*RUN, "--run-id", "my run!"),
         "--run-id 'my run!' must be 1-100 letters, digits, '.', '_' or '-'"),
    Case("run-id-path", (*RUN, "--run-id", "../escape"), "--run-id '../escape' must be"),
    Case("run-id-too-long", (*RUN, "--run-id", "r" * 101), "must be 1-100 letters"),
    # -- task files (their content is written by the `files` fixture) ----------------------
    run("--task-file", "{files}/nope.json", run_id="task-file-missing",
        error="task file {files}/nope.json does not exist"),
    run("--task-file", "{files}", run_id="task-file-directory",
        error="task file {files} is a directory, not a JSON file"),
    run("--task-file", "{files}/broken.json", run_id="task-file-not-json",
        error="task file {files}/broken.json is not valid JSON: Expecting ',' delimiter at line 3, column 1"),
    run("--task-file", "{files}/object.json", run_id="task-file-not-list",
        error="task file {files}/object.json must hold a JSON list of tasks (the format of tau2's tasks.json), not a JSON object"),
    run("--task-file", "{files}/empty.json", run_id="task-file-empty",
        error="task file {files}/empty.json holds an empty list: give at least one task"),
    run("--task-file", "{files}/duplicate.json", run_id="task-file-duplicate-ids",
        error="{files}/duplicate.json: the task at index 1 (id 't1') repeats the id of the task at index 0; task ids must be unique"),
    run("--task-file", "{files}/invalid.json", run_id="task-file-invalid-task",
        error="{files}/invalid.json: the task at index 1 (id 't2'): user_scenario: Field required"),
    run("--task-file", "{files}/unknown-tool.json", run_id="task-file-unknown-tool",
        error="{files}/unknown-tool.json: the task at index 0 (id 't1'): evaluation_criteria.actions.0.name: the airline domain has no agent tool 'fly_me_home'"),
    run("--task-file", "{files}/good.json", "--task", "t9", run_id="task-file-unknown-task",
        error="unknown task id(s) for domain airline@{files}/good.json: t9"),
    Case("task-file-two-domains",
         ("run", "--domain", "airline", "--domain", "retail", *AGENTS, "--task-file",
          "{files}/good.json", "--run-id", "task-file-two-domains"),
         "--task-file replaces the tasks of one domain: give exactly one plain --domain with it"),
    Case("tasks-of-broken-file", ("tasks", "airline@{files}/duplicate.json"),
         "repeats the id of the task at index 0"),
    # -- agents ------------------------------------------------------------------------------
    run("--agent-prompt", "{files}/no-prompt.txt", run_id="agent-prompt-missing",
        error="agent prompt {files}/no-prompt.txt: cannot read it (No such file or directory)"),
    run("--agent-prompt", "{files}/no-placeholder.txt", run_id="agent-prompt-no-placeholder",
        error="agent prompt {files}/no-placeholder.txt has no {policy} placeholder"),
    # -- user personas -------------------------------------------------------------------------
    run("--user-persona", "grumpy", run_id="persona-unknown",
        error="unknown --user-persona 'grumpy': use one of impatient, confused, skeptical, incoherent, "
              "changes-mind (optionally NAME:1 to NAME:3), or file:PATH for your own"),
    run("--user-persona", "impatient:7", run_id="persona-intensity",
        error="--user-persona impatient:7: the intensity must be 1 to 3, e.g. impatient:2"),
    run("--user-persona", "file:{files}/no-persona.txt", run_id="persona-file-missing",
        error="--user-persona file:{files}/no-persona.txt: cannot read {files}/no-persona.txt: No such file or directory"),
    run("--user-persona", "impatient", "--adaptive", run_id="persona-adaptive",
        error="passhat run --adaptive does not take --user-persona yet"),
    Case("persona-gate", ("gate", "--domain", "airline", *AGENTS, "--require", "pass^1 >= 0.5",
                          "--user-persona", "impatient", "--run-id", "persona-gate"),
         "with --user-persona, say which personas the criteria are checked under: --personas all, or some of "
         "impatient:1 separated by commas"),
    Case("persona-gate-unknown", ("gate", "--domain", "airline", *AGENTS, "--require", "pass^1 >= 0.5",
                                  "--user-persona", "impatient", "--personas", "confused", "--run-id", "persona-gate-unknown"),
         "--personas confused: confused is not one of this gate's personas (impatient:1); give 'all' or some of "
         "them separated by commas"),
    Case("persona-gate-baseline", ("gate", "--domain", "airline", *AGENTS, "--baseline", "r", "--max-drop", "0.1",
                                   "--user-persona", "impatient", "--personas", "all", "--run-id", "persona-gate-baseline"),
         "--baseline with --user-persona is not supported yet"),
    run("--agent", "no_such_agent", run_id="unknown-agent",
        error="unknown --agent 'no_such_agent'; tau2's agent registry has: llm_agent, llm_agent_gt"),
    run("--task-file", "{files}/wrong-argument.json", run_id="task-file-wrong-argument",
        error="the task at index 0 (id 't1'): evaluation_criteria.actions.0 (get_reservation_details): "
              "argument 'reservation': the tool has no such parameter; its parameters are: reservation_id"),
    Case("import-json-lines", ("import", "{files}/export.jsonl"),
         "holds JSON lines (passhat's `export --format jsonl`), which keep trials but not the run's "
         "settings: only tau2 results files (`passhat export --format tau2`) and tau-bench result files "
         "can be imported"),
    Case("import-json-lines-of-one-trial", ("import", "{files}/one-trial.jsonl"),
         "holds JSON lines (passhat's `export --format jsonl`)"),
    Case("import-not-json", ("import", "/etc/passwd"),
         "/etc/passwd is not JSON (it begins 'root:x:0:0:"),
    # -- where things live -----------------------------------------------------------------
    run("--task", "0", run_id="temporal-unreachable", env={"TEMPORAL_ADDRESS": "127.0.0.1:{closed}"},
        error="cannot connect to Temporal at 127.0.0.1:{closed}", max_s=60),
    Case("worker-temporal-unreachable", ("worker",), "cannot connect to Temporal at 127.0.0.1:{closed}",
         env={"TEMPORAL_ADDRESS": "127.0.0.1:{closed}"}, max_s=30),
    Case("temporal-address-not-an-address", ("worker",),
         "TEMPORAL_ADDRESS 'not an address' is not a Temporal frontend address: give host:port",
         env={"TEMPORAL_ADDRESS": "not an address"}),
    Case("temporal-address-with-scheme", ("search-attributes", "register"),
         "TEMPORAL_ADDRESS 'http://localhost:7233' is not a Temporal frontend address",
         env={"TEMPORAL_ADDRESS": "http://localhost:7233"}),
    Case("temporal-port-not-a-number", ("server", "status"),
         "PASSHAT_TEMPORAL_PORT must be a TCP port number (1-65535), got 'seven'",
         env={"PASSHAT_TEMPORAL_PORT": "seven"}),
    Case("server-port-out-of-range", ("server", "start", "--port", "99999"),
         "--port (or PASSHAT_TEMPORAL_PORT) must be a TCP port number (1-65535), got 99999"),
    Case("server-ui-port-out-of-range", ("server", "start", "--ui-port", "70000"),
         "--ui-port (or PASSHAT_UI_PORT) must be a TCP port number (1-65535), got 70000"),
    Case("server-port-variable-out-of-range", ("server", "start"),
         "--port (or PASSHAT_TEMPORAL_PORT) must be a TCP port number (1-65535), got 70000",
         env={"PASSHAT_TEMPORAL_PORT": "70000"}),
    run("--task", "0", run_id="home-under-a-file", env={"PASSHAT_HOME": "{files}/good.json/home"},
        error="cannot open results store at sqlite:///{files}/good.json/home/results.db: [Errno 20] Not a directory"),
    run("--task", "0", run_id="db-unreachable",
        env={"PASSHAT_DB_URL": "postgresql+psycopg://postgres@127.0.0.1:1/x"},
        error="cannot open results store at postgresql+psycopg://postgres@127.0.0.1:1/x: connection failed"),
    Case("report-unknown-run", ("report", "no-such-run"), "no run 'no-such-run' in the results store"),
    Case("status-unknown-run", ("status", "no-such-run"), "no run 'no-such-run' in the results store"),
    Case("tasks-unknown-domain", ("tasks", "nosuchdomain"), "Unknown domain 'nosuchdomain'"),
    # -- tau2's task sets and splits -------------------------------------------------------
    run("--task-set-name", "airline_huge", run_id="unknown-task-set",
        error="tau2's registry has no task set 'airline_huge'; task sets: mock, airline, retail, telecom_full"),
    run("--task-split-name", "nope", run_id="unknown-split",
        error="task set airline has no split 'nope'; its splits: train, test, base"),
]

# Hints every message of these kinds must carry, checked on top of the fragment.
HINTS = {
    "temporal-unreachable": "set TEMPORAL_ADDRESS to a reachable Temporal frontend",
    "worker-temporal-unreachable": "set TEMPORAL_ADDRESS to a reachable Temporal frontend",
    "home-under-a-file": "check PASSHAT_HOME / PASSHAT_DB_URL",
    "db-unreachable": "check PASSHAT_HOME / PASSHAT_DB_URL",
    "missing-domain": "see `passhat run --help`",
}


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> Path:
    """One task file per way of being broken, plus a good one."""
    d = tmp_path_factory.mktemp("task-files")
    t2 = {**VALID_TASK, "id": "t2"}
    bad_action = {**VALID_TASK["evaluation_criteria"]["actions"][0], "name": "fly_me_home"}
    agent = '[[agents]]\nmodel = "scripted/oracle"\n'
    trial_lines = [{"run_id": "r", "trial_id": f"r/m/airline/0/trial-{i}", "task_id": "0", "trial": i,
                    "reward": 1.0, "messages": []} for i in range(2)]
    sweep = f'domains = ["airline"]\n[user]\nmodel = "scripted/oracle"\n{agent}'
    contents = {
        "syntax.toml": 'domains = ["airline"]\ntrials = \n',
        "unknown-key.toml": "k = 4\n" + sweep,
        "args-string.toml": sweep + '[[agents]]\nmodel = "scripted/noisy-0.5"\nargs = "hot"\n',
        "secret.toml": sweep.replace(agent, '[[agents]]\nmodel = "scripted/oracle"\nargs = { api_key = "sk-not-a-real-key-0123456789" }\n'),
        "unknown-task.toml": sweep + '[tasks]\nairline = ["0", "9999"]\n',
        "good.toml": f'domains = ["airline"]\n{agent}',
        "good.json": [VALID_TASK],
        "no-placeholder.txt": "You are a helpful agent. Follow the policy.\n",
        "broken.json": '[\n  {"id": "t1"}\n',
        "object.json": {"tasks": [VALID_TASK]},
        "empty.json": [],
        "duplicate.json": [VALID_TASK, VALID_TASK],
        "invalid.json": [VALID_TASK, {k: v for k, v in t2.items() if k != "user_scenario"}],
        "unknown-tool.json": [{**VALID_TASK, "evaluation_criteria": {"actions": [bad_action]}}],
        # tau2-bench's own slip: the parameter is reservation_id.
        "wrong-argument.json": [{**VALID_TASK, "evaluation_criteria": {"actions": [
            {**bad_action, "name": "get_reservation_details", "arguments": {"reservation": "EHGLP3"}}]}}],
        "export.jsonl": "".join(json.dumps(line) + "\n" for line in trial_lines),
        "one-trial.jsonl": json.dumps(trial_lines[0]) + "\n",
    }
    for name, content in contents.items():
        (d / name).write_text(content if isinstance(content, str) else json.dumps(content))
    return d


@dataclass
class Outcome:
    result: subprocess.CompletedProcess
    seconds: float
    home: Path
    fill: dict[str, str]


def _fill(template: str, fill: dict[str, str]) -> str:
    # Not str.format: arguments such as '{"temperature": 0' contain braces of their own.
    for key, value in fill.items():
        template = template.replace(f"{{{key}}}", value)
    return template


def _launch(case: Case, base: Path, files: Path, temporal_address: str, closed: int) -> Outcome:
    home = base / case.id / "home"
    fill = {"home": str(home), "files": str(files), "closed": str(closed)}
    env = {**os.environ, "PASSHAT_HOME": str(home), "TEMPORAL_ADDRESS": temporal_address,
           "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    env.pop("PASSHAT_DB_URL", None)
    for name, value in case.env.items():
        if value is None:
            env.pop(name, None)
        else:
            env[name] = _fill(value, fill)
    start = time.monotonic()
    result = passhat(*(_fill(a, fill) for a in case.args), env=env)
    return Outcome(result, time.monotonic() - start, home, fill)


@pytest.fixture(scope="module")
def outcomes(request, tmp_path_factory, files, temporal_server) -> dict[str, Future]:
    """Start every selected case at once; each test waits for its own."""
    selected = [
        item.callspec.params["case"] for item in request.session.items
        if getattr(item, "originalname", None) == "test_bad_input_is_refused_cleanly"
    ]
    base = tmp_path_factory.mktemp("bad-input")
    closed = free_port()  # nothing listens there
    with ThreadPoolExecutor(max_workers=max(2, os.cpu_count() or 2)) as pool:
        yield {c.id: pool.submit(_launch, c, base, files, temporal_server.address, closed)
               for c in selected}


def assert_clean_refusal(out: Outcome, fragment: str, code: int = 2) -> None:
    """The command failed with one "error:" line containing `fragment`, no traceback."""
    stderr = out.result.stderr
    assert out.result.returncode == code, stderr
    assert "Traceback" not in stderr, stderr
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), stderr
    assert fragment in lines[0], stderr


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_bad_input_is_refused_cleanly(case: Case, outcomes):
    out = outcomes[case.id].result()
    assert_clean_refusal(out, _fill(case.error, out.fill), case.code)
    assert out.result.stdout == "", out.result.stdout  # a refusal prints nothing else
    if case.id in HINTS:
        assert HINTS[case.id] in out.result.stderr
    if case.max_s is not None:
        assert out.seconds < case.max_s
    # Nothing half-written: each case has its own home, so its store must hold no rows
    # at all (and in particular none for the run id it tried).
    db = out.home / "results.db"
    if db.exists():
        store = Store(f"sqlite:///{db}")
        try:
            assert store.get_run(case.id) is None
            assert all(r == [] for r in store_rows(store).values()), store_rows(store)
        finally:
            store.close()


def test_reusing_a_run_id_with_another_configuration_is_refused(temporal_server, tmp_path):
    home = tmp_path / "home"
    env = {**os.environ, "PASSHAT_HOME": str(home), "TEMPORAL_ADDRESS": temporal_server.address,
           "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    env.pop("PASSHAT_DB_URL", None)

    first = passhat(*RUN, "--task", "5", "--trials", "1", "--run-id", "reused", "--output", "json", env=env)
    assert first.returncode == 0, first.stderr
    store = Store(f"sqlite:///{home / 'results.db'}")
    try:
        before = store_rows(store)
        assert len(before["runs"]) == 1 and len(before["trials"]) == 1 and before["steps"]

        second = passhat(*RUN, "--task", "5", "--trials", "2", "--run-id", "reused", env=env)
        assert_clean_refusal(
            Outcome(second, 0.0, home, {}),
            "run 'reused' already exists with a different configuration "
            "(trials: 1 in the run, 2 now); resume it with the same settings, or use a new --run-id",
        )
        # The same configuration with a budget: a run takes a new budget through resume.
        budget = passhat(*RUN, "--task", "5", "--trials", "1", "--run-id", "reused", "--max-cost", "1", env=env)
        assert_clean_refusal(
            Outcome(budget, 0.0, home, {}),
            "run reused exists with no budget; `passhat resume reused --max-cost USD` continues it with another",
        )
        assert store_rows(store) == before  # the original run is untouched
    finally:
        store.close()


def test_attaching_after_the_domain_changed_is_refused_naming_what_changed(temporal_server, tmp_path):
    """A plugin domain (tests/plugin_modules/home_internet, copied so its files can be
    edited) whose policy is edited after a run: running the same run id again, or
    resuming it, is refused in one line naming the domain and "policy"; the run's
    records stay as they were. Restoring the policy attaches again."""
    import shutil

    modules = tmp_path / "modules"
    shutil.copytree(PLUGIN_MODULES / "home_internet", modules / "home_internet")
    home = tmp_path / "home"
    env = {**os.environ, "PASSHAT_HOME": str(home), "TEMPORAL_ADDRESS": temporal_server.address,
           "LITELLM_LOCAL_MODEL_COST_MAP": "True", "PYTHONPATH": str(modules)}
    env.pop("PASSHAT_DB_URL", None)
    args = ("run", "--plugin", "home_internet", "--domain", "home_internet", *AGENTS,
            "--task", "upgrade_to_fiber", "--trials", "1", "--run-id", "edited")

    first = passhat(*args, "--output", "json", env=env)
    assert first.returncode == 0, first.stderr
    store = Store(f"sqlite:///{home / 'results.db'}")
    try:
        digests = store.get_run("edited").run_config().domain_digests
        assert set(digests["home_internet"]) == {"policy", "tools", "db", "tasks"}
        # Reports and exports carry the digest.
        report = passhat("report", "edited", env=env)
        assert f"domain home_internet: policy {digests['home_internet']['policy'][:8]} tools" in report.stdout
        exported = passhat("export", "edited", "--format", "jsonl", "--output-dir", str(tmp_path / "out"), env=env)
        assert exported.returncode == 0, exported.stderr
        line = json.loads((tmp_path / "out" / "edited.jsonl").read_text().splitlines()[0])
        assert line["domain_digest"] == digests["home_internet"]
        before = store_rows(store)
        policy = modules / "home_internet" / "policy.md"
        original = policy.read_text()
        policy.write_text(original + "- Offer the fiber plan to every caller.\n")
        refusal = ("the domain changed since run 'edited' was recorded: home_internet (policy) differ; "
                   "restore the domain to go on with this run, or use a new --run-id")
        assert_clean_refusal(Outcome(passhat(*args, env=env), 0.0, home, {}), refusal)
        assert_clean_refusal(Outcome(passhat("resume", "edited", env=env), 0.0, home, {}), refusal)
        assert store_rows(store) == before
        policy.write_text(original)
        again = passhat(*args, "--output", "json", env=env)
        assert again.returncode == 0, again.stderr
    finally:
        store.close()
