"""Conversation step activities: one agent model call, one user model call, or one batch
of tool executions per activity, so every completed step is checkpointed.

Each activity first looks for its step in the results store: a step that was recorded is
returned as it is and never executed again (an activity retried after its worker died
between recording and reporting does not call the model a second time)."""

from __future__ import annotations

import asyncio
import functools
import json
import random
import time
from datetime import datetime, timedelta, timezone
from typing import Awaitable, TypeVar

from opentelemetry.trace import SpanKind, Status, StatusCode
from temporalio import activity
from temporalio.exceptions import ApplicationError

from passhat.contracts import StepRef, StepResult, TrialSpec, provider_of, render_agent_prompt
from passhat.messages import (
    EMPTY_REPLY,
    INVALID_TOOL_ARGUMENTS,
    OUT_OF_SCOPE_TOKEN,
    STOP_TOKEN,
    TRANSFER_TOKEN,
    Message,
    ToolCall,
)
from passhat.domains.a2a_protocol import A2A_PREFIX
from passhat.domains.registry import get_domain
from passhat.domains.nl_judge import JUDGE_ERROR, judge_key, parse_verdicts
from passhat.domains.tau2_version import rules_for
from passhat.infra import llm, scripted_faults, scripted_provider, tracing
from passhat.activities.mcp_tools import McpCallRef
from passhat.infra.store import Store, StoreError
from passhat.personas import with_persona

T = TypeVar("T")


def step_result(step: int, messages: list[Message], failure: str | None = None,
                agent_stop: bool = False) -> StepResult:
    """Summarise a recorded step for the workflow's state machine. `agent_stop`: a
    registered agent said its message ends the conversation (tau2's agent.is_stop)."""
    last = messages[-1]
    if failure is not None:
        return StepResult(step=step, role=last.role, failure=failure)
    if last.role == "tool":
        return StepResult(step=step, role="tool", tool_errors=sum(m.error for m in messages))
    is_call = last.is_tool_call()
    text = last.content or ""
    return StepResult(
        step=step,
        role=last.role,
        is_tool_call=is_call,
        tool_names=[call.name for call in last.tool_calls or []] if is_call else [],
        # The user's stop tokens end a conversation; tau2's LLM agent never stops it, an
        # agent of tau2's registry may (its is_stop, recorded with its turn).
        is_stop=agent_stop or (
            last.role == "user"
            and not is_call
            and any(t in text for t in (STOP_TOKEN, TRANSFER_TOKEN, OUT_OF_SCOPE_TOKEN))
        ),
    )


def recorded_result(row) -> StepResult:  # noqa: ANN001 - a StepRow
    turn = row.agent_turn()
    return step_result(row.step, row.message_list(), row.failure_class, bool(turn and turn.get("stop")))


def model_failure(message: Message, spec: TrialSpec) -> tuple[str, str] | None:
    """(class, message) when the model's reply ends the conversation, as in tau2: still
    empty after the retries, or tool arguments that are not a JSON object (unless the
    run opted into lenient tool arguments)."""
    side = "agent" if message.role == "assistant" else "user"
    if message.is_empty():
        return EMPTY_REPLY, (
            f"{side} model replied with neither text nor tool calls, "
            f"{1 + rules_for(spec.tau2_version).empty_reply_retries} times"
        )
    invalid = [c for c in message.tool_calls or [] if c.invalid_arguments is not None]
    if invalid and not spec.lenient_tool_arguments:
        call = invalid[0]
        return INVALID_TOOL_ARGUMENTS, (
            f"{side} model called {call.name or '(no name)'} with arguments that are not "
            f"a JSON object: {call.invalid_arguments[:200]!r}"
        )
    return None


def judge_failure(message: Message, spec: TrialSpec) -> tuple[str | None, str | None]:
    """(class, message) when the judge's reply cannot be read as the run's tau2 reads it."""
    try:
        parse_verdicts(message.content, rules_for(spec.tau2_version))
    except ValueError as err:
        return JUDGE_ERROR, str(err)
    return None, None


def backoff_delay(attempt: int, ref: StepRef, retry_after_s: float | None) -> timedelta:
    """Exponential backoff with full jitter, never shorter than the provider's Retry-After."""
    r = ref.trial.retry
    ceiling = min(r.max_interval_s, r.initial_interval_s * r.backoff ** max(0, attempt - 1))
    delay = random.uniform(ceiling / 2, ceiling)
    if retry_after_s is not None:
        delay = max(delay, retry_after_s)
    return timedelta(seconds=delay)


def heartbeat_every_s(spec: TrialSpec) -> float:
    """A third of the heartbeat timeout, so that a live worker's heartbeat reaches the
    server well within it (Temporal's SDK holds back one sent less than 0.8 of the
    timeout after the previous one)."""
    return max(1.0, spec.retry.heartbeat_timeout_s / 3)


class Heartbeat:
    """The heartbeats of one activity attempt: sent while slow work is awaited, at most
    every every_s, counted from the attempt's start across all the work it awaits.

    Temporal's heartbeat timeout runs from the start of the attempt, so no heartbeat is
    due before every_s: a step that ends sooner (most model calls) sends none. Each one
    is a request to the Temporal server and a write of the workflow's state, so one per
    model call would add a request per step for nothing."""

    def __init__(self, every_s: float):
        self.every_s = every_s
        self._last = time.monotonic()
        self.details: tuple = ()  # carried by every heartbeat once note()d

    def note(self, *details: object) -> None:
        """Heartbeat now with `details`, and with them from now on: what a retry of this
        activity reads back (activity.info().heartbeat_details) if this attempt dies."""
        self.details = details
        activity.heartbeat(*details)
        self._last = time.monotonic()

    async def around(self, awaitable: Awaitable[T]) -> T:
        """Await slow work (preparing a prompt, a model call) while telling Temporal the
        worker is alive, so a killed worker's call is retried after the heartbeat
        timeout rather than the call timeout. When the activity is cancelled, so is the
        work: an HTTP call in flight is closed rather than left running (and billing)."""
        task = asyncio.ensure_future(awaitable)
        try:
            while True:
                due_in = self._last + self.every_s - time.monotonic()
                if due_in <= 0:
                    activity.heartbeat(*self.details)
                    self._last = time.monotonic()
                    continue
                done, _ = await asyncio.wait({task}, timeout=due_in)
                if done:
                    return task.result()
        finally:
            task.cancel()


async def open_turn(store: Store, ref: StepRef) -> tuple[Heartbeat, list, StepResult | None]:
    """The start of an agent's turn that its own code plays (a registered agent, an
    agent behind A2A): its heartbeats, the trial's steps so far, and the turn's result
    when it is recorded already (then nothing is played again)."""
    heartbeat = Heartbeat(heartbeat_every_s(ref.trial))
    rows = await heartbeat.around(asyncio.to_thread(store.steps, ref.trial.trial_id))
    recorded = next((row for row in rows if row.step == ref.step), None)
    return heartbeat, rows, None if recorded is None else recorded_result(recorded)


@functools.lru_cache(maxsize=None)
def _domain_facts(domain: str) -> scripted_faults.DomainFacts:
    """What the faulty scripted models plan their mistakes from, once per domain."""
    return scripted_faults.facts_of(get_domain(domain))


class ConversationActivities:
    def __init__(self, store: Store):
        self.store = store
        # The offline models answer through litellm like any provider; they must be
        # registered in every process that makes model calls.
        scripted_provider.register(lambda domain, task_id: get_domain(domain).task(task_id), _domain_facts)

    @activity.defn
    async def agent_turn(self, ref: StepRef) -> StepResult:
        if ref.trial.agent is not None:  # an agent of tau2's registry, or behind A2A
            if ref.trial.agent.startswith(A2A_PREFIX):
                from passhat.activities.a2a_turn import a2a_turn

                return await a2a_turn(self, ref)
            from passhat.activities.agent_turn import agent_turn

            return await agent_turn(self, ref)
        return await self._model_turn(ref, "assistant")

    @activity.defn
    async def user_turn(self, ref: StepRef) -> StepResult:
        return await self._model_turn(ref, "user")

    @activity.defn
    def tool_turn(self, ref: StepRef) -> StepResult:
        spec = ref.trial
        recorded, history = self.store.step_or_history(spec.trial_id, ref.step)
        if recorded is not None:
            return recorded_result(recorded)
        pending = history[-1]
        if not pending.tool_calls:
            raise ApplicationError(
                f"step {ref.step}: last message has no tool calls", non_retryable=True,
                type="ProtocolError",
            )
        started = time.time_ns()
        answers = get_domain(spec.domain).execute(
            spec.task_id, history[:-1], pending.tool_calls, session=spec.trial_id
        )
        _tool_spans(ref, pending.tool_calls, answers, started, time.time_ns())
        return self._record(ref, "tool", answers)

    @activity.defn
    def record_mcp_call(self, ref: McpCallRef) -> StepResult:
        """An agent's tool call over MCP (activities/mcp_tools.py), recorded as its
        tool-call step; the tool step after it executes it."""
        call = ref.call
        message = Message(role="assistant", tool_calls=[
            ToolCall(id=call.key, name=call.name, arguments=call.arguments, requestor="assistant")])
        return self._record(StepRef(trial=ref.trial, step=ref.step), "assistant", [message])

    def _record(self, ref: StepRef, role: str, messages: list[Message], trial_key: str | None = None,
                **details) -> StepResult:  # noqa: ANN003
        """Write the step once. An attempt that loses the race to another attempt of the
        same step (two workers, after a heartbeat timeout) returns what the winner
        recorded, so the workflow's state always matches the stored conversation.
        `trial_key`: where the step is kept, the trial's conversation by default."""
        spec = ref.trial
        key = trial_key or spec.trial_id
        if self.store.record_step(key, spec.run_id, ref.step, role, messages, **details):
            stop = bool(details.get("agent_state_json") and json.loads(details["agent_state_json"]).get("stop"))
            return step_result(ref.step, messages, details.get("failure_class"), stop)
        return recorded_result(self.store.get_step(key, ref.step))

    async def _model_turn(self, ref: StepRef, role: llm.Perspective) -> StepResult:
        spec = ref.trial
        # Everything that may be slow heartbeats: the store (busy, or down), loading a
        # domain's data the first time (seconds), and a worker whose threads are all taken.
        heartbeat = Heartbeat(heartbeat_every_s(spec))
        recorded, prompt = await heartbeat.around(asyncio.to_thread(self._prepare, ref, role))
        if recorded is not None:
            return recorded
        history, system, tools = prompt
        rules = rules_for(spec.tau2_version)
        model = spec.agent_model if role == "assistant" else spec.user_model
        args = spec.agent_args if role == "assistant" else spec.user_args
        messages = [{"role": "system", "content": system}] + llm.view_for(
            role, history, skip_empty_text=role == "user" and rules.user_skips_empty_agent_text
        )
        return await self._call(
            ref, heartbeat, role, model, args, messages, tools=tools, seed=spec.seed,
            empty_retries=rules.empty_reply_retries, trial_key=spec.trial_id,
        )

    @activity.defn
    async def judge_turn(self, ref: StepRef) -> bool:
        """The NL-assertion judge's call for a finished conversation (tau2 1.0.x), as a
        step of its own: recorded under judge_key(trial), so never made twice. True when
        grading has verdicts to use (or needs none), False when the judge failed."""
        spec = ref.trial
        key = judge_key(spec.trial_id)
        heartbeat = Heartbeat(heartbeat_every_s(spec))
        row = await heartbeat.around(asyncio.to_thread(self.store.get_step, key, 0))
        if row is not None:
            return row.failure_class is None
        messages = await heartbeat.around(asyncio.to_thread(self._judge_request, ref))
        if messages is None:
            return True
        result = await self._call(
            ref, heartbeat, "judge", spec.judge_model or "", spec.judge_args, messages,
            tools=None, seed=None, empty_retries=0, trial_key=key,
        )
        return result.failure is None

    def _judge_request(self, ref: StepRef) -> list[dict] | None:
        spec = ref.trial
        messages = [m for row in self.store.steps(spec.trial_id) for m in row.message_list()]
        judge_request = getattr(get_domain(spec.domain), "judge_request", None)  # optional
        if judge_request is None:
            return None
        return judge_request(spec.task_id, messages, ref.termination_reason)

    async def _call(self, ref: StepRef, heartbeat: Heartbeat, role: str, model: str,
                    args: dict, messages: list[dict], *, tools: list | None, seed: int | None,
                    empty_retries: int, trial_key: str) -> StepResult:
        """One model call of a trial, traced, recorded as step `ref.step` of `trial_key`
        with its tokens and cost; transient provider errors are left to Temporal's retry."""
        spec = ref.trial
        perspective = "user" if role == "user" else "assistant"
        try:
            reply = await heartbeat.around(call_model(
                ref, role, model, messages, tools=tools, model_args=args, seed=seed,
                empty_retries=empty_retries,
            ))
        except llm.ModelCallError as err:
            if err.transient:
                await self._say_retrying(ref, err)
            if not err.model_failure:  # the infrastructure's: retried, or not evaluable
                raise infrastructure_failure(err, ref) from None
            # The model's own failure: recorded as its step, and the conversation ends.
            return await self._record_paid(
                ref, heartbeat, perspective, [Message(role=perspective)], trial_key,
                model=model, failure_class=err.error_class, failure=str(err),
            )
        if activity.info().attempt > 1:  # earlier attempts may have said they were retrying
            await self._say_retrying(ref, None)
        if role == "judge":
            failure_class, failure = judge_failure(reply.message, spec)
        else:
            failure_class, failure = model_failure(reply.message, spec) or (None, None)
        return await self._record_paid(
            ref,
            heartbeat,
            perspective,
            [reply.message],
            trial_key,
            model=reply.model or model,
            input_tokens=reply.input_tokens,
            output_tokens=reply.output_tokens,
            cost=reply.cost,
            latency_s=reply.latency_s,
            finish_reason=reply.finish_reason,
            failure_class=failure_class,
            failure=failure,
        )

    async def _say_retrying(self, ref: StepRef, err: llm.ModelCallError | None) -> None:
        """Note on the trial that its model call is being retried after `err` (or, with
        None, no longer is), for the progress line and `passhat status` of any process.
        Only the error's class and status are kept: the provider's text stays in the
        activity's failure. A store that cannot take the note changes nothing else."""
        trial_id = ref.trial.trial_id
        try:
            if err is None:
                await asyncio.to_thread(self.store.clear_retry, trial_id)
            else:
                label = err.error_class + (f" (HTTP {err.status_code})" if err.status_code else "")
                await asyncio.to_thread(self.store.note_retry, trial_id, activity.info().attempt, label)
        except StoreError as store_err:
            activity.logger.warning("retry of %s#%s not noted: %s", trial_id, ref.step, store_err)

    async def _record_paid(self, ref: StepRef, heartbeat: Heartbeat, role: str, messages: list[Message],
                           trial_key: str, **details) -> StepResult:  # noqa: ANN003
        """Record a step whose model call has been made (and paid for). A store that is
        down is waited out here, heartbeating, for as long as bookkeeping may retry:
        failing the activity would throw the answer away and pay for the call again."""
        retry = ref.trial.retry
        wait_s = retry.bookkeeping_for_s
        info = activity.info()
        if info.start_to_close_timeout:  # give up before Temporal times the attempt out
            ends = info.started_time + info.start_to_close_timeout
            wait_s = min(wait_s, (ends - datetime.now(timezone.utc)).total_seconds() - 5)
        deadline = time.monotonic() + wait_s
        delay = retry.initial_interval_s
        while True:
            try:
                return await heartbeat.around(
                    asyncio.to_thread(self._record, ref, role, messages, trial_key=trial_key, **details)
                )
            except StoreError as err:
                if time.monotonic() + delay > deadline:
                    raise
                activity.logger.warning("step %s#%s not recorded yet, retrying in %.0fs: %s",
                                        ref.trial.trial_id, ref.step, delay, err)
                await heartbeat.around(asyncio.sleep(delay))
                delay = min(delay * retry.backoff, retry.max_interval_s)

    def _prepare(self, ref: StepRef, role: str) -> tuple[StepResult | None, tuple | None]:
        """(the step's result, None) when it is recorded already, else (None, the prompt
        of its model call). In one worker thread: each hop to a thread waits for one, and
        for the GIL, behind every other conversation in this process."""
        recorded, history = self.store.step_or_history(ref.trial.trial_id, ref.step)
        if recorded is not None:
            return recorded_result(recorded), None
        return None, self._prompt(ref, role, history)

    def _prompt(self, ref: StepRef, role: str, history: list[Message]) -> tuple[list[Message], str, list | None]:
        spec = ref.trial
        domain = get_domain(spec.domain)
        if role == "assistant":
            system = (domain.agent_system_prompt() if spec.agent_prompt is None
                      else render_agent_prompt(spec.agent_prompt, domain.policy()))
            return history, system, domain.agent_tools()
        # The one place a persona enters the user simulator's request (docs/personas.md).
        return history, with_persona(domain.user_system_prompt(spec.task_id), spec.user_persona_text), domain.user_tools()


async def call_model(ref: StepRef, role: str, model: str, messages: list[dict], *,
                     tools: list | None, model_args: dict, seed: int | None,
                     tool_choice: str | None = None,
                     empty_retries: int | None = None) -> llm.ModelReply:
    """One model call of a step (role: assistant, user or judge), with the trial's
    metadata and a span in its trace. An empty reply is asked again `empty_retries`
    times; by default as the run's tau2 version does."""
    spec = ref.trial
    if empty_retries is None:
        empty_retries = rules_for(spec.tau2_version).empty_reply_retries
    metadata = {
        "passhat": {
            "run_id": spec.run_id,
            "trial_id": spec.trial_id,
            "domain": spec.domain,
            "task_id": spec.task_id,
            "trial": spec.trial_index,
            "step": ref.step,
            "role": role,
        }
    }
    span_attributes = {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": provider_of(model),
        "gen_ai.request.model": model,
        "gen_ai.request.seed": model_args.get("seed", seed),
        "gen_ai.request.temperature": model_args.get("temperature"),
        **tracing.trial_attributes(ref.trial),
        "passhat.step": ref.step,
        "passhat.role": {"assistant": "agent"}.get(role, role),
    }
    with tracing.span(f"chat {model}", spec.trial_id, span_attributes, SpanKind.CLIENT) as span:
        reply = await llm.complete(
            model, messages, tools=tools, role="user" if role == "user" else "assistant",
            model_args=model_args, metadata=metadata,
            seed=seed, timeout_s=spec.retry.model_call_timeout_s, empty_retries=empty_retries,
            tool_choice=tool_choice,
        )
        span.set_attributes({
            "gen_ai.response.model": reply.model or model,
            "gen_ai.usage.input_tokens": reply.input_tokens,
            "gen_ai.usage.output_tokens": reply.output_tokens,
            "gen_ai.response.finish_reasons": [reply.finish_reason or "unknown"],
            "passhat.cost_usd": reply.cost,
        })
    return reply


def infrastructure_failure(err: llm.ModelCallError, ref: StepRef) -> ApplicationError:
    """A model call's failure that is not the model's: the activity fails with it, and
    Temporal retries the step (transient) or the trial is not evaluable. The provider's
    exception, unredacted, stays out of the failure."""
    return ApplicationError(
        str(err),
        {"status_code": err.status_code, "retry_after_s": err.retry_after_s},
        type=err.error_class,
        non_retryable=not err.transient,
        next_retry_delay=backoff_delay(activity.info().attempt, ref, err.retry_after_s)
        if err.transient
        else None,
    )


def _tool_spans(ref: StepRef, calls, answers: list[Message], start_ns: int, end_ns: int) -> None:  # noqa: ANN001
    """One span per tool call. The domain runs a step's calls as one batch (tau2 syncs
    state once per step), so each span covers the batch's time."""
    for call, answer in zip(calls, answers):
        with tracing.span(
            f"execute_tool {call.name}",
            ref.trial.trial_id,
            {
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": call.name,
                "gen_ai.tool.call.id": call.id,
                "passhat.tool.requestor": call.requestor,
                "passhat.tool.error": answer.error,
                "passhat.tool.batch_size": len(calls),
                **tracing.trial_attributes(ref.trial),
                "passhat.step": ref.step,
                "passhat.role": "agent" if call.requestor == "assistant" else "user",
            },
            start_time=start_ns,
            end_time=end_ns,
        ) as span:
            if answer.error:
                span.set_status(Status(StatusCode.ERROR, (answer.content or "")[:500]))
                span.set_attribute("error.type", "ToolError")
