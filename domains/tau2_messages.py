"""passhat's conversations (messages.Message) as tau2's messages and back, and tau2's
evaluation result as a Score: what passhat.domains.tau2_domain hands tau2's environments
and evaluator, and what passhat.results writes into tau2's files."""

from __future__ import annotations

from typing import Any

from passhat.messages import Message, Score, ToolCall


def initial_messages(task: Any) -> list[Message]:
    """The conversation that precedes a trial of `task` (tau2's initial message history)."""
    state = task.initial_state
    return from_tau2_messages(state.message_history or [] if state else [])


def with_initial_messages(task: Any, messages: list[Message]) -> list[Message]:
    """`messages`, starting with the task's initial messages even if the caller left
    them out: their tool calls are part of the state every trial starts from."""
    initial = initial_messages(task)
    if initial and messages[: len(initial)] != initial:
        return initial + list(messages)
    return messages


def answered_calls(messages: list[Message]) -> list[tuple[ToolCall, Message]]:
    """Each tool call that has an answer, with that answer, in conversation order.

    An answer is a tool message with the call's id among the tool messages right after
    the calling message. Calls without one (not run yet) are left out.
    """
    pairs = []
    for i, message in enumerate(messages):
        if not message.tool_calls:
            continue
        answers: dict[str | None, Message] = {}
        for following in messages[i + 1 :]:
            if following.role != "tool":
                break
            answers.setdefault(following.tool_call_id, following)
        for call in message.tool_calls:
            if call.id in answers:
                pairs.append((call, answers.pop(call.id)))
    return pairs


def tool_trace(history: list[Message]) -> tuple:
    """What identifies the tool state a history leads to."""
    return tuple(
        (answer.tool_call_id, answer.content) for _, answer in answered_calls(history)
    )


def replayable(history: list[Message]) -> list[Any]:
    """The tool calls `history` ran, as tau2 messages that set_state can replay: one
    calling message per call, followed by its answer. Calls with invalid arguments never
    ran, so they are not replayed."""
    from tau2.data_model.message import AssistantMessage, UserMessage

    replay = []
    for call, answer in answered_calls(history):
        if call.invalid_arguments is not None:
            continue
        caller = UserMessage if call.requestor == "user" else AssistantMessage
        replay.append(caller(role=call.requestor, tool_calls=[to_tau2_call(call)]))
        replay.append(_to_tau2_tool_message(call, answer))
    return replay


def to_tau2_trajectory(messages: list[Message]) -> list[Any]:
    """Our conversation as tau2's simulation messages.

    Tool calls that never ran (invalid arguments, or no answer) are left out with their
    answers: they did not touch the environment, and tau2 expects every call in a
    trajectory to be followed by its answer.
    """
    return [turn for turn, _ in to_tau2_turns(messages)]


def to_tau2_turns(messages: list[Message]) -> list[tuple[Any, Message]]:
    """to_tau2_trajectory's messages, each with the message of ours it was made from (a
    tool answer's own message), so a turn tau2 numbers can be traced to its step."""
    from tau2.data_model.message import AssistantMessage, UserMessage

    answered = {
        id(call): answer
        for call, answer in answered_calls(messages)
        if call.invalid_arguments is None
    }
    trajectory: list[tuple[Any, Message]] = []
    for message in messages:
        if message.role == "tool":
            continue  # emitted right after the call it answers
        calls = [c for c in message.tool_calls or [] if id(c) in answered]
        if not calls and not message.has_text():
            continue
        caller = UserMessage if message.role == "user" else AssistantMessage
        trajectory.append((
            caller(
                role=message.role,
                content=message.content,
                tool_calls=[to_tau2_call(c) for c in calls] or None,
            ),
            message,
        ))
        trajectory.extend((_to_tau2_tool_message(c, answered[id(c)]), answered[id(c)]) for c in calls)
    for turn, (message, _) in enumerate(trajectory):
        message.turn_idx = turn
    return trajectory


def to_tau2_call(call: ToolCall) -> Any:
    from tau2.data_model.message import ToolCall as Tau2ToolCall

    return Tau2ToolCall(
        id=call.id, name=call.name, arguments=call.arguments, requestor=call.requestor
    )


def _to_tau2_tool_message(call: ToolCall, answer: Message) -> Any:
    from tau2.data_model.message import ToolMessage

    return ToolMessage(
        id=call.id,
        role="tool",
        content=answer.content,
        requestor=call.requestor,
        error=answer.error,
    )


def from_tau2_messages(messages: list[Any]) -> list[Message]:
    """tau2 messages (a task's initial history) as ours."""
    ours = []
    for message in messages:
        if message.role == "tool" and hasattr(message, "tool_messages"):
            ours.extend(from_tau2_messages(message.tool_messages))
        elif message.role == "tool":
            ours.append(
                Message(
                    role="tool",
                    content=message.content,
                    tool_call_id=message.id,
                    requestor=message.requestor,
                    error=message.error,
                )
            )
        elif message.role in ("assistant", "user"):
            calls = [
                ToolCall(
                    id=c.id, name=c.name, arguments=c.arguments, requestor=c.requestor
                )
                for c in message.tool_calls or []
            ]
            ours.append(
                Message(
                    role=message.role, content=message.content, tool_calls=calls or None
                )
            )
        else:
            raise ValueError(f"Unsupported message in a tau2 history: {message.role}")
    return ours


def invalid_arguments_answer(call: ToolCall) -> Message:
    raw = call.invalid_arguments or ""
    if len(raw) > 500:
        raw = raw[:500] + "..."
    return Message(
        role="tool",
        content=(
            f"Error: the arguments for {call.name} are not valid JSON, so the tool was "
            f"not run. Arguments received: {raw}"
        ),
        tool_call_id=call.id,
        requestor=call.requestor,
        error=True,
    )


def to_score(result: Any) -> Score:
    dumped = result.model_dump(mode="json")
    info = {
        key: dumped[key]
        for key in (
            "reward_basis",
            "db_check",
            "action_checks",
            "communicate_checks",
            "env_assertions",
            "nl_assertions",
        )
        if key in dumped
    }
    info["note"] = (result.info or {}).get("note")
    return Score(
        reward=float(result.reward),
        breakdown={
            getattr(kind, "value", str(kind)): float(value)
            for kind, value in (result.reward_breakdown or {}).items()
        },
        info=info,
    )
