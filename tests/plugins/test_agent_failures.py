"""A registered agent's own failures are failures: an exception its code raises, a reply
tau2 rejects, a state passhat cannot record. On tau2 26.3 such a trial is scored 0 as
`agent_error` (what tau2's run_tasks with skip_failed_samples records) and counts in
pass^k; tau2 1.0.x runs the simulation again and then gives up on it (not evaluable),
as it gives up on any simulation that raises. Either way the trial says what the agent
did and where in its code; `report` and `show` say so too. The failing turn is recorded
once, like any turn: asked again, the activity returns it without running the agent."""

from __future__ import annotations

import inspect
import re

import pytest
from rich.console import Console
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.testing import ActivityEnvironment
from temporalio.worker import Replayer

from passhat.activities.conversation import ConversationActivities
from passhat.cli.render import transcript
from passhat.cli.report_text import report_table
from passhat.contracts import StepRef
from passhat.domains.tau2_version import installed_rules
from passhat.results.report import build_report
from passhat.run_identity import agent_identity
from passhat.testing.harness import workflow_ids
from passhat.workflows.worker import WORKFLOWS
from tests.helpers import PLUGIN_MODULES, TEST_AGENTS
from tests.runs import config, run_to_end


def line_of(text: str) -> int:
    lines = (PLUGIN_MODULES / f"{TEST_AGENTS}.py").read_text().splitlines()
    return next(n for n, line in enumerate(lines, 1) if text in line)


def defined_at(class_name: str) -> str:
    """Where a test agent's generate_next_message is defined: the place a failure of
    what it returned is shown at."""
    import passhat_test_agents

    method = getattr(passhat_test_agents, class_name).generate_next_message
    return f"passhat_test_agents.py:{inspect.getsourcelines(method)[1]} in generate_next_message"


async def test_an_agent_that_breaks_its_own_state_fails_its_trials(client, sqlite_store):
    """docs/agents.md's example as it once was (it appends the MultiToolMessage of
    parallel tool calls to its state's messages), with a model that makes parallel
    calls: from its second turn its state cannot be recorded. Those trials fail in
    pass^k (26.3), with the class, what happened and the agent's method; report and
    show say what the agent did; a replay of the trial's history decides the same."""
    rules = installed_rules()
    cfg = config(plugins=[TEST_AGENTS], agent="appending_agent", agent_models=["scripted/parallel"],
                 task_ids=["1"], trials=2)
    summary = await run_to_end(client, sqlite_store, cfg)
    [row] = summary.results
    trials = sqlite_store.trials(cfg.run_id)
    at = defined_at("AppendingAgent")
    for trial in trials:
        steps = sqlite_store.steps(trial.trial_id)
        if rules.on_model_failure == "rerun":  # 1.0.x: re-run, then given up
            assert (trial.status, trial.termination_reason) == ("not_evaluable", rules.exhausted_reason)
            continue
        assert (trial.status, trial.reward, trial.termination_reason) == ("scored", 0.0, "agent_error")
        assert (trial.error_class, trial.error_side, trial.error_at) == ("ValidationError", "agent", at)
        assert re.fullmatch(r"ValidationError: agent 'appending_agent': its state \(NotesState\) cannot be "
                            r"recorded: messages\[\d+\] is a MultiToolMessage, which the field does not take "
                            r"\(ValidationError, \d+ error\(s\)\)", trial.error), trial.error
        # The first turn (two parallel calls) was recorded with its state, the second failed.
        turns = [s for s in steps if s.role == "assistant" and s.step > 0]
        assert len(turns[0].message_list()[0].tool_calls) == 2 and turns[0].agent_state_json
        assert (turns[-1].failure_class, turns[-1].failure_at, turns[-1].agent_state_json) == (
            "ValidationError", at, None)
    if rules.on_model_failure != "rerun":
        assert (row.evaluable, row.pass_hat_k["1"]) == (2, 0.0)

    out = Console(record=True, width=200)
    report_table(build_report(sqlite_store, [cfg.run_id]), "model", out)
    text = out.export_text()
    identity = agent_identity(cfg, "scripted/parallel")
    assert f"agent with scripted/parallel: appending_agent sha256:{identity.digest}" in text
    if rules.on_model_failure != "rerun":
        assert f"the agent's own code: ValidationError at {at} 2" in text

    out = Console(record=True, width=200)
    trial = trials[0]
    transcript(trial, sqlite_store.steps(trial.trial_id), out, agent=identity)
    shown = out.export_text()
    assert f"agent appending_agent sha256:{identity.digest} (module passhat_test_agents " in shown
    if rules.on_model_failure != "rerun":
        assert "the agent's own code failed: ValidationError: agent 'appending_agent': its state" in shown
        assert f"  at {at}" in shown

    # Deterministic on replay: each trial's history replays against the code that ran it.
    trial_ids = {t.trial_id for t in trials}
    histories = [await client.get_workflow_handle(wf_id).fetch_history()
                 for _, wf_id in workflow_ids(cfg) if wf_id in trial_ids]
    assert len(histories) == 2
    replayer = Replayer(workflows=list(WORKFLOWS), data_converter=pydantic_data_converter)
    for history in histories:
        await replayer.replay_workflow(history)


@pytest.mark.skipif(installed_rules().on_model_failure == "rerun",
                    reason="tau2 1.0.x re-runs a simulation whose agent fails, then gives up on it")
@pytest.mark.parametrize("agent, error_class, error, at", [
    ("raising_agent", "RuntimeError", "RuntimeError raised by agent 'raising_agent': gave up on turn 2",
     lambda: f"passhat_test_agents.py:{line_of('raise RuntimeError')} in generate_next_message"),
    ("mute_agent", "ValueError", "ValueError: agent 'mute_agent' replied with a message tau2 rejects: ",
     lambda: defined_at("MuteAgent")),
])
async def test_an_agent_failure_is_recorded_once(client, sqlite_store, agent, error_class, error, at):
    """An exception the agent raises, and a reply tau2 rejects: the trial fails as
    agent_error with the class, the words and the agent's own frame. The failing turn
    is a recorded step: the activity asked for it again returns what was recorded."""
    cfg = config(plugins=[TEST_AGENTS], agent=agent, task_ids=["1"], trials=1)
    await run_to_end(client, sqlite_store, cfg)
    [trial] = sqlite_store.trials(cfg.run_id)
    assert (trial.status, trial.reward, trial.termination_reason) == ("scored", 0.0, "agent_error")
    assert (trial.error_class, trial.error_at) == (error_class, at())
    assert trial.error.startswith(error)
    steps = sqlite_store.steps(trial.trial_id)
    failed = steps[-1]
    assert (failed.role, failed.failure_class, failed.failure_at) == ("assistant", error_class, at())
    spec = cfg.units()[0].trial(0)
    again = await ActivityEnvironment().run(
        ConversationActivities(sqlite_store).agent_turn, StepRef(trial=spec, step=failed.step))
    assert again.failure == error_class
    assert [(s.step, s.failure, s.created_at) for s in sqlite_store.steps(trial.trial_id)] == [
        (s.step, s.failure, s.created_at) for s in steps]
