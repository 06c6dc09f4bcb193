"""The scripted oracle as the model behind an A2A agent in text mode: given the
evaluator's first message (tau2's agentify prompt, or the AgentBeats one: the policy,
the tools as JSON, the `<json>` action format and the first observation) and the
conversation since, as a plain chat without tools, it answers with the next action as
`<json>{"name": ..., "arguments": ...}</json>`, the oracle's next turn
(scripted_provider.agent_turn) in that format.

An agent in MCP mode (`--agent-tools mcp`) forwards the same first message (its tools
served over MCP instead of listed) with the tools as its model's own: it is answered
with the oracle's turn as it is, tool calls and all (is_mcp_chat).

So an A2A agent that only forwards its context to a model (examples/a2a_agent) runs
offline against passhat.testing.scripted_http, and scores as the oracle does.

The oracle counts its progress by the ids of its tool calls ("gold-N"); a plain chat has
none, so its earlier `<json>` tool actions are matched to the task's gold actions in
order, by name.
"""

from __future__ import annotations

import json
import re
from typing import Any

from passhat.messages import TaskInfo

# The line of passhat's first message in MCP mode (domains.a2a_protocol.MCP_TOOLS_LINE's
# start: infra does not import domains).
MCP_MARKER = "Your tools are served over MCP"
# The action-format lines of the two evaluators' first messages.
MARKERS = ("Please wrap the JSON part with <json>...</json> tags.", "Wrap the JSON with <json>...</json> tags.")
_OBSERVATION = "User message: "
_ACTION = re.compile(r"<json>(.*?)</json>", re.DOTALL)
_TAG = re.compile(r"\[gold-(\d+)\]")


def is_agentify_chat(messages: list[dict], text_of: Any) -> bool:
    """Whether a chat opens with an evaluator's first message (its first user message
    states the action format and ends with the first observation)."""
    first = next((text_of(m.get("content")) for m in messages if m.get("role") == "user"), "")
    return _OBSERVATION in first and any(marker in first for marker in MARKERS)


def is_mcp_chat(messages: list[dict], text_of: Any) -> bool:
    """Whether a chat opens with passhat's first message in MCP mode."""
    first = next((text_of(m.get("content")) for m in messages if m.get("role") == "user"), "")
    return _OBSERVATION in first and MCP_MARKER in first


def opening_of(first_message: str) -> str:
    """The user's first words in an evaluator's first message: its observation (a JSON
    string, "user: TEXT") without the role."""
    shown = first_message.rpartition(_OBSERVATION)[2].strip()
    try:
        shown = json.loads(shown)
    except ValueError:
        pass
    return str(shown).removeprefix("user: ")


def oracle_chat(task: TaskInfo, messages: list[dict], text_of: Any) -> list[dict]:
    """The chat as the oracle reads it: each earlier `<json>` tool action as a tool call
    whose id names the gold action it plays, each `respond` as its text."""
    gold = task.gold_actions
    done = -1
    out: list[dict] = []
    for m in messages:
        text = text_of(m.get("content"))
        if m.get("role") != "assistant":
            out.append({"role": "user", "content": text})
            continue
        action = _action(text)
        if action is None or action.get("name") == "respond":
            content = str(((action or {}).get("arguments") or {}).get("content") or text)
            done = max([done, *(int(n) for n in _TAG.findall(content))])
            out.append({"role": "assistant", "content": content})
            continue
        j = next((j for j in range(done + 1, len(gold))
                  if gold[j].requestor == "assistant" and gold[j].name == action.get("name")), None)
        call_id = f"gold-{j}" if j is not None else f"extra-{len(out)}"
        done = j if j is not None else done
        out.append({"role": "assistant", "content": None, "tool_calls": [{
            "id": call_id, "type": "function",
            "function": {"name": action.get("name"), "arguments": json.dumps(action.get("arguments") or {})}}]})
    return out


def as_action_text(message: dict) -> dict:
    """The oracle's turn (a tool call or text) as one `<json>` action in a chat reply."""
    calls = message.get("tool_calls") or []
    if calls:
        fn = calls[0]["function"]
        action = {"name": fn["name"], "arguments": json.loads(fn["arguments"] or "{}")}
    elif message.get("content"):
        action = {"name": "respond", "arguments": {"content": message["content"]}}
    else:  # a noisy agent's failing trial answers with nothing
        return {"role": "assistant", "content": ""}
    return {"role": "assistant", "content": f"<json>\n{json.dumps(action)}\n</json>"}


def _action(text: str) -> dict | None:
    for found in reversed(_ACTION.findall(text)):
        try:
            value = json.loads(found)
        except ValueError:
            continue
        if isinstance(value, dict):
            return value
    return None
