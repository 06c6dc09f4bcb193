"""One turn of an agent from tau2's agent registry (`--agent NAME`) as one activity.

The activity rebuilds the agent and its state as the previous turn recorded it, hands it
the user's message or its tool answers, and records the agent's message with its new
state as the step, atomically: a turn that was recorded is never run again (not on
retry, not after a worker died, not on resume).

The model calls the agent makes go through tau2's `generate`, which is routed, while a
turn runs, through passhat's own model-call path: tokens and cost are recorded with the
step (and count against the budget), each call is a span in the trial's trace, and a
provider's transient error fails the activity, so Temporal retries the whole turn; the
agent never sees it as its own failure. The agent's own failure ends the conversation as
tau2 ends it, agent_error with reward 0: an exception its code raises, a reply tau2
rejects, a state passhat cannot record; the step records its class, what happened and
where in the agent's code (failure_at). Whatever is not the agent's (a provider, the
worker lacking what the agent needs) fails the activity instead: not evaluable."""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

from temporalio.exceptions import ApplicationError

from passhat.activities.conversation import (
    call_model,
    infrastructure_failure,
    open_turn,
)
from passhat.contracts import StepRef, StepResult, TrialSpec
from passhat.messages import Message
from passhat.domains.agent_identity import failure_at, method_at
from passhat.domains.registry import get_domain
from passhat.domains.tau2_agents import (
    AgentOutputError,
    AgentSetupError,
    Tau2Agent,
    from_tau2_reply,
    split_turn_input,
    to_tau2_reply,
)
from passhat.infra import llm, secrets


class TurnCancelled(BaseException):
    """Raised in the agent's thread at its model call once the turn's activity was
    cancelled. A BaseException, so an agent's `except Exception` does not take it for a
    model error and go on."""


@dataclass
class _TurnCalls:
    """The model calls of one turn, made from the agent's thread on the activity's loop.

    The agent's thread cannot be stopped from outside, so cancelling the activity leaves
    it running; cancel() closes the call it waits on and refuses any further one, so the
    thread ends at its next model call and nothing is paid for after a cancel."""

    ref: StepRef
    loop: asyncio.AbstractEventLoop
    replies: list[llm.ModelReply] = field(default_factory=list)
    error: llm.ModelCallError | None = None
    cancelled: bool = False
    _in_flight: concurrent.futures.Future | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def cancel(self) -> None:
        with self._lock:
            self.cancelled = True
            in_flight = self._in_flight
        if in_flight is not None:
            in_flight.cancel()  # cancels the call's task on the loop: its HTTP request closes

    def generate(self, model: str, messages: list[Any], tools: list[Any] | None,
                 tool_choice: str | None, kwargs: dict[str, Any]) -> Any:
        """tau2's generate, as passhat makes the call: the request tau2 would send."""
        from tau2.utils.llm_utils import to_litellm_messages

        # litellm's own retries are Temporal's job here; caching is not part of a request.
        args = {k: v for k, v in kwargs.items() if k not in ("num_retries", "caching")}
        call = call_model(
            self.ref, "assistant", model, to_litellm_messages(messages),
            tools=[t.openai_schema for t in tools] if tools else None,
            model_args=args, seed=None, tool_choice=tool_choice,
        )
        with self._lock:
            if self.cancelled:
                call.close()
                raise TurnCancelled("the turn was cancelled")
            future = self._in_flight = asyncio.run_coroutine_threadsafe(call, self.loop)
        try:
            reply = future.result()
        except concurrent.futures.CancelledError:
            raise TurnCancelled("the turn was cancelled") from None
        except llm.ModelCallError as err:
            self.error = self.error or err  # decides the turn, whatever the agent does with it
            raise
        finally:
            self._in_flight = None
        self.replies.append(reply)
        usage = {"prompt_tokens": reply.input_tokens, "completion_tokens": reply.output_tokens}
        return to_tau2_reply(reply.message, cost=reply.cost, usage=usage)


_turn: ContextVar[_TurnCalls | None] = ContextVar("passhat_agent_turn", default=None)
_original: list[Any] = []  # tau2's own generate, once replaced
_route_lock = threading.Lock()


def _generate(model: str, messages: list[Any], tools: list[Any] | None = None,
              tool_choice: str | None = None, **kwargs: Any) -> Any:
    calls = _turn.get()
    if calls is None:  # not in an agent's turn (tau2's own code elsewhere in the process)
        return _original[0](model, messages, tools=tools, tool_choice=tool_choice, **kwargs)
    return calls.generate(model, messages, tools, tool_choice, kwargs)


def _route_generate(modules: list[Any]) -> None:
    """Replace tau2's generate, in tau2 and in each module of the agent that imported
    it by name, with one that makes the call through passhat while a turn runs."""
    import tau2.utils.llm_utils as llm_utils

    with _route_lock:
        if not _original:
            _original.append(llm_utils.generate)
        for module in [llm_utils, *modules]:
            if getattr(module, "generate", None) is _original[0]:
                module.generate = _generate


@dataclass
class _Turn:
    message: Message | None = None
    state_json: str | None = None
    # The agent's own failure: (class, what happened, where in its code).
    failure: tuple[str, str, str | None] | None = None


def _run_turn(spec: TrialSpec, rows: list[Any], calls: _TurnCalls) -> _Turn:
    """The agent's turn, in a worker thread (tau2's agents are synchronous)."""
    _turn.set(calls)  # this thread's context only
    history, incoming = split_turn_input([row.message_list() for row in rows])
    previous = next((row.agent_turn() for row in reversed(rows) if row.agent_state_json), None)
    state = Tau2Agent.load_state_json(previous) if previous else None
    agent = None
    try:
        agent = Tau2Agent(spec.agent, get_domain(spec.domain), spec.task_id, spec.agent_model,
                          spec.agent_args, spec.seed)
        _route_generate(agent.modules())
        if state is None:
            state = agent.initial_state(history)
        reply, state, stop = agent.turn(incoming, state)
        return _Turn(message=from_tau2_reply(reply), state_json=agent.dump_state(state, stop))
    except AgentOutputError as err:  # what the agent returned: a reply or a state it broke
        return _Turn(failure=(err.error_class, f"{err.error_class}: {err}", method_at(agent.agent, err.method)))
    except AgentSetupError:
        raise
    except Exception as err:  # noqa: BLE001 - the agent's own code: the conversation ends
        message = " ".join(str(err).split())
        return _Turn(failure=(type(err).__name__, f"{type(err).__name__} raised by agent {spec.agent!r}: {message}",
                              failure_at(err, spec.agent)))


async def agent_turn(activities: Any, ref: StepRef) -> StepResult:
    """The step of a registered agent's turn (ConversationActivities.agent_turn)."""
    spec = ref.trial
    heartbeat, rows, recorded = await open_turn(activities.store, ref)
    if recorded is not None:
        return recorded
    calls = _TurnCalls(ref, asyncio.get_running_loop())
    try:
        turn = await heartbeat.around(asyncio.to_thread(_run_turn, spec, rows, calls))
    except asyncio.CancelledError:
        calls.cancel()  # the thread runs on: end its model call, and refuse further ones
        raise
    except AgentSetupError as err:  # the agent cannot be run here: not the agent's failure
        raise ApplicationError(str(err), type="AgentSetupError", non_retryable=True) from None
    err = calls.error
    if err is not None and not err.model_failure:
        raise infrastructure_failure(err, ref) from None
    paid = {
        "model": next((r.model for r in reversed(calls.replies) if r.model), spec.agent_model),
        "input_tokens": sum(r.input_tokens for r in calls.replies),
        "output_tokens": sum(r.output_tokens for r in calls.replies),
        "cost": sum(r.cost for r in calls.replies),
        "latency_s": sum(r.latency_s for r in calls.replies),
        "finish_reason": calls.replies[-1].finish_reason if calls.replies else None,
    }
    if err is not None:  # the model's own failure (its context overflowed, ...)
        return await activities._record_paid(
            ref, heartbeat, "assistant", [Message(role="assistant")], spec.trial_id,
            failure_class=err.error_class, failure=str(err), **paid)
    if turn.failure is not None:  # the agent's own code ended the conversation
        error_class, words, where = turn.failure
        return await activities._record_paid(
            ref, heartbeat, "assistant", [Message(role="assistant")], spec.trial_id,
            failure_class=error_class, failure=secrets.redact(words)[:1000], failure_at=where, **paid)
    return await activities._record_paid(
        ref, heartbeat, "assistant", [turn.message], spec.trial_id, agent_state_json=turn.state_json, **paid)
