"""The `scripted` model provider: offline, key-free models registered with litellm's
custom-provider hook, so they travel the same code path as any real provider.

- `scripted/oracle`, as the agent, plays the task's gold actions in order (asking the user
  to perform the ones whose requestor is the user) and then tells the user the
  information the task says must be communicated. As the user, it states its request,
  performs the actions the agent asks of it, and stops once the agent is done.
- `scripted/noisy-P` is the oracle agent that succeeds with probability P per trial: the
  draw is seeded by the trial's seed and the task, so a trial always draws the same. A
  failing trial answers with an empty message (every time it is asked again), which ends
  the conversation as an agent error.
- `scripted/faulty-P` is the oracle agent that, with probability P per trial, makes one
  mistake (a wrong argument value, a skipped write, an extra write, the wrong tool, a
  missing piece of the information to communicate, or a write before its read), and
  `scripted/faulty-user-P` the oracle user that, with probability P per trial, stops
  early or invents a detail. Both are planned by passhat.infra.scripted_faults from the
  trial's seed, so a bench or a test knows the ground truth; each errs on its own side
  only and plays the oracle on the other.
- `scripted/parallel` is the oracle agent making its tool calls in parallel: each run of
  gold actions that are the agent's goes out in one message, as a model with parallel
  tool calls does (the answers come back together: tau2's MultiToolMessage).
- `scripted/verifier` is the oracle agent that first verifies the user: it asks for the
  identifying detail of the task's known info (its first word with a digit, `_` or `@`,
  such as a user id), at most twice, and acts only once the user has said it; otherwise
  it says it cannot go on. Against the scripted user personas
  (passhat.infra.scripted_personas) it is the agent that a withheld or fragmented fact
  breaks.
- `scripted/customer`, as the user, plays its task's scenario as a cooperative customer
  who answers the agent's questions (passhat.infra.scripted_customer); as the agent, the
  oracle.
- `scripted/judge` grades tau2 1.0.x's NL assertions offline: every assertion is met.
- `scripted/reviewer` (and its variants) reviews a trial for `passhat review`
  (passhat.infra.scripted_review).
- A `latency` model argument (seconds) delays every answer, to measure throughput.
- A `failures` model argument of `"not_evaluable"` makes `scripted/noisy-P`'s failing trials
  end not evaluable instead (its first answer is a provider error), as when a would-be
  failure is what the provider or passhat loses: the case a gate must not mistake for a
  success.

The model learns which task it plays from the call's litellm `metadata`
({"passhat": {"domain", "task_id"}}), which passhat sends with every call, and reads
the task through the lookup given to `register` (the domains sit beside infra, not
below it).
"""

from __future__ import annotations

import asyncio
import json
import random
import re
import time
import uuid
from typing import Any, Callable

from passhat.messages import STOP_TOKEN, TaskInfo
from passhat.infra import scripted_review
from passhat.infra.scripted_customer import GOLD_TAG, asked_user_calls, customer_turn
from passhat.infra.scripted_personas import customer_for, system_of
from passhat.infra.scripted_faults import (
    AgentFault,
    DomainFacts,
    UserFault,
    planned_fault,
    planned_user_fault,
)

# A task by (domain name, task id).
TaskLookup = Callable[[str, str], TaskInfo]
# A domain's facts by its name (scripted_faults.facts_of of the domain).
FactsLookup = Callable[[str], DomainFacts]

PROVIDER = "scripted"
_TAG = GOLD_TAG
_GOLD_CALL = re.compile(r"gold-(\d+)")
_MODEL = re.compile(r"(noisy|faulty|faulty-user)-(\d*\.?\d+)")
_registered = False


class ScriptedModelError(ValueError):
    pass


class ScriptedTrialLost(RuntimeError):
    """A scripted failing trial made not evaluable on purpose (the `failures` argument)."""


def register(task_of: TaskLookup, facts_of: FactsLookup | None = None) -> None:
    """Add the provider to litellm once per process; its models find the task they play
    with `task_of`, and the faulty ones the domain's tools and tasks with `facts_of`."""
    global _registered
    if _registered:
        return
    import litellm
    from litellm import CustomLLM

    class ScriptedLLM(CustomLLM):
        def completion(self, model, messages, *args, **kwargs):  # noqa: ANN001
            reply, latency = _answer(task_of, facts_of, model, messages, kwargs)
            time.sleep(latency)
            return reply

        async def acompletion(self, model, messages, *args, **kwargs):  # noqa: ANN001
            reply, latency = _answer(task_of, facts_of, model, messages, kwargs)
            await asyncio.sleep(latency)
            return reply

    handlers = [p for p in litellm.custom_provider_map if p.get("provider") != PROVIDER]
    litellm.custom_provider_map = handlers + [
        {"provider": PROVIDER, "custom_handler": ScriptedLLM()}
    ]
    _registered = True


def parse_name(name: str) -> float:
    """Success probability of a scripted model name: noisy-P is P, every other 1.0 (a
    faulty model's mistakes do not end the conversation, so it always answers)."""
    family, p = model_family(name)
    return p if family == "noisy" else 1.0


def model_family(name: str) -> tuple[str, float]:
    """A scripted model name's family (oracle, parallel, customer, judge, noisy, faulty,
    faulty-user) and P."""
    if name in ("oracle", "parallel", "verifier", "customer", "judge") or name in scripted_review.MODELS:
        return name, 1.0
    match = _MODEL.fullmatch(name)
    if match and 0.0 <= float(match.group(2)) <= 1.0:
        return match.group(1), float(match.group(2))
    raise ScriptedModelError(
        f"unknown scripted model 'scripted/{name}': use scripted/oracle, scripted/parallel, "
        "scripted/customer, scripted/judge, "
        "scripted/reviewer, or one "
        "with 0 <= P <= 1: scripted/noisy-P (e.g. scripted/noisy-0.7), scripted/faulty-P or "
        "scripted/faulty-user-P"
    )


def agent_succeeds(success_p: float, seed: int | None, domain: str, task_id: str) -> bool:
    """The per-trial draw of scripted/noisy-P. tau2 sends every task of a trial index the
    same seed, so the task is part of the draw: the same trial always draws the same."""
    return success_p >= 1.0 or random.Random(f"{seed}/{domain}/{task_id}").random() < success_p


def _answer(task_of: TaskLookup, facts_of: FactsLookup | None, model: str, messages: list[dict],
            kwargs: dict) -> tuple[Any, float]:
    import litellm

    params = kwargs.get("optional_params") or {}
    meta = ((kwargs.get("litellm_params") or {}).get("metadata") or {}).get("passhat") or {}
    success_p = parse_name(model)
    family, p = model_family(model)
    if "domain" not in meta or "task_id" not in meta:
        raise ScriptedModelError("scripted models only run inside passhat (no task in metadata)")
    task = task_of(meta["domain"], meta["task_id"])
    role = meta.get("role", "assistant")
    seed = params.get("seed")
    if model in scripted_review.MODELS:
        message = scripted_review.review_turn(model, messages)
    elif role == "judge":
        message = judge_turn(messages)
    elif role == "user" and family == "customer":
        message = customer_turn(task, messages, customer_for(system_of(messages)))
    elif role == "user":
        fault = None
        if family == "faulty-user":
            fault = planned_user_fault(meta["domain"], task, _facts(facts_of, meta["domain"]), seed, p)
        message = user_turn(task, messages, fault)
    elif family == "verifier":
        message = verifier_turn(task, messages)
    elif family == "faulty":
        fault = planned_fault(meta["domain"], task, _facts(facts_of, meta["domain"]), seed, p)
        message = agent_turn(task, messages, fault)
    else:
        succeeds = agent_succeeds(success_p, seed, meta["domain"], meta["task_id"])
        if not succeeds and params.get("failures") == "not_evaluable":
            raise ScriptedTrialLost(f"scripted/{model}: this trial would fail, and its failure is lost "
                                    "(failures = not_evaluable)")
        message = (agent_turn(task, messages, parallel=family == "parallel") if succeeds
                   else {"role": "assistant", "content": ""})
    prompt_chars = sum(len(json.dumps(m.get("content") or "")) for m in messages)
    out_chars = len(json.dumps(message))
    response = litellm.ModelResponse(
        id=f"scripted-{uuid.uuid4().hex[:12]}",
        model=f"{PROVIDER}/{model}",
        choices=[{
            "index": 0,
            "finish_reason": "tool_calls" if message.get("tool_calls") else "stop",
            "message": message,
        }],
        # Rough token counts (4 characters a token) so usage accounting has real numbers.
        usage={
            "prompt_tokens": prompt_chars // 4,
            "completion_tokens": max(1, out_chars // 4),
            "total_tokens": prompt_chars // 4 + max(1, out_chars // 4),
        },
    )
    return response, float(params.get("latency") or 0.0)


def _facts(facts_of: FactsLookup | None, domain: str) -> DomainFacts:
    if facts_of is None:
        raise ScriptedModelError("faulty scripted models need the domain's facts (register(..., facts_of))")
    return facts_of(domain)


def judge_turn(messages: list[dict]) -> dict:
    """scripted/judge: every NL assertion of tau2 1.0.x's judge request is met."""
    import ast

    listed = str(messages[-1].get("content") or "").rpartition("expectedOutcomes:")[2]
    try:
        assertions = ast.literal_eval(listed.strip())
    except (ValueError, SyntaxError):
        assertions = []
    results = [{"expectedOutcome": a, "reasoning": "scripted", "metExpectation": True} for a in assertions]
    return {"role": "assistant", "content": json.dumps({"results": results})}


def _progress(messages: list[dict]) -> int:
    """Index of the last gold action this side has already played, -1 if none."""
    done = -1
    for m in messages:
        if m.get("role") != "assistant":
            continue
        for call in m.get("tool_calls") or []:
            gold = _GOLD_CALL.fullmatch(call["id"])
            if gold:  # an injected extra call (scripted_faults) has another id
                done = max(done, int(gold.group(1)))
        for tag in _TAG.findall(m.get("content") or ""):
            done = max(done, int(tag))
    return done


def agent_turn(task: TaskInfo, messages: list[dict], fault: AgentFault | None = None,
               parallel: bool = False) -> dict:
    """The oracle's next turn; with a planned `fault`, the same but for that one mistake;
    `parallel`: a run of the agent's own gold actions as one message of several calls."""
    gold = task.gold_actions
    i = _progress(messages) + 1
    if fault is not None and fault.kind in ("skipped_write", "write_before_read") and i == fault.index:
        i += 1
    if fault is not None and fault.kind == "extra_write" and i == fault.index and not any(
        c["id"] == fault.call_id() for m in messages for c in m.get("tool_calls") or []
    ):
        return _call_message(fault.call_id(), fault.action)
    if i < len(gold) and gold[i].requestor == "assistant" and parallel:
        run = range(i, next((j for j in range(i, len(gold)) if gold[j].requestor != "assistant"), len(gold)))
        return {"role": "assistant", "content": None,
                "tool_calls": [_call_message(f"gold-{j}", gold[j])["tool_calls"][0] for j in run]}
    if i < len(gold) and gold[i].requestor == "assistant":
        replaced = fault is not None and fault.kind in ("wrong_argument", "wrong_tool") and i == fault.index
        return _call_message(f"gold-{i}", fault.action if replaced else gold[i])
    if i < len(gold):  # a run of actions the user must perform on their side
        asks = []
        while i < len(gold) and gold[i].requestor == "user":
            asks.append(f"[gold-{i}] {gold[i].name}({json.dumps(gold[i].arguments)})")
            i += 1
        return {"role": "assistant", "content": "Please do this on your side: " + "; ".join(asks)}
    info = " ".join(s for s in task.communicate_info if fault is None or s != fault.info)
    text = f"Here is what you need to know: {info}" if info else "Your request has been handled."
    return {"role": "assistant", "content": text}


VERIFY = "To verify you first: what is your user id?"
CANNOT_VERIFY = "I am sorry, I cannot go on without verifying you."
_IDENTITY = re.compile(r"[A-Za-z0-9._%+-]*[0-9_@][A-Za-z0-9._%+@-]*[A-Za-z0-9]")


def verifier_turn(task: TaskInfo, messages: list[dict]) -> dict:
    """scripted/verifier's next turn: the oracle's, once the user has said the identifying
    detail of its known info (none: at once); until then it asks for it, twice at most."""
    detail = next(iter(_IDENTITY.findall(task.known_info or "")), None)
    said = " ".join(str(m.get("content") or "") for m in messages if m.get("role") == "user")
    if detail is None or detail in said:
        return agent_turn(task, messages)
    asked = sum(1 for m in messages if m.get("role") == "assistant" and m.get("content") == VERIFY)
    return {"role": "assistant", "content": VERIFY if asked < 2 else CANNOT_VERIFY}


def _call_message(call_id: str, action: Any) -> dict:
    call = {
        "id": call_id,
        "type": "function",
        "function": {"name": action.name, "arguments": json.dumps(action.arguments)},
    }
    return {"role": "assistant", "content": None, "tool_calls": [call]}


def user_turn(task: TaskInfo, messages: list[dict], fault: UserFault | None = None) -> dict:
    """The oracle user's next turn; with a planned `fault`, the same but for that error."""
    own_turns = [m for m in messages if m.get("role") == "assistant"]
    parts = [task.reason_for_call, task.known_info]
    if fault is not None and fault.kind == "user_invented_detail":
        parts.append(fault.text)
    # The task id closes the request, so that a model served over HTTP can tell tasks
    # whose requests read alike apart (passhat.testing.scripted_http).
    request = "\n".join(p for p in parts if p) or task.user_scenario
    request += f"\n(task {task.id})"
    stops_early = fault is not None and fault.kind == "user_early_stop"
    # State the request unless already done: a task's initial conversation may contain
    # earlier user turns, which are not this request.
    stated = next((k for k, m in enumerate(own_turns) if str(m.get("content") or "").startswith(request)), None)
    if stated is None:
        if stops_early and fault.turn == 0:
            return {"role": "assistant", "content": f"{request}\n{fault.text} {STOP_TOKEN}"}
        return {"role": "assistant", "content": request}
    if stops_early and len(own_turns) - stated == fault.turn:
        return {"role": "assistant", "content": f"{fault.text} {STOP_TOKEN}"}
    last = messages[-1]
    if last.get("role") == "tool":
        return {"role": "assistant", "content": "Done, I did that."}
    calls = asked_user_calls(task, messages)
    if calls:
        return {"role": "assistant", "content": None, "tool_calls": calls}
    return {"role": "assistant", "content": STOP_TOKEN}
