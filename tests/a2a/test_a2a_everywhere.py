"""Everything passhat does with a run works on a run whose agent is behind A2A, through
the real command on the session's Temporal server: the reference agent (examples/
a2a_agent) forwarding to the scripted oracle over loopback HTTP, with every second
context of a task giving up after its first tool action (testing/a2a_agents.
parting_agent), so each task passes once and fails once.

One run is read by every read-only command: the failed trials' diagnosis (`show`,
`trials --failed`), where the trials part (`report --by task`), `report` as a table,
markdown, JSON and HTML, the tau2 export, all with the agent's identity (its card's
name, version and URL); `passhat review` with the scripted judge. `gate` and `run
--adaptive` run rounds of their own against an agent that always follows the oracle."""

from __future__ import annotations

import json
import os
from types import SimpleNamespace

import pytest

from passhat.domains.tau2_version import installed_rules
from passhat.testing.a2a_agents import QUIT, A2AAgentServer, chat_agent, parting_agent
from passhat.testing.fault_server import FaultServer
from passhat.testing.harness import passhat
from passhat.testing.scripted_http import ScriptedResponder, http_args
from tests.helpers import tasks_with_agent_writes

# Airline tasks whose agent writes after its first tool action: quitting there fails them
# (2 and 8 on 26.3; 1.0.x's task 2 only reads).
TASKS = tasks_with_agent_writes(2, after_first=True, prefer=("2", "8"))
TASK_ARGS = [a for t in TASKS for a in ("--task", t)]
CARD = "card name passhat example agent, card version 1.0.0, card url {url}/"


@pytest.fixture(scope="module")
def model():
    """The scripted models over HTTP: the agent's model, and the review judge."""
    with FaultServer(responder=ScriptedResponder(["airline"])) as srv:
        yield srv


@pytest.fixture(scope="module")
def a2a_run(temporal_server, tmp_path_factory, model):
    """The run every read-only test reads: 2 tasks x 2 trials, one of each failing."""
    home = tmp_path_factory.mktemp("a2a-everywhere")
    env = {**os.environ, "TEMPORAL_ADDRESS": temporal_server.address, "PASSHAT_HOME": str(home / "home"),
           "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    env.pop("PASSHAT_DB_URL", None)
    with A2AAgentServer(parting_agent("openai/oracle", http_args(model.url))) as agent:
        ran = passhat("run", "--domain", "airline", *TASK_ARGS, "--agent", f"a2a:{agent.url}",
                      "--user-model", "scripted/oracle", "--trials", "2", "--run-id", "a2a", "--yes", env=env)
    assert ran.returncode == 0, ran.stderr
    trials = json.loads(passhat("trials", "a2a", "-o", "json", env=env).stdout)["trials"]
    return SimpleNamespace(env=env, url=agent.url, home=home, trials=trials, card=CARD.format(url=agent.url))


def _failed(run) -> list[dict]:
    return [t for t in run.trials if t["reward"] != 1.0]


def test_each_task_passes_once_and_the_failure_is_diagnosed_where_it_left_the_gold_path(a2a_run):
    outcomes = sorted((t["task_id"], t["reward"]) for t in a2a_run.trials)
    assert outcomes == sorted((t, r) for t in TASKS for r in (0.0, 1.0))
    for trial in _failed(a2a_run):
        shown = json.loads(passhat("show", trial["trial_id"], "-o", "json", env=a2a_run.env).stdout)
        first = shown["diagnosis"]["first_off_path"]
        # the agent's first tool action was gold; its next gold action (a write) was never made
        assert first["kind"] in ("skipped_write", "skipped_action"), shown["diagnosis"]
        assert shown["diagnosis"]["ended_by"]["termination_reason"] == "user_stop"
        table = passhat("show", trial["trial_id"], env=a2a_run.env).stdout
        assert "diagnosis: " + first["kind"] in table and QUIT in table
        assert a2a_run.card in table
    failed = passhat("trials", "a2a", "--failed", env=a2a_run.env).stdout
    assert failed.count("skipped_") == len(TASKS)


def test_report_by_task_says_where_the_trials_part(a2a_run):
    by_task = passhat("report", "a2a", "--by", "task", env=a2a_run.env)
    assert by_task.returncode == 0, by_task.stderr
    text = " ".join(by_task.stdout.split())
    # the failing trial ended where the passing one made its next call
    assert text.count("1 of 2 trials ended (user stopped) where the passing ones called") == len(TASKS), text
    report = json.loads(passhat("report", "a2a", "-o", "json", env=a2a_run.env).stdout)
    [group] = report["runs"][0]["groups"]
    assert {t["task_id"]: t["divergence"]["kind"] for t in group["task_results"]} == {t: "flaky" for t in TASKS}
    assert group["agent"]["parts"] == {"card name": "passhat example agent", "card version": "1.0.0",
                                       "card url": f"{a2a_run.url}/"}
    assert group["agent_model"] == "a2a" and group["pass_hat_k"]["1"]["value"] == 0.5


def test_report_in_every_format_names_the_agent(a2a_run, tmp_path):
    for fmt in ("table", "markdown"):
        shown = passhat("report", "a2a", "-o", fmt, env=a2a_run.env)
        assert shown.returncode == 0, shown.stderr
        assert a2a_run.card in " ".join(shown.stdout.split()), fmt
    html = passhat("report", "a2a", "-o", "html", env=a2a_run.env)
    assert html.returncode == 0, html.stderr
    assert a2a_run.card in html.stdout
    assert "skipped_" in html.stdout  # the failed trials' diagnosis, in their transcripts


def test_the_tau2_export_holds_the_agents_identity(a2a_run, tmp_path):
    from tau2.data_model.simulation import Results

    done = passhat("export", "a2a", "--format", "tau2", "--output-dir", str(tmp_path), env=a2a_run.env)
    assert done.returncode == 0, done.stderr
    [path] = tmp_path.glob("*.json")
    body = json.loads(path.read_text())
    agent = body["info"]["agent_info"]
    assert (agent["implementation"], agent["llm"]) == (f"a2a:{a2a_run.url}", "a2a")
    assert agent["passhat_agent"]["parts"] == {"card name": "passhat example agent", "card version": "1.0.0",
                                               "card url": f"{a2a_run.url}/"}
    results = Results.model_validate_json(path.read_text())
    assert sorted(s.reward_info.reward for s in results.simulations) == [0.0, 0.0, 1.0, 1.0]


def test_review_reads_the_a2a_runs_failures(a2a_run, model):
    args = json.dumps(http_args(model.url))
    reviewed = passhat("review", "a2a", "--judge-model", "openai/reviewer", "--judge-args", args, "-o", "json",
                       env=a2a_run.env)
    assert reviewed.returncode == 0, reviewed.stderr
    assert json.loads(reviewed.stdout)["review"]["reviewed"] == len(_failed(a2a_run))
    shown = json.loads(passhat("show", _failed(a2a_run)[0]["trial_id"], "-o", "json", env=a2a_run.env).stdout)
    [review] = shown["reviews"]
    assert review["blame"] == "agent"  # it closed the task with an expected action never tried
    if installed_rules().reviewer != "tau2":  # tau2 1.0.x's reviewer tags it in its own words
        assert [e["category"] for e in review["errors"]] == ["skipped_action"], review


def test_gate_and_adaptive_run_their_rounds_against_an_a2a_agent(a2a_run, model):
    with A2AAgentServer(chat_agent("openai/oracle", http_args(model.url))) as agent:
        suite = ["--domain", "airline", *TASK_ARGS, "--agent", f"a2a:{agent.url}", "--user-model", "scripted/oracle",
                 "--yes", "-o", "json"]
        gated = passhat("gate", *suite, "--require", "pass^1 >= 0.3", "--max-trials", "2", "--run-id", "a2a-gate",
                        env=a2a_run.env, timeout=600)
        adaptive = passhat("run", *suite, "--trials", "2", "--adaptive", "--precision", "0.4",
                           "--run-id", "a2a-adaptive", env=a2a_run.env, timeout=600)
    assert gated.returncode == 0, gated.stderr
    record = json.loads(gated.stdout)
    assert record["verdict"] == "PASS" and record["criteria"][0]["estimate"] == 1.0
    assert adaptive.returncode == 0, adaptive.stderr
    measured = json.loads(adaptive.stdout)
    assert measured["estimate"] == 1.0 and measured["evaluable"] == measured["conversations"]
    rounds = json.loads(passhat("trials", "a2a-gate-r0", "-o", "json", env=a2a_run.env).stdout)["trials"]
    assert {t["agent_model"] for t in rounds} == {"a2a"}
