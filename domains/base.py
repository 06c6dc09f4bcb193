"""The domain interface: what passhat needs from a benchmark domain.

A domain owns tools (for the agent and, optionally, the user), a database, a policy,
tasks, and the scoring of a finished conversation. Everything crosses this boundary as
plain pydantic models, so a user can implement a domain for their own tools without
depending on tau2.
"""

from __future__ import annotations

from typing import Any, Literal, Protocol, runtime_checkable

from pydantic import BaseModel, Field

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
    gold_actions: list[GoldAction] = Field(default_factory=list)
    communicate_info: list[str] = Field(default_factory=list)
    # Conversation that already happened before the trial starts (rare; tau2 mock has some).
    initial_messages: list[Message] = Field(default_factory=list)


class Score(BaseModel):
    reward: float
    breakdown: dict[str, float] = Field(default_factory=dict)
    info: dict[str, Any] = Field(default_factory=dict)


class UnknownTaskError(LookupError):
    pass


class UnknownDomainError(LookupError):
    pass


@runtime_checkable
class Domain(Protocol):
    name: str

    def task_ids(self) -> list[str]:
        """All task ids, in the domain's canonical order."""

    def task(self, task_id: str) -> TaskInfo:
        """Raises UnknownTaskError for an id the domain does not have."""

    def agent_tools(self) -> list[dict[str, Any]]:
        """OpenAI function-tool schemas the agent may call."""

    def user_tools(self) -> list[dict[str, Any]] | None:
        """OpenAI function-tool schemas the user may call, or None when the user has none."""

    def agent_system_prompt(self) -> str: ...

    def user_system_prompt(self, task_id: str) -> str: ...

    def execute(
        self,
        task_id: str,
        history: list[Message],
        calls: list[ToolCall],
        session: str | None = None,
    ) -> list[Message]:
        """Run tool calls against the state rebuilt from the task's initial state plus every
        tool call in `history`; return one role="tool" message per call, in order.
        `session` names a conversation so an implementation may cache its state."""

    def score(
        self, task_id: str, messages: list[Message], termination_reason: str
    ) -> Score:
        """Score a finished conversation (messages include the task's initial messages)."""
