"""The exact diagnosis of a failed trial against its task's gold path (issue 33):
pure computation over the recorded steps, the gold actions and the scored reward info.
No LLM, no environment: the field-by-field DB diff (`db_differences`, which needs tau2's
environments) is added by the domain (Tau2Domain.database_differences, domains/db_diff.py)."""

from __future__ import annotations

from typing import Any

from passhat.messages import Message

DIAGNOSIS_VERSION = 3  # 2: db_differences; 3: attempted_writes, the headline from the failed parts

# What ended the trial, in words, from tau2's termination reasons.
ENDED_BY = {
    "user_stop": "user stopped",
    "agent_stop": "agent stopped",
    "max_steps": "hit max_steps",
    "too_many_errors": "too many tool errors",
    "agent_error": "agent errored",
    "user_error": "user simulator errored",
}
# The ends tau2 scores; any other ends the conversation before it can be (reward 0, no part checked).
SCORED_ENDS = ("user_stop", "agent_stop")

TRANSFER_TOOL = "transfer_to_human_agents"  # every tau2 domain's hand-off tool

# Which causes can explain which failed reward part (tau2's reward parts). A write off
# the gold path changes the state (DB, ENV_ASSERTION); a gold action not made with its
# arguments fails ACTION, an extra one does not (tau2's ACTION check looks only for the
# gold actions).
STATE_PARTS = ("DB", "ENV_ASSERTION")
ACTION_KINDS = ("wrong_argument", "wrong_tool", "skipped_write", "skipped_action")


def _calls(steps: list[tuple[int, list[Message]]]) -> list[tuple[int, str, dict[str, Any], str | None]]:
    """Every call the agent made, with the step it was made at and, when the tool
    answered with an error, that answer's first line."""
    errors = {m.tool_call_id: (m.content or "error").strip().splitlines()[0][:200]
              for _, messages in steps for m in messages if m.role == "tool" and m.error}
    return [
        (step_no, call.name, dict(call.arguments), errors.get(call.id))
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
            (i for i, (_, name, args, _) in enumerate(calls) if i not in used and name == gold["name"]
             and not _differing(gold["arguments"], args, gold.get("compare_args"))),
            None,
        )
        assigned.append(match)
        if match is not None:
            used.add(match)
    unmatched_tools = {g["name"] for g, a in zip(gold_actions, assigned) if a is None}
    actions = []
    write_cause: dict[str, Any] | None = None  # the first gold write off the path
    read_cause: dict[str, Any] | None = None  # the first other gold action off it (tau2's ACTION check)
    for n, gold in enumerate(gold_actions):
        if assigned[n] is not None:
            actions.append({"action": gold["name"], "matched": True, "step": calls[assigned[n]][0]})
            continue
        # Calls before the cursor are accounted for by earlier gold actions.
        cursor = max((a + 1 for a in assigned[:n] if a is not None), default=0)
        compare = gold.get("compare_args")
        is_write = tool_kinds.get(gold["name"]) == "write"
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
            if is_write and due is not None and calls[due][1] not in unmatched_tools:
                used.add(due)
                assigned[n] = due
                kind, step, tool = "wrong_tool", calls[due][0], calls[due][1]
            else:
                # It was due before the agent's next call (or its closing message).
                nxt = calls[cursor][0] if cursor < len(calls) else _closing_step(steps)
                kind, step, tool = ("skipped_write" if is_write else "skipped_action"), nxt, gold["name"]
        if is_write and write_cause is None:
            write_cause = {"kind": kind, "step": step, "tool": tool}
        elif not is_write and read_cause is None:
            read_cause = {"kind": kind, "step": step, "tool": tool}
    # A write no gold action explains: one the tool refused (answered with an error) was
    # attempted and changed nothing; the others are extra writes.
    unexplained, attempted = [], []
    for i, (s, name, args, error) in enumerate(calls):
        if i not in used and tool_kinds.get(name) == "write":
            write = {"step": s, "tool": name, "arguments": args}
            (attempted.append({**write, "error": error}) if error else unexplained.append(write))
    if unexplained and (write_cause is None or unexplained[0]["step"] < (write_cause["step"] or 0)):
        write_cause = {"kind": "extra_write", "step": unexplained[0]["step"], "tool": unexplained[0]["tool"]}
    # tau2's check: the info, lower-cased, inside one agent message lower-cased without commas.
    said = [(m.content or "").lower().replace(",", "")
            for _, messages in steps for m in messages if m.role == "assistant" and m.content]
    unsaid = [info for info in communicate_info if not any(info.lower() in text for text in said)]
    breakdown = reward_info.get("breakdown", {})
    failed_parts = sorted(k for k, v in breakdown.items() if v is not None and v < 1)
    checks = reward_info.get("nl_checks") or reward_info.get("nl_assertions") or []
    nl = [c for c in checks if isinstance(c, dict) and not c.get("met", True)]
    causes = {
        "write": write_cause,
        "action": read_cause,
        "info": {"kind": "missing_info", "step": _closing_step(steps), "tool": None, "detail": unsaid[0]}
        if unsaid else None,
        "nl": {"kind": "nl_assertion", "step": None, "tool": None, "detail": _nl_words(nl[0])} if nl else None,
        "env": _env_cause(reward_info),
    }
    return {
        "version": DIAGNOSIS_VERSION,
        "failed_parts": failed_parts,
        "actions": actions,
        "unexplained_writes": unexplained,
        "attempted_writes": attempted,
        "communicate_missing": unsaid,
        "nl_failed": nl,
        "db_differences": [],  # filled by the domain when the DB part failed
        "first_off_path": _headline(causes, breakdown, failed_parts, termination_reason, steps),
        "ended_by": {"termination_reason": termination_reason, "how": _how_it_ended(calls, termination_reason)},
    }


def _headline(causes: dict[str, Any], breakdown: dict[str, Any], failed_parts: list[str],
              termination_reason: str | None, steps: list[tuple[int, list[Message]]]) -> dict[str, Any] | None:
    """The cause that heads the diagnosis: one that explains a failed part of the
    reward, so the diagnosis never contradicts it. A write off the gold path heads
    only when a state part (or, made wrong or not at all, ACTION) failed; with none
    failed, as when the conversation ended before tau2 could score it, the end is the
    cause. None: the DB differs with every agent write on the path (the user's own
    writes; the one line names the field), or nothing explains it."""
    write, action = causes["write"], causes["action"]
    if not breakdown:
        if termination_reason not in (*SCORED_ENDS, None):
            return _premature_end(steps)
        # Parts not known (a record that has none): the first step off the gold path.
        return write or causes["info"]
    failed = set(failed_parts)
    for explains, cause in (
        (failed & set(STATE_PARTS), write),
        ("ACTION" in failed, write if write and write["kind"] in ACTION_KINDS else None),
        ("ACTION" in failed, action),
        ("COMMUNICATE" in failed, causes["info"]),
        ("NL_ASSERTION" in failed, causes["nl"]),
        ("ENV_ASSERTION" in failed, causes["env"]),
    ):
        if explains and cause is not None:
            return cause
    return None


def _premature_end(steps: list[tuple[int, list[Message]]]) -> dict[str, Any]:
    """The end of a conversation tau2 did not score: the agent's empty reply, where it
    gave one (neither text nor tool calls), else the last step."""
    for step_no, messages in reversed(steps):
        for m in messages:
            if m.role == "assistant" and m.is_empty():
                return {"kind": "empty_reply", "step": step_no, "tool": None}
        if messages:
            return {"kind": "ended_early", "step": step_no, "tool": None}
    return {"kind": "ended_early", "step": None, "tool": None}


def _env_cause(reward_info: dict[str, Any]) -> dict[str, Any] | None:
    """The first environment assertion tau2 found unmet (telecom's device checks)."""
    for check in reward_info.get("env_assertions") or []:
        if isinstance(check, dict) and not check.get("met", True):
            assertion = check.get("env_assertion") or {}
            return {"kind": "env_assertion", "step": None, "tool": assertion.get("func_name"),
                    "detail": assertion.get("message")}
    return None


def _nl_words(check: dict[str, Any]) -> str:
    text = check.get("nl_assertion") or check.get("expectedOutcome") or check.get("assertion") or ""
    return str(text)[:120]


def _how_it_ended(calls: list[tuple[int, str, dict[str, Any], str | None]], termination_reason: str | None) -> str | None:
    how = ENDED_BY.get(termination_reason or "", termination_reason)
    # tau2's user simulator ends the conversation (###TRANSFER###) once the agent hands it
    # to a human: the stop is the user's, the decision the agent's.
    transfer = next((call[0] for call in calls if call[1] == TRANSFER_TOOL), None)
    return f"agent transferred to a human at step {transfer}; {how}" if transfer is not None else how


def one_line(diagnosis: dict[str, Any] | None) -> str:
    """The diagnosis in one line, for `passhat trials --failed` and reports. Nothing
    unknown is printed as such: a cause without a step or a tool leaves it out."""
    if not diagnosis:
        return ""
    first = diagnosis.get("first_off_path")
    db = diagnosis.get("db_differences") or []
    if first:
        where = cause_words(first)
    elif db:  # every agent write on the path, yet the state differs (e.g. the user's own writes)
        where = f"{db[0]['database']} DB differs at {db[0]['path']}"
    else:
        where = "on the gold path"
    how = diagnosis["ended_by"].get("how")
    return f"{where}; {how}" if how else where


def cause_words(cause: dict[str, Any]) -> str:
    """A cause in words: "wrong_argument at step 7 (update_reservation_flights)",
    "missing_info at step 4 (never said 'rf1')", "empty_reply at step 2 (neither text
    nor tool calls)", "nl_assertion ('The agent ...' not met)"."""
    kind, step = cause["kind"], cause.get("step")
    words = kind if step is None else f"{kind} at step {step}"
    what = {
        "missing_info": f"never said {cause.get('detail')!r}" if cause.get("detail") else None,
        "empty_reply": "neither text nor tool calls",
        "nl_assertion": f"{cause.get('detail')!r} not met" if cause.get("detail") else None,
    }.get(kind, cause.get("tool"))
    return f"{words} ({what})" if what else words
