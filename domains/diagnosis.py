"""The exact diagnosis of a failed trial against its task's gold path (issue 33):
pure computation over the recorded steps, the gold actions and the scored reward info.
No LLM, no environment: the field-by-field DB diff (`db_differences`, which needs tau2's
environments) is added by the domain (Tau2Domain.database_differences, domains/db_diff.py)."""

from __future__ import annotations

from typing import Any

from passhat.contracts import Message

DIAGNOSIS_VERSION = 2  # 2: db_differences

# What ended the trial, in words, from tau2's termination reasons.
ENDED_BY = {
    "user_stop": "user stopped",
    "agent_stop": "agent stopped",
    "max_steps": "hit max_steps",
    "too_many_errors": "too many tool errors",
    "agent_error": "agent errored",
    "user_error": "user simulator errored",
}

TRANSFER_TOOL = "transfer_to_human_agents"  # every tau2 domain's hand-off tool


def _calls(steps: list[tuple[int, list[Message]]]) -> list[tuple[int, str, dict[str, Any]]]:
    """Every call the agent made, with the step it was made at."""
    return [
        (step_no, call.name, dict(call.arguments))
        for step_no, messages in steps
        for m in messages
        if m.role == "assistant"
        for call in (m.tool_calls or [])
        if call.requestor == "assistant"
    ]


def _differing(gold: dict[str, Any], actual: dict[str, Any], compare: list[str] | None) -> dict[str, Any]:
    keys = compare if compare is not None else sorted(set(gold) | set(actual))
    return {k: {"gold": gold.get(k), "actual": actual.get(k)} for k in keys if gold.get(k) != actual.get(k)}


def _closing_step(steps: list[tuple[int, list[Message]]]) -> int | None:
    """The step of the agent's last text message."""
    last = None
    for step_no, messages in steps:
        if any(m.role == "assistant" and m.has_text() for m in messages):
            last = step_no
    return last


def diagnose(
    gold_actions: list[dict[str, Any]],
    communicate_info: list[str],
    tool_kinds: dict[str, str],
    steps: list[tuple[int, list[Message]]],
    reward_info: dict[str, Any],
    termination_reason: str | None,
) -> dict[str, Any]:
    """`gold_actions`: [{"name", "arguments", "compare_args"}] of the agent's gold actions
    in order; `steps`: [(step number as `passhat show` numbers it, messages)]."""
    calls = _calls(steps)
    # First every exact match, so that a gold action whose call is missing does not take
    # the call of a later gold action of the same tool for its own (two cancellations,
    # one skipped, would otherwise read as one wrong argument and one skipped write).
    used: set[int] = set()
    assigned: list[int | None] = []
    for gold in gold_actions:
        match = next(
            (i for i, (_, name, args) in enumerate(calls) if i not in used and name == gold["name"]
             and not _differing(gold["arguments"], args, gold.get("compare_args"))),
            None,
        )
        assigned.append(match)
        if match is not None:
            used.add(match)
    unmatched_tools = {g["name"] for g, a in zip(gold_actions, assigned) if a is None}
    actions = []
    first: dict[str, Any] | None = None
    for n, gold in enumerate(gold_actions):
        if assigned[n] is not None:
            actions.append({"action": gold["name"], "matched": True, "step": calls[assigned[n]][0]})
            continue
        # Calls before the cursor are accounted for by earlier gold actions.
        cursor = max((a + 1 for a in assigned[:n] if a is not None), default=0)
        compare = gold.get("compare_args")
        same_tool = [i for i, c in enumerate(calls) if i not in used and c[1] == gold["name"]]
        if same_tool:
            i = min(same_tool, key=lambda i: len(_differing(gold["arguments"], calls[i][2], compare)))
            diff = _differing(gold["arguments"], calls[i][2], compare)
            actions.append({"action": gold["name"], "matched": False, "closest_step": calls[i][0],
                            "differing_arguments": diff})
            used.add(i)
            assigned[n] = i
            kind, step, tool = "wrong_argument", calls[i][0], gold["name"]
        else:
            actions.append({"action": gold["name"], "matched": False, "never_called": True})
            due = next((i for i in range(cursor, len(calls)) if i not in used
                        and tool_kinds.get(calls[i][1]) == "write"), None)
            # A write where this one was due is the wrong tool, unless a gold action of
            # its own tool still waits for a call (then it is that action's, mistaken).
            if due is not None and calls[due][1] not in unmatched_tools:
                used.add(due)
                assigned[n] = due
                kind, step, tool = "wrong_tool", calls[due][0], calls[due][1]
            else:
                # It was due before the agent's next call (or its closing message).
                nxt = calls[cursor][0] if cursor < len(calls) else _closing_step(steps)
                kind, step, tool = "skipped_write", nxt, gold["name"]
        if first is None and tool_kinds.get(gold["name"]) == "write":
            first = {"kind": kind, "step": step, "tool": tool}
    unexplained = [
        {"step": s, "tool": name, "arguments": args}
        for i, (s, name, args) in enumerate(calls)
        if i not in used and tool_kinds.get(name) == "write"
    ]
    if unexplained and (first is None or unexplained[0]["step"] < (first["step"] or 0)):
        first = {"kind": "extra_write", "step": unexplained[0]["step"], "tool": unexplained[0]["tool"]}
    # tau2's check: the info, lower-cased, inside one agent message lower-cased without commas.
    said = [(m.content or "").lower().replace(",", "")
            for _, messages in steps for m in messages if m.role == "assistant" and m.content]
    unsaid = [info for info in communicate_info if not any(info.lower() in text for text in said)]
    if first is None and unsaid:
        first = {"kind": "missing_info", "step": _closing_step(steps), "tool": None}
    breakdown = reward_info.get("breakdown", {})
    failed_parts = sorted(k for k, v in breakdown.items() if v is not None and v < 1)
    checks = reward_info.get("nl_checks") or reward_info.get("nl_assertions") or []
    nl = [c for c in checks if isinstance(c, dict) and not c.get("met", True)]
    return {
        "version": DIAGNOSIS_VERSION,
        "failed_parts": failed_parts,
        "actions": actions,
        "unexplained_writes": unexplained,
        "communicate_missing": unsaid,
        "nl_failed": nl,
        "db_differences": [],  # filled by the domain when the DB part failed
        "first_off_path": first,
        "ended_by": {"termination_reason": termination_reason, "how": _how_it_ended(calls, termination_reason)},
    }


def _how_it_ended(calls: list[tuple[int, str, dict[str, Any]]], termination_reason: str | None) -> str | None:
    how = ENDED_BY.get(termination_reason or "", termination_reason)
    # tau2's user simulator ends the conversation (###TRANSFER###) once the agent hands it
    # to a human: the stop is the user's, the decision the agent's.
    transfer = next((step for step, name, _ in calls if name == TRANSFER_TOOL), None)
    return f"agent transferred to a human at step {transfer}; {how}" if transfer is not None else how


def one_line(diagnosis: dict[str, Any] | None) -> str:
    """The diagnosis in one line, for `passhat trials --failed` and reports."""
    if not diagnosis:
        return ""
    first = diagnosis.get("first_off_path")
    db = diagnosis.get("db_differences") or []
    if first:
        where = f"{first['kind']} at step {first['step']} ({first['tool']})"
    elif db:  # every agent write on the path, yet the state differs (e.g. the user's own writes)
        where = f"{db[0]['database']} DB differs at {db[0]['path']}"
    else:
        where = "on the gold path"
    return f"{where}; {diagnosis['ended_by']['how']}"
