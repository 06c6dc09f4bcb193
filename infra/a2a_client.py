"""Talking to an agent behind A2A with the official `a2a-sdk` client.

The agent card (/.well-known/agent-card.json) says which transport and protocol version
the agent speaks; the SDK's ClientFactory picks them, on A2A 1.0 or on 0.3 (its compat
layer: the installed base of tau2 agents is built on a2a-sdk 0.3.x). passhat sends one
text message per turn and waits for the answer (no streaming: the reply is one action),
and reads the reply whether it is a Message or a Task (its artifacts when it completed,
its status message otherwise).

Failures are sorted here by whose they are (docs/agents.md has the table):
- the agent's own: a JSON-RPC error it answers with, a task that ends failed, rejected or
  canceled, no answer within the turn's time (A2AAgentFailure);
- not the agent's: the server cannot be reached, answers 5xx or 429 (A2AUnavailable,
  transient: retried, then the trial is not evaluable), or wants what passhat cannot give
  (another 4xx, auth-required: A2AUnavailable, not transient).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import httpx

# A2A task states as passhat records them (the 0.3 names, which both versions' docs use).
_STATES = {
    "TASK_STATE_SUBMITTED": "submitted", "TASK_STATE_WORKING": "working",
    "TASK_STATE_COMPLETED": "completed", "TASK_STATE_FAILED": "failed",
    "TASK_STATE_CANCELED": "canceled", "TASK_STATE_INPUT_REQUIRED": "input-required",
    "TASK_STATE_REJECTED": "rejected", "TASK_STATE_AUTH_REQUIRED": "auth-required",
}
_AGENT_ENDED = {"failed", "rejected", "canceled"}


class A2ASetupError(Exception):
    """The agent card cannot be read or used; one line saying what and where."""


class A2AAgentFailure(Exception):
    """The agent's own failure in a turn. `error_class` names the kind; `reply` is any
    text it answered with."""

    def __init__(self, message: str, error_class: str, reply: str | None = None):
        super().__init__(message)
        self.error_class = error_class
        self.reply = reply


class A2AUnavailable(Exception):
    """The turn could not be held for a reason that is not the agent's answer."""

    def __init__(self, message: str, transient: bool, status_code: int | None = None):
        super().__init__(message)
        self.transient = transient
        self.status_code = status_code


@dataclass(frozen=True)
class Card:
    name: str
    version: str
    url: str  # the interface the client talks to
    protocol_version: str
    binding: str
    description: str


@dataclass
class Reply:
    text: str
    context_id: str | None
    task_id: str | None
    state: str  # "message" for a Message, else the task's state
    latency_s: float
    # The metadata the reply carried, the message's or the task's first (its status
    # message's, then its artifacts'): where an agent reports its usage.
    metadata: list[dict[str, Any]] = field(default_factory=list)


_cards: dict[str, object] = {}  # base URL -> the SDK's AgentCard, once per process


async def fetch_card(url: str, timeout_s: float = 10.0) -> object:
    """The agent's card, as the SDK parses it (A2ASetupError when it cannot)."""
    from a2a.client import A2ACardResolver, A2AClientError

    card_url = f"{url}/.well-known/agent-card.json"
    async with httpx.AsyncClient(timeout=timeout_s) as http:
        try:
            card = await A2ACardResolver(http, url).get_agent_card()
        except A2AClientError as err:
            if isinstance(err.__cause__, httpx.RequestError):
                raise A2ASetupError(f"cannot reach the agent at {card_url}: {_words(err.__cause__)}") from None
            raise A2ASetupError(f"cannot read the agent card at {card_url}: {_words(err)}") from None
        except (httpx.HTTPError, OSError) as err:
            raise A2ASetupError(f"cannot reach the agent at {card_url}: {_words(err)}") from None
    if not card.name:
        raise A2ASetupError(f"the agent card at {card_url} has no name")
    if not card.supported_interfaces:
        raise A2ASetupError(f"the agent card at {card_url} declares no interface (url) to send messages to")
    return card


async def read_card(url: str, timeout_s: float = 10.0) -> Card:
    """The identity and transport of the agent at `url` (A2ASetupError when it cannot be
    used). Cached per process: a worker reads it once."""
    card = _cards.get(url)
    if card is None:
        card = _cards[url] = await fetch_card(url, timeout_s)
    return _describe(card)


def _describe(card) -> Card:
    interface = card.supported_interfaces[0]
    return Card(name=card.name, version=card.version, url=interface.url,
                protocol_version=interface.protocol_version or "", binding=interface.protocol_binding,
                description=card.description)


async def send(url: str, text: str, *, message_id: str, context_id: str | None, task_id: str | None,
               timeout_s: float, on_task: Callable[[str, str], None] | None = None,
               metadata: dict[str, str] | None = None) -> Reply:
    """Send one text message and wait up to `timeout_s` for the agent's answer. The
    message asks the agent to return at once (A2A's non-blocking send): an agent that
    answers with a task says its id first, which `on_task(task_id, context_id)` is told
    before the wait, and the task is followed (`tasks/get`) until it has the answer.
    `metadata`: the message's metadata (MCP mode: the trial's MCP URL)."""
    from a2a.types import (
        Message,
        Part,
        Role,
        SendMessageConfiguration,
        SendMessageRequest,
    )

    await read_card(url)
    message = Message(message_id=message_id, role=Role.ROLE_USER, parts=[Part(text=text)])
    if metadata:
        message.metadata.update(metadata)
    if context_id:
        message.context_id = context_id
    if task_id:
        message.task_id = task_id
    request = SendMessageRequest(message=message, configuration=SendMessageConfiguration(return_immediately=True))

    async def exchange(client) -> object:
        response = None
        async for response in client.send_message(request):
            pass
        if response is not None and response.HasField("task") and on_task is not None:
            on_task(response.task.id, response.task.context_id)
        return response

    return await _talk(url, timeout_s, exchange)


async def follow(url: str, task_id: str, *, timeout_s: float) -> Reply:
    """The answer of a task sent earlier (by an attempt that died while it waited):
    the task is followed, nothing is sent again."""
    from a2a.types import GetTaskRequest, StreamResponse

    async def exchange(client) -> object:
        return StreamResponse(task=await client.get_task(GetTaskRequest(id=task_id)))

    return await _talk(url, timeout_s, exchange)


async def cancel(url: str, task_id: str, *, timeout_s: float = 5.0) -> None:
    """Ask the agent to cancel a task (A2A tasks/cancel): the conversation it belongs to
    was cancelled. Best effort: an agent that cannot cancel, or does not answer in
    `timeout_s`, is left as it is."""
    from a2a.types import CancelTaskRequest

    try:
        async with asyncio.timeout(timeout_s):
            await _client(url).cancel_task(CancelTaskRequest(id=task_id))
    except Exception:  # noqa: BLE001 - the agent's (a task already done, no cancel support)
        pass


_clients: dict[tuple[asyncio.AbstractEventLoop, str], Any] = {}


def _client(url: str) -> Any:
    """The SDK client for the agent at `url`, one per event loop and agent: its HTTP
    connections are kept between turns (a client per turn cost a third of a turn's CPU).
    No HTTP timeout of its own: each exchange is bounded by its turn's timeout."""
    from a2a.client import ClientConfig, ClientFactory

    key = (asyncio.get_running_loop(), url)
    client = _clients.get(key)
    if client is None:
        http = httpx.AsyncClient(timeout=httpx.Timeout(None, connect=10.0),
                                 event_hooks={"request": [_trace_context]})
        client = _clients[key] = ClientFactory(ClientConfig(streaming=False, httpx_client=http)).create(_cards[url])
    return client


async def _trace_context(request: httpx.Request) -> None:
    """Each request carries the W3C trace context of the turn's span (`traceparent`),
    so that the agent's own spans join the trial's trace; nothing when tracing is off."""
    from opentelemetry.propagate import inject

    inject(request.headers)


async def _talk(url: str, timeout_s: float, exchange: Callable[[Any], Awaitable[Any]]) -> Reply:
    """One exchange with the agent, then its task followed until it is no longer at
    work, within `timeout_s`; failures sorted by whose they are."""
    from a2a.client import A2AClientError, A2AClientTimeoutError
    from a2a.types import GetTaskRequest, StreamResponse, TaskState
    from a2a.utils.errors import A2AError

    await read_card(url)
    started = time.monotonic()
    at_work = (TaskState.TASK_STATE_SUBMITTED, TaskState.TASK_STATE_WORKING)
    client = _client(url)
    try:
        async with asyncio.timeout(timeout_s):
            response = await exchange(client)
            pause = 0.02
            while response is not None and response.HasField("task") and response.task.status.state in at_work:
                await asyncio.sleep(pause)
                pause = min(pause * 2, 0.5)
                response = StreamResponse(task=await client.get_task(GetTaskRequest(id=response.task.id)))
    except (A2AClientTimeoutError, TimeoutError):
        raise A2AAgentFailure(f"the agent did not answer within {timeout_s:g}s", "A2ATimeout") from None
    except A2AClientError as err:
        raise _unavailable(err) from None
    except A2AError as err:  # a JSON-RPC error the agent answered with
        raise A2AAgentFailure(f"the agent answered with an A2A error: {_words(err)}",
                              type(err).__name__) from None
    latency = time.monotonic() - started
    if response is None:
        raise A2AAgentFailure("the agent's answer held neither a message nor a task", "A2AEmptyAnswer")
    return _reply(response, latency)


def _reply(response, latency: float) -> Reply:
    if response.HasField("message"):
        m = response.message
        return Reply(_text(m.parts), m.context_id or None, m.task_id or None, "message", latency,
                     _metadata(m))
    from a2a.types import TaskState

    task = response.task
    state = _STATES.get(TaskState.Name(task.status.state), "unknown")
    status_text = _text(task.status.message.parts) if task.status.HasField("message") else ""
    artifacts = "\n".join(t for a in task.artifacts if (t := _text(a.parts)))
    if state in _AGENT_ENDED:
        raise A2AAgentFailure(f"the agent's task ended {state}" + (f": {status_text}" if status_text else ""),
                              f"A2ATask{state.capitalize()}", reply=status_text or artifacts or None)
    if state == "auth-required":
        raise A2AUnavailable("the agent's task wants authentication (auth-required)", transient=False)
    text = artifacts if state == "completed" and artifacts else status_text or artifacts
    metadata = _metadata(task, task.status.message if task.status.HasField("message") else None, *task.artifacts)
    return Reply(text, task.context_id or None, task.id or None, state, latency, metadata)


def _metadata(*carriers) -> list[dict[str, Any]]:  # noqa: ANN002 - messages, tasks, artifacts
    """The metadata of each of `carriers` that has some, as plain dicts."""
    from google.protobuf.json_format import MessageToDict

    return [MessageToDict(c.metadata) for c in carriers if c is not None and c.HasField("metadata")]


def _text(parts) -> str:
    """The text of a message's or artifact's parts (structured data parts as JSON)."""
    from google.protobuf.json_format import MessageToJson

    out = []
    for p in parts:
        if p.HasField("text"):
            out.append(p.text)
        elif p.HasField("data"):
            out.append(MessageToJson(p.data))
    return "\n".join(out)


def _unavailable(err: Exception) -> A2AUnavailable:
    cause = err.__cause__
    if isinstance(cause, httpx.HTTPStatusError):
        status = cause.response.status_code
        transient = status >= 500 or status in (408, 429)
        return A2AUnavailable(f"the agent's server answered HTTP {status}", transient, status)
    if isinstance(cause, httpx.RequestError):
        return A2AUnavailable(f"cannot reach the agent: {_words(cause)}", transient=True)
    return A2AUnavailable(f"A2A client error: {_words(err)}", transient=True)


def _words(err: BaseException) -> str:
    text = " ".join(str(err).split()) or type(err).__name__
    return f"{type(err).__name__}: {text}"[:300]
