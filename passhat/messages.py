"""A conversation's vocabulary, shared by every layer: its messages and tool calls, a task
as the rest of passhat may know it, a score, and tau2's conversation conventions. It
imports nothing of passhat.

Messages are what the results store keeps and what domains, models and tools exchange.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

# tau2's conversation conventions.
AGENT_GREETING = "Hi! How can I help you today?"
STOP_TOKEN = "###STOP###"
TRANSFER_TOKEN = "###TRANSFER###"
OUT_OF_SCOPE_TOKEN = "###OUT-OF-SCOPE###"

# Model failures: the model's own output ended the conversation. tau2 records these as
# agent_error with reward 0 (whichever side failed), so they count in pass^k.
INVALID_TOOL_ARGUMENTS = "InvalidToolArguments"
EMPTY_REPLY = "EmptyReply"

Requestor = Literal["assistant", "user"]


class ToolCall(BaseModel):
    id: str
    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)
    requestor: Requestor = "assistant"
    # Set when the model's arguments were not valid JSON: the call is answered with an
    # error instead of being executed (tau2 semantics: the error counts toward max errors).
    invalid_arguments: str | None = None


class Message(BaseModel):
    """One conversation message, in the shape shared by agent, user and tools."""

    role: Literal["assistant", "user", "tool"]
    content: str | None = None
    tool_calls: list[ToolCall] | None = None
    # For role == "tool": which call this answers, who asked, and whether it failed.
    tool_call_id: str | None = None
    requestor: Requestor | None = None
    error: bool = False

    def is_tool_call(self) -> bool:
        return bool(self.tool_calls)

    def has_text(self) -> bool:
        return bool(self.content and self.content.strip())

    def is_empty(self) -> bool:
        """No text and no tool calls: tau2 asks the model again, then gives up."""
        return not self.has_text() and not self.is_tool_call()


class GoldAction(BaseModel):
    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)
    requestor: Requestor = "assistant"


class TaskInfo(BaseModel):
    """What the rest of passhat may know about a task (scripted models use the gold parts)."""

    id: str
    user_scenario: str  # the hidden instruction the user simulator plays
    reason_for_call: str | None = None
    known_info: str | None = None
    unknown_info: str | None = None  # what the user does not know (scripted/customer says so when asked)
    gold_actions: list[GoldAction] = Field(default_factory=list)
    communicate_info: list[str] = Field(default_factory=list)
    # Conversation that already happened before the trial starts (rare; tau2 mock has some).
    initial_messages: list[Message] = Field(default_factory=list)


class Score(BaseModel):
    reward: float
    breakdown: dict[str, float] = Field(default_factory=dict)
    info: dict[str, Any] = Field(default_factory=dict)
