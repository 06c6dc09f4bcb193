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
- `scripted/judge` grades tau2 1.0.x's NL assertions offline: every assertion is met.
- `scripted/reviewer` (and its variants) reviews a trial for `passhat review`
  (passhat.infra.scripted_review).
- A `latency` model argument (seconds) delays every answer, to measure throughput.

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

from passhat.contracts import STOP_TOKEN, TaskInfo
from passhat.infra import scripted_review

# A task by (domain name, task id).
TaskLookup = Callable[[str, str], TaskInfo]

PROVIDER = "scripted"
_TAG = re.compile(r"\[gold-(\d+)\]")
_registered = False


class ScriptedModelError(ValueError):
    pass


def register(task_of: TaskLookup) -> None:
    """Add the provider to litellm once per process; its models find the task they play
    with `task_of`."""
    global _registered
    if _registered:
        return
    import litellm
    from litellm import CustomLLM

    class ScriptedLLM(CustomLLM):
        def completion(self, model, messages, *args, **kwargs):  # noqa: ANN001
            reply, latency = _answer(task_of, model, messages, kwargs)
            time.sleep(latency)
            return reply

        async def acompletion(self, model, messages, *args, **kwargs):  # noqa: ANN001
            reply, latency = _answer(task_of, model, messages, kwargs)
            await asyncio.sleep(latency)
            return reply

    handlers = [p for p in litellm.custom_provider_map if p.get("provider") != PROVIDER]
    litellm.custom_provider_map = handlers + [
        {"provider": PROVIDER, "custom_handler": ScriptedLLM()}
    ]
    _registered = True


def parse_name(name: str) -> float:
    """Success probability of a scripted model name: oracle is 1.0, noisy-P is P."""
    if name in ("oracle", "judge") or name in scripted_review.MODELS:
        return 1.0
    match = re.fullmatch(r"noisy-(\d*\.?\d+)", name)
    if match and 0.0 <= float(match.group(1)) <= 1.0:
        return float(match.group(1))
    raise ScriptedModelError(
        f"unknown scripted model 'scripted/{name}': use scripted/oracle, "
        "scripted/noisy-P with 0 <= P <= 1 (e.g. scripted/noisy-0.7), scripted/judge or scripted/reviewer"
    )


def agent_succeeds(success_p: float, seed: int | None, domain: str, task_id: str) -> bool:
    """The per-trial draw of scripted/noisy-P. tau2 sends every task of a trial index the
    same seed, so the task is part of the draw: the same trial always draws the same."""
    return success_p >= 1.0 or random.Random(f"{seed}/{domain}/{task_id}").random() < success_p


def _answer(task_of: TaskLookup, model: str, messages: list[dict], kwargs: dict) -> tuple[Any, float]:
    import litellm

    params = kwargs.get("optional_params") or {}
    meta = ((kwargs.get("litellm_params") or {}).get("metadata") or {}).get("passhat") or {}
    success_p = parse_name(model)
    if "domain" not in meta or "task_id" not in meta:
        raise ScriptedModelError("scripted models only run inside passhat (no task in metadata)")
    task = task_of(meta["domain"], meta["task_id"])
    role = meta.get("role", "assistant")
    seed = params.get("seed")
    if model in scripted_review.MODELS:
        message = scripted_review.review_turn(model, messages)
    elif role == "judge":
        message = judge_turn(messages)
    elif role == "user":
        message = user_turn(task, messages)
    else:
        message = (
            agent_turn(task, messages)
            if agent_succeeds(success_p, seed, meta["domain"], meta["task_id"])
            else {"role": "assistant", "content": ""}
        )
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
            if call["id"].startswith("gold-"):
                done = max(done, int(call["id"].split("-")[1]))
        for tag in _TAG.findall(m.get("content") or ""):
            done = max(done, int(tag))
    return done


def agent_turn(task: TaskInfo, messages: list[dict]) -> dict:
    gold = task.gold_actions
    i = _progress(messages) + 1
    if i < len(gold) and gold[i].requestor == "assistant":
        action = gold[i]
        call = {
            "id": f"gold-{i}",
            "type": "function",
            "function": {"name": action.name, "arguments": json.dumps(action.arguments)},
        }
        return {"role": "assistant", "content": None, "tool_calls": [call]}
    if i < len(gold):  # a run of actions the user must perform on their side
        asks = []
        while i < len(gold) and gold[i].requestor == "user":
            asks.append(f"[gold-{i}] {gold[i].name}({json.dumps(gold[i].arguments)})")
            i += 1
        return {"role": "assistant", "content": "Please do this on your side: " + "; ".join(asks)}
    info = " ".join(task.communicate_info)
    text = f"Here is what you need to know: {info}" if info else "Your request has been handled."
    return {"role": "assistant", "content": text}


def user_turn(task: TaskInfo, messages: list[dict]) -> dict:
    own_turns = [m for m in messages if m.get("role") == "assistant"]
    parts = [task.reason_for_call, task.known_info]
    # The task id closes the request, so that a model served over HTTP can tell tasks
    # whose requests read alike apart (passhat.testing.scripted_http).
    request = "\n".join(p for p in parts if p) or task.user_scenario
    request += f"\n(task {task.id})"
    # State the request unless already done: a task's initial conversation may contain
    # earlier user turns, which are not this request.
    if not any(m.get("content") == request for m in own_turns):
        return {"role": "assistant", "content": request}
    last = messages[-1]
    if last.get("role") == "tool":
        return {"role": "assistant", "content": "Done, I did that."}
    asked = [int(t) for t in _TAG.findall(last.get("content") or "")]
    already = {c["id"] for m in own_turns for c in (m.get("tool_calls") or [])}
    todo = [i for i in asked if f"user-gold-{i}" not in already and i < len(task.gold_actions)]
    if todo:
        calls = [
            {
                "id": f"user-gold-{i}",
                "type": "function",
                "function": {
                    "name": task.gold_actions[i].name,
                    "arguments": json.dumps(task.gold_actions[i].arguments),
                },
            }
            for i in todo
        ]
        return {"role": "assistant", "content": None, "tool_calls": calls}
    return {"role": "assistant", "content": STOP_TOKEN}
