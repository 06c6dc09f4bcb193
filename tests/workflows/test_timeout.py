"""tau2 1.0.x's time limit on a conversation (`--timeout SECONDS`).

1.0.x's orchestrator checks it after every step not followed by tool execution, after
max_steps and too_many_errors, and only when nothing else ended the conversation on that
step; a conversation past it ends as `timeout` and its evaluator gives reward 0. passhat
decides the same in the trial workflow's state machine, on workflow time.

The rule's placement is checked on the state machine with given elapsed times. Through
real workflows, the models are slow rather than the limit measured: every answer of the
slow side takes at least as long as the limit, so the limit has passed at the first step
it is checked on, whatever the machine's speed; the tests count the steps recorded.
Those need tau2 1.0.x and skip on 26.3, which has no such limit: there `--timeout` is
refused in one line (here, and through the real command in tests/cli/test_bad_input.py).
"""

from __future__ import annotations

import json

import pytest

from passhat.contracts import StepResult
from passhat.domains.tau2_version import installed_rules, rules_for
from passhat.workflows.trial import Turns
from tests.helpers import VALID_TASK, make_spec

needs_timeout = pytest.mark.skipif(installed_rules().timeout_reason is None,
                                   reason="needs tau2 1.0.x (the installed tau2 has no --timeout)")
LIMIT_S = 1.0


def turns(version: str = "1.0.1", timeout: float | None = 10.0, **spec) -> Turns:  # noqa: ANN003
    trial = make_spec().model_copy(update={"timeout": timeout, **spec})
    return Turns(trial, rules_for(version))


def opened(t: Turns) -> Turns:
    t.apply(StepResult(step=0, role="assistant"))  # the greeting: the user speaks next
    return t


def user_says(step: int, stop: bool = False) -> StepResult:
    return StepResult(step=step, role="user", is_stop=stop)


def agent_calls(step: int) -> StepResult:
    return StepResult(step=step, role="assistant", is_tool_call=True, tool_names=["get_user_details"])


def test_the_limit_ends_a_conversation_at_the_next_step_not_followed_by_tools():
    t = opened(turns(timeout=10.0))
    t.apply(user_says(1), elapsed_s=9.9)
    assert t.termination_reason is None
    t.apply(agent_calls(2), elapsed_s=30.0)  # past the limit, but the tool calls are pending
    assert (t.termination_reason, t.to_role) == (None, "env")
    t.apply(StepResult(step=3, role="tool"), elapsed_s=30.1)
    assert t.termination_reason == "timeout"


def test_the_limit_is_reached_at_exactly_its_seconds():
    t = opened(turns(timeout=10.0))
    t.apply(user_says(1), elapsed_s=10.0)
    assert t.termination_reason == "timeout"


def test_a_stop_or_another_limit_on_the_same_step_wins():
    stopped = opened(turns())
    stopped.apply(user_says(1, stop=True), elapsed_s=99.0)
    assert stopped.termination_reason == "user_stop"
    at_max_steps = opened(turns(max_steps=1))
    at_max_steps.apply(user_says(1), elapsed_s=99.0)
    assert at_max_steps.termination_reason == "max_steps"


def test_no_limit_without_a_timeout_nor_on_a_version_without_one_nor_for_recorded_steps():
    for t in (opened(turns(timeout=None)), opened(turns("26.3", timeout=10.0))):
        t.apply(user_says(1), elapsed_s=1e6)
        assert t.termination_reason is None
    resumed = opened(turns(timeout=10.0))
    resumed.apply(user_says(1))  # recorded by an earlier execution: its time is not known
    assert resumed.termination_reason is None


@pytest.mark.skipif(installed_rules().timeout_reason is not None, reason="the refusal of a tau2 without a time limit (26.3)")
def test_a_timeout_is_refused_on_a_tau2_without_one():
    from tests.runs import config

    from passhat.cli.run_options import UserInputError

    with pytest.raises(UserInputError) as err:
        config(task_ids=["0"], timeout=30.0)
    assert str(err.value).startswith("--timeout (a sweep file's timeout) needs tau2 1.0.x: the installed tau2 26.3")
    assert "\n" not in str(err.value)


async def _run_and_replay(client, store, cfg):  # noqa: ANN001, ANN202
    """Run `cfg` (one trial) to its end; its trial, its steps' roles, and its workflow
    history replayed on the current code (the limit is decided on workflow time, which
    the replay reads back)."""
    from temporalio.contrib.pydantic import pydantic_data_converter
    from temporalio.worker import Replayer

    from passhat.workflows.worker import WORKFLOWS
    from tests.runs import run_to_end

    await run_to_end(client, store, cfg)
    [trial] = store.trials(cfg.run_id)
    roles = [s.role for s in store.steps(trial.trial_id)]
    history = await client.get_workflow_handle(trial.trial_id).fetch_history()
    await Replayer(workflows=list(WORKFLOWS), data_converter=pydantic_data_converter).replay_workflow(history)
    return trial, roles


@needs_timeout
async def test_a_conversation_past_its_limit_ends_as_timeout_with_reward_0(client, sqlite_store):
    """The user's first answer takes as long as the limit: the check after it ends the
    conversation, at step 1."""
    from tests.runs import config

    cfg = config(task_ids=["0"], trials=1, user_args=json.dumps({"latency": LIMIT_S}), timeout=LIMIT_S)
    assert cfg.timeout == LIMIT_S
    trial, roles = await _run_and_replay(client, sqlite_store, cfg)
    assert (trial.status, trial.termination_reason, trial.reward) == ("scored", "timeout", 0.0)
    assert roles == ["assistant", "user"]  # the greeting, the user's request


@needs_timeout
async def test_the_limit_waits_for_pending_tool_calls(client, sqlite_store, tmp_path):
    """A task whose initial conversation ends with the user's request: the slow agent
    answers with a tool call, past the limit, and the conversation ends after the tool
    step, where tau2 checks next, not before it."""
    from tests.runs import config

    task = {**VALID_TASK, "initial_state": {"message_history": [
        {"role": "user", "content": "Cancel reservation EHGLP3, I am Emma Kim."}]}}
    tasks = tmp_path / "tasks.json"
    tasks.write_text(json.dumps([task]))
    cfg = config(task_file=str(tasks), trials=1, agent_args=json.dumps({"latency": LIMIT_S}), timeout=LIMIT_S)
    trial, roles = await _run_and_replay(client, sqlite_store, cfg)
    assert (trial.termination_reason, trial.reward) == ("timeout", 0.0)
    assert roles == ["user", "assistant", "tool"]  # the initial conversation, the call, its result
