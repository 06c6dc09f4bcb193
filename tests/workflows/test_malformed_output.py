"""A model whose own output breaks the conversation fails as the installed tau2 fails
it: on 26.3 the trial ends as agent_error with reward 0 and counts in pass^k, with the
failure's class and the side that produced it on the trial; on 1.0.x the simulation runs
again from the start and, failing each time, is given up (not evaluable,
infrastructure_error, the failure's class on the trial). It never crashes a worker.
Answering invalid arguments with a tool error instead is an opt-in
departure, recorded on the run and printed in its report."""

from __future__ import annotations

import pytest

from passhat.domains.tau2_version import installed_rules
from passhat.testing.fault_server import FaultServer
from passhat.run_identity import fingerprint
from tests.helpers import conversation
from tests.runs import config, run_to_end

BAD_ARGS = {"tool_calls": [{"name": "get_user_details", "arguments": '{"user_id": '}]}
EMPTY_ARGS = {"tool_calls": [{"name": "get_user_details", "arguments": ""}]}
UNKNOWN_TOOL = {"tool_calls": [{"name": "teleport_user", "arguments": "{}"}]}


@pytest.mark.parametrize(
    "answer, faults, termination, failure, agent_requests",
    [
        (BAD_ARGS, None, "agent_error", "InvalidToolArguments", 1),
        (EMPTY_ARGS, None, "agent_error", "InvalidToolArguments", 1),  # json.loads("") fails
        ({"content": ""}, None, "agent_error", "EmptyReply", 4),  # 3 resends, as tau2's generate
        ("ok", lambda n, body: "context_window", "agent_error", "ContextWindowExceededError", 1),
        (UNKNOWN_TOOL, None, "too_many_errors", None, 3),  # a tool error each, max_errors 3
    ],
    ids=["invalid-json-arguments", "empty-arguments", "empty-reply", "context-window", "unknown-tool"],
)
async def test_malformed_agent_output_is_the_agents_failure(
    client, sqlite_store, answer, faults, termination, failure, agent_requests
):
    with FaultServer(responder=lambda body: answer, faults=faults) as srv:
        cfg = config(
            agent_models=["openai/broken"], task_ids=["1"], max_errors=3,
            agent_args=f'{{"api_base": "{srv.url}/v1", "api_key_env": "PASSHAT_TEST_API_KEY"}}',
        )
        summary = await run_to_end(client, sqlite_store, cfg)
        received = srv.received
    rules = installed_rules()
    if failure and rules.on_model_failure == "rerun":
        # each attempt asks once more (no re-asking of an empty reply within one)
        assert received == (1 + rules.simulation_retries) * (1 + rules.empty_reply_retries)
        [trial] = sqlite_store.trials(cfg.run_id)
        assert (summary.results[0].evaluable, trial.status) == (0, "not_evaluable")
        assert (trial.termination_reason, trial.error_class) == (rules.exhausted_reason, failure)
        assert sqlite_store.steps(trial.trial_id)[-1].failure_class == failure
        return
    assert received == agent_requests
    [row] = summary.results
    assert (row.evaluable, row.avg_reward, row.pass_hat_k) == (1, 0.0, {"1": 0.0})
    [trial] = sqlite_store.trials(cfg.run_id)
    assert (trial.status, trial.reward, trial.termination_reason) == ("scored", 0.0, termination)
    assert (trial.error_class, trial.error_side) == (failure, "agent" if failure else None)
    tool_answers = [m for m in conversation(sqlite_store, trial.trial_id) if m.role == "tool"]
    if failure:
        assert tool_answers == []  # nothing was executed
        assert sqlite_store.steps(trial.trial_id)[-1].failure_class == failure
    else:
        assert len(tool_answers) == 3 and all(m.error for m in tool_answers)


async def test_lenient_tool_arguments_is_an_opt_in_departure(client, sqlite_store):
    with FaultServer(responder=lambda body: BAD_ARGS) as srv:
        cfg = config(
            agent_models=["openai/broken"], task_ids=["1"], max_errors=3, lenient_tool_args=True,
            agent_args=f'{{"api_base": "{srv.url}/v1", "api_key_env": "PASSHAT_TEST_API_KEY"}}',
        )
        summary = await run_to_end(client, sqlite_store, cfg)
    assert summary.departures and "lenient tool arguments" in summary.departures[0]
    [trial] = sqlite_store.trials(cfg.run_id)
    assert trial.termination_reason == "too_many_errors" and trial.error_class is None
    answers = [m for m in conversation(sqlite_store, trial.trial_id) if m.role == "tool"]
    assert len(answers) == 3 and all("not valid JSON" in (m.content or "") for m in answers)
    # The departure is part of what the run measures: it is in the fingerprint.
    strict = cfg.model_copy(update={"lenient_tool_arguments": False})
    assert fingerprint(strict) != fingerprint(cfg)


async def test_an_answer_without_choices_is_not_evaluable(client, sqlite_store):
    """tau2 fails the simulation on `choices: []` (its generate takes choices[0]) and
    scores nothing: the trial is not evaluable, at once, not the agent's EmptyReply."""
    with FaultServer(responder=lambda body: "ok", faults=lambda n, body: "empty_choices") as srv:
        cfg = config(
            agent_models=["openai/broken"], task_ids=["1"],
            agent_args=f'{{"api_base": "{srv.url}/v1", "api_key_env": "PASSHAT_TEST_API_KEY"}}',
        )
        summary = await run_to_end(client, sqlite_store, cfg)
        assert srv.received == 1  # neither resent as an empty reply nor retried
    [row] = summary.results
    assert (row.evaluable, row.pass_hat_k) == (0, {})
    [trial] = sqlite_store.trials(cfg.run_id)
    assert (trial.status, trial.reward, trial.error_class) == ("not_evaluable", None, "EmptyChoices")
