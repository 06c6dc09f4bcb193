"""The scripted review judges: offline stand-ins for the LLM that reviews a trial
(`passhat review`), answering from the request alone, so they give the same answer in
process (`scripted/reviewer`) and over loopback HTTP (passhat.testing).

`reviewer` finds the mistakes the scripted models are known to make, from the
transcript and the expected actions the request carries (passhat.domains.review's
format), and blames them as the ground truth says:
- an agent turn with neither text nor tool calls (scripted/noisy-P's failure): the
  agent's premature_end;
- the user simulator's stop before every expected agent action was made and before the
  agent closed the task: the user's premature_end (a user that gives up early); after the
  agent closed it without an expected action it never tried: the agent's skipped_action;
- an agent tool call no expected action names: wrong_action; one whose tool is
  expected with other arguments: wrong_arguments.
`reviewer-misquote` answers first with a quote the transcript does not hold, then, when
told so, as `reviewer`; `reviewer-garbled` never answers with JSON.

Asked by tau2 1.0.x's own reviewer (passhat.domains.tau2_review), they read its request
(the conversation as "[TURN n] **role**:" blocks, the expected actions as a JSON block)
and answer in its format: the same findings, with tau2's tags (TAU2_TAGS), the agent's
as "critical", the user's as "critical_hindered"; the misquote names a turn that does
not exist. tau2's authentication classifier (its full mode's second call) is answered from
the agent's lookups of the user in the conversation (tau2_auth_verdict)."""

from __future__ import annotations

import json
import re
from typing import Any

STOP = "###STOP###"
# How the scripted agents close a task (scripted_provider.agent_turn): a user that stops
# after one of these stops when the agent says it is done, not early.
CLOSINGS = ("Here is what you need to know", "Your request has been handled.")
_LINE = re.compile(r"\[step (\d+)\] (agent|user|tool answer to \w+)( calls |: )(.*)", re.S)
_NEXT_LINE = re.compile(r"\n(?=\[step \d+\] )")  # a message's text may span lines
MODELS = ("reviewer", "reviewer-misquote", "reviewer-garbled")


def _section(text: str, tag: str) -> str:
    start, end = text.find(f"<{tag}>\n"), text.find(f"\n</{tag}>")
    return text[start + len(tag) + 3:end] if start >= 0 and end >= 0 else ""


def _call(text: str) -> tuple[str, Any]:
    name, _, rest = text.partition("(")
    try:
        return name, json.loads(rest[:-1])
    except ValueError:
        return name, None


def verdict(request: str) -> dict[str, Any]:
    """The review of the trial in `request` (the judge's user message, passhat's prompt)."""
    expected = json.loads(_section(request, "expected_actions") or "[]")
    lines = []
    for line in _NEXT_LINE.split(_section(request, "transcript")):
        match = _LINE.fullmatch(line)
        if match:
            lines.append((int(match.group(1)), match.group(2), match.group(3), match.group(4)))
    return _verdict(expected, lines)


def tau2_verdict(request: str) -> dict[str, Any]:
    """The same review, of a request made by tau2 1.0.x's reviewer, answered in its format
    (source, error_tags, severity, turn_idx, reasoning, correct_behavior)."""
    fenced = _section(request, "Example Action Trajectory").strip()
    expected = json.loads(fenced.removeprefix("```json").removesuffix("```") or "[]")
    lines = []
    for turn in _TAU2_TURN.finditer(_section(request, "Conversation")):
        index, role, body = int(turn.group(1)), turn.group(2), turn.group(3)
        if role not in ("assistant", "user"):
            continue
        who = "agent" if role == "assistant" else "user"
        text, _, calls = body.partition("**Tool Call**: ")
        if text.strip():
            lines.append((index, who, ": ", text.strip()))
        for call in _TAU2_CALL.finditer("**Tool Call**: " + calls if calls else ""):
            lines.append((index, who, " calls ", f"{call.group(1)}({json.dumps(json.loads(call.group(2)))})"))
    found = _verdict(expected, lines)
    return {"errors": [{"source": e["side"], "error_tags": [TAU2_TAGS[e["category"]]],
                        "severity": "critical" if e["side"] == "agent" else "critical_hindered",
                        "turn_idx": e["step"], "reasoning": e["explanation"], "correct_behavior": None}
                       for e in found["errors"]],
            "summary": f"{len(found['errors'])} error(s)"}


def tau2_auth_verdict(request: str) -> dict[str, str]:
    """tau2 1.0.x's authentication classification of the conversation in `request`, in its
    format: "succeeded" when a lookup of the user by the agent (a get_/find_ tool naming
    the user or customer) was answered without error, "failed" when every such lookup
    erred, "not_needed" when the agent made none."""
    pending: list[str] = []  # the lookups (or other calls) of the agent's last turn, unanswered
    answered: dict[str, list[bool]] = {}  # lookup -> whether each answer was an error
    for turn in _TAU2_TURN.finditer(_section(request, "Conversation")):
        role, body = turn.group(2), turn.group(3)
        if role == "assistant":
            pending = [call.group(1) for call in _TAU2_CALL.finditer(body)]
        elif role == "user":  # the user's own tool calls are answered next: none of the agent's
            pending = []
        elif role.startswith("tool") and pending:
            name = pending.pop(0)
            if _LOOKUP.fullmatch(name):
                answered.setdefault(name, []).append(role != "tool")
    if not answered:
        return {"status": "not_needed", "reasoning": "the agent never looked the user up"}
    succeeded = sorted(name for name, errors in answered.items() if not all(errors))
    if succeeded:
        return {"status": "succeeded", "reasoning": f"the agent found the user with {succeeded[0]}"}
    return {"status": "failed", "reasoning": f"every lookup ({', '.join(sorted(answered))}) failed"}


AUTH_ASK = "Classify the user authentication outcome"  # tau2's classifier's system prompt
_LOOKUP = re.compile(r"(get|find)_\w*(user|customer)\w*")
# passhat's categories as tau2 1.0.x's reviewer tags them.
TAU2_TAGS = {"wrong_action": "irrelevant_tool_call", "wrong_arguments": "tool_call_argument_error",
             "premature_end": "premature_termination", "skipped_action": "missed_required_action",
             "hallucinated_detail": "hallucination"}
_TAU2_TURN = re.compile(r"\[TURN (\d+)\] \*\*(assistant|user|tool(?: \(Error\))?)\*\*:\n?(.*?)(?=\n\n\[TURN \d+\] |\Z)",
                        re.S)
_TAU2_CALL = re.compile(r"\*\*Tool Call\*\*: (\S+)\n```json\n(.*?)\n```", re.S)


def _verdict(expected: list[dict[str, Any]], lines: list[tuple[int, str, str, str]]) -> dict[str, Any]:
    expected = [a for a in expected if a.get("requestor", "assistant") == "assistant"]
    errors: list[dict[str, Any]] = []
    made: list[tuple[str, Any]] = []
    closed: tuple[int, str] | None = None  # the agent's closing turn: its step and words
    for step, who, how, text in lines:
        if who == "agent" and how == " calls ":
            name, args = _call(text)
            made.append((name, args))
            same_tool = [a for a in expected if a["name"] == name]
            if not same_tool:
                errors.append(_error(step, "agent", "wrong_action", text, f"{name} is not an expected action"))
            elif all(a["arguments"] != args for a in same_tool):
                errors.append(_error(step, "agent", "wrong_arguments", text, f"{name} with other arguments"))
        elif who == "agent" and text.startswith(CLOSINGS):
            closed = (step, text[:60])
        elif who == "agent" and text == "(empty)":
            errors.append(_error(step, "agent", "premature_end", "(empty)", "the agent stopped answering"))
        elif who == "user" and STOP in text:
            missing = [a for a in expected if (a["name"], a["arguments"]) not in made]
            if missing and closed is None:
                errors.append(_error(step, "user", "premature_end", STOP,
                                     f"the user stopped before {missing[0]['name']} was done"))
            elif missing and not any(a["name"] == name for a in missing for name, _ in made):
                # The agent said it was done without an expected action it never tried.
                errors.append(_error(closed[0], "agent", "skipped_action", closed[1],
                                     f"{missing[0]['name']} was never made"))
    sides = {e["side"] for e in errors}
    blame = "both" if len(sides) == 2 else (sides.pop() if sides else "none")
    return {"errors": errors, "blame": blame}


def _error(step: int, side: str, category: str, quote: str, why: str) -> dict[str, Any]:
    return {"step": step, "side": side, "category": category, "severity": "high",
            "quote": quote, "explanation": why}


def review_turn(model: str, messages: list[dict]) -> dict:
    """The scripted judge `model`'s answer (an assistant message) to a review request."""
    name = model.rsplit("/", 1)[-1]
    if name == "reviewer-garbled":
        return {"role": "assistant", "content": "I think the agent did fine overall."}
    request = next(str(m.get("content") or "") for m in messages if m.get("role") == "user")
    resent = len([m for m in messages if m.get("role") == "user"]) > 1
    system = next((str(m.get("content") or "") for m in messages if m.get("role") == "system"), "")
    if AUTH_ASK in system:  # tau2 1.0.x's full mode: its authentication classifier asks
        return {"role": "assistant", "content": json.dumps(tau2_auth_verdict(request))}
    if "<Conversation>" in request:  # tau2 1.0.x's reviewer asks
        review = tau2_verdict(request)
        if name == "reviewer-misquote" and not resent:  # evidence from a turn that does not exist
            review["errors"].insert(0, {"source": "agent", "error_tags": ["hallucination"], "severity": "minor",
                                        "turn_idx": 9999, "reasoning": "made up", "correct_behavior": None})
        return {"role": "assistant", "content": json.dumps(review)}
    review = verdict(request)
    if name == "reviewer-misquote" and not resent:
        review = {"errors": [_error(1, "agent", "hallucinated_detail", "a sentence nobody said",
                                    "made up")] + review["errors"], "blame": "agent"}
    return {"role": "assistant", "content": json.dumps(review)}
