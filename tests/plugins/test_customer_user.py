"""An agent that asks questions, tested offline: asking_agent
(tests/plugin_modules/asking_agent.py) asks for the customer's details and for a yes
before it acts. With scripted/oracle as the user it scores 0 (that user stops at the
agent's first question); with scripted/customer, which answers, it solves the example
domain's tasks as the oracle agent does."""

from __future__ import annotations

import pytest

from tests.runs import config, run_to_end

ROOT = __import__("pathlib").Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def examples_importable(monkeypatch):
    monkeypatch.syspath_prepend(str(ROOT / "examples"))


@pytest.mark.parametrize("user, reward", [("scripted/oracle", 0.0), ("scripted/customer", 1.0)])
async def test_an_agent_that_asks_gets_answers_from_the_customer(client, sqlite_store, user, reward):
    cfg = config(domains=["pharmacy"], plugins=["pharmacy", "asking_agent"], agent="asking_agent",
                 user_model=user, trials=1)
    summary = await run_to_end(client, sqlite_store, cfg)
    [row] = summary.results
    assert row.evaluable == row.trials == 5
    for trial in sqlite_store.trials(cfg.run_id):
        assert trial.reward == reward, (trial.task_id, trial.termination_reason, trial.error)
        said = [m.content for s in sqlite_store.steps(trial.trial_id) if s.role == "user"
                for m in s.message_list() if m.content]
        assert trial.task_id not in said[0] or user == "scripted/oracle"
        if user == "scripted/customer":
            # It gave the details asked for, and its yes, then ended the conversation.
            assert "patient id" in said[1] and said[2] == "Yes, please go ahead."
            assert trial.termination_reason == "user_stop"


async def test_impatience_breaks_an_agent_that_asks_before_it_acts(client, sqlite_store):
    """asking_agent asks two questions before it acts (details, then "Shall I go ahead?"):
    the impatient customer (passhat.infra.scripted_personas) answers two at intensity 1,
    and stops at the second at intensity 2, before the agent has acted."""
    cfg = config(domains=["pharmacy"], plugins=["pharmacy", "asking_agent"], agent="asking_agent",
                 user_model="scripted/customer", trials=1, user_personas=["impatient:1", "impatient:2"])
    summary = await run_to_end(client, sqlite_store, cfg)
    got = {r.user_persona: r.pass_hat_k["1"] for r in summary.results}
    assert got == {None: 1.0, "impatient:1": 1.0, "impatient:2": 0.0}, got
