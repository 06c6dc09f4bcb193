"""What passhat sends an agent behind A2A in text mode, and how it reads its replies
(domains/a2a_protocol.py): both evaluators' wording, and a reply read as leniently as
the more lenient of them."""

from __future__ import annotations

import json

import pytest
from passhat.domains.a2a_protocol import (
    UnparsableReply,
    detect_protocol,
    first_message,
    observation,
    parse_action,
    reported_usage,
    since_last_action,
)

from passhat.messages import Message, ToolCall

CALL = {"name": "get_user_details", "arguments": {"user_id": "mia_li_3668"}}


@pytest.mark.parametrize("reply", [
    f"I'll look that up.\n<json>\n{json.dumps(CALL, indent=2)}\n</json>",  # agentify's
    f"```json\n{json.dumps(CALL)}\n```",  # fenced
    json.dumps(CALL),  # bare (an AgentBeats agent's artifact)
    f"Sure: {json.dumps(CALL)} (one tool at a time)",  # bare inside text
    f"<json>{json.dumps({**CALL, 'arguments': json.dumps(CALL['arguments'])})}</json>",  # arguments as JSON text
])
def test_a_tool_action_is_read_in_every_form_agents_write(reply):
    action = parse_action(reply)
    assert (action.name, action.arguments) == (CALL["name"], CALL["arguments"])
    message = action.message("a2a-3")
    assert message.tool_calls == [ToolCall(id="a2a-3", name=CALL["name"], arguments=CALL["arguments"])]


def test_respond_is_text_for_the_user():
    message = parse_action('<json>{"name": "respond", "arguments": {"content": "Done."}}</json>').message("x")
    assert (message.role, message.content, message.tool_calls) == ("assistant", "Done.", None)


@pytest.mark.parametrize("reply, why", [
    ("", "no text"),
    ("I am not sure.", "no JSON action"),
    ('<json>{"name": "respond", "arguments": {}}</json>', "without a \"content\""),
    ('<json>{"name": "x", "arguments": [1]}</json>', "not a JSON object"),
    ('<json>{"arguments": {}}</json>', "no JSON action"),
])
def test_a_reply_without_an_action_is_refused_saying_why(reply, why):
    with pytest.raises(UnparsableReply, match=why):
        parse_action(reply)


def test_each_evaluator_is_spoken_in_its_own_words():
    agentify = first_message("agentify", "POLICY", [{"type": "function"}], "user: hi")
    agentbeats = first_message("agentbeats", "POLICY", [{"type": "function"}], "user: hi")
    assert "Please response in the JSON format. Please wrap the JSON part with <json>...</json> tags." in agentify
    assert "Please respond in JSON format. Wrap the JSON with <json>...</json> tags." in agentbeats
    for text in (agentify, agentbeats):
        assert text.startswith("POLICY\n") and text.endswith('User message: "user: hi"')
    assert detect_protocol("Tau2 purple agent for AgentBeats") == "agentbeats"
    assert detect_protocol("my agent") == "agentify"


def test_the_observation_is_what_happened_since_the_agents_last_action():
    history = [
        Message(role="assistant", content="Hi! How can I help you today?"),
        Message(role="user", content="Cancel my trip."),
        Message(role="assistant", tool_calls=[ToolCall(id="1", name="get_reservation", arguments={"id": "X"})]),
        Message(role="tool", content='{"id": "X"}', tool_call_id="1", requestor="assistant"),
    ]
    assert observation(since_last_action(history)) == 'tool: {"id": "X"}'
    assert observation(since_last_action(history[:2])) == "user: Cancel my trip."
    user_call = Message(role="user", tool_calls=[ToolCall(id="2", name="toggle", arguments={"on": True},
                                                          requestor="user")])
    assert observation([user_call]) == "user: toggle(on=true)"


@pytest.mark.parametrize("metadata, expected", [
    # Google ADK's A2A server: genai's usage metadata, camelCase, as a dict or as JSON text
    ([{"adk_usage_metadata": {"promptTokenCount": 120, "candidatesTokenCount": 7, "totalTokenCount": 127}}],
     (120, 7, 0.0)),
    ([{"adk_usage_metadata": json.dumps({"prompt_token_count": 5, "candidates_token_count": 2})}], (5, 2, 0.0)),
    # OpenAI's / LangChain's names under `usage`, with a cost; the first carrier that has one wins
    ([{"other": 1}, {"usage": {"prompt_tokens": 9, "completion_tokens": 3, "cost": 0.25}},
      {"usage": {"input_tokens": 1}}], (9, 3, 0.25)),
    ([{"usage": {"input_tokens": 4.0, "output_tokens": "lots", "total_cost": -1}}], (4, 0, 0.0)),
])
def test_the_usage_an_agent_reports_is_read_from_its_replys_metadata(metadata, expected):
    usage = reported_usage(metadata)
    assert (usage.input_tokens, usage.output_tokens, usage.cost) == expected


def test_a_reply_without_usage_reports_none():
    assert reported_usage([{"usage": "n/a"}, {"note": "x"}]) is None and reported_usage([]) is None
