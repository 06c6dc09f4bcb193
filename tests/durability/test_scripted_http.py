"""The scripted model over HTTP (tests/scripted_http.py) answers exactly as the in-process
scripted provider does, so the durability tests measure passhat, not the stand-in."""

from __future__ import annotations

import json

import pytest

from domains.registry import get_domain
from tests.scripted_http import (
    ScriptedHTTPError,
    ScriptedResponder,
    expected_reward,
    http_args,
    opening_request,
)
from tests.runs import config, run_to_end
from workflows.specs import AGENT_GREETING, trial_seed


@pytest.fixture(scope="module")
def airline_responder():
    return ScriptedResponder(["airline"])


def agent_body(task_id: str, model: str = "oracle", seed: int = 1, domain: str = "airline") -> dict:
    d = get_domain(domain)
    return {
        "model": model, "seed": seed,
        "messages": [
            {"role": "system", "content": d.agent_system_prompt()},
            {"role": "assistant", "content": AGENT_GREETING},
            {"role": "user", "content": opening_request(d.task(task_id))},
        ],
    }


def test_user_and_agent_sides_are_told_apart(airline_responder):
    d = get_domain("airline")
    user = airline_responder.answer({"model": "oracle", "seed": 1, "messages": [
        {"role": "system", "content": d.user_system_prompt("2")},
        {"role": "user", "content": AGENT_GREETING},
    ]})
    assert user == {"role": "assistant", "content": opening_request(d.task("2"))}
    agent = airline_responder.answer(agent_body("2"))
    gold = d.task("2").gold_actions[0]
    assert agent["tool_calls"][0]["function"] == {"name": gold.name, "arguments": json.dumps(gold.arguments)}


def test_noisy_draw_is_infra_scripted_s():
    """Same seed, same draw: the reward predicted for openai/noisy-P is what the
    in-process scripted/noisy-P provider gets."""
    seeds = [trial_seed("r", "m", "airline", "2", i) for i in range(40)]
    outcomes = [expected_reward("openai/noisy-0.7", s) for s in seeds]
    assert outcomes == [expected_reward("scripted/noisy-0.7", s) for s in seeds]
    assert 0 < sum(outcomes) < 40
    r = ScriptedResponder(["airline"])
    for s, o in zip(seeds[:6], outcomes):
        assert (r.answer(agent_body("2", "noisy-0.7", s))["content"] == "") == (o == 0.0)


def test_lookalike_tasks(airline_responder):
    # Airline tasks 15 and 16 look the same and answer the same: no seed needed.
    d = get_domain("airline")
    assert opening_request(d.task("15")) == opening_request(d.task("16"))
    assert airline_responder.answer(agent_body("16"))["tool_calls"][0]["id"] == "gold-0"
    # Two mock tasks open alike but need different actions: the trial seed decides.
    a, b = "update_task_with_initialization_data", "update_task_with_initialization_actions"
    mock = get_domain("mock")
    assert opening_request(mock.task(a)) == opening_request(mock.task(b))
    r = ScriptedResponder(["mock"])
    with pytest.raises(ScriptedHTTPError, match="expect_run"):
        r.answer(agent_body(b, domain="mock"))
    r.expect_run(config(run_id="lookalike", domains=["mock"], task_ids=[a, b], agent_models=["openai/oracle"]))
    for task_id in (a, b):
        seed = trial_seed("lookalike", "openai/oracle", "mock", task_id, 0)
        gold = mock.task(task_id).gold_actions[0]
        call = r.answer(agent_body(task_id, seed=seed, domain="mock"))["tool_calls"][0]["function"]
        assert call == {"name": gold.name, "arguments": json.dumps(gold.arguments)}


async def test_http_conversations_equal_in_process_ones(client, sqlite_store, model_server, responder):
    """Whole runs: every recorded message over HTTP equals the in-process scripted one."""
    responder.latency = 0.0
    args = json.dumps(http_args(model_server.url))
    tasks = ["1", "2", "8"]
    local = config(task_ids=tasks, trials=2, concurrency=6)
    remote = config(task_ids=tasks, trials=2, concurrency=6, agent_models=["openai/oracle"],
                    user_model="openai/oracle", agent_args=args, user_args=args)
    await run_to_end(client, sqlite_store, local)
    await run_to_end(client, sqlite_store, remote)

    def conversations(run_id: str) -> dict:
        def shape(m) -> tuple:  # noqa: ANN001
            calls = [(c.id, c.name, c.arguments) for c in m.tool_calls or []]
            return (m.role, m.content or None, calls, m.tool_call_id)

        return {
            (t.task_id, t.trial_index): [shape(m) for m in sqlite_store.messages(t.trial_id)]
            for t in sqlite_store.trials(run_id)
        }

    here, there = conversations(local.run_id), conversations(remote.run_id)
    assert len(here) == 6 and here == there
    assert all(t.reward == 1.0 for t in sqlite_store.trials(remote.run_id))
    assert model_server.served == sum(
        1 for convo in there.values() for m in convo[1:] if m[0] != "tool"
    )
