"""A small agent behind A2A, built with the official a2a-sdk (server) and litellm: the
shape of a deployed agent passhat measures with `--agent a2a:URL` (docs/agents.md,
"Agent behind A2A").

It keeps each A2A context's conversation as its own chat history and forwards it to its
model as a plain chat without tools; the model's text is its reply, one action a turn,
as the evaluator's first message asks (`<json>{"name": ..., "arguments": ...}</json>`).
It answers with a Message, or with `--reply-as task` with a completed Task whose artifact
holds the text (as AgentBeats agents do), and reports what its model call used in the
reply's metadata: `{"usage": {"input_tokens": N, "output_tokens": N, "cost": USD}}`.

    python examples/a2a_agent/agent.py --port 9009 --model openai/gpt-4.1
    python examples/a2a_agent/agent.py --port 9009 --model openai/oracle \\
        --api-base http://127.0.0.1:8000/v1 --api-key-env PASSHAT_TEST_API_KEY

With its tools over MCP (`passhat run --agent-tools mcp`), the evaluator's first message
carries an MCP URL in its metadata ("mcp_url"): the agent then lists the tools there
with the official `mcp` client, gives them to its model as its own tools, calls the ones
the model asks for over MCP, and replies with the model's words for the user.

`--a2a-version 0.3` serves the agent as an a2a-sdk 0.3.x server does (a 0.3 agent card,
JSON-RPC `message/send`), through the SDK's compat layer.
"""

from __future__ import annotations

import argparse
import json
import os
from typing import Any

from a2a.helpers.proto_helpers import new_task, new_text_artifact, new_text_message
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
from a2a.types import (
    AgentCapabilities,
    AgentCard,
    AgentInterface,
    AgentSkill,
    TaskState,
)
from starlette.applications import Starlette
from starlette.responses import JSONResponse
from starlette.routing import Route

NAME = "passhat example agent"
VERSION = "1.0.0"


class ChatAgent(AgentExecutor):
    """Forwards each context's conversation to a litellm model; one reply per message."""

    def __init__(self, model: str, model_args: dict[str, Any] | None = None, reply_as: str = "message"):
        self.model = model
        self.model_args = dict(model_args or {})
        self.reply_as = reply_as
        self.histories: dict[str, list[dict[str, Any]]] = {}
        self.mcp_urls: dict[str, str] = {}  # context -> the MCP server its tools are at
        self.usage: dict[str, dict[str, float]] = {}  # context id -> the usage of its answer under way

    async def answer(self, context_id: str, text: str) -> str:
        import litellm

        history = self.histories.setdefault(context_id, [])
        history.append({"role": "user", "content": text})
        if context_id in self.mcp_urls:
            return await self.answer_with_tools(context_id, self.mcp_urls[context_id], history)
        response = await litellm.acompletion(model=self.model, messages=list(history), **self.model_args)
        self.count(context_id, response)
        reply = response.choices[0].message.content or ""
        history.append({"role": "assistant", "content": reply})
        return reply

    def count(self, context_id: str, response: Any) -> None:
        """Add a model call's usage to the answer under way (reported with the reply)."""
        usage = getattr(response, "usage", None)
        if usage is None:
            return
        total = self.usage.setdefault(context_id, {"input_tokens": 0, "output_tokens": 0})
        total["input_tokens"] += usage.prompt_tokens or 0
        total["output_tokens"] += usage.completion_tokens or 0
        cost = (getattr(response, "_hidden_params", None) or {}).get("response_cost")
        if cost:
            total["cost"] = total.get("cost", 0.0) + cost

    async def answer_with_tools(self, context_id: str, mcp_url: str, history: list[dict[str, Any]],
                                rounds: int = 30) -> str:
        """The model's turn with the MCP server's tools: its tool calls made over MCP and
        answered to it, until it says something to the user."""
        import litellm

        async with self.mcp_client(mcp_url) as client:
            listed = await client.list_tools()
            tools = [{"type": "function", "function": {"name": t.name, "description": t.description or "",
                                                       "parameters": t.input_schema}} for t in listed.tools]
            for _ in range(rounds):
                response = await litellm.acompletion(model=self.model, messages=list(history), tools=tools,
                                                     **self.model_args)
                self.count(context_id, response)
                message = response.choices[0].message
                calls = message.tool_calls or []
                if not calls:
                    history.append({"role": "assistant", "content": message.content or ""})
                    return message.content or ""
                history.append({"role": "assistant", "content": message.content, "tool_calls": [
                    {"id": c.id, "type": "function",
                     "function": {"name": c.function.name, "arguments": c.function.arguments}} for c in calls]})
                for call in calls:
                    try:
                        arguments = json.loads(call.function.arguments or "{}")
                    except ValueError:
                        arguments = {}
                    result = await client.call_tool(call.function.name, arguments)
                    text = "\n".join(b.text for b in result.content if getattr(b, "text", None) is not None)
                    history.append({"role": "tool", "tool_call_id": call.id, "content": text})
        return ""

    def mcp_client(self, mcp_url: str) -> Any:
        """The official MCP client for the server at `mcp_url` (streamable HTTP)."""
        from mcp import Client

        return Client(mcp_url)

    def reported(self, context_id: str) -> dict[str, Any] | None:
        """The reply's metadata: the usage of the answer just given, if it made a model call."""
        usage = self.usage.pop(context_id, None)
        return {"usage": usage} if usage else None

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        metadata = dict(context.message.metadata) if context.message and context.message.metadata else {}
        if metadata.get("mcp_url"):
            self.mcp_urls[context.context_id] = str(metadata["mcp_url"])
        if self.reply_as != "task":
            reply = await self.answer(context.context_id, context.get_user_input())
            message = new_text_message(reply, context_id=context.context_id)
            if metadata := self.reported(context.context_id):
                message.metadata.update(metadata)
            await event_queue.enqueue_event(message)
            return
        # The task first: a client that does not wait (non-blocking send) learns its id
        # at once, and can follow it if it loses the connection.
        await event_queue.enqueue_event(new_task(context.task_id, context.context_id,
                                                 TaskState.TASK_STATE_WORKING, history=[context.message]))
        reply = await self.answer(context.context_id, context.get_user_input())
        updater = TaskUpdater(event_queue, context.task_id, context.context_id)
        await updater.add_artifact(new_text_artifact("action", reply).parts, metadata=self.reported(context.context_id))
        await updater.complete()

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        updater = TaskUpdater(event_queue, context.task_id, context.context_id)
        await updater.cancel()


def card(url: str, version: str = "1.0", name: str = NAME, description: str = "") -> AgentCard:
    return AgentCard(
        name=name, version=VERSION,
        description=description or "A chat agent that forwards each A2A context to a litellm model.",
        supported_interfaces=[AgentInterface(url=url, protocol_binding="JSONRPC", protocol_version=version)],
        capabilities=AgentCapabilities(streaming=False),
        default_input_modes=["text/plain"], default_output_modes=["text/plain"],
        skills=[AgentSkill(id="chat", name="chat", description="Answers each message with one action.",
                           tags=["tau2"])],
    )


def card_v0_3(url: str, name: str = NAME, description: str = "") -> dict[str, Any]:
    """The agent card as an a2a-sdk 0.3.x server serves it."""
    return {
        "name": name, "version": VERSION, "url": url, "protocolVersion": "0.3.0",
        "preferredTransport": "JSONRPC",
        "description": description or "A chat agent that forwards each A2A context to a litellm model.",
        "capabilities": {"streaming": False}, "defaultInputModes": ["text/plain"],
        "defaultOutputModes": ["text/plain"],
        "skills": [{"id": "chat", "name": "chat", "description": "Answers each message with one action.",
                    "tags": ["tau2"]}],
    }


def build_app(executor: AgentExecutor, url: str, a2a_version: str = "1.0", name: str = NAME,
              description: str = "") -> Starlette:
    """The agent's ASGI app: its card at /.well-known/agent-card.json, JSON-RPC at /."""
    agent_card = card(url, a2a_version, name, description)
    handler = DefaultRequestHandler(agent_executor=executor, task_store=InMemoryTaskStore(),
                                    agent_card=agent_card)
    if a2a_version == "0.3":
        legacy = card_v0_3(url, name, description)
        routes = [Route("/.well-known/agent-card.json", lambda request: JSONResponse(legacy), methods=["GET"])]
    else:
        routes = create_agent_card_routes(agent_card)
    routes += create_jsonrpc_routes(handler, "/", enable_v0_3_compat=a2a_version == "0.3")
    return Starlette(routes=routes)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=9009)
    parser.add_argument("--model", required=True, help="litellm model string, e.g. openai/gpt-4.1")
    parser.add_argument("--api-base", help="the model's OpenAI-compatible base URL")
    parser.add_argument("--api-key-env", help="the environment variable that holds the model's key")
    parser.add_argument("--reply-as", choices=["message", "task"], default="message")
    parser.add_argument("--a2a-version", choices=["1.0", "0.3"], default="1.0")
    args = parser.parse_args()
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    model_args: dict[str, Any] = {"temperature": 0.0}
    if args.api_base:
        model_args["api_base"] = args.api_base
    if args.api_key_env:
        if not os.environ.get(args.api_key_env):
            parser.error(f"--api-key-env {args.api_key_env}: that variable is not set in this environment")
        model_args["api_key"] = os.environ[args.api_key_env]
    url = f"http://{args.host}:{args.port}/"
    app = build_app(ChatAgent(args.model, model_args, args.reply_as), url, args.a2a_version)
    import uvicorn

    uvicorn.run(app, host=args.host, port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
