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
task (tasks/get) instead of sending the message again. In MCP mode a turn in flight
when its worker died is not followed: the agent's tools were at that worker's MCP URL,
gone with it, so the trial restarts in a fresh context (its task, if any, cancelled).
The agent's own failures (a reply with no action in it, a task that ends failed,
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

from passhat.activities.conversation import Heartbeat, open_turn, recorded_result
from passhat.domains import a2a_protocol as protocol
from passhat.domains.registry import get_domain
from passhat.activities import mcp_tools
from passhat.infra import a2a_client, secrets, tracing
from opentelemetry.trace import SpanKind
from temporalio import activity
from temporalio.exceptions import ApplicationError

from passhat.contracts import StepRef, StepResult, TrialSpec
from passhat.messages import Message


def _outgoing(spec: TrialSpec, rows: list[Any], mcp_url: str | None = None) -> tuple[str, dict[str, Any]]:
    """(the text to send this turn, the A2A state the previous turn recorded)."""
    history = [m for row in rows for m in row.message_list()]
    previous = next((row.agent_turn() for row in reversed(rows) if row.agent_state_json), None)
    seen = protocol.observation(protocol.since_last_action(history))
    if previous is None:  # the conversation's first turn
        domain = get_domain(spec.domain)
        if mcp_url is not None:
            return protocol.mcp_first_message(domain.policy(), mcp_url, seen), {}
        text = protocol.first_message(spec.agent_protocol or "agentify", domain.policy(),
                                      domain.agent_tools(), seen)
        return text, {}
    return seen, previous.get("a2a", {})


def message_id(spec: TrialSpec, step: int, attempt: int = 0) -> str:
    """The A2A message id of a turn: the same for every retry of the step's activity, so
    that an agent that deduplicates by message id sees a re-sent turn as one message; a
    new one for each attempt of the conversation (tau2 1.0.x re-runs one that failed from
    the start, and a trial restarts in a fresh context: its turns are new messages, not
    the set-aside ones)."""
    run = f"{spec.trial_id}@{attempt}" if attempt else spec.trial_id
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"passhat:{run}#{step}"))


async def a2a_turn(activities: Any, ref: StepRef) -> StepResult:
    """The step of an A2A agent's turn (ConversationActivities.agent_turn)."""
    spec = ref.trial
    heartbeat, rows, recorded = await open_turn(activities.store, ref)
    mcp = spec.agent_tools == "mcp"
    if mcp:  # the turn's reply comes after its tool calls' steps
        reply = next((row for row in rows if row.step >= ref.step and row.role == "assistant"
                      and not row.message_list()[-1].tool_calls), None)
        recorded = None if reply is None else recorded_result(reply)
    if recorded is not None:
        return recorded
    if not mcp:
        return await _exchange(activities, ref, heartbeat, rows, None)
    attempt = await heartbeat.around(asyncio.to_thread(activities.store.attempts_set_aside, spec.trial_id))
    mcp_url = await mcp_tools.open_trial(spec, activity.client(), activities.store, ref.step, attempt)
    try:
        return await _exchange(activities, ref, heartbeat, rows, mcp_url)
    finally:  # (a recorded reply waited for its calls: _reply_step)
        await mcp_tools.close_trial(spec, wait=False)


async def _exchange(activities: Any, ref: StepRef, heartbeat: Heartbeat, rows: list[Any],
                    mcp_url: str | None) -> Any:
    """Send the turn's message, and record the reply as the turn's step."""
    spec = ref.trial
    text, state = await heartbeat.around(asyncio.to_thread(_outgoing, spec, rows, mcp_url))
    url = protocol.agent_url(spec.agent)
    context_id = state.get("context_id")
    if "attempt" not in state:  # the conversation's first turn: how many attempts are set aside
        state["attempt"] = await heartbeat.around(asyncio.to_thread(
            activities.store.attempts_set_aside, spec.trial_id))
    # A task the agent left waiting for input is continued; a finished one is not.
    task_id = state.get("task_id") if state.get("state") == "input-required" else None
    details: dict[str, Any] = {"model": spec.agent_model}
    # The task an earlier attempt of this turn sent, noted before it waited (it died
    # waiting): follow that task rather than send the message again.
    sent = next((d for d in activity.info().heartbeat_details if isinstance(d, dict) and "a2a_task" in d), None)
    if activity.info().attempt > 1 and (mcp_url is not None or (sent is None and context_id)):
        # An earlier attempt of this turn may have reached the agent, and left no task
        # to follow, or (MCP mode) left the agent calling tools at an MCP URL that died
        # with that attempt (its worker's server, its trial's token): what the agent saw
        # or did is not known, and a task of its would go on without its tools. The
        # conversation starts again in a fresh context (the workflow sets this attempt
        # aside); the task, if one was noted, is cancelled.
        if sent is not None:
            await heartbeat.around(a2a_client.cancel(url, sent["a2a_task"]))
        return await activities._record_paid(
            await _reply_step(activities, ref, heartbeat, mcp_url), heartbeat, "assistant",
            [Message(role="assistant")], spec.trial_id, failure_class=protocol.RESTART,
            failure=(f"the outcome of turn {ref.step} is not known (attempt {activity.info().attempt}) and "
                     f"{'its MCP tools were gone' if mcp_url else 'the agent gave no task to follow'}: "
                     "the trial restarts in a fresh A2A context"),
            **details)
    try:
        card = await heartbeat.around(a2a_client.read_card(url))
        with tracing.span(f"invoke_agent {card.name}", spec.trial_id, _span_attributes(ref, card, context_id),
                          SpanKind.CLIENT) as span:
            if sent is not None:
                heartbeat.note(sent)
                reply = await heartbeat.around(a2a_client.follow(
                    url, sent["a2a_task"], timeout_s=spec.retry.model_call_timeout_s))
            else:
                reply = await heartbeat.around(a2a_client.send(
                    url, text, message_id=message_id(spec, ref.step, state["attempt"]), context_id=context_id,
                    task_id=task_id, timeout_s=spec.retry.model_call_timeout_s,
                    on_task=lambda task, context: heartbeat.note({"a2a_task": task, "context_id": context}),
                    metadata={protocol.MCP_URL_KEY: mcp_url} if mcp_url else None))
            usage = protocol.reported_usage(reply.metadata)
            span.set_attributes(_reply_attributes(reply, usage))
    except asyncio.CancelledError:  # the run was cancelled: so is the agent's task, if it has one
        noted = next((d for d in heartbeat.details if isinstance(d, dict) and "a2a_task" in d), None)
        if noted is not None:
            await a2a_client.cancel(url, noted["a2a_task"])
        raise
    except a2a_client.A2AAgentFailure as err:
        return await _failed(activities, await _reply_step(activities, ref, heartbeat, mcp_url), heartbeat,
                             err.error_class, str(err), err.reply, details)
    except a2a_client.A2AUnavailable as err:
        raise ApplicationError(f"A2A agent at {url}: {err}", {"status_code": err.status_code},
                               type="A2AUnavailable", non_retryable=not err.transient) from None
    except a2a_client.A2ASetupError as err:
        raise ApplicationError(f"A2A agent at {url}: {err}", type="A2AUnavailable") from None
    details.update(latency_s=reply.latency_s, finish_reason=reply.state)
    if usage is not None:  # what the agent says its turn cost, counted as a model call's
        details.update(input_tokens=usage.input_tokens, output_tokens=usage.output_tokens, cost=usage.cost)
    new_state = {"context_id": reply.context_id or context_id, "task_id": reply.task_id, "state": reply.state,
                 "attempt": state["attempt"]}
    if context_id and reply.context_id and reply.context_id != context_id:
        return await _failed(activities, await _reply_step(activities, ref, heartbeat, mcp_url), heartbeat,
                             "A2AContextChanged",
                             f"the agent answered in context {reply.context_id}, not the trial's {context_id}",
                             reply.text, details)
    if activity.info().attempt > 1:
        activity.logger.info("A2A turn %s#%s answered on attempt %s", spec.trial_id, ref.step, activity.info().attempt)
    if mcp_url is not None:  # the reply is the agent's words to the user
        if not reply.text.strip():
            return await _failed(activities, await _reply_step(activities, ref, heartbeat, mcp_url), heartbeat,
                                 "A2AEmptyReply", "the agent's reply has no text for the user", None, details)
        message = Message(role="assistant", content=reply.text)
    else:
        try:
            message = protocol.parse_action(reply.text).message(call_id=f"a2a-{ref.step}")
        except protocol.UnparsableReply as err:
            return await _failed(activities, ref, heartbeat, "A2AUnparsableReply", str(err), reply.text, details)
    return await activities._record_paid(
        await _reply_step(activities, ref, heartbeat, mcp_url), heartbeat, "assistant", [message], spec.trial_id,
        agent_state_json=json.dumps({"a2a": new_state, "stop": False}), **details)


async def _reply_step(activities: Any, ref: StepRef, heartbeat: Heartbeat, mcp_url: str | None) -> StepRef:
    """Where the turn's reply is recorded: at its own step (text mode), or after the tool
    calls the agent made during the turn (MCP mode), once the trial's MCP path is closed
    and the calls under way are recorded."""
    if mcp_url is None:
        return ref
    await heartbeat.around(mcp_tools.close_trial(ref.trial))
    rows = await heartbeat.around(asyncio.to_thread(activities.store.steps, ref.trial.trial_id))
    return ref.model_copy(update={"step": max((row.step for row in rows), default=-1) + 1})


async def _failed(activities: Any, ref: StepRef, heartbeat: Heartbeat, error_class: str, words: str,
                  reply: str | None, details: dict[str, Any]) -> StepResult:
    """The agent's own failure: recorded as its step, with what it answered; the
    conversation ends as agent_error."""
    shown = f"{words}; the agent's reply: {json.dumps(reply[:500])}" if reply else words
    return await activities._record_paid(
        ref, heartbeat, "assistant", [Message(role="assistant", content=reply or None)], ref.trial.trial_id,
        failure_class=error_class, failure=secrets.redact(shown)[:1000], **details)


def _span_attributes(ref: StepRef, card: a2a_client.Card, context_id: str | None) -> dict[str, Any]:
    """The attributes of a turn's span (OpenTelemetry's GenAI conventions for invoking a
    remote agent, and passhat's naming the trial)."""
    return {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.agent.name": card.name,
        "gen_ai.agent.version": card.version,
        "gen_ai.conversation.id": context_id,
        "server.address": card.url,
        **tracing.trial_attributes(ref.trial),
        "passhat.step": ref.step,
        "passhat.role": "agent",
    }


def _reply_attributes(reply: a2a_client.Reply, usage: protocol.Usage | None) -> dict[str, Any]:
    """What a turn's span says of the agent's answer."""
    said = {
        "gen_ai.conversation.id": reply.context_id,
        "a2a.task.id": reply.task_id,
        "a2a.task.state": reply.state,
        **({} if usage is None else {"gen_ai.usage.input_tokens": usage.input_tokens,
                                     "gen_ai.usage.output_tokens": usage.output_tokens,
                                     "passhat.cost_usd": usage.cost}),
    }
    return {k: v for k, v in said.items() if v is not None}
