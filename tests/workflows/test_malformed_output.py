"""A model that answers badly is the agent's failure, scored by tau2's rules; it never
crashes a worker and never makes a trial not evaluable."""

from __future__ import annotations

import pytest

from tests.fault_server import FaultServer
from tests.runs import config, run_to_end

BAD_ARGS = {"tool_calls": [{"name": "get_user_details", "arguments": '{"user_id": '}]}
UNKNOWN_TOOL = {"tool_calls": [{"name": "teleport_user", "arguments": "{}"}]}


@pytest.mark.parametrize(
    "answer, faults, termination",
    [
        (BAD_ARGS, None, "too_many_errors"),  # each invalid call is a tool error
        (UNKNOWN_TOOL, None, "too_many_errors"),
        ("ok", lambda n, body: "empty_choices", "agent_error"),  # no message at all
    ],
    ids=["invalid-json-arguments", "unknown-tool", "empty-choices"],
)
async def test_malformed_agent_output_is_scored_as_failure(client, sqlite_store, answer, faults, termination):
    with FaultServer(responder=lambda body: answer, faults=faults) as srv:
        cfg = config(
            agent_models=["openai/broken"], task_ids=["1"], max_errors=3,
            agent_args=f'{{"api_base": "{srv.url}/v1", "api_key": "x"}}',
        )
        summary = await run_to_end(client, sqlite_store, cfg)
    [row] = summary.results
    assert (row.evaluable, row.avg_reward) == (1, 0.0)
    [trial] = sqlite_store.trials(cfg.run_id)
    assert trial.termination_reason == termination
    tool_answers = [m for m in sqlite_store.messages(trial.trial_id) if m.role == "tool"]
    if termination == "too_many_errors":
        assert len(tool_answers) == 3 and all(m.error for m in tool_answers)
