"""tau2 1.0.x's own LLM review of a trial, split so that passhat makes the judge's call
as a checkpointed step of its own (activities/review.py), and so that a review made by
passhat is the review tau2's reviewer makes of the same trajectory with the same answer.

tau2 reviews a turn-based simulation (`tau2 review`, `tau2 run --auto-review`, in full
mode: evaluator/reviewer.review_simulation) with review_llm_judge.ConversationReviewer:
one LLM call over the policy, the user simulator's guidelines, the task's user scenario,
its expected actions and NL assertions, and the conversation as tau2 displays it
("[TURN n] **role**:"). Its answer is JSON read by tau2's own parser into tau2's Review.
Here that is three parts, as passhat.domains.nl_judge does for the NL-assertion judge:

- `request_messages`: tau2's reviewer is run with its generate() stood in for (under a
  lock), which captures the request: the prompt is the installed version's, byte for byte;
- the call itself, made by the review activity like any passhat model call;
- `read_review`: tau2's reviewer is run again with generate() answering the recorded
  reply, so the Review is the one tau2 builds from that reply (its parser, its defaults).

passhat then shows tau2's Review in its own shape (`as_errors`: step, side, category,
severity, quote) and keeps tau2's Review as tau2 wrote it, for tau2 exports.

What passhat refuses where tau2 would keep a review (the reply is sent back once, then the
trial is not reviewable; nothing is guessed): a reply tau2 cannot parse (tau2 keeps a
Review whose single "unknown" error holds the parse error), an error whose source is
neither "agent" nor "user" (tau2: "unknown"), and an error whose turn_idx names no turn
of the conversation (its evidence is not in the transcript).

tau2's full mode also classifies authentication with a second judge call
(evaluator/auth_classifier.AuthenticationClassifier, over the same conversation; tau2
keeps it in SimulationRun.auth_classification). passhat makes it the same way, in three
parts: `auth_request_messages` (tau2's classifier run with generate() stood in for, under
the same lock), the call (the review activity's, under its own call number), and
`read_auth` (the classifier run again with generate() answering the recorded reply, so
tau2's parser builds tau2's AuthenticationClassification, its cost the call's).

A classifier reply tau2 cannot read is not resent; it is recorded as NOT_CLASSIFIABLE
with the reason, where tau2 would keep "not_needed": tau2's parser answers "not_needed"
when the reply holds no JSON object, when that object is not JSON, when it has no
"status" and when its status is not one of tau2's three. That fallback is a guess (the
judge never said authentication was not needed), so passhat keeps none of those as a
classification. Everything else tau2's parser reads (JSON fenced or inside prose, a
missing "reasoning", extra keys) is kept as tau2 reads it. The review itself does not
depend on the classification: a trial is reviewed whether or not it is classified.
"""

from __future__ import annotations

import json
import re
import threading
from typing import Any

from passhat.messages import Message
from passhat.domains.review import ReviewRejected
from passhat.domains.tau2_messages import to_tau2_turns

# A review's key names the reviewer's version: tau2's prompt is the installed tau2's.
PROMPT_PREFIX = "tau2-"
QUOTE_CHARS = 200
# An authentication classification passhat does not keep as tau2's (read_auth says when).
NOT_CLASSIFIABLE = "not_classifiable"
_AUTH_STATUSES = ("succeeded", "failed", "not_needed")
# A severity tau2's parser read as none (a value not of the source's list): said so, not
# guessed, and never null (everything that shows an error prints its severity).
UNRATED = "unrated"
# tau2's severities that put the trial's failure on a side (the user's "critical_helped"
# helped the agent: it does not explain a failure).
BLAMING = {"agent": ("critical",), "user": ("critical_hindered",)}
_PARSE_FAILURE = "Failed to parse LLM response:"

_capture_lock = threading.Lock()


def prompt_version() -> str:
    """The installed tau2's reviewer as a review key's prompt version, e.g. "tau2-1.0.1"."""
    from passhat.domains.tau2_version import installed_version

    return f"{PROMPT_PREFIX}{installed_version()}"


def is_tau2_prompt(version: str) -> bool:
    return version.startswith(PROMPT_PREFIX)


class Trajectory:
    """One trial's conversation as tau2 reviews it: tau2's messages (turn_idx 0..n-1),
    for each turn the step it was recorded in, and the persona text the user simulator
    was given (passhat.personas), None for tau2's own user."""

    def __init__(self, steps: list[tuple[int, list[Message]]], persona: str | None = None):
        self.persona = persona
        step_of = {id(m): step for step, messages in steps for m in messages}
        turns = to_tau2_turns([m for _, messages in steps for m in messages])
        self.messages = [turn for turn, _ in turns]
        self.steps = [step_of[id(source)] for _, source in turns]

    def quote(self, turn: int) -> str:
        """What the judge was shown of a turn: its text, or its tool calls, shortened."""
        message = self.messages[turn]
        text = message.content or "; ".join(
            f"{c.name}({json.dumps(c.arguments)})" for c in message.tool_calls or [])
        return text[:QUOTE_CHARS]


class _Answer(Exception):  # noqa: N818 - carries the request out of tau2's reviewer
    def __init__(self, messages: list[dict[str, Any]]):
        self.messages = messages


def _run_reviewer(domain: Any, task_id: str, trajectory: Trajectory, generate: Any) -> Any:
    """tau2's ConversationReviewer on the trial, as tau2's run_auto_review sets it up
    (text mode), with `generate` standing in for tau2's model call."""
    from tau2.data_model.simulation import UserInfo
    from tau2.evaluator import review_llm_judge as module
    from tau2.user.user_simulator import get_global_user_sim_guidelines

    from passhat.personas import with_persona

    # The reviewer is shown the guidelines the user simulator had: under a persona, with
    # the persona's section, so that playing the persona is not taken for the simulator's error.
    guidelines = with_persona(get_global_user_sim_guidelines(), trajectory.persona)
    user_info = UserInfo(implementation="user_simulator", llm=None, llm_args=None,
                         global_simulation_guidelines=guidelines)
    with _capture_lock:
        real = module.generate
        module.generate = generate
        try:
            return module.ConversationReviewer.review(
                user_info=user_info, task=domain.tau2_task(task_id),
                full_trajectory=trajectory.messages, policy=domain.policy())
        finally:
            module.generate = real


def request_messages(domain: Any, task_id: str, trajectory: Trajectory) -> list[dict[str, Any]]:
    """The chat messages (OpenAI format) tau2's reviewer sends for this trial."""
    from tau2.utils.llm_utils import to_litellm_messages

    def capture(*, messages: list[Any], **_: Any) -> Any:
        raise _Answer(to_litellm_messages(messages))

    try:
        _run_reviewer(domain, task_id, trajectory, capture)
    except _Answer as captured:
        return captured.messages
    raise RuntimeError("tau2's reviewer made no model call")


def resend_messages(request: list[dict[str, Any]], reply: str | None, reason: str) -> list[dict[str, Any]]:
    """The request once more, after the judge's refused answer and why it was refused."""
    return [*request, {"role": "assistant", "content": reply or ""},
            {"role": "user", "content": f"That answer cannot be used: {reason}. Answer again with the "
                                        "JSON object only, each error's turn_idx a turn of the conversation."}]


def read_review(content: str | None, cost: float | None, domain: Any, task_id: str,
                trajectory: Trajectory) -> Any:
    """The reply as tau2's reviewer reads it: tau2's Review (its cost the call's). Raises
    ReviewRejected where passhat refuses it (the module docstring lists when)."""
    from tau2.data_model.message import AssistantMessage

    def answer(**_: Any) -> Any:
        return AssistantMessage(role="assistant", content=content or "", cost=cost)

    review = _run_reviewer(domain, task_id, trajectory, answer)
    errors = review.errors
    if (len(errors) == 1 and errors[0].source == "unknown"
            and errors[0].reasoning.startswith(_PARSE_FAILURE)):
        reason = errors[0].reasoning[len(_PARSE_FAILURE):].split(". Response:")[0].strip()
        raise ReviewRejected("malformed", f"tau2's reviewer cannot read the answer ({reason})")
    for i, e in enumerate(errors):
        if e.source not in BLAMING:
            raise ReviewRejected("malformed", f"error {i}'s source is not \"agent\" or \"user\"")
        if not isinstance(e.turn_idx, int) or not 0 <= e.turn_idx < len(trajectory.messages):
            raise ReviewRejected("quote", f"error {i} names turn {e.turn_idx}, which the conversation "
                                          f"(turns 0 to {len(trajectory.messages) - 1}) does not have")
    return review


def as_errors(review: Any, trajectory: Trajectory) -> list[dict[str, Any]]:
    """tau2's Review in passhat's shape: the step the turn was recorded in, the side,
    the first of tau2's tags as the category (all of them under "tags"), tau2's severity
    (UNRATED where it read none),
    the turn's text as the quote, tau2's reasoning as the explanation."""
    return [{"step": trajectory.steps[e.turn_idx], "turn": e.turn_idx, "side": e.source,
             "category": e.error_tags[0] if e.error_tags else "other", "tags": list(e.error_tags),
             "severity": e.severity or UNRATED, "quote": trajectory.quote(e.turn_idx), "explanation": e.reasoning,
             "correct_behavior": e.correct_behavior}
            for e in review.errors]


def blame(review: Any) -> str:
    """The side the failure is owed to: those with an error tau2 calls critical to the
    outcome (the agent's "critical", the user's "critical_hindered")."""
    sides = {e.source for e in review.errors if e.severity in BLAMING.get(e.source, ())}
    return "both" if len(sides) == 2 else (sides.pop() if sides else "none")


def _run_classifier(trajectory: Trajectory, generate: Any) -> Any:
    """tau2's AuthenticationClassifier on the trial, as tau2's review_simulation runs it in
    full mode (turn-based), with `generate` standing in for tau2's model call."""
    from tau2.evaluator import auth_classifier as module

    with _capture_lock:
        real = module.generate
        module.generate = generate
        try:
            return module.AuthenticationClassifier.classify(messages=trajectory.messages)
        finally:
            module.generate = real


def auth_request_messages(trajectory: Trajectory) -> list[dict[str, Any]]:
    """The chat messages (OpenAI format) tau2's authentication classifier sends for this trial."""
    from tau2.utils.llm_utils import to_litellm_messages

    def capture(*, messages: list[Any], **_: Any) -> Any:
        raise _Answer(to_litellm_messages(messages))

    try:
        _run_classifier(trajectory, capture)
    except _Answer as captured:
        return captured.messages
    raise RuntimeError("tau2's authentication classifier made no model call")


def read_auth(content: str | None, cost: float | None, trajectory: Trajectory) -> dict[str, Any]:
    """The reply as tau2's classifier reads it: tau2's AuthenticationClassification as a
    dict (its cost the call's), or {"status": NOT_CLASSIFIABLE, "reason": ...} where tau2's
    parser would fall back to "not_needed" (the module docstring says why)."""
    from tau2.data_model.message import AssistantMessage

    def answer(**_: Any) -> Any:
        return AssistantMessage(role="assistant", content=content or "", cost=cost)

    classification = _run_classifier(trajectory, answer)
    if classification.status == "not_needed":
        unread = _unread_status(content or "")
        if unread is not None:
            return {"status": NOT_CLASSIFIABLE, "reason": f"tau2's classifier cannot read the answer ({unread})"}
    return classification.model_dump()


def _unread_status(content: str) -> str | None:
    """Why tau2's parser's "not_needed" for this reply is its fallback rather than the
    judge's word; None when the judge said "not_needed". The object is found as tau2's
    parser finds it (the first brace-delimited span without nested braces)."""
    found = re.search(r"\{[^{}]*\}", content, re.DOTALL)
    if not found:
        return "no JSON object"
    try:
        data = json.loads(found.group())
    except ValueError:
        return "its object is not JSON"
    if "status" not in data:
        return "no status"
    if data["status"] not in _AUTH_STATUSES:
        return f"status {json.dumps(data['status'])} is not one of {', '.join(_AUTH_STATUSES)}"
    return None
