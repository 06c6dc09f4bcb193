"""passhat's LLM review of a trial (tau2 26.3): the judge's request, its taxonomy of
errors, and how its answer is read and checked.

The judge reads one finished conversation with what it was held to (the domain's policy,
the user simulator's instructions, the task's expected actions) and lists the errors it
finds, on either side of the conversation: the agent's, or the user simulator's. Every
error names its step (the step numbers `passhat show` prints), its side, a category
from TAXONOMY, a severity, and a quote that must appear in the transcript it was shown.
It also says which side the failure is owed to (`blame`).

Nothing here guesses: an answer that is not the JSON asked for, or that names an
unknown category, or quotes what the transcript does not hold, raises ReviewRejected
with the reason, which the review activity sends back to the judge once.

The prompt is passhat's own, written for this taxonomy. PROMPT_VERSION is part of a
review's key: a change to the prompt or the taxonomy is a new version, so reviews made
under the old one are kept apart, never mixed with new ones."""

from __future__ import annotations

import json
import re
from typing import Any

from passhat.messages import Message, TaskInfo
from passhat.personas import with_persona

PROMPT_VERSION = "passhat-review-3"  # 3: a persona trial's judge is shown the persona

SIDES = ("agent", "user")
SEVERITIES = ("low", "medium", "high")
BLAMES = ("agent", "user", "both", "none")

# category -> what it means (the judge is shown these lines; docs/failures.md lists them).
TAXONOMY: dict[str, str] = {
    "policy_violation": "acted against a rule of the domain policy (e.g. changed something the policy forbids, "
                        "skipped a confirmation the policy requires)",
    "wrong_action": "called a tool, or asked for an action, that the task did not call for",
    "wrong_arguments": "called the right tool with a wrong argument value",
    "skipped_action": "did not make an action the task required (and did not try it with other arguments)",
    "missed_information": "did not obtain or did not pass on information the task needed "
                          "(a lookup skipped before acting, a fact never told to the other side)",
    "premature_end": "ended the conversation (or stopped answering) before the task was done",
    "hallucinated_detail": "stated a fact that neither the tools' answers nor its instructions support "
                           "(for the user simulator: a detail its instructions do not contain)",
    "misread_request": "misunderstood what the other side asked or said",
    "other": "an error that fits no category above (say what in the explanation)",
}

ROLE_WORDS = {"assistant": "agent", "user": "user"}


class ReviewRejected(ValueError):
    """The judge's answer cannot be used as a review. `kind`: "malformed" (not the JSON
    asked for) or "quote" (evidence that is not in the transcript)."""

    def __init__(self, kind: str, reason: str):
        super().__init__(reason)
        self.kind = kind


def transcript_lines(steps: list[tuple[int, list[Message]]]) -> list[str]:
    """The conversation as the judge reads it: one line per message or tool call,
    each starting with its step number."""
    lines: list[str] = []
    for step, messages in steps:
        for m in messages:
            if m.role == "tool":
                who = f"tool answer to {ROLE_WORDS.get(m.requestor or 'assistant', 'agent')}"
                lines.append(f"[step {step}] {who}: {m.content or ''}")
                continue
            who = ROLE_WORDS.get(m.role, m.role)
            for call in m.tool_calls or []:
                args = call.invalid_arguments if call.invalid_arguments is not None else json.dumps(call.arguments)
                lines.append(f"[step {step}] {who} calls {call.name}({args})")
            if m.content or not m.tool_calls:
                lines.append(f"[step {step}] {who}: {m.content or '(empty)'}")
    return lines


SYSTEM_PROMPT = """You review one conversation between a customer-service AI agent and a \
simulated customer (the user simulator, itself an AI playing a person from written \
instructions). Either side can be wrong. Find the mistakes of both sides that matter for \
whether the customer's task was done correctly, and only those.

The agent must follow the policy below and serve the customer's request with its tools. \
The user simulator must play its instructions faithfully: state only what they contain, \
not give up before the task is done or impossible, and not invent facts.

For each mistake report:
- "step": the step number shown at the start of the transcript line where it happens;
- "side": "agent" or "user";
- "category": one of
{categories}
- "severity": "high" (the task cannot end correctly because of it), "medium" (it changes \
the outcome or the customer's experience, but not necessarily the result), "low" (a slip \
without consequence);
- "quote": an exact substring of that transcript line, copied character for character, \
short (under 200 characters) and enough to show the mistake;
- "explanation": one sentence.

Then "blame": the side the conversation's failure is owed to: "agent", "user", "both", \
or "none" (no mistake, or the task was done).

Answer with one JSON object and nothing else:
{{"errors": [{{"step": 3, "side": "agent", "category": "wrong_arguments", "severity": "high", \
"quote": "...", "explanation": "..."}}], "blame": "agent"}}
An empty list of errors is a valid answer."""


def request_messages(policy: str, task: TaskInfo, steps: list[tuple[int, list[Message]]],
                     outcome: str, persona: str | None = None) -> list[dict[str, Any]]:
    """The judge's request (OpenAI chat format) for one trial: `steps` as recorded
    (step number, its messages), `outcome` a line on how it ended and was scored,
    `persona` the persona text the user simulator was given (None: tau2's own user). The
    judge sees the persona among the user's instructions, as the simulator did: a user who
    plays its persona is not off its scenario."""
    categories = "\n".join(f"  - {name}: {meaning}" for name, meaning in TAXONOMY.items())
    expected = [a.model_dump() for a in task.gold_actions]
    body = (
        f"<policy>\n{policy}\n</policy>\n\n"
        f"<user_instructions>\n{with_persona(str(task.user_scenario), persona)}\n</user_instructions>\n\n"
        f"<expected_actions>\n{json.dumps(expected)}\n</expected_actions>\n\n"
        f"<information_to_communicate>\n{json.dumps(task.communicate_info)}\n</information_to_communicate>\n\n"
        f"<outcome>\n{outcome}\n</outcome>\n\n"
        "<transcript>\n" + "\n".join(transcript_lines(steps)) + "\n</transcript>"
    )
    return [{"role": "system", "content": SYSTEM_PROMPT.format(categories=categories)},
            {"role": "user", "content": body}]


def resend_messages(request: list[dict[str, Any]], reply: str | None, reason: str) -> list[dict[str, Any]]:
    """The request once more, after the judge's rejected answer and why it was rejected."""
    return [*request, {"role": "assistant", "content": reply or ""},
            {"role": "user", "content": f"That answer cannot be used: {reason}. Answer again with the "
                                        "JSON object only, every quote copied exactly from its transcript line."}]


def _json_object(content: str | None) -> dict[str, Any]:
    text = (content or "").strip()
    fenced = re.fullmatch(r"```(?:json)?\s*(.*?)\s*```", text, re.S)
    if fenced:  # a fenced block is still the object asked for
        text = fenced.group(1)
    try:
        data = json.loads(text)
    except ValueError as err:
        raise ReviewRejected("malformed", f"the answer is not JSON ({err})") from None
    if not isinstance(data, dict):
        raise ReviewRejected("malformed", "the answer is not a JSON object")
    return data


def _squash(text: str) -> str:
    return " ".join(text.split())


def parse_review(content: str | None, steps: list[tuple[int, list[Message]]]) -> dict[str, Any]:
    """The judge's answer as a review {"errors": [...], "blame": ...}; raises
    ReviewRejected when it is not the JSON asked for, or when a quote is not in the
    transcript line of its step (compared with runs of whitespace made one space)."""
    data = _json_object(content)
    errors = data.get("errors")
    blame = data.get("blame", "none")
    if not isinstance(errors, list):
        raise ReviewRejected("malformed", '"errors" is not a list')
    if blame not in BLAMES:
        raise ReviewRejected("malformed", f'"blame" is {blame!r}, not one of {", ".join(BLAMES)}')
    by_step: dict[int, str] = {}
    for line in transcript_lines(steps):
        step = int(line[len("[step "):line.index("]")])
        by_step[step] = by_step.get(step, "") + "\n" + _squash(line)
    out = []
    for i, e in enumerate(errors):
        if not isinstance(e, dict):
            raise ReviewRejected("malformed", f"error {i} is not an object")
        step, side, category, severity, quote = (e.get(k) for k in ("step", "side", "category", "severity", "quote"))
        if not isinstance(step, int) or isinstance(step, bool) or side not in SIDES \
                or category not in TAXONOMY or severity not in SEVERITIES \
                or not isinstance(quote, str) or not quote.strip():
            raise ReviewRejected("malformed", f"error {i} lacks a valid step, side, category, severity or quote: "
                                              f"{json.dumps(e)[:300]}")
        if step not in by_step:
            raise ReviewRejected("quote", f"error {i} names step {step}, which the transcript does not have")
        if _squash(quote) not in by_step[step]:
            raise ReviewRejected("quote", f"error {i}'s quote {quote[:120]!r} is not in step {step} of the transcript")
        out.append({"step": step, "side": side, "category": category, "severity": severity,
                    "quote": quote, "explanation": str(e.get("explanation") or "")})
    return {"errors": out, "blame": blame}
