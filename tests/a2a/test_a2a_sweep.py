"""A sweep of agents behind A2A: `--agent a2a:URL` repeated runs every task and trial
against each agent, as `--agent-model` repeated does with models, through the real
command on the session's Temporal server, over real loopback HTTP with a2a-sdk on both
sides. Two agents: the reference agent (examples/a2a_agent) forwarding to the scripted
oracle, whose card says nothing of AgentBeats (agentify), and one that gives up after
its first tool action in every second context of a task (testing/a2a_agents.
parting_agent), whose card says it is an AgentBeats agent (agentbeats).

Each agent is an agent model of the run, named by its `a2a:URL`: its own trials, its own
group with pass^k in `report` (every format), its own card in `show`, `report` and the
tau2 export; each received only its own trials' messages, in its own convention."""

from __future__ import annotations

import json
import os
from types import SimpleNamespace

import pytest

from passhat.activities.a2a_turn import message_id
from passhat.testing.a2a_agents import A2AAgentServer, chat_agent, parting_agent
from passhat.testing.fault_server import FaultServer
from passhat.testing.harness import free_port, passhat
from passhat.testing.scripted_http import ScriptedResponder, http_args
from tests.helpers import tasks_with_agent_writes

# Airline tasks whose agent writes after its first tool action: quitting there fails them.
TASKS = tasks_with_agent_writes(2, after_first=True, prefer=("2", "8"))
TASK_ARGS = [a for t in TASKS for a in ("--task", t)]
AGENTIFY = "Please response in the JSON format."
AGENTBEATS = "Please respond in JSON format."
PARTING = "passhat parting agent"


@pytest.fixture(scope="module")
def sweep(temporal_server, tmp_path_factory):
    """One run sweeping two agents: 2 tasks x 2 trials each."""
    home = tmp_path_factory.mktemp("a2a-sweep")
    env = {**os.environ, "TEMPORAL_ADDRESS": temporal_server.address, "PASSHAT_HOME": str(home / "home"),
           "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    env.pop("PASSHAT_DB_URL", None)
    with FaultServer(responder=ScriptedResponder(["airline"])) as model, \
            A2AAgentServer(chat_agent("openai/oracle", http_args(model.url))) as oracle, \
            A2AAgentServer(parting_agent("openai/oracle", http_args(model.url)), name=PARTING,
                           description="An AgentBeats purple agent that stops early.") as parting:
        agents = ["--agent", f"a2a:{oracle.url}", "--agent", f"a2a:{parting.url}"]
        suite = ["--domain", "airline", *TASK_ARGS, "--user-model", "scripted/oracle", "--trials", "2"]
        ran = passhat("run", *suite, *agents, "--run-id", "sweep", "--yes", env=env, timeout=900)
        assert ran.returncode == 0, ran.stderr
        # attaching with another set of agents is refused, naming the agent that differs
        alone = passhat("run", *suite, "--agent", f"a2a:{oracle.url}", "--run-id", "sweep", "--yes", env=env)
        # resume reads both cards again, and finds the run as it was
        resumed = passhat("resume", "sweep", env=env)
        refusals = {
            "gate": passhat("gate", "--domain", "airline", *TASK_ARGS, "--user-model", "scripted/oracle", *agents,
                            "--require", "pass^1 >= 0.3", "--yes", env=env),
            "adaptive": passhat("run", *suite, *agents, "--adaptive", env=env),
            "model": passhat("run", *suite, *agents, "--agent-model", "scripted/oracle", env=env),
            "mixed": passhat("run", *suite, *agents[:2], "--agent", "llm_agent", env=env),
            "dead": passhat("run", *suite, *agents, "--agent", f"a2a:http://127.0.0.1:{free_port()}", env=env),
        }
        trials = json.loads(passhat("trials", "sweep", "-o", "json", env=env).stdout)["trials"]
        yield SimpleNamespace(env=env, oracle=oracle, parting=parting, trials=trials, alone=alone, resumed=resumed,
                              refusals=refusals, names={f"a2a:{oracle.url}": oracle, f"a2a:{parting.url}": parting})


def _card(name: str, url: str) -> str:
    return f"card name {name}, card version 1.0.0, card url {url}/"


def _cards(run) -> dict[str, str]:
    return {f"a2a:{run.oracle.url}": _card("passhat example agent", run.oracle.url),
            f"a2a:{run.parting.url}": _card(PARTING, run.parting.url)}


def test_each_agent_runs_every_task_and_trial_with_pass_hat_k_of_its_own(sweep):
    oracle, parting = f"a2a:{sweep.oracle.url}", f"a2a:{sweep.parting.url}"
    by_agent = {}
    for t in sweep.trials:
        by_agent.setdefault(t["agent_model"], []).append((t["task_id"], t["reward"]))
    assert sorted(by_agent[oracle]) == sorted((t, 1.0) for t in TASKS for _ in range(2))
    assert sorted(by_agent[parting]) == sorted((t, r) for t in TASKS for r in (0.0, 1.0))
    assert set(by_agent) == {oracle, parting}
    report = json.loads(passhat("report", "sweep", "-o", "json", env=sweep.env).stdout)
    groups = {g["agent_model"]: g for g in report["runs"][0]["groups"]}
    assert set(groups) == {oracle, parting}
    assert [groups[oracle]["pass_hat_k"][k]["value"] for k in ("1", "2")] == [1.0, 1.0]
    assert [groups[parting]["pass_hat_k"][k]["value"] for k in ("1", "2")] == [0.5, 0.0]
    for name, server in sweep.names.items():
        assert groups[name]["agent"]["name"] == name
        assert groups[name]["agent"]["parts"]["card url"] == f"{server.url}/"
    assert groups[parting]["agent"]["parts"]["card name"] == PARTING


def test_each_agent_received_only_its_own_trials_messages_in_its_own_convention(sweep):
    for name, server in sweep.names.items():
        own = [t["trial_id"] for t in sweep.trials if t["agent_model"] == name]
        others = [t["trial_id"] for t in sweep.trials if t["agent_model"] != name]
        ids = {trial: {message_id(SimpleNamespace(trial_id=trial), step) for step in range(200)}
               for trial in own + others}
        received = set(server.received)
        assert received and received <= set().union(*(ids[t] for t in own)), name
        assert all(received & ids[t] for t in own), name  # every trial of its own reached it
        assert not any(received & ids[t] for t in others), name
        firsts = [history[0]["content"] for history in server.counting.inner.histories.values()]
        assert len(firsts) == len(own)  # a context per trial
        wanted, other = (AGENTBEATS, AGENTIFY) if server is sweep.parting else (AGENTIFY, AGENTBEATS)
        assert all(wanted in text and other not in text for text in firsts), name


def test_show_report_and_export_name_each_agent(sweep, tmp_path):
    cards = _cards(sweep)
    for name, card in cards.items():
        trial = next(t for t in sweep.trials if t["agent_model"] == name)
        shown = passhat("show", trial["trial_id"], env=sweep.env)
        assert shown.returncode == 0, shown.stderr
        text = " ".join(shown.stdout.split())
        assert card in text and [c for c in cards.values() if c != card][0] not in text
    for fmt in ("table", "markdown", "html"):
        shown = passhat("report", "sweep", "-o", fmt, env=sweep.env)
        assert shown.returncode == 0, shown.stderr
        assert all(card in " ".join(shown.stdout.split()) for card in cards.values()), fmt
    done = passhat("export", "sweep", "--format", "tau2", "--output-dir", str(tmp_path), env=sweep.env)
    assert done.returncode == 0, done.stderr
    exported = {}
    for path in tmp_path.glob("*.json"):
        agent = json.loads(path.read_text())["info"]["agent_info"]
        exported[agent["llm"]] = agent
    assert set(exported) == set(cards)
    for name, server in sweep.names.items():
        assert exported[name]["implementation"] == name
        assert exported[name]["passhat_agent"]["parts"]["card url"] == f"{server.url}/"


def test_the_set_of_agents_is_the_runs_identity_and_mistakes_are_one_line(sweep):
    assert sweep.alone.returncode == 2 and "already exists with a different configuration" in sweep.alone.stderr
    assert f"a2a:{sweep.parting.url} only in the run" in sweep.alone.stderr
    assert sweep.resumed.returncode == 0, sweep.resumed.stderr
    for what, done in sweep.refusals.items():
        assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1, (what, done.stderr)
        assert "Traceback" not in done.stderr
    assert "decides for one agent at a time" in sweep.refusals["gate"].stderr
    assert "measures one agent at a time" in sweep.refusals["adaptive"].stderr
    assert "leave out --agent-model" in sweep.refusals["model"].stderr
    assert "llm_agent is not one" in sweep.refusals["mixed"].stderr
    dead = sweep.refusals["dead"].stderr
    assert "--agent a2a:http://127.0.0.1:" in dead and sweep.oracle.url not in dead


def test_a_sweep_file_lists_the_agents(sweep, tmp_path):
    from passhat.cli import sweep_config
    from passhat.cli.run_config import build_config
    from passhat.cli.run_options import RunOptions, UserInputError

    names = list(sweep.names)
    path = tmp_path / "sweep.toml"
    path.write_text(f'domains = ["airline"]\nagent = {json.dumps(names)}\n[user]\nmodel = "scripted/oracle"\n')
    options = sweep_config.merge(sweep_config.load(str(path)), RunOptions(), set())
    config = build_config(options)
    assert config.agent_models == names and config.agent is None and config.agent_protocol is None
    assert config.a2a_agents == {names[0]: "agentify", names[1]: "agentbeats"}
    assert {n: d["card url"] for n, d in config.agent_digests.items()} == {n: f"{s.url}/" for n, s in sweep.names.items()}
    path.write_text('agent = ["a2a:http://127.0.0.1:1", 7]\n')
    with pytest.raises(UserInputError, match=r"sweep.toml: agent\[1\]: must be a string, got an integer"):
        sweep_config.load(str(path))

