"""Where the trials of a task part (results/divergence.py), on hand-built conversations
whose parting points are known: the agent's calls and endings are compared, its words
are not."""

from __future__ import annotations

from passhat.messages import Message, ToolCall
from passhat.results.divergence import TrialActions, agent_actions, cause_changes, task_divergence


def conversation(calls: list[tuple[str, dict]], ending: str = "Done.", words: str = "Let me look.") -> list:
    """Steps as `passhat show` numbers them: the agent's greeting (0), the user's opening
    (1), then per call the agent's words and call (one step) and the tool's answer (the
    next), then the agent's closing message."""
    steps = [(0, [Message(role="assistant", content="Hi! How can I help you today?")]),
             (1, [Message(role="user", content="Hi, I need help.")])]
    n = 2
    for i, (name, args) in enumerate(calls):
        steps.append((n, [Message(role="assistant", content=words,
                                  tool_calls=[ToolCall(id=f"c{i}", name=name, arguments=args)])]))
        steps.append((n + 1, [Message(role="tool", content="{}", tool_call_id=f"c{i}", requestor="assistant")]))
        n += 2
    steps.append((n, [Message(role="assistant", content=ending)]))
    return steps


GOLD = [("get_user_details", {"user_id": "u1"}),
        ("get_reservation_details", {"reservation_id": "R1"}),
        ("cancel_reservation", {"reservation_id": "R1"})]


def trial(index: int, success: bool, calls, ending: str = "Done.", reason: str = "user_stop",
          diagnosis=None, words: str = "Let me look.") -> TrialActions:  # noqa: ANN001
    return TrialActions(f"t{index}", index, success,
                        agent_actions(conversation(calls, ending, words), reason), diagnosis)


def test_failing_trials_are_grouped_by_where_they_leave_the_passing_ones():
    wrong_arg = [GOLD[0], GOLD[1], ("cancel_reservation", {"reservation_id": "R2"})]
    too_soon = [GOLD[0], GOLD[2]]  # cancels before reading the reservation
    result = task_divergence([
        # Passing trials word things differently: that is not a parting point.
        trial(0, True, GOLD, words="One moment."),
        trial(1, False, too_soon),
        trial(2, True, GOLD, ending="All set, goodbye!"),
        trial(3, False, wrong_arg),
        trial(4, False, too_soon, words="Sure thing."),
        trial(5, False, GOLD[:1], reason="max_steps"),
    ])
    assert result.kind == "flaky" and (result.failed, result.scored) == (4, 6)
    first, second, third = result.groups
    # Steps: 2 and 3 get_user_details, 4 and 5 the second call, 6 the third.
    assert first.trials == ["t1", "t4"] and first.steps == [4, 4]
    assert (first.after, first.failing, first.passing) == (
        "get_user_details", "called cancel_reservation", "called get_reservation_details")
    assert first.passing_trial == "t0" and first.passing_step == 4
    assert first.sentence == ("2 of 6 trials called cancel_reservation where the passing ones called "
                              "get_reservation_details (step 4, after get_user_details)")
    assert second.trials == ["t3"] and second.steps == [6]
    assert second.differing_arguments == {"reservation_id": {"passing": "R1", "failing": "R2"}}
    assert second.sentence == ('1 of 6 trials called cancel_reservation with reservation_id="R2" not "R1" '
                               "(step 6, after get_reservation_details)")
    # It stopped calling: its end (at its closing message, step 4) is the parting point.
    assert (third.trials, third.steps, third.failing) == (["t5"], [4], "ended (hit max_steps)")
    # Every parting point, the largest group first.
    assert result.line == "; ".join([first.sentence, second.sentence, third.sentence])


def test_the_same_actions_with_other_words_are_grouped_by_the_diagnosis():
    diagnosis = {"first_off_path": {"kind": "missing_info", "step": 8, "tool": None}}
    result = task_divergence([
        trial(0, True, GOLD, ending="Cancelled; your refund is 200 USD."),
        trial(1, False, GOLD, ending="Cancelled.", diagnosis=diagnosis),
    ])
    [group] = result.groups
    assert (group.failing, group.first_off_path, group.steps) == ("same actions", "missing_info", [8])
    assert group.sentence == ("1 of 2 trials made the same calls as a passing trial and differ only in "
                              "what the agent said (missing_info at step 8)")


def test_a_failing_trial_is_lined_up_with_the_passing_trial_nearest_to_it():
    # Two ways to pass; the failing trial follows the second one further.
    other_way = [GOLD[1], GOLD[0], GOLD[2]]
    result = task_divergence([
        trial(0, True, GOLD),
        trial(1, True, other_way),
        trial(2, False, [GOLD[1], GOLD[0], ("cancel_reservation", {"reservation_id": "R9"})]),
    ])
    [group] = result.groups
    assert group.passing_trial == "t1" and group.after == "get_user_details" and group.steps == [6]


def test_a_task_that_failed_every_trial_names_its_most_common_first_step_off_the_path():
    def off(kind, step, tool):  # noqa: ANN001, ANN202
        return {"first_off_path": {"kind": kind, "step": step, "tool": tool}}
    result = task_divergence([
        trial(0, False, GOLD, diagnosis=off("wrong_argument", 6, "cancel_reservation")),
        trial(1, False, GOLD, diagnosis=off("skipped_write", 8, "cancel_reservation")),
        trial(2, False, GOLD, diagnosis=off("wrong_argument", 7, "cancel_reservation")),
        trial(3, False, GOLD, diagnosis=None),
    ])
    assert result.kind == "all_failed" and not result.groups
    assert result.first_off_path == {"kind": "wrong_argument", "tool": "cancel_reservation", "count": 2,
                                     "diagnosed": 3, "steps": [6, 7]}
    assert result.line == ("all 4 trials failed; most common first step off the gold path: "
                           "wrong_argument (cancel_reservation) in 2 of 3 diagnosed, steps 6, 7")
    assert task_divergence([trial(0, True, GOLD)]) is None


def test_user_tool_calls_are_not_the_agents_actions():
    steps = conversation(GOLD)
    steps.insert(1, (1, [Message(role="user", tool_calls=[
        ToolCall(id="u0", name="check_speed", arguments={}, requestor="user")])]))
    assert [a.name for a in agent_actions(steps, "user_stop")] == [g[0] for g in GOLD] + [None]


def test_an_agent_that_calls_nothing_parts_at_its_answer_not_its_greeting():
    result = task_divergence([trial(0, True, GOLD), trial(1, False, [], reason="user_stop")])
    [group] = result.groups
    assert (group.steps, group.failing, group.passing, group.after) == (
        [2], "ended (user stopped)", "called get_user_details", None)


def test_cause_changes_between_two_runs():
    changes = cause_changes({"wrong_argument": 3, "skipped_write": 2}, {"wrong_argument": 1, "extra_write": 4})
    assert [(c.cause, c.a, c.b, c.change) for c in changes] == [
        ("extra_write", 0, 4, "grew"), ("skipped_write", 2, 0, "shrank"), ("wrong_argument", 3, 1, "shrank")]


def test_a_cause_is_the_first_step_off_the_path_else_where_the_state_differs():
    """The report's cause count says what the diagnosis's one line says: a trial with no
    step off the gold path whose final state differs counts as "user DB differs"."""
    from passhat.domains.diagnosis import one_line
    from passhat.results.divergence import cause_of

    ended = {"ended_by": {"how": "user stopped"}}
    user_db = ended | {"db_differences": [{"database": "user", "path": "devices.phone.sim", "gold": 1, "actual": 0}]}
    assert cause_of(user_db) == "user DB differs" and one_line(user_db).startswith("user DB differs at")
    assert cause_of(ended | {"first_off_path": {"kind": "extra_write", "step": 3, "tool": "t"}}) == "extra_write"
    assert cause_of(ended) == "on the gold path"


def test_a_trial_that_differs_only_in_words_is_headed_by_the_part_that_failed():
    """Every trial also makes a write the tool refuses: the failing one, which passed the
    DB part and failed COMMUNICATE, differs in what the agent said (not an extra write)."""
    from passhat.domains.diagnosis import diagnose

    calls = [("get_user_details", {"user_id": "u1"}), ("cancel_reservation", {"reservation_id": "R1"}),
             ("cancel_reservation", {"reservation_id": "R1"})]
    failing = conversation(calls, ending="Cancelled.")
    failing[7] = (7, [Message(role="tool", content="Error: Reservation already cancelled", tool_call_id="c2",
                              requestor="assistant", error=True)])
    gold = [{"name": n, "arguments": a, "compare_args": None} for n, a in calls[:2]]
    diagnosis = diagnose(gold, ["200 USD"], {"cancel_reservation": "write"}, failing,
                         {"breakdown": {"DB": 1.0, "COMMUNICATE": 0.0}}, "user_stop")
    result = task_divergence([
        trial(0, True, calls, ending="Cancelled; your refund is 200 USD."),
        TrialActions("t1", 1, False, agent_actions(failing, "user_stop"), diagnosis),
    ])
    assert result.groups[0].sentence == ("1 of 2 trials made the same calls as a passing trial and differ only "
                                         "in what the agent said (missing_info at step 8)")
