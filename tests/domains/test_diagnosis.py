"""The diagnosis of failed trials, checked against the mistakes scripted/faulty-P injects
on a real run (Temporal, store, scoring activity)."""

from __future__ import annotations

import json

import pytest
from passhat.infra.temporal_client import connect

from passhat.domains.diagnosis import DIAGNOSIS_VERSION
from passhat.domains.registry import get_domain
from passhat.infra import scripted_faults
from passhat.testing.harness import passhat
from tests.helpers import cli_env
from tests.runs import config, run_to_end

SEEN_KINDS = {"wrong_argument", "skipped_write", "extra_write", "wrong_tool", "missing_info"}


async def test_diagnosis_names_the_injected_mistake_and_its_step(temporal_server, sqlite_store, tmp_path):
    client = await connect(temporal_server.address)
    cfg = config(limit=20, agent_models=["scripted/faulty-1.0"])
    await run_to_end(client, sqlite_store, cfg)
    domain = get_domain("airline")
    facts = scripted_faults.facts_of(domain)
    checked = db_checked = 0
    for row in sqlite_store.trials(cfg.run_id):
        diagnosis = sqlite_store.trial_diagnosis(cfg.run_id, row.trial_id)
        if row.success:
            assert diagnosis is None
            continue
        assert diagnosis is not None and diagnosis["version"] == DIAGNOSIS_VERSION
        # A failed DB check is answered field by field, never by a hash alone.
        db_failed = row.reward_info()["breakdown"].get("DB", 1.0) < 1
        assert bool(diagnosis["db_differences"]) == db_failed, (row.task_id, diagnosis)
        db_checked += db_failed
        task = domain.task(row.task_id)
        fault = scripted_faults.planned_fault("airline", task, facts, row.seed, 1.0)
        if fault is None or fault.kind not in SEEN_KINDS:
            continue
        steps = [(s.step, s.message_list()) for s in sqlite_store.steps(row.trial_id)]
        expected = {"kind": fault.kind, "step": scripted_faults.fault_step(fault, task, steps)}
        first = diagnosis["first_off_path"]
        assert first is not None, (row.task_id, fault)
        assert {"kind": first["kind"], "step": first["step"]} == expected, (row.task_id, fault, diagnosis)
        checked += 1
    assert checked >= 3 and db_checked >= 3
    # The commands carry it: in full under "diagnosis" in JSON, one line in the table,
    # above the transcript in `show`.
    env = cli_env(f"sqlite:///{tmp_path / 'results.db'}", tmp_path)
    listed = json.loads(passhat("trials", cfg.run_id, "--failed", "-o", "json", env=env, timeout=180).stdout)
    failed = listed["trials"][0]
    assert failed["diagnosis"] == sqlite_store.trial_diagnosis(cfg.run_id, failed["trial_id"])
    shown = json.loads(passhat("show", failed["trial_id"], "-o", "json", env=env, timeout=180).stdout)
    assert shown["diagnosis"] == failed["diagnosis"]
    text = passhat("show", failed["trial_id"], env=env, timeout=180).stdout
    assert text.index("diagnosis: ") < text.index("agent:") if "agent:" in text else "diagnosis: " in text


def test_a_hand_off_to_a_human_is_named_with_its_step():
    from passhat.messages import Message, ToolCall
    from passhat.domains.diagnosis import diagnose, one_line

    steps = [
        (0, [Message(role="assistant", content="Hi! How can I help you today?")]),
        (1, [Message(role="user", content="Cancel reservation ABC.")]),
        (2, [Message(role="assistant", tool_calls=[ToolCall(id="t", name="transfer_to_human_agents",
                                                            arguments={"summary": "cancel"})])]),
    ]
    gold = [{"name": "cancel_reservation", "arguments": {"reservation_id": "ABC"}, "compare_args": None}]
    diagnosis = diagnose(gold, [], {"cancel_reservation": "write", "transfer_to_human_agents": "generic"},
                         steps, {"breakdown": {"DB": 0.0}}, "user_stop")
    assert diagnosis["ended_by"]["how"] == "agent transferred to a human at step 2; user stopped"
    assert diagnosis["first_off_path"] == {"kind": "skipped_write", "step": 2, "tool": "cancel_reservation"}
    assert one_line(diagnosis) == ("skipped_write at step 2 (cancel_reservation); "
                                   "agent transferred to a human at step 2; user stopped")
    # With every write on the path, a DB that still differs is what the line names.
    diagnosis["first_off_path"] = None
    diagnosis["db_differences"] = [{"database": "user", "path": "device.roaming", "gold": True, "actual": False}]
    assert one_line(diagnosis).startswith("user DB differs at device.roaming;")


def test_a_skipped_write_is_not_taken_for_a_wrong_argument_of_the_same_tool():
    from passhat.messages import Message, ToolCall
    from passhat.domains.diagnosis import diagnose

    def call(step: int, reservation: str):
        return (step, [Message(role="assistant", tool_calls=[ToolCall(
            id=f"c{step}", name="cancel_reservation", arguments={"reservation_id": reservation})])])

    gold = [{"name": "cancel_reservation", "arguments": {"reservation_id": r}, "compare_args": None}
            for r in ("AAA", "BBB")]
    kinds = {"cancel_reservation": "write"}
    # The first cancellation skipped: the one call made is the second gold action's.
    steps = [(0, [Message(role="user", content="Cancel both.")]), call(1, "BBB"),
             (2, [Message(role="assistant", content="Done.")])]
    diagnosis = diagnose(gold, [], kinds, steps, {"breakdown": {"DB": 0.0}}, "user_stop")
    assert diagnosis["actions"] == [
        {"action": "cancel_reservation", "matched": False, "never_called": True},
        {"action": "cancel_reservation", "matched": True, "step": 1},
    ]
    assert diagnosis["first_off_path"] == {"kind": "skipped_write", "step": 1, "tool": "cancel_reservation"}
    # One wrong: it is the closest call of the action whose call is missing.
    steps[1] = call(1, "AAX")
    steps.insert(2, call(2, "BBB"))
    diagnosis = diagnose(gold, [], kinds, steps, {"breakdown": {"DB": 0.0}}, "user_stop")
    assert diagnosis["actions"][0]["differing_arguments"] == {"reservation_id": {"gold": "AAA", "actual": "AAX"}}
    assert diagnosis["first_off_path"] == {"kind": "wrong_argument", "step": 1, "tool": "cancel_reservation"}


# A loan desk: the agent renews a loan, then (as the passing trials do too) tries to
# renew it again, which the tool refuses without changing anything.
LOAN_KINDS = {"find_member": "read", "renew_loan": "write"}
LOAN_GOLD = [{"name": "find_member", "arguments": {"member_id": "m1"}, "compare_args": None},
             {"name": "renew_loan", "arguments": {"loan_id": "L1"}, "compare_args": None}]


def loan_steps(closing: str) -> list:
    from passhat.messages import Message, ToolCall

    def call(step: int, name: str, args: dict, answer: str, error: bool = False) -> list:
        return [(step, [Message(role="assistant", tool_calls=[ToolCall(id=f"c{step}", name=name, arguments=args)])]),
                (step + 1, [Message(role="tool", content=answer, tool_call_id=f"c{step}", requestor="assistant",
                                    error=error)])]

    return [(0, [Message(role="assistant", content="Hi! How can I help you today?")]),
            (1, [Message(role="user", content="Please renew my loan L1; I am member m1.")]),
            *call(2, "find_member", {"member_id": "m1"}, '{"member_id": "m1"}'),
            *call(4, "renew_loan", {"loan_id": "L1"}, '{"loan_id": "L1", "renewed": true}'),
            *call(6, "renew_loan", {"loan_id": "L1"}, "Error: This loan was already renewed once", error=True),
            (8, [Message(role="assistant", content=closing)])]


def test_a_write_the_tool_refused_is_attempted_not_extra_and_the_headline_is_a_failed_part():
    from passhat.domains.diagnosis import diagnose, one_line

    steps = loan_steps("Your loan is renewed.")  # the due date (2024-06-01) never said
    reward = {"breakdown": {"DB": 1.0, "COMMUNICATE": 0.0}}
    diagnosis = diagnose(LOAN_GOLD, ["2024-06-01"], LOAN_KINDS, steps, reward, "user_stop")
    assert diagnosis["unexplained_writes"] == []
    assert diagnosis["attempted_writes"] == [{"step": 6, "tool": "renew_loan", "arguments": {"loan_id": "L1"},
                                              "error": "Error: This loan was already renewed once"}]
    assert diagnosis["first_off_path"]["kind"] == "missing_info"
    assert one_line(diagnosis) == "missing_info at step 8 (never said '2024-06-01'); user stopped"


def test_with_the_db_part_passed_no_write_heads_the_diagnosis():
    from passhat.domains.diagnosis import diagnose, one_line

    steps = loan_steps("Your loan is renewed.")
    steps[7] = (steps[7][0], [steps[7][1][0].model_copy(update={"error": False, "content": "{}"})])
    # A write no gold action explains, which left the DB as the gold one (tau2 says DB 1.0).
    diagnosis = diagnose(LOAN_GOLD, ["2024-06-01"], LOAN_KINDS, steps,
                         {"breakdown": {"DB": 1.0, "COMMUNICATE": 0.0}}, "user_stop")
    assert [w["step"] for w in diagnosis["unexplained_writes"]] == [6]
    assert diagnosis["first_off_path"]["kind"] == "missing_info"
    # The same write heads it when the DB part failed.
    failed_db = diagnose(LOAN_GOLD, ["2024-06-01"], LOAN_KINDS, steps,
                         {"breakdown": {"DB": 0.0, "COMMUNICATE": 0.0}}, "user_stop")
    assert one_line(failed_db) == "extra_write at step 6 (renew_loan); user stopped"
    # Only an NL assertion failed: that is the headline, not the write.
    nl = diagnose(LOAN_GOLD, [], LOAN_KINDS, steps, {"breakdown": {"DB": 1.0, "NL_ASSERTION": 0.0},
                  "nl_checks": [{"nl_assertion": "The agent tells the new due date", "met": False}]}, "user_stop")
    assert one_line(nl) == "nl_assertion ('The agent tells the new due date' not met); user stopped"


def test_an_empty_reply_says_so_and_nothing_prints_none():
    from passhat.messages import Message
    from passhat.domains.diagnosis import diagnose, one_line

    steps = [(0, [Message(role="assistant", content="Hi! How can I help you today?")]),
             (1, [Message(role="user", content="Please renew my loan L1.")]),
             (2, [Message(role="assistant", content="")])]
    # tau2 scores no part of a conversation that ended with an agent error.
    diagnosis = diagnose(LOAN_GOLD, ["2024-06-01"], LOAN_KINDS, steps, {"breakdown": {}}, "agent_error")
    assert one_line(diagnosis) == "empty_reply at step 2 (neither text nor tool calls); agent errored"
    # An agent that never said a word: the info it never gave has no step, and no None.
    silent = diagnose([], ["2024-06-01"], LOAN_KINDS, steps[1:2], {"breakdown": {"COMMUNICATE": 0.0}}, "user_stop")
    assert one_line(silent) == "missing_info (never said '2024-06-01'); user stopped"
    assert "None" not in one_line({**silent, "ended_by": {"termination_reason": None, "how": None}})
