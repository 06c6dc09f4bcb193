"""Conversions between passhat's trials and results files: tau2's Results schema and
tau-bench v1's result lists (passhat.results: reading, tau2_writer, tau2_reader,
tau_bench). No store, no Temporal."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace

import pytest

from passhat import metrics
from passhat.messages import AGENT_GREETING, Message, ToolCall
from passhat.results.reading import read_results_file
from passhat.results.records import ResultsFileError, StepRecord, TrialRecord
from passhat.results.tau2_writer import tau2_reward_info, to_tau2_messages, to_tau2_results
from tests.results_files import (
    TAU2_MOCK_RESULTS,
    V1_FILE_NAME,
    tau_bench_pass_hat,
    tau_bench_result,
    write_tau_bench_file,
)


def pass_hat_of(f) -> dict[str, float]:  # noqa: ANN001 - a ResultsFile
    """pass^k of a read file, computed as `passhat import` records and reports it."""
    outcomes = []
    for task_id in f.task_ids:
        rewards = [r.reward for r in f.records if r.task_id == task_id and r.reward is not None]
        unit = SimpleNamespace(run_id="r", agent_model=f.agent_model, user_model=f.user_model,
                               domain=f.domain, task_id=task_id)
        outcomes.append(metrics.task_outcome(unit, rewards, f.trials))
    [summary] = metrics.summarize("r", outcomes).results
    return summary.pass_hat_k


def test_reads_a_tau2_results_file_as_trials():
    f = read_results_file(TAU2_MOCK_RESULTS)
    assert (f.format, f.domain, f.agent_model, f.user_model) == ("tau2", "mock", "openai/some-model", "openai/some-model")
    assert f.agent_args == {"api_base": "http://127.0.0.1:8765/v1"}  # api_key stripped
    assert (f.trials, f.seed, f.max_steps, f.max_errors) == (2, 300, 100, 10)
    assert f.task_ids == ["create_task_1", "update_task_1"]
    assert [(r.task_id, r.trial_index, r.reward, r.seed) for r in f.records] == [
        ("create_task_1", 0, 1.0, 626729), ("update_task_1", 0, 0.0, 626729),
        ("create_task_1", 1, 1.0, 373753), ("update_task_1", 1, 0.0, 373753),
    ]
    first = f.records[0]
    # greeting, user, agent tool call, its answer, agent text, user stop: one step each
    assert [s.role for s in first.steps] == ["assistant", "user", "assistant", "tool", "assistant", "user"]
    assert first.steps[0].messages[0].content == AGENT_GREETING and first.steps[0].model is None
    call = first.steps[2]
    assert call.model == "openai/some-model" and (call.input_tokens, call.output_tokens) == (11, 7)
    assert call.messages[0].tool_calls[0].name == "create_task"
    answer = first.steps[3].messages[0]
    assert answer.tool_call_id == call.messages[0].tool_calls[0].id and answer.requestor == "assistant"
    assert first.reward_info["reward_basis"] == ["DB", "COMMUNICATE"]
    assert first.reward_info["breakdown"] == {"DB": 1.0, "COMMUNICATE": 1.0}
    assert first.termination_reason == "user_stop"


def test_tau2_file_written_back_is_the_same_for_tau2():
    """tau2 file -> trials -> tau2 file: messages, rewards and pass^k as tau2 sees them."""
    from tau2.data_model.simulation import Results
    from tau2.metrics.agent_metrics import compute_metrics

    original = Results.model_validate_json(TAU2_MOCK_RESULTS.read_text())
    f = read_results_file(TAU2_MOCK_RESULTS)
    for n, r in enumerate(f.records):
        r.trial_id = f"t{n}"
    text = to_tau2_results(
        domain=f.domain, agent_model=f.agent_model, user_model=f.user_model,
        agent_args=f.agent_args, user_args=f.user_args, task_ids=f.task_ids, trials=f.trials,
        seed=f.seed, max_steps=f.max_steps, max_errors=f.max_errors, records=f.records,
    )
    again = Results.model_validate_json(text)
    assert "api_key" not in text
    assert [t.model_dump() for t in again.tasks] == [t.model_dump() for t in original.tasks]
    assert (again.info.num_trials, again.info.seed, again.info.max_steps) == (2, 300, 100)
    by_key = {(s.task_id, s.trial): s for s in original.simulations}
    for sim in again.simulations:
        before = by_key[(sim.task_id, sim.trial)]
        assert sim.seed == before.seed and sim.termination_reason == before.termination_reason
        assert sim.reward_info.reward == before.reward_info.reward
        for field in ("reward_basis", "reward_breakdown", "db_check", "action_checks",
                      "communicate_checks", "env_assertions"):
            assert getattr(sim.reward_info, field) == getattr(before.reward_info, field), field
        assert len(sim.messages) == len(before.messages)
        for new, old in zip(sim.messages, before.messages):
            assert new == old  # tau2's equality: role, content, tool calls (ids, args, requestor)
            assert new.turn_idx == old.turn_idx
            if old.role != "tool":
                assert (new.cost, new.usage) == (old.cost, old.usage)
        assert (sim.agent_cost, sim.user_cost) == (before.agent_cost, before.user_cost)
    assert compute_metrics(again).pass_hat_ks == compute_metrics(original).pass_hat_ks
    assert pass_hat_of(f) == {str(k): v for k, v in compute_metrics(original).pass_hat_ks.items()}


def _at(seconds: int) -> datetime:
    return datetime(2026, 1, 1, tzinfo=UTC) + timedelta(seconds=seconds)


def test_exported_trajectory_follows_tau2s_rules():
    """Calls that never ran and the reply that ended the trial as agent_error are not in
    tau2's trajectory; costs and usage come from the model call of each step."""
    good = ToolCall(id="c1", name="get_user_details", arguments={"user_id": "u1"})
    bad = ToolCall(id="c2", name="get_user_details", invalid_arguments="{oops")
    steps = [
        StepRecord(0, "assistant", [Message(role="assistant", content=AGENT_GREETING)], created_at=_at(0)),
        StepRecord(1, "user", [Message(role="user", content="hi")], model="u", input_tokens=5,
                   output_tokens=2, cost=0.25, created_at=_at(1)),
        StepRecord(2, "assistant", [Message(role="assistant", tool_calls=[good, bad])], model="a",
                   input_tokens=9, output_tokens=3, cost=0.5, created_at=_at(2)),
        StepRecord(3, "tool", [
            Message(role="tool", content='{"id": "u1"}', tool_call_id="c1", requestor="assistant"),
            Message(role="tool", content="Error: not valid JSON", tool_call_id="c2",
                    requestor="assistant", error=True),
        ], created_at=_at(3)),
        StepRecord(4, "assistant", [Message(role="assistant", content="partial text")], model="a",
                   cost=1.0, created_at=_at(4), failure_class="EmptyReply", failure="empty"),
    ]
    out = to_tau2_messages(steps)
    assert [(m.role, m.turn_idx) for m in out] == [("assistant", 0), ("user", 1), ("assistant", 2), ("tool", 3)]
    greeting, user, call, answer = out
    assert (greeting.cost, greeting.usage) == (0.0, None)
    assert (user.cost, user.usage) == (0.25, {"completion_tokens": 2, "prompt_tokens": 5})
    assert [c.id for c in call.tool_calls] == ["c1"] and call.content is None
    assert (answer.id, answer.content, answer.error) == ("c1", '{"id": "u1"}', False)
    assert answer.timestamp == _at(3).isoformat()
    # A task's initial messages (step 0, not the greeting) have no cost in tau2.
    opening = [StepRecord(0, "user", [Message(role="user", content="earlier")], created_at=_at(0))]
    [first] = to_tau2_messages(opening)
    assert first.cost is None


def test_reward_info_is_rebuilt_from_the_stored_score():
    stored = {
        "breakdown": {"DB": 1.0, "COMMUNICATE": 0.0}, "reward_basis": ["DB", "COMMUNICATE"],
        "db_check": {"db_match": True, "db_reward": 1.0}, "action_checks": None,
        "communicate_checks": [{"info": "4", "met": False, "justification": "no"}],
        "env_assertions": [], "note": None,
    }
    info = tau2_reward_info(TrialRecord(task_id="1", trial_index=0, seed=1, reward=0.0, reward_info=stored))
    assert info.reward == 0.0 and [b.value for b in info.reward_basis] == ["DB", "COMMUNICATE"]
    assert {k.value: v for k, v in info.reward_breakdown.items()} == {"DB": 1.0, "COMMUNICATE": 0.0}
    assert info.db_check.db_match and info.communicate_checks[0].info == "4" and info.info is None
    premature = TrialRecord(
        task_id="1", trial_index=0, seed=1, reward=0.0,
        reward_info={"breakdown": {}, "reward_basis": None, "note": "Simulation terminated prematurely."},
        error_class="EmptyReply", error_side="agent", error="empty 4 times",
    )
    info = tau2_reward_info(premature)
    assert info.reward_basis is None and info.reward_breakdown is None
    assert info.info == {
        "note": "Simulation terminated prematurely.",
        "passhat_failure": {"class": "EmptyReply", "side": "agent", "message": "empty 4 times"},
    }


def test_reads_a_tau_bench_file_and_its_pass_hat_is_the_papers(tmp_path):
    results = [
        tau_bench_result(0, t, r) for t, r in enumerate([1.0, 1.0, 1.0, 0.0])
    ] + [
        tau_bench_result(1, t, r, end=e) for t, (r, e) in enumerate(
            [(1.0, "stop"), (0.0, "transfer"), (0.0, "cut"), (1.0, "stop")])
    ] + [
        tau_bench_result(7, 0, 0.0, error="EOF when reading a line"),
        tau_bench_result(7, 1, 1.0), tau_bench_result(7, 2, 1.0), tau_bench_result(7, 3, 1.0),
    ]
    f = read_results_file(write_tau_bench_file(tmp_path, results))
    assert (f.format, f.domain) == ("tau-bench", "tau-bench-airline")
    assert (f.agent_model, f.user_model, f.agent_args) == ("gpt-4o", "gpt-4o", {"temperature": 0.0})
    assert (f.trials, f.task_ids) == (4, ["0", "1", "7"])
    reasons = {(r.task_id, r.trial_index): r.termination_reason for r in f.records}
    assert reasons[("1", 0)] == "user_stop" and reasons[("1", 1)] == "agent_stop"
    assert reasons[("1", 2)] == "max_steps" and reasons[("7", 0)] == "agent_error"
    error = next(r for r in f.records if r.task_id == "7" and r.trial_index == 0)
    assert (error.error_class, error.error, error.steps) == ("TauBenchError", "EOF when reading a line", [])
    first = f.records[0]
    assert [s.role for s in first.steps] == ["user", "assistant", "tool", "assistant", "user"]
    call = first.steps[1].messages[0].tool_calls[0]
    assert (call.name, call.arguments, call.invalid_arguments) == (
        "get_reservation_details", {"reservation_id": "ABC123"}, None)
    assert first.total_cost() == 0.001 and first.reward_info["tau_bench"]["reward"] == 1.0
    expected = tau_bench_pass_hat(results)
    assert pass_hat_of(f) == pytest.approx({str(k): v for k, v in expected.items()})
    assert expected[4] == pytest.approx(0.0) and expected[1] == pytest.approx(8 / 12)


def test_tau_bench_retail_file_and_explicit_domain(tmp_path):
    path = write_tau_bench_file(tmp_path, [tau_bench_result(114, 0, 1.0, domain="retail")], "r.json")
    f = read_results_file(path, agent_model="m", user_model="u")
    assert (f.domain, f.agent_model, f.user_model, f.agent_args) == ("tau-bench-retail", "m", "u", {})
    # Without the policy, the tools tell the domain.
    for domain in ("airline", "retail"):
        bare = write_tau_bench_file(tmp_path, [tau_bench_result(3, 0, 1.0, domain=domain, policy=False)], "b.json")
        assert read_results_file(bare).domain == f"tau-bench-{domain}"
    only_errors = write_tau_bench_file(tmp_path, [tau_bench_result(3, 0, 0.0, error="boom")], "e.json")
    with pytest.raises(ResultsFileError, match="cannot tell the domain"):
        read_results_file(only_errors)
    assert read_results_file(only_errors, domain="retail").domain == "tau-bench-retail"


def _bad(tmp_path, name: str, content) -> str:  # noqa: ANN001
    path = tmp_path / name
    path.write_text(content if isinstance(content, str) else json.dumps(content))
    return str(path)


def _tau2_with(**changes):
    data = json.loads(TAU2_MOCK_RESULTS.read_text())
    for dotted, value in changes.items():
        target, *keys, last = [data, *dotted.split("__")]
        for key in keys:
            target = target[int(key)] if key.isdigit() else target[key]
        target[int(last) if last.isdigit() else last] = value
    return data


BAD_FILES = [
    ("neither", {"hello": "world"}, {}, "is neither a tau2 results file"),
    ("list-of-other", [{"a": 1}], {}, "is neither a tau2 results file"),
    ("empty-list", [], {}, "is an empty list"),
    ("empty", "", {}, "is empty"),
    ("truncated", TAU2_MOCK_RESULTS.read_text()[:3000], {}, "is truncated"),
    ("not-json", "root:x:0:0:root:/root:/bin/bash\n", {}, "is not JSON (it begins 'root:x:0:0:root:/root:/bin/bash')"),
    ("truncated-at-a-brace", TAU2_MOCK_RESULTS.read_text()[:1234].rstrip() + "}", {}, "is not valid JSON"),
    ("tau2-bad-schema", _tau2_with(simulations__0__termination_reason="gave_up"), {},
     "is not a valid tau2 results file: simulations.0.termination_reason"),
    ("tau2-unknown-task", _tau2_with(simulations__1__task_id="no_such_task"), {},
     "task id(s) 'no_such_task' are not tasks of the mock domain"),
    ("tau2-unknown-domain", _tau2_with(info__environment_info__domain_name="banking"), {},
     "domain 'banking' is not one passhat has"),
    ("tau2-with-domain", _tau2_with(), {"domain": "airline"}, "--domain is for tau-bench files"),
    ("v1-unknown-task", [tau_bench_result(0, 0, 1.0), tau_bench_result(50, 0, 1.0)], {},
     "task id(s) 50 are not tasks of tau-bench's airline test split (ids 0-49)"),
    ("v1-mixed", [tau_bench_result(0, 0, 1.0), tau_bench_result(1, 0, 1.0, domain="retail")], {},
     "mixes domains in one tau-bench file (airline: results 0; retail: results 1)"),
    ("v1-repeated", [tau_bench_result(0, 0, 1.0), tau_bench_result(0, 0, 0.0)], {},
     "task 0 trial 0 appears more than once"),
    ("v1-bad-task-id", [dict(tau_bench_result(0, 0, 1.0), task_id="0")], {},
     "result 0 has task_id '0', not a task index"),
    ("v1-wrong-domain", [tau_bench_result(0, 0, 1.0)], {"domain": "retail"},
     "holds airline results, not retail (--domain)"),
    ("v1-unknown-domain", [tau_bench_result(0, 0, 1.0)], {"domain": "banking"},
     "--domain for a tau-bench file must be airline or retail"),
]


@pytest.mark.parametrize("name,content,kwargs,message", BAD_FILES, ids=[c[0] for c in BAD_FILES])
def test_bad_files_are_refused_in_one_line(tmp_path, name, content, kwargs, message):
    path = _bad(tmp_path, f"{name}.json", content)
    with pytest.raises(ResultsFileError) as err:
        read_results_file(path, **kwargs)
    text = str(err.value)
    assert message in text and path in text
    assert "\n" not in text


def test_missing_file_and_directory(tmp_path):
    with pytest.raises(ResultsFileError, match="does not exist"):
        read_results_file(tmp_path / "nope.json")
    with pytest.raises(ResultsFileError, match="is a directory"):
        read_results_file(tmp_path)


def test_v1_file_name_is_parsed_for_models(tmp_path):
    path = write_tau_bench_file(
        tmp_path, [tau_bench_result(0, 0, 1.0)],
        "tool-calling-claude-3-5-sonnet-20241022-0.5_range_0-50_user-gpt-4o-2024-08-06-llm_1104101010.json",
    )
    f = read_results_file(path)
    assert (f.agent_model, f.user_model, f.agent_args) == (
        "claude-3-5-sonnet-20241022", "gpt-4o-2024-08-06", {"temperature": 0.5})
    assert V1_FILE_NAME.startswith("tool-calling-gpt-4o-0.0_")
