"""What passhat says to an agent behind A2A in text mode, and how it reads the replies.

Two evaluators are in use, and an agent is built for one of them (issue 44 measured an
agent of each failing under the other), so passhat speaks both:

- `agentify`: tau2-bench's own green agent (src/experiments/agentify_tau_bench). Its
  first message is the policy, the tools as OpenAI function schemas in JSON, the action
  format ("Please response in the JSON format. Please wrap the JSON part with
  <json>...</json> tags.", its wording, kept as it is: agents match it) and the first
  observation, after "User message: " as a JSON string. It reads the action from
  `<json>` tags in a Message.
- `agentbeats`: the AgentBeats tutorial's tau2 green agent, which writes "Please respond
  in JSON format. Wrap the JSON with <json>...</json> tags." and also reads fenced or
  bare JSON (from a Message or a Task's artifacts).

Each later message is the observation since the agent's last action, as tau2's gym
formats it ("role: content" a line: the user's text, or the tool's answer). An action is
{"name": TOOL or "respond", "arguments": {...}}; `respond`'s arguments hold the text for
the user as "content". passhat reads a reply as leniently as the more lenient evaluator:
`<json>` tags, then a fenced block, then the reply itself as JSON (or its outermost
{...}).

In MCP mode (`--agent-tools mcp`) the tools are not in the text: the first message
carries the policy, the URL of the trial's MCP server (also in the message's metadata,
MCP_URL_KEY) and the user's first words; each later message is the user's words, and
each reply is the agent's words to the user (its tool calls go over MCP).

Pure text: no A2A library here (passhat.infra.a2a_client speaks the protocol).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from passhat.messages import Message, ToolCall

A2A_PREFIX = "a2a:"
# The agent model of a run whose agent is behind A2A: the agent calls its own models, so
# the run has no model string of its own for it; its identity is its card (agent_identity).
A2A_AGENT_MODEL = "a2a"
PROTOCOLS = ("agentify", "agentbeats")
RESPOND = "respond"
# How the agent gets the tools: in the text (one action a reply), or over MCP.
TOOL_MODES = ("text", "mcp")
# The first message's metadata key that holds the trial's MCP server URL (MCP mode).
MCP_URL_KEY = "mcp_url"
MCP_TOOLS_LINE = "Your tools are served over MCP (streamable HTTP) at this URL, for this conversation only:"
# The failure class of an agent turn whose outcome is not known (its worker died
# mid-turn) and that gave no task to follow: the trial restarts in a fresh context.
RESTART = "A2ARestart"
# How often a trial restarts so before it is given up as not evaluable (as often as
# tau2 1.0.x re-runs a simulation).
MAX_RESTARTS = 3

_FORMAT = {
    "agentify": "Please response in the JSON format. Please wrap the JSON part with <json>...</json> tags.",
    "agentbeats": "Please respond in JSON format. Wrap the JSON with <json>...</json> tags.",
}
_TAGGED = re.compile(r"<json>(.*?)</json>", re.DOTALL | re.IGNORECASE)
_FENCED = re.compile(r"```(?:json)?\s*(.*?)```", re.DOTALL | re.IGNORECASE)


class UnparsableReply(ValueError):
    """The agent's reply holds no action passhat can read (the agent's failure)."""


def is_a2a(agent: str | None) -> bool:
    return bool(agent) and agent.startswith(A2A_PREFIX)


def agent_url(agent: str) -> str:
    """The agent's base URL from an `a2a:URL` agent name."""
    return agent[len(A2A_PREFIX):].rstrip("/")


def first_message(protocol: str, policy: str, tools: list[dict[str, Any]], observation: str) -> str:
    """The first message of a conversation: policy, tools, action format, and the first
    observation."""
    example_tool = {"name": "find_user_id_by_name_zip",
                    "arguments": {"first_name": "Yusuf", "last_name": "Rossi", "zip_code": "19122"}}
    example_respond = {"name": RESPOND, "arguments": {"content": "Hello, how can I help you today?"}}
    return "\n".join([
        policy,
        "Here's a list of tools you can use (you can use at most one tool at a time):",
        json.dumps(tools, indent=2),
        _FORMAT[protocol],
        "The JSON should contain:",
        f'- "name": the tool call function name, or "{RESPOND}" if you want to respond directly.',
        ('- "arguments": the arguments for the tool call, or {"content": "your message here"} '
         "if you want to respond directly."),
        "You should only use one tool at a time!!",
        "You cannot respond to user and use a tool at the same time!!",
        "",
        "Examples of responses:",
        f"<json>\n{json.dumps(example_tool, indent=2)}\n</json>",
        "",
        f"<json>\n{json.dumps(example_respond, indent=2)}\n</json>",
        "",
        "Next, I'll provide you with the user message and tool call results.",
        f"User message: {json.dumps(observation, indent=2)}",
    ])


def mcp_first_message(policy: str, mcp_url: str, observation: str) -> str:
    """The first message of a conversation in MCP mode: policy, the trial's MCP URL, how
    to answer, and the first observation."""
    return "\n".join([
        policy,
        MCP_TOOLS_LINE,
        mcp_url,
        "Call them with your MCP client; each reply of yours is your message to the user, in plain text.",
        "",
        "Next, I'll provide you with the user messages.",
        f"User message: {json.dumps(observation, indent=2)}",
    ])


def observation(messages: list[Message]) -> str:
    """What happened since the agent's last action, as tau2's gym shows it: one line a
    message, "user: TEXT", "user: tool(args)" for the user's own tool calls, and
    "tool: ANSWER"."""
    lines = []
    for m in messages:
        if m.role == "tool":
            lines.append(f"tool: {m.content or ''}")
        elif m.tool_calls:
            calls = ", ".join(_functional(c) for c in m.tool_calls)
            lines.append(f"{m.role}: {calls}")
        else:
            lines.append(f"{m.role}: {m.content or ''}")
    return "\n".join(lines)


def _functional(call: ToolCall) -> str:
    args = ", ".join(f"{k}={json.dumps(v)}" for k, v in call.arguments.items())
    return f"{call.name}({args})"


def since_last_action(history: list[Message]) -> list[Message]:
    """The messages after the agent's last one (all of them if it has none)."""
    last = max((i for i, m in enumerate(history) if m.role == "assistant"), default=-1)
    return history[last + 1:]


@dataclass
class Action:
    name: str
    arguments: dict[str, Any]

    def message(self, call_id: str) -> Message:
        """The agent's action as a recorded message: text for the user, or one tool call
        (executed by passhat against the trial's environment)."""
        if self.name == RESPOND:
            return Message(role="assistant", content=str(self.arguments.get("content") or ""))
        return Message(role="assistant", tool_calls=[
            ToolCall(id=call_id, name=self.name, arguments=self.arguments, requestor="assistant")])


def parse_action(text: str) -> Action:
    """The action in a reply: the last `<json>` block that parses, else a fenced block,
    else the text itself (or its outermost {...}). UnparsableReply says why not."""
    candidates = [*reversed(_TAGGED.findall(text)), *reversed(_FENCED.findall(text)), text]
    start, end = text.find("{"), text.rfind("}")
    if 0 <= start < end:
        candidates.append(text[start:end + 1])
    for candidate in candidates:
        try:
            value = json.loads(candidate.strip())
        except ValueError:
            continue
        if isinstance(value, dict) and isinstance(value.get("name"), str) and value["name"]:
            arguments = value.get("arguments", {})
            if isinstance(arguments, str):  # some agents send the arguments as JSON text
                try:
                    arguments = json.loads(arguments)
                except ValueError:
                    pass
            if not isinstance(arguments, dict):
                raise UnparsableReply(f"the action's arguments are not a JSON object: {json.dumps(arguments)[:200]}")
            if value["name"] == RESPOND and not isinstance(arguments.get("content"), str):
                raise UnparsableReply('a "respond" action without a "content" text in its arguments')
            return Action(value["name"], arguments)
    if not text.strip():
        raise UnparsableReply("the reply has no text")
    raise UnparsableReply('no JSON action ({"name": ..., "arguments": {...}}) in the reply')


# ---- what the agent says its turn cost ------------------------------------------------

# Google ADK's A2A server puts an event's model usage in the A2A metadata under this key
# (genai's GenerateContentResponseUsageMetadata, camelCase or snake_case, possibly as JSON
# text); other agents use `usage` with OpenAI's or LangChain's names, and `cost` in USD.
ADK_USAGE = "adk_usage_metadata"
USAGE = "usage"


@dataclass
class Usage:
    input_tokens: int = 0
    output_tokens: int = 0
    cost: float = 0.0


def reported_usage(metadata: list[dict[str, Any]]) -> Usage | None:
    """The usage the agent reported with its reply: from the first of `metadata` (the
    reply's metadata dicts, the message's or the task's first) that holds one; None when
    none does. Values that are not numbers are ignored."""
    for meta in metadata:
        for key in (ADK_USAGE, USAGE):
            found = meta.get(key)
            if isinstance(found, str):
                try:
                    found = json.loads(found)
                except ValueError:
                    continue
            if isinstance(found, dict):
                return Usage(
                    input_tokens=_count(found, "input_tokens", "prompt_tokens", "promptTokenCount",
                                        "prompt_token_count"),
                    output_tokens=_count(found, "output_tokens", "completion_tokens", "candidatesTokenCount",
                                         "candidates_token_count"),
                    cost=_number(found.get("cost", found.get("total_cost", meta.get("cost")))))
    return None


def _count(usage: dict[str, Any], *names: str) -> int:
    return int(next((_number(usage[n]) for n in names if n in usage), 0))


def _number(value: Any) -> float:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) and value >= 0 else 0.0


# ---- the agent's identity ---------------------------------------------------------------

_cards: dict[str, dict[str, str]] = {}  # agent name -> its card's parts, once read


def note_card(agent: str, parts: dict[str, str]) -> None:
    """Keep what the agent's card says it is (name, version, URL), read by the command
    that configures the run (passhat.infra.a2a_client); agent_identity records it."""
    _cards[agent] = dict(parts)


def card_parts(agent: str) -> dict[str, str]:
    """The parts of an A2A agent's identity (agent_identity.KINDS): its card's name,
    version and URL. No secret is in them: a card is public."""
    if agent not in _cards:
        raise LookupError(f"the agent card of {agent} has not been read in this process")
    return dict(_cards[agent])


def detect_protocol(card_text: str) -> str:
    """The convention an agent is built for, from its card's name and description: an
    AgentBeats (purple) agent says so; every other is taken for tau2's agentify."""
    return "agentbeats" if "agentbeats" in card_text.lower() else "agentify"
