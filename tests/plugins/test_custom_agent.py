"""`--agent NAME`: an agent of tau2's registry, registered by a plugin
(tests/plugin_modules/passhat_test_agents.py, loaded by the run's `plugins`), plays the
agent side, one checkpointed turn per activity, its state recorded with each turn; its
model calls go through passhat's model-call path."""

from __future__ import annotations

import pytest

from passhat.cli.run_options import UserInputError
from passhat.domains.tau2_version import installed_rules
from tests.helpers import PLUGIN_MODULES, TEST_AGENTS
from tests.runs import config as run_config, run_to_end

TASKS = ["1", "2"]


def config(**overrides):  # noqa: ANN003, ANN201
    """A run that loads the test agents' plugin."""
    return run_config(plugins=[TEST_AGENTS], **overrides)


def line_of(text: str) -> int:
    """The line of the test agents' module that holds `text`."""
    lines = (PLUGIN_MODULES / f"{TEST_AGENTS}.py").read_text().splitlines()
    return next(n for n, line in enumerate(lines, 1) if text in line)


def agent_states(store, trial_id: str) -> list[dict]:
    return [row.agent_turn() for row in store.steps(trial_id) if row.agent_state_json]


async def test_notes_agent_runs_with_its_state_recorded_each_turn(client, sqlite_store):
    cfg = config(agent="notes_agent", task_ids=TASKS, trials=2)
    summary = await run_to_end(client, sqlite_store, cfg)
    [row] = summary.results
    assert (row.trials, row.evaluable) == (4, 4)
    for trial in sqlite_store.trials(cfg.run_id):
        assert trial.status == "scored" and trial.reward == 1.0, (trial.error, trial.termination_reason)
        steps = sqlite_store.steps(trial.trial_id)
        agent_steps = [s for s in steps if s.role == "assistant" and s.step > 0]
        states = agent_states(sqlite_store, trial.trial_id)
        # one recorded state per agent turn, its own counter advancing by one each turn
        assert len(states) == len(agent_steps) > 0
        assert [s["state"]["turns"] for s in states] == list(range(1, len(states) + 1))
        assert states[0]["class"] == "passhat_test_agents:NotesState"
        called = [c.name for s in agent_steps for m in s.message_list() for c in m.tool_calls or []]
        assert states[-1]["state"]["tools_called"] == called and called


async def test_agent_exception_ends_the_trial_as_agent_error(client, sqlite_store):
    """An exception in the agent's turn is the agent's failure: agent_error on 26.3;
    1.0.x re-runs the simulation and then gives up on it (not evaluable)."""
    rules = installed_rules()
    cfg = config(agent="raising_agent", task_ids=["1"], trials=1)
    await run_to_end(client, sqlite_store, cfg)
    [trial] = sqlite_store.trials(cfg.run_id)
    if rules.on_model_failure == "rerun":
        assert (trial.status, trial.termination_reason, trial.error_class) == (
            "not_evaluable", rules.exhausted_reason, "RuntimeError")
        assert f"on every one of {1 + rules.simulation_retries} attempts" in trial.error
    else:
        assert (trial.status, trial.termination_reason, trial.reward) == ("scored", "agent_error", 0.0)
        assert (trial.error_class, trial.error_side) == ("RuntimeError", "agent")
        assert trial.error == "RuntimeError raised by agent 'raising_agent': gave up on turn 2"
        assert trial.error_at == f"passhat_test_agents.py:{line_of('raise RuntimeError')} in generate_next_message"
    # the first turn was recorded with its state; the failing one without
    assert [s["state"]["turns"] for s in agent_states(sqlite_store, trial.trial_id)] == [1]


def test_unknown_agent_is_one_line_naming_the_known_ones():
    with pytest.raises(UserInputError) as err:
        config(agent="no_such_agent")
    message = str(err.value)
    assert "\n" not in message
    assert message.startswith("unknown --agent 'no_such_agent'; tau2's agent registry has: llm_agent, llm_agent_gt")
    assert "notes_agent" in message and "llm_agent_solo" not in message


def test_unserialisable_state_is_refused_before_the_run():
    with pytest.raises(UserInputError) as err:
        config(agent="boxed_agent", task_ids=["1"])
    assert str(err.value) == (
        "agent 'boxed_agent': its state is a passhat_test_agents.Box, not a pydantic model; passhat "
        "records the state after every turn, so get_init_state and generate_next_message must "
        "return a pydantic BaseModel")


def test_agent_prompt_with_a_registered_agent_is_refused(tmp_path):
    prompt = tmp_path / "prompt.txt"
    prompt.write_text("Mine.\n{policy}\n")
    with pytest.raises(UserInputError, match="agent 'notes_agent' builds its own prompt"):
        config(agent="notes_agent", agent_prompt=str(prompt))
