"""Agents behind A2A (`--agent a2a:URL`), text mode, over real loopback HTTP with the real
a2a-sdk on both sides and a real Temporal server: the reference agent
(examples/a2a_agent) forwarding to the scripted oracle over HTTP scores as the oracle
does, on A2A 1.0 and on 0.3, replying with Messages or with Tasks; an agent that answers
garbage fails as the installed tau2 counts a model's failure (agent_error on 26.3; on
1.0.x re-runs, each a new message, then not evaluable), with its reply shown; one that
hangs is bounded by the turn's timeout; an agent URL that gives no card is refused before
anything runs."""

from __future__ import annotations

import threading

import pytest

from passhat.cli.run_options import UserInputError
from passhat.domains.a2a_protocol import A2A_AGENT_MODEL
from passhat.domains.tau2_version import installed_rules
from passhat.testing.a2a_agents import A2AAgentServer, chat_agent, fixed_reply_agent, hanging_agent, task_noted
from passhat.testing.fault_server import FaultServer
from passhat.testing.harness import free_port, until
from passhat.testing.scripted_http import ScriptedResponder, http_args
from passhat.workflows.client import cancel_run, start_run
from tests.runs import config, run_to_end, worker_for

TASKS = ["0", "1", "2", "3"]


@pytest.fixture(scope="module")
def oracle_model():
    """The scripted oracle over HTTP: the model behind the agent."""
    with FaultServer(responder=ScriptedResponder(["airline"])) as srv:
        yield srv


def a2a_config(agent: A2AAgentServer, **overrides):
    return config(**{"agent": f"a2a:{agent.url}", "agent_models": [], "user_model": "scripted/oracle",
                     "task_ids": TASKS, "trials": 1, **overrides})


@pytest.mark.parametrize("a2a_version, reply_as, description, protocol", [
    ("1.0", "message", "", "agentify"),
    # as an AgentBeats purple agent: a 0.3 server, Task replies, the AgentBeats prompt
    ("0.3", "task", "A tau2 purple agent for AgentBeats.", "agentbeats"),
])
async def test_the_reference_agent_scores_as_the_oracle_does(client, sqlite_store, oracle_model, a2a_version,
                                                             reply_as, description, protocol):
    agent_side = chat_agent("openai/oracle", http_args(oracle_model.url), reply_as)
    with A2AAgentServer(agent_side, a2a_version=a2a_version, description=description) as agent:
        cfg = a2a_config(agent, trials=2)
        assert cfg.agent_models == [A2A_AGENT_MODEL] and cfg.agent_protocol == protocol
        assert cfg.agent_digests[cfg.agent]["card name"] == "passhat example agent"
        await run_to_end(client, sqlite_store, cfg)
        received = agent.received
    marker = {"agentify": "Please response in the JSON format.", "agentbeats": "Please respond in JSON format."}
    assert all(marker[protocol] in chat[0]["content"] for chat in agent_side.histories.values())
    trials = sqlite_store.trials(cfg.run_id)
    assert len(trials) == len(TASKS) * 2
    assert {(t.status, t.reward, t.termination_reason) for t in trials} == {("scored", 1.0, "user_stop")}
    turns = [s for t in trials for s in sqlite_store.steps(t.trial_id) if s.agent_state_json]
    assert len(received) == len(turns) == len(set(received))  # every turn sent once
    contexts = {t.trial_id: {s.agent_turn()["a2a"]["context_id"] for s in sqlite_store.steps(t.trial_id)
                             if s.agent_state_json} for t in trials}
    assert all(len(c) == 1 for c in contexts.values())  # one context a trial ...
    assert len({c for cs in contexts.values() for c in cs}) == len(trials)  # ... each its own
    assert {s.finish_reason for s in turns} == {"message" if reply_as == "message" else "completed"}
    assert all(s.latency_s > 0 for s in turns)
    # the usage the agent reports in its replies' metadata is the turn's, as a model call's
    assert all(s.input_tokens > 0 and s.output_tokens > 0 for s in turns)
    others = [s for t in trials for s in sqlite_store.steps(t.trial_id) if not s.agent_state_json]
    assert sum(t.input_tokens for t in trials) == sum(s.input_tokens for s in [*turns, *others])
    # the agent's tool actions were executed by passhat as tool steps
    assert any(s.role == "tool" for t in trials for s in sqlite_store.steps(t.trial_id))


def assert_failed_as_tau2_counts(trial, received: list[str], failure_class: str) -> None:
    """The agent's failure, as the installed tau2 counts a model's: agent_error with
    reward 0 after one message (26.3); a simulation re-run from the start, each attempt
    one new message, and then not evaluable (1.0.x)."""
    rules = installed_rules()
    if rules.on_model_failure == "rerun":
        assert (trial.status, trial.termination_reason, trial.error_class) == (
            "not_evaluable", rules.exhausted_reason, failure_class)
        assert len(received) == len(set(received)) == 1 + rules.simulation_retries
    else:
        assert (trial.status, trial.reward, trial.termination_reason) == ("scored", 0.0, "agent_error")
        assert len(received) == 1  # not sent again: the agent may have acted on it


async def test_an_agent_that_answers_garbage_fails_with_its_reply_shown(client, sqlite_store):
    with A2AAgentServer(fixed_reply_agent("I am not sure what to do.")) as agent:
        cfg = a2a_config(agent, task_ids=["0"])
        await run_to_end(client, sqlite_store, cfg)
        received = agent.received
    [trial] = sqlite_store.trials(cfg.run_id)
    assert_failed_as_tau2_counts(trial, received, "A2AUnparsableReply")
    last = sqlite_store.steps(trial.trial_id)[-1]
    assert last.failure_class == "A2AUnparsableReply"
    assert "I am not sure what to do." in last.failure
    assert last.message_list()[0].content == "I am not sure what to do."


async def test_an_agent_that_hangs_is_bounded_by_the_turn_timeout(client, sqlite_store):
    release = threading.Event()
    try:
        with A2AAgentServer(hanging_agent(release)) as agent:
            cfg = a2a_config(agent, task_ids=["0"], model_timeout=2.0)
            await run_to_end(client, sqlite_store, cfg)
            received = agent.received
    finally:
        release.set()
    [trial] = sqlite_store.trials(cfg.run_id)
    assert_failed_as_tau2_counts(trial, received, "A2ATimeout")
    assert sqlite_store.steps(trial.trial_id)[-1].failure_class == "A2ATimeout"


def test_an_agent_url_without_a_card_is_refused_before_anything_runs():
    with pytest.raises(UserInputError, match=r"cannot reach the agent at http://127\.0\.0\.1:\d+/\.well-known"):
        config(agent=f"a2a:http://127.0.0.1:{free_port()}", agent_models=[])
    with FaultServer(responder=ScriptedResponder(["airline"])) as srv:  # answers, but no card
        with pytest.raises(UserInputError, match="cannot read the agent card"):
            config(agent=f"a2a:{srv.url}", agent_models=[])
    with pytest.raises(UserInputError, match="after a2a: comes the agent's http"):
        config(agent="a2a:localhost", agent_models=[])


async def test_a_cancelled_run_cancels_the_agents_task(client, sqlite_store):
    """Cancel stops the conversation at once: the turn in flight is cancelled, and so is
    the task it was waiting on at the agent (A2A tasks/cancel)."""
    release = threading.Event()
    try:
        with A2AAgentServer(hanging_agent(release, reply_as="task")) as agent:
            cfg = a2a_config(agent, task_ids=["0"])
            async with worker_for(client, sqlite_store) as queue:
                await start_run(client, sqlite_store, cfg, task_queue=queue)
                trial_id = cfg.units()[0].trial(0).trial_id
                await until(lambda: task_noted(client, trial_id), "the turn's task noted", 120)
                assert await cancel_run(client, sqlite_store, cfg.run_id) == "cancelled"
                await until(lambda: agent.cancelled, "the agent's task cancelled", 60)
            received = agent.received
    finally:
        release.set()
    [trial] = sqlite_store.trials(cfg.run_id)
    assert trial.status == "cancelled"
    assert len(received) == 1


def test_a_sweep_file_names_an_agent_behind_a2a(tmp_path):
    """`agent = "a2a:URL"` (and `agent_protocol`) in a sweep file, with no [[agents]]."""
    from passhat.cli import sweep_config
    from passhat.cli.run_config import build_config
    from passhat.cli.run_options import RunOptions

    with A2AAgentServer(fixed_reply_agent("-")) as agent:
        path = tmp_path / "sweep.toml"
        path.write_text(f'domains = ["airline"]\ntasks = {{ airline = ["0"] }}\nagent = "a2a:{agent.url}"\n'
                        f'agent_protocol = "agentbeats"\n[user]\nmodel = "scripted/oracle"\n')
        values = sweep_config.merge(sweep_config.load(str(path)), RunOptions(), set())
        sweep_config.check_required(values, "")
        cfg = build_config(values)
    assert (cfg.agent, cfg.agent_protocol, cfg.agent_models) == (f"a2a:{agent.url}", "agentbeats", [A2A_AGENT_MODEL])
    assert cfg.agent_digests[cfg.agent] == {"card name": "passhat example agent", "card version": "1.0.0",
                                            "card url": f"{agent.url}/"}


def test_the_example_agent_refuses_an_unset_key_variable_in_one_line():
    import os
    import subprocess
    import sys
    from pathlib import Path

    agent = Path(__file__).resolve().parents[2] / "examples" / "a2a_agent" / "agent.py"
    env = {k: v for k, v in os.environ.items() if k != "PASSHAT_UNSET_KEY"}
    done = subprocess.run([sys.executable, str(agent), "--model", "openai/m", "--api-key-env", "PASSHAT_UNSET_KEY"],
                          env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert done.stderr.splitlines()[-1] == ("agent.py: error: --api-key-env PASSHAT_UNSET_KEY: that variable is "
                                            "not set in this environment")
