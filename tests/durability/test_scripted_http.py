"""The scripted model over HTTP (passhat.testing.scripted_http) answers exactly as the in-process
scripted provider does, so the durability tests measure passhat, not the stand-in."""

from __future__ import annotations

import json

import pytest

from passhat.domains.registry import get_domain
from passhat.testing.scripted_http import (
    ScriptedHTTPError,
    ScriptedResponder,
    expected_reward,
    http_args,
    opening_request,
)
from tests.helpers import conversation
from tests.runs import config, run_to_end
from passhat.contracts import trial_seeds
from passhat.messages import AGENT_GREETING, STOP_TOKEN


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


def test_noisy_draw_is_the_in_process_one():
    """Same seed and task, same draw: the reward predicted for openai/noisy-P is what the
    in-process scripted/noisy-P provider gets, and the draw differs between tasks that
    share a trial's seed."""
    seeds = trial_seeds(300, 40)
    outcomes = [expected_reward("openai/noisy-0.7", s, "airline", "2") for s in seeds]
    assert outcomes == [expected_reward("scripted/noisy-0.7", s, "airline", "2") for s in seeds]
    assert 0 < sum(outcomes) < 40
    per_task = [expected_reward("openai/noisy-0.5", seeds[0], "airline", t) for t in map(str, range(20))]
    assert 0 < sum(per_task) < 20
    r = ScriptedResponder(["airline"])
    for s, o in zip(seeds[:6], outcomes):
        assert (r.answer(agent_body("2", "noisy-0.7", s))["content"] == "") == (o == 0.0)


def test_lookalike_tasks(airline_responder):
    # Airline tasks 15 and 16 make the same request; each answers its own gold action.
    d = get_domain("airline")
    assert d.task("15").reason_for_call == d.task("16").reason_for_call
    for task_id in ("15", "16"):
        gold = d.task(task_id).gold_actions[0]
        call = airline_responder.answer(agent_body(task_id))["tool_calls"][0]["function"]
        assert call == {"name": gold.name, "arguments": json.dumps(gold.arguments)}
    # Two mock tasks whose requests read alike but need different actions: the task id
    # that closes the scripted user's request tells them apart.
    a, b = "update_task_with_initialization_data", "update_task_with_initialization_actions"
    mock = get_domain("mock")
    assert mock.task(a).reason_for_call == mock.task(b).reason_for_call
    assert opening_request(mock.task(a)) != opening_request(mock.task(b))
    r = ScriptedResponder(["mock"])
    for task_id in (a, b):
        gold = mock.task(task_id).gold_actions[0]
        call = r.answer(agent_body(task_id, domain="mock"))["tool_calls"][0]["function"]
        assert call == {"name": gold.name, "arguments": json.dumps(gold.arguments)}
    # A request that matches tasks answering differently is refused, not guessed.
    body = agent_body(a, domain="mock")
    body["messages"][-1]["content"] = mock.task(a).reason_for_call
    with pytest.raises(ScriptedHTTPError, match="matches no task"):
        r.answer(body)


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
            (t.task_id, t.trial_index): [shape(m) for m in conversation(sqlite_store, t.trial_id)]
            for t in sqlite_store.trials(run_id)
        }

    here, there = conversations(local.run_id), conversations(remote.run_id)
    assert len(here) == 6 and here == there
    assert all(t.reward == 1.0 for t in sqlite_store.trials(remote.run_id))
    assert model_server.served == sum(
        1 for convo in there.values() for m in convo[1:] if m[0] != "tool"
    )


@pytest.mark.parametrize("calls", [3, 8, 9])
async def test_fixed_length_conversations_make_exactly_that_many_calls(client, sqlite_store, model_server,
                                                                       responder, calls):
    """`openai/fixed-N` (bench/throughput.py --calls N): every conversation is N model
    calls, whatever its task: task 44 has 20 gold actions, task 0 none (its agent calls
    a tool that takes no arguments), task 2 four. Each ends with the user's stop."""
    responder.latency = 0.0
    args = json.dumps(http_args(model_server.url))
    model = f"openai/fixed-{calls}"
    cfg = config(task_ids=["0", "2", "44"], trials=1, concurrency=3, agent_models=[model],
                 user_model=model, agent_args=args, user_args=args)
    await run_to_end(client, sqlite_store, cfg)
    trials = sqlite_store.trials(cfg.run_id)
    assert len(trials) == 3
    for trial in trials:
        steps = [s for s in sqlite_store.steps(trial.trial_id) if s.model is not None]
        assert len(steps) == calls, (trial.task_id, len(steps))
        messages = conversation(sqlite_store, trial.trial_id)
        # 3: user, agent's reply, stop. 8: user, tool, reply, user, tool, tool, reply,
        # stop. 9: user, tool, reply, user, tool, reply, user, reply, stop.
        assert sum(1 for m in messages if m.tool_calls) == {3: 0, 8: 3, 9: 2}[calls], \
            (trial.task_id, [(m.role, m.content, m.tool_calls) for m in messages])
        assert messages[-1].role == "user" and messages[-1].content == STOP_TOKEN
        assert trial.termination_reason == "user_stop"
    assert model_server.served == 3 * calls


def test_the_customer_user_answers_over_http_as_in_process(airline_responder):
    """`openai/customer` as the user is scripted/customer; the oracle agent finds its task
    from the customer's opening, which does not name it."""
    from passhat.infra.scripted_customer import customer_turn

    d = get_domain("airline")
    task = d.task("2")
    user = airline_responder.answer({"model": "customer", "seed": 1, "messages": [
        {"role": "system", "content": d.user_system_prompt("2")},
        {"role": "user", "content": AGENT_GREETING},
    ]})
    assert user == customer_turn(task, [{"role": "user", "content": AGENT_GREETING}])
    assert "(task 2)" not in user["content"]
    body = agent_body("2")
    body["messages"][-1]["content"] = user["content"]
    gold = task.gold_actions[0]
    assert airline_responder.answer(body)["tool_calls"][0]["function"] == {
        "name": gold.name, "arguments": json.dumps(gold.arguments)}


def test_tau2s_nl_assertion_judge_is_answered_as_scripted_judge(airline_responder):
    """tau2 1.0.x grades NL assertions with one call to an OpenAI model by default, which
    the loopback server gets: its request (tau2's own prompt, no seed, no task's system
    prompt) is answered as scripted/judge answers it, every assertion met."""
    from passhat.domains.nl_judge import judge_messages

    assertions = ["The agent cancels the reservation.", "The agent does not offer a refund."]
    body = {"model": "gpt-4.1-2025-04-14", "messages": judge_messages([], assertions)}
    verdicts = json.loads(airline_responder.answer(body)["content"])["results"]
    assert [(v["expectedOutcome"], v["metExpectation"]) for v in verdicts] == [(a, True) for a in assertions]
