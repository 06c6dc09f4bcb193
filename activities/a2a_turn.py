"""One turn of an agent behind A2A (`--agent a2a:URL`) as one activity, text mode.

A trial is one A2A context: the first turn's message carries the policy, the tools and
the action format (passhat.domains.a2a_protocol, in the convention the run chose), each
later one the observation since the agent's last action (the user's words, or the
answer to its tool call). The agent's reply is one action: a tool call, recorded as the
agent's step and executed by passhat against the trial's environment (the trial's tool
step), or `respond`, whose text goes to the simulated user.

The step records, with the agent's message, the A2A context and task ids and the task's
state (agent_state_json, {"a2a": {...}}), the turn's latency, and the task state as its
finish_reason ("message" for a plain Message reply). A step once recorded is never sent
again; nor is one in flight when its worker died, when the agent answered with a task:
its id is noted in the activity's heartbeat before the wait, and the retry follows the
task (tasks/get) instead of sending the message again. The agent's own failures (a reply with no action in it, a task that ends failed,
an A2A error, no answer in --model-timeout) end the conversation as the installed tau2
ends a model's failure, the reply shown with the failure: agent_error, reward 0 (26.3);
on 1.0.x the simulation runs again from the start, in a new context with new message
ids, and after its re-runs is not evaluable (infrastructure_error). A server that cannot be
reached or answers 5xx is not the agent's answer: the activity fails and Temporal
retries it; past the retries the trial is not evaluable.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from typing import Any

from passhat.activities.conversation import (
    Heartbeat,
    heartbeat_every_s,
    recorded_result,
)
from passhat.domains import a2a_protocol as protocol
from passhat.domains.registry import get_domain
from passhat.infra import a2a_client, secrets
from temporalio import activity
from temporalio.exceptions import ApplicationError

from passhat.contracts import Message, StepRef, StepResult, TrialSpec


def _outgoing(spec: TrialSpec, rows: list[Any]) -> tuple[str, dict[str, Any]]:
    """(the text to send this turn, the A2A state the previous turn recorded)."""
    history = [m for row in rows for m in row.message_list()]
    previous = next((row.agent_turn() for row in reversed(rows) if row.agent_state_json), None)
    seen = protocol.observation(protocol.since_last_action(history))
    if previous is None:  # the conversation's first turn
        domain = get_domain(spec.domain)
        text = protocol.first_message(spec.agent_protocol or "agentify", domain.policy(),
                                      domain.agent_tools(), seen)
        return text, {}
    return seen, previous.get("a2a", {})


def message_id(spec: TrialSpec, step: int, attempt: int = 0) -> str:
    """The A2A message id of a turn: the same for every retry of the step's activity, so
    that an agent that deduplicates by message id sees a re-sent turn as one message; a
    new one for each attempt of the simulation (tau2 1.0.x re-runs one that failed from
    the start, in a new context: its turns are new messages, not the set-aside ones)."""
    run = f"{spec.trial_id}@{attempt}" if attempt else spec.trial_id
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"passhat:{run}#{step}"))


def _turn_state(store: Any, trial_id: str) -> tuple[list[Any], int]:
    """(the trial's recorded steps, the number of its current attempt)."""
    return store.steps(trial_id), store.attempts_set_aside(trial_id)


async def a2a_turn(activities: Any, ref: StepRef) -> StepResult:
    """The step of an A2A agent's turn (ConversationActivities.agent_turn)."""
    spec = ref.trial
    heartbeat = Heartbeat(heartbeat_every_s(spec))
    rows, attempt = await heartbeat.around(asyncio.to_thread(_turn_state, activities.store, spec.trial_id))
    recorded = next((row for row in rows if row.step == ref.step), None)
    if recorded is not None:
        return recorded_result(recorded)
    text, state = await heartbeat.around(asyncio.to_thread(_outgoing, spec, rows))
    url = protocol.agent_url(spec.agent)
    context_id = state.get("context_id")
    # A task the agent left waiting for input is continued; a finished one is not.
    task_id = state.get("task_id") if state.get("state") == "input-required" else None
    details: dict[str, Any] = {"model": spec.agent_model}
    # The task an earlier attempt of this turn sent, noted before it waited (it died
    # waiting): follow that task rather than send the message again.
    sent = next((d for d in activity.info().heartbeat_details if isinstance(d, dict) and "a2a_task" in d), None)
    try:
        if sent is not None:
            heartbeat.note(sent)
            reply = await heartbeat.around(a2a_client.follow(
                url, sent["a2a_task"], timeout_s=spec.retry.model_call_timeout_s))
        else:
            reply = await heartbeat.around(a2a_client.send(
                url, text, message_id=message_id(spec, ref.step, attempt), context_id=context_id, task_id=task_id,
                timeout_s=spec.retry.model_call_timeout_s,
                on_task=lambda task, context: heartbeat.note({"a2a_task": task, "context_id": context})))
    except asyncio.CancelledError:  # the run was cancelled: so is the agent's task, if it has one
        noted = next((d for d in heartbeat.details if isinstance(d, dict) and "a2a_task" in d), None)
        if noted is not None:
            await a2a_client.cancel(url, noted["a2a_task"])
        raise
    except a2a_client.A2AAgentFailure as err:
        return await _failed(activities, ref, heartbeat, err.error_class, str(err), err.reply, details)
    except a2a_client.A2AUnavailable as err:
        raise ApplicationError(f"A2A agent at {url}: {err}", {"status_code": err.status_code},
                               type="A2AUnavailable", non_retryable=not err.transient) from None
    except a2a_client.A2ASetupError as err:
        raise ApplicationError(f"A2A agent at {url}: {err}", type="A2AUnavailable") from None
    details.update(latency_s=reply.latency_s, finish_reason=reply.state)
    new_state = {"context_id": reply.context_id or context_id, "task_id": reply.task_id, "state": reply.state}
    if context_id and reply.context_id and reply.context_id != context_id:
        return await _failed(activities, ref, heartbeat, "A2AContextChanged",
                             f"the agent answered in context {reply.context_id}, not the trial's {context_id}",
                             reply.text, details)
    try:
        action = protocol.parse_action(reply.text)
    except protocol.UnparsableReply as err:
        return await _failed(activities, ref, heartbeat, "A2AUnparsableReply", str(err), reply.text, details)
    if activity.info().attempt > 1:
        activity.logger.info("A2A turn %s#%s answered on attempt %s", spec.trial_id, ref.step, activity.info().attempt)
    message = action.message(call_id=f"a2a-{ref.step}")
    return await activities._record_paid(
        ref, heartbeat, "assistant", [message], spec.trial_id,
        agent_state_json=json.dumps({"a2a": new_state, "stop": False}), **details)


async def _failed(activities: Any, ref: StepRef, heartbeat: Heartbeat, error_class: str, words: str,
                  reply: str | None, details: dict[str, Any]) -> StepResult:
    """The agent's own failure: recorded as its step, with what it answered; the
    conversation ends as agent_error."""
    shown = f"{words}; the agent's reply: {json.dumps(reply[:500])}" if reply else words
    return await activities._record_paid(
        ref, heartbeat, "assistant", [Message(role="assistant", content=reply or None)], ref.trial.trial_id,
        failure_class=error_class, failure=secrets.redact(shown)[:1000], **details)
