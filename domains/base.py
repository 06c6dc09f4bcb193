"""The domain interface: what passhat needs from a benchmark domain.

A domain owns tools (for the agent and, optionally, the user), a database, a policy,
tasks, and the scoring of a finished conversation. Everything crosses this boundary as
plain pydantic models from passhat.contracts, so a user can implement a domain for their
own tools without depending on tau2.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

from passhat.messages import Message, Score, TaskInfo, ToolCall


class UnknownTaskError(LookupError):
    pass


class UnknownDomainError(LookupError):
    pass


class DomainLoadError(Exception):
    """A domain's own code failed while passhat loaded it (its environment or tasks
    did not build); the message is one line naming the domain and the error."""


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
        self,
        task_id: str,
        messages: list[Message],
        termination_reason: str,
        nl_checks: list[dict[str, Any]] | None = None,
    ) -> Score:
        """Score a finished conversation (messages include the task's initial messages).
        A domain whose grading needs an LLM judge also has `judge_request(task_id,
        messages, termination_reason)`, the judge call's messages or None; its verdicts
        come back as `nl_checks` (only then)."""
