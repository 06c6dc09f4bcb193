"""The scripted oracle over HTTP answering the notes agent (a plugin of the tests,
tests/plugin_modules/passhat_test_agents.py), and what its requests say: the notes
agent's system prompt is tau2's plus a `<notes>` block holding its turn count, so each
agent request names the turn it belongs to."""

from __future__ import annotations

import asyncio
import json
import re

from passhat.testing.scripted_http import ScriptedResponder, request_key

_NOTES = re.compile(r"\n<notes>.*</notes>", flags=re.S)


def is_notes_request(body: dict) -> bool:
    """An agent request of the notes agent (the user simulator's prompt has no notes)."""
    return "<notes>" in json.dumps(body.get("messages", [])[:1])


def turn_of(body: dict) -> int:
    """The agent's turn count (its state) that a notes-agent request was sent from."""
    system = body["messages"][0]["content"]
    return int(system.split("<notes>turn ", 1)[1].split(";", 1)[0])


class NotesOracle(ScriptedResponder):
    """The scripted oracle, which knows tau2's prompt, answering the notes agent: the
    notes are left out of what it reads. With hold_agent_only, freeze() holds the notes
    agent's requests only (the user's are answered), so a frozen run comes to rest with
    every open trial waiting on an agent turn's model call."""

    def __init__(self, *args, hold_agent_only: bool = False, **kwargs):  # noqa: ANN002, ANN003
        super().__init__(*args, **kwargs)
        self.hold_agent_only = hold_agent_only

    async def __call__(self, body: dict) -> dict:
        if self.latency > 0:
            await asyncio.sleep(self.latency)
        if is_notes_request(body) or not self.hold_agent_only:
            await self._pass_gate(request_key(body))
        return self.answer(body)

    def answer(self, body: dict) -> dict:
        first = body["messages"][0]
        content = _NOTES.sub("", first.get("content") or "")
        return super().answer({**body, "messages": [{**first, "content": content}, *body["messages"][1:]]})
