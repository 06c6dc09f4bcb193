"""`--agent NAME`: an agent of tau2's registry (tests/plugins/passhat_test_agents.py)
plays the agent side, one checkpointed turn per activity, its state recorded with each
turn; its model calls go through passhat's model-call path."""

from __future__ import annotations

import json

import pytest

from passhat.cli.run_options import UserInputError
from tests.runs import config, run_to_end

TASKS = ["1", "2"]


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
