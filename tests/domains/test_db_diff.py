"""The DB part of the diagnosis: which records and fields of the final databases differ
from the gold ones, replayed through tau2's environments as its evaluator replays them."""

from __future__ import annotations

from passhat.messages import Message, ToolCall
from pydantic import BaseModel

from passhat.domains.db_diff import ABSENT, database_differences
from passhat.domains.registry import get_domain


def _conversation(domain, task_id: str, calls: list[ToolCall]) -> list[Message]:
    """A conversation in which the calls are made one by one, answered by the domain."""
    messages = [Message(role="user", content="hello")]
    for call in calls:
        role = "user" if call.requestor == "user" else "assistant"
        answers = domain.execute(task_id, messages, [call])
        messages += [Message(role=role, tool_calls=[call]), *answers]
    return messages + [Message(role="assistant", content="Is there anything else?")]


def test_the_wrong_reservation_cancelled_shows_both_records_field_by_field():
    airline = get_domain("airline")
    # Task 19's one gold action cancels Z7GOZK; the agent cancels the user's SDZQKO.
    call = ToolCall(id="c1", name="cancel_reservation", arguments={"reservation_id": "SDZQKO"})
    diffs = airline.database_differences("19", _conversation(airline, "19", [call]))
    by_path = {d["path"]: d for d in diffs}
    assert by_path["reservations.Z7GOZK.status"]["gold"] == "cancelled"
    assert by_path["reservations.Z7GOZK.status"]["actual"] is None
    assert by_path["reservations.SDZQKO.status"] == {
        "database": "agent", "path": "reservations.SDZQKO.status", "gold": None, "actual": "cancelled"}
    assert {d["database"] for d in diffs} == {"agent"}
    # Only the touched records: the thousands of others are the same on both sides.
    assert {p.split(".")[1] for p in by_path} == {"Z7GOZK", "SDZQKO"}


def test_the_right_write_leaves_no_difference():
    airline = get_domain("airline")
    call = ToolCall(id="c1", name="cancel_reservation", arguments={"reservation_id": "Z7GOZK"})
    assert airline.database_differences("19", _conversation(airline, "19", [call])) == []


def test_a_wrong_argument_value_shows_as_the_field_it_wrote():
    retail = get_domain("retail")
    task_id = next(t for t in retail.task_ids()
                   if [a.name for a in retail.task(t).gold_actions] == ["cancel_pending_order"])
    gold = retail.task(task_id).gold_actions[0]
    # The right call, then a made-up record written where the gold path writes none.
    calls = [ToolCall(id="c1", name=gold.name, arguments=gold.arguments)]
    messages = _conversation(retail, task_id, calls)
    diffs = retail.database_differences(task_id, messages)
    assert diffs == []
    wrong = dict(gold.arguments, reason="ordered by mistake" if gold.arguments.get("reason") == "no longer needed"
                 else "no longer needed")
    diffs = retail.database_differences(
        task_id, _conversation(retail, task_id, [ToolCall(id="c1", name=gold.name, arguments=wrong)]))
    order = gold.arguments["order_id"]
    assert diffs == [{"database": "agent", "path": f"orders.{order}.cancel_reason",
                      "gold": gold.arguments["reason"], "actual": wrong["reason"]}]


class Record(BaseModel):
    status: str
    legs: list[str]


class PlainDB(BaseModel):  # a database not made of shared tables is compared whole
    records: dict[str, Record]


def test_a_plain_database_compared_whole_names_added_and_missing_records():
    gold = PlainDB(records={"a": Record(status="open", legs=["x", "y"]), "b": Record(status="open", legs=[])})
    actual = PlainDB(records={"a": Record(status="open", legs=["x", "z"]), "c": Record(status="new", legs=[])})
    assert database_differences(gold, actual, "agent") == [
        {"database": "agent", "path": "records.a.legs[1]", "gold": "y", "actual": "z"},
        {"database": "agent", "path": "records.b", "gold": {"status": "open", "legs": []}, "actual": ABSENT},
        {"database": "agent", "path": "records.c", "gold": ABSENT, "actual": {"status": "new", "legs": []}},
    ]
    assert database_differences(gold, gold, "agent") == []


def test_the_user_database_is_compared_too():
    telecom = get_domain("telecom")
    task_id = telecom.task_ids()[0]
    assert [a.name for a in telecom.task(task_id).gold_actions] == ["toggle_airplane_mode", "toggle_roaming"]
    # The user simulator turns airplane mode off but never turns roaming on.
    call = ToolCall(id="u1", name="toggle_airplane_mode", arguments={}, requestor="user")
    diffs = telecom.database_differences(task_id, _conversation(telecom, task_id, [call]))
    assert diffs and {d["database"] for d in diffs} == {"user"}
    assert any("roaming" in d["path"] for d in diffs), diffs


def test_a_conversation_tau2_cannot_replay_keeps_the_rest_of_its_diagnosis():
    airline = get_domain("airline")
    call = ToolCall(id="c1", name="cancel_reservation", arguments={"reservation_id": "SDZQKO"})
    messages = _conversation(airline, "19", [call])
    messages[2] = messages[2].model_copy(update={"content": "not what the tool answered"})
    steps = [(n, [m]) for n, m in enumerate(messages)]
    diagnosis = airline.diagnose("19", steps, {"breakdown": {"DB": 0.0}}, "user_stop")
    assert diagnosis["db_differences"] == []
    assert diagnosis["db_differences_error"].startswith("ValueError: Tool call:")
    assert diagnosis["first_off_path"]["kind"] == "wrong_argument"
