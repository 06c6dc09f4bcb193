"""The trial's agent tools served over MCP (`--agent-tools mcp`), from the worker process
that holds the agent's A2A turn.

Each worker process serves one MCP server (the official `mcp` SDK's low-level server,
streamable HTTP, started on the first MCP turn it runs; PASSHAT_MCP_HOST and
PASSHAT_MCP_PORT choose where, default 127.0.0.1 and a free port). A trial's tools are
at `/mcp/<token>`, the token an HMAC of the trial id under a key this process drew at
random: unguessable, and the same for every turn of the trial here. The path answers
only while that trial's agent turn is in flight in this process (`open_trial` ..
`close_trial`); any other path, another trial's after its turn ended included, is 404.

A tool call is a workflow Update on the trial's workflow (TrialWorkflow.mcp_tool_call),
whose handler records the agent's call and runs it as the trial's usual tool step. The
update id is the call's idempotency key (`_Open.key_for`): a digest of the trial, its
attempt (a trial restarted in a fresh context, or re-run, numbers its steps again), the
turn, the call's order in the turn, the tool and its arguments. A call the agent's
client sends again is one update to Temporal, executed once and answered the same:
sent again on its session (the same JSON-RPC request id), or from a new session after
the first was lost (a reconnect: the request id is the new session's, so neither it
nor the session can be in the key) as the same tool with the same arguments as the
turn's latest call. That is the call a client re-sends: it waits for each answer, so
the one it lost is its latest; and an identical call right after an identical one
changes nothing a read would see. The same call again on the same session with a new
request id is a new call, executed. A connection without a session (MCP's stateless
protocol, the mcp SDK 2.x's default) has no request id that is its own: there an
identical call right after an identical one is the same call. The answer
is the recorded tool message; an unknown tool or bad arguments is the tool's error, as
tau2 answers it, returned as an MCP tool error (isError) for the agent to handle.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import hmac
import json
import os
import secrets
import socket
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel

from passhat.contracts import StepResult, TrialSpec
from passhat.domains.registry import get_domain

UPDATE = "mcp_tool_call"
_PATH = "/mcp/"
_KEY = secrets.token_bytes(32)  # this process's: the tokens of the trials it serves


class McpCall(BaseModel):
    """One tool call of the agent's, as the update carries it."""

    key: str  # the idempotency key (also the update id)
    name: str
    arguments: dict[str, Any]


class McpCallRef(BaseModel):
    """The step that records an MCP call as the agent's tool call."""

    trial: TrialSpec
    step: int
    call: McpCall


@dataclass
class _Open:
    spec: TrialSpec
    client: Any  # temporalio Client
    store: Any  # passhat Store
    turn: int  # the step the turn started at
    attempt: int  # the trial's attempts set aside before this one
    in_flight: int = 0
    idle: asyncio.Event = field(default_factory=asyncio.Event)
    keys: dict[tuple[str, str, str], str] = field(default_factory=dict)  # (session, request id, call) -> key
    latest: tuple[str, str, str] | None = None  # the turn's latest call: (session, the call, its key)
    calls: int = 0  # the turn's calls so far (a call sent again counted once)

    def key_for(self, session: str, request_id: Any, name: str, arguments: dict) -> str:
        """The idempotency key of a call of this turn (the module's docstring says why).
        `session` is "" where the connection has none (MCP's stateless protocol): request
        ids are then not unique across connections, and the turn's latest call sent again
        is taken for the same call whatever its request id."""
        call = json.dumps([name, arguments], sort_keys=True, default=str)
        sent = (session, str(request_id), call)
        if session and sent in self.keys:  # sent again on its session
            return self.keys[sent]
        if self.latest is not None and self.latest[1] == call and (self.latest[0] != session or not session):
            key = self.latest[2]  # the turn's latest call, sent again from a new connection
        else:
            key = call_key(self.spec.trial_id, self.attempt, self.turn, self.calls, call)
            self.calls += 1
        if session:
            self.keys[sent] = key
        self.latest = (session, call, key)
        return key


_open: dict[str, _Open] = {}  # token -> the trial whose turn is in flight here
_servers: dict[asyncio.AbstractEventLoop, str] = {}  # loop -> its server's base URL


def token(trial_id: str) -> str:
    return hmac.new(_KEY, trial_id.encode(), hashlib.sha256).hexdigest()[:40]


async def open_trial(spec: TrialSpec, client: Any, store: Any, turn: int, attempt: int) -> str:
    """Serve the trial's tools for its agent turn starting at step `turn` of its attempt
    `attempt` (the attempts set aside before it); its MCP URL."""
    base = await _server()
    entry = _Open(spec, client, store, turn, attempt)
    entry.idle.set()
    _open[token(spec.trial_id)] = entry
    return f"{base}{_PATH}{token(spec.trial_id)}"


async def close_trial(spec: TrialSpec, wait: bool = True) -> None:
    """Take no more calls of the trial's, and (`wait`) wait for the ones under way to be
    recorded."""
    entry = _open.pop(token(spec.trial_id), None)
    if entry is not None and wait:
        await entry.idle.wait()


def call_key(trial_id: str, attempt: int, turn: int, order: int, call: str) -> str:
    """The idempotency key of the `order`th call (from 0) of the turn at step `turn` of
    the trial's attempt `attempt`; `call` is the tool and its arguments, as JSON."""
    ident = json.dumps([trial_id, attempt, turn, order, call])
    return "mcp-" + hashlib.sha256(ident.encode()).hexdigest()[:32]


def _tools(spec: TrialSpec) -> list[Any]:
    import mcp_types as types

    out = []
    for tool in get_domain(spec.domain).agent_tools():
        fn = tool.get("function", tool)
        schema = fn.get("parameters") or {"type": "object", "properties": {}}
        out.append(types.Tool(name=fn["name"], description=fn.get("description"), input_schema=schema))
    return out


def _entry(ctx: Any) -> _Open:
    request = ctx.request
    found = _open.get(request.path_params.get("token", "")) if request is not None else None
    if found is None:
        raise LookupError("no trial's turn is in flight at this URL")
    return found


async def _list_tools(ctx: Any, params: Any) -> Any:
    import mcp_types as types

    return types.ListToolsResult(tools=_tools(_entry(ctx).spec))


async def _call_tool(ctx: Any, params: Any) -> Any:
    import mcp_types as types
    from temporalio.client import WorkflowUpdateFailedError
    from temporalio.service import RPCError

    def error(text: str) -> Any:
        return types.CallToolResult(content=[types.TextContent(text=text)], is_error=True)

    try:
        entry = _entry(ctx)
    except LookupError as err:
        return error(str(err))
    arguments = dict(params.arguments or {})
    session = ctx.request.headers.get("mcp-session-id", "")
    key = entry.key_for(session, ctx.request_id, params.name, arguments)
    entry.in_flight += 1
    entry.idle.clear()
    try:
        handle = entry.client.get_workflow_handle(entry.spec.trial_id)
        result = await handle.execute_update(UPDATE, McpCall(key=key, name=params.name, arguments=arguments),
                                             id=key, result_type=StepResult)
        row = await asyncio.to_thread(entry.store.get_step, entry.spec.trial_id, result.step)
    except WorkflowUpdateFailedError as err:
        return error(f"the call was not taken: {err.cause or err}")
    except RPCError as err:
        return error(f"the call was not taken: {err.message}")
    finally:
        entry.in_flight -= 1
        if not entry.in_flight:
            entry.idle.set()
    answer = row.message_list()[-1]
    return types.CallToolResult(content=[types.TextContent(text=answer.content or "")], is_error=bool(answer.error))


class _Server:
    """uvicorn in the worker's event loop, leaving the worker's signals alone."""

    def __init__(self, app: Any, sock: socket.socket):
        import uvicorn

        class Quiet(uvicorn.Server):
            def capture_signals(self):  # noqa: ANN202 - the worker handles its signals
                return contextlib.nullcontext()

        self.server = Quiet(uvicorn.Config(app, log_level="warning", access_log=False, lifespan="on"))
        self.sock = sock
        self.task = asyncio.get_running_loop().create_task(self.server.serve(sockets=[sock]))


async def _server() -> str:
    loop = asyncio.get_running_loop()
    if loop in _servers:
        return _servers[loop]
    from mcp.server.lowlevel import Server
    from mcp.server.transport_security import TransportSecuritySettings
    from starlette.responses import Response

    host = os.environ.get("PASSHAT_MCP_HOST", "127.0.0.1")
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, int(os.environ.get("PASSHAT_MCP_PORT", "0"))))
    port = sock.getsockname()[1]
    server = Server("passhat trial tools", on_list_tools=_list_tools, on_call_tool=_call_tool)
    app = server.streamable_http_app(
        streamable_http_path=_PATH + "{token}", host=host,
        transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False))

    async def guarded(scope: dict, receive: Any, send: Any) -> None:
        # Only the paths of trials whose turn is in flight here exist.
        path = scope.get("path", "") if scope["type"] == "http" else ""
        if scope["type"] == "http" and path.removeprefix(_PATH) not in _open:
            await Response("not found", status_code=404)(scope, receive, send)
            return
        await app(scope, receive, send)

    runner = _Server(guarded, sock)
    for _ in range(1000):
        if runner.server.started:
            break
        if runner.task.done():
            runner.task.result()
        await asyncio.sleep(0.01)
    _servers[loop] = f"http://{host}:{port}"
    return _servers[loop]
