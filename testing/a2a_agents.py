"""Agents behind A2A over real loopback HTTP, for tests and benches: the reference agent
of examples/a2a_agent (a2a-sdk's server, litellm to its model) served by uvicorn on an
event loop of its own in a background thread, and agents that misbehave on purpose.

Every agent served here runs on that one loop, for the life of the process, as a
deployed agent's process serves on one loop. litellm keeps its async HTTP clients in a
process-wide cache, and with a loop per server, litellm 1.82.6 (tau2 1.0.x's) handed a
later server's loop a client whose pooled connection belonged to an earlier server's
closed loop: "Event loop is closed" inside the agent, its task failed, the turn counted
as the agent's failure (and re-run on 1.0.x).

    with A2AAgentServer(lambda: ChatAgent("openai/oracle", http_args(srv.url))) as agent:
        run --agent a2a:{agent.url} ...
        agent.received   # message ids, in arrival order (a turn sent twice shows twice)
        agent.traceparents  # the W3C `traceparent` header each message came with (or None)

`a2a_version="0.3"` serves the agent as an a2a-sdk 0.3.x server does (a 0.3 card and
JSON-RPC method names), through the SDK's compat layer.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import importlib.util
import sys
import subprocess
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

from passhat.testing.harness import free_port

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "a2a_agent" / "agent.py"


@functools.cache
def example() -> Any:
    """The reference agent's module (examples/a2a_agent/agent.py)."""
    spec = importlib.util.spec_from_file_location("passhat_example_a2a_agent", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def chat_agent(model: str, model_args: dict[str, Any], reply_as: str = "message") -> Any:
    """The reference agent forwarding to `model` (litellm) with `model_args`; an
    `api_key_env` in them is read as litellm's api_key, as the example's command does."""
    import os

    args = dict(model_args)
    if "api_key_env" in args:
        args["api_key"] = os.environ[args.pop("api_key_env")]
    return example().ChatAgent(model, args, reply_as)


class Counting:
    """Wraps an agent executor: records each message id it receives, in order."""

    def __init__(self, inner: Any):
        self.inner = inner
        self.received: list[str] = []
        self.cancelled: list[str] = []  # task ids the client asked to cancel
        self.traceparents: list[str | None] = []  # each message's traceparent header

    async def execute(self, context: Any, event_queue: Any) -> None:
        self.received.append(context.message.message_id)
        headers = context.call_context.state.get("headers", {}) if context.call_context else {}
        self.traceparents.append(headers.get("traceparent"))
        await self.inner.execute(context, event_queue)

    async def cancel(self, context: Any, event_queue: Any) -> None:
        self.cancelled.append(context.task_id)
        await self.inner.cancel(context, event_queue)


def fixed_reply_agent(text: str) -> Any:
    """An agent that answers every message with `text` (garbage, for a test)."""
    base = example().ChatAgent

    class Fixed(base):
        async def answer(self, context_id: str, _: str) -> str:
            return text

    return Fixed("none")


# How it closes early: as the scripted agents close a task (scripted_review.CLOSINGS), so
# the scripted judge blames the agent for what it left undone, not the user for stopping.
QUIT = "Your request has been handled."


def parting_agent(model: str, model_args: dict[str, Any]) -> Any:
    """The reference agent forwarding to `model`, but every second context of a task
    (counted by its first message, which names the task) gives up after its first tool
    action: it tells the user it is done instead of going on. Two trials of a task
    that has more to do after that action: one passes, the other parts from the gold
    path there."""
    from passhat.domains.a2a_protocol import RESPOND, UnparsableReply, parse_action

    base = example().ChatAgent

    def acted(history: list[dict[str, str]]) -> bool:
        for m in history:
            if m["role"] == "assistant":
                try:
                    if parse_action(m["content"]).name != RESPOND:
                        return True
                except UnparsableReply:
                    pass
        return False

    class Parting(base):
        def __init__(self) -> None:
            super().__init__(model, chat_agent(model, model_args).model_args)
            self.seen: dict[str, int] = {}  # first message -> contexts that opened with it
            self.quitters: set[str] = set()

        async def answer(self, context_id: str, text: str) -> str:
            history = self.histories.get(context_id)
            if history is None:
                self.seen[text] = self.seen.get(text, 0) + 1
                if self.seen[text] % 2 == 0:
                    self.quitters.add(context_id)
            elif context_id in self.quitters and acted(history):
                reply = f'<json>{{"name": "{RESPOND}", "arguments": {{"content": "{QUIT}"}}}}</json>'
                history += [{"role": "user", "content": text}, {"role": "assistant", "content": reply}]
                return reply
            return await super().answer(context_id, text)

    return Parting()


def hanging_agent(release: threading.Event, reply_as: str = "message") -> Any:
    """An agent that never answers until `release` is set (bounded: 300 s); with
    reply_as="task", its task is announced first, as the reference agent's is."""
    base = example().ChatAgent

    class Hanging(base):
        async def answer(self, context_id: str, _: str) -> str:
            await asyncio.to_thread(release.wait, 300)
            return "released"

    return Hanging("none", reply_as=reply_as)


def wait_for_card(url: str, proc: subprocess.Popen, log: Path, timeout: float = 300) -> None:
    """Until the agent process `proc` serving `url` answers with its card (it imports
    litellm first: seconds on a busy machine); RuntimeError if it ends or takes longer."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            urllib.request.urlopen(f"{url}/.well-known/agent-card.json", timeout=5).close()
            return
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the A2A agent at {url} did not start; see {log}") from None
            time.sleep(0.2)


class A2AAgentServer:
    """An agent executor served over loopback HTTP by the reference agent's app (`wrap`ped
    in an ASGI middleware, if one is given)."""

    def __init__(self, executor: Any, a2a_version: str = "1.0", name: str | None = None,
                 description: str = "", wrap: Any = None):
        import uvicorn

        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.counting = Counting(executor)
        kwargs = {"name": name} if name else {}
        app = example().build_app(self.counting, self.url + "/", a2a_version, description=description, **kwargs)
        app = app if wrap is None else wrap(app)  # an ASGI middleware: how the agent's server misbehaves
        self._server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=self.port, log_level="warning"))
        self._serving: concurrent.futures.Future | None = None

    @property
    def received(self) -> list[str]:
        return list(self.counting.received)

    @property
    def traceparents(self) -> list[str | None]:
        return list(self.counting.traceparents)

    @property
    def cancelled(self) -> list[str]:
        return list(self.counting.cancelled)

    def __enter__(self) -> A2AAgentServer:
        self._serving = asyncio.run_coroutine_threadsafe(self._server.serve(), agents_loop())
        deadline = time.monotonic() + 30
        while not self._server.started:
            if time.monotonic() > deadline or self._serving.done():
                raise RuntimeError(f"the A2A agent on port {self.port} did not start")
            time.sleep(0.02)
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.should_exit = True
        try:  # (a request still in flight, e.g. a hanging agent's, may hold it open)
            self._serving.result(timeout=10)
        except concurrent.futures.TimeoutError:
            pass


@functools.cache
def agents_loop() -> asyncio.AbstractEventLoop:
    """The event loop every agent served here runs on, in a daemon thread of its own."""
    loop = asyncio.new_event_loop()
    threading.Thread(target=loop.run_forever, daemon=True, name="a2a-agents").start()
    return loop


def dropping_follow_ups(app: Any) -> Any:
    """ASGI middleware: the agent takes every message that continues a context (it
    carries a contextId), answers it, and its server drops the connection mid-reply (the
    headers and part of the body sent, then the connection closed): whether the agent
    got the message is not known to the sender."""
    import json

    async def dropping(scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["method"] != "POST":
            return await app(scope, receive, send)
        body, more = b"", True
        while more:
            event = await receive()
            body += event.get("body", b"")
            more = event.get("more_body", False)
        try:
            message = json.loads(body).get("params", {}).get("message", {})
        except ValueError:
            message = {}

        async def replay() -> dict:
            return {"type": "http.request", "body": body, "more_body": False}

        if not (message.get("contextId") or message.get("context_id")):
            return await app(scope, replay, send)
        answered: list[dict] = []

        async def swallow(event: dict) -> None:
            answered.append(event)

        await app(scope, replay, swallow)  # the agent has the message, and answers it
        start = next(e for e in answered if e["type"] == "http.response.start")
        await send({**start, "headers": [(k, v) for k, v in start["headers"] if k.lower() != b"content-length"]
                    + [(b"content-length", b"100000")]})
        await send({"type": "http.response.body", "body": b"{", "more_body": True})
        raise ConnectionResetError("the agent's server dropped the connection mid-reply")

    return dropping


async def task_noted(client: Any, trial_id: str) -> bool:
    """Whether the trial's agent turn in flight has noted its A2A task in a heartbeat
    (activities/a2a_turn.py): a worker that dies now leaves a task to follow."""
    from passhat.testing.harness import describe_raw

    d = await describe_raw(client, trial_id)
    return d is not None and any(a.heartbeat_details.payloads and b"a2a_task" in a.heartbeat_details.payloads[0].data
                                 for a in d.pending_activities)
