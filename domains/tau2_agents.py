"""Agents from tau2's agent registry (`--agent NAME`), one turn at a time.

tau2's orchestrator keeps one agent object for a whole conversation and hands it each
user or tool message with the agent's state. passhat checkpoints every turn, so a turn
may run in another process than the one before: here the agent is built afresh for the
turn, as tau2's run builds it, and its state is restored from what the previous turn
recorded (tau2's agent states are pydantic models). How a plugin's module got imported
does not matter here: the agent is looked up in tau2's registry by name.

tau2 is imported inside functions only (importing it takes seconds).
"""

from __future__ import annotations

import importlib
import inspect
import json
import warnings
from typing import Any

from passhat.messages import AGENT_GREETING, Message, ToolCall


class AgentSetupError(Exception):
    """The agent cannot be run as asked (unknown name, a constructor passhat cannot call,
    a first state it cannot record); the message is one line saying what to change."""


class AgentOutputError(Exception):
    """What the agent's code returned cannot be used: a reply tau2 rejects, or a state
    passhat cannot record. In a turn it is the agent's failure, as an exception its code
    raises is. `error_class`: the class of the error met; `method`: the agent's method
    that returned the value (where the failure is shown to come from)."""

    def __init__(self, message: str, error_class: str, method: str) -> None:
        super().__init__(message)
        self.error_class = error_class
        self.method = method


def _registry() -> Any:
    from passhat.domains.tau2_data import quiet_tau2

    quiet_tau2()
    from tau2.registry import registry

    return registry


def _builds_by_factory(registry: Any) -> bool:
    """tau2 1.0.x registers agents as factory functions (register_agent_factory), 26.3 as
    classes (register_agent)."""
    return hasattr(registry, "get_agent_factory")


def _is_solo(registry: Any, name: str) -> bool:
    if _builds_by_factory(registry):
        return bool(registry.get_agent_metadata(name, "solo_mode", False))
    from tau2.agent.llm_agent import LLMSoloAgent

    return issubclass(registry.get_agent_constructor(name), LLMSoloAgent)


def runnable_agents() -> list[str]:
    """The agents of tau2's registry passhat can run: all but solo ones (tau2 runs those
    without a user, in its solo mode)."""
    registry = _registry()
    return [n for n in registry.get_agents() if not _is_solo(registry, n)]


def check_agent(name: str) -> None:
    """Refuse an agent tau2's registry does not hold, or one passhat cannot run
    (AgentSetupError names the known ones)."""
    registry = _registry()
    if name not in registry.get_agents():
        how = ("registry.register_agent_factory(make_my_agent, NAME)" if _builds_by_factory(registry)
               else "registry.register_agent(MyAgent, NAME)")
        raise AgentSetupError(
            f"unknown --agent {name!r}; tau2's agent registry has: {', '.join(runnable_agents())} "
            f"(an agent of your own is registered by the module that defines it, with {how}; "
            "name that module with --plugin MODULE)"
        )
    if _is_solo(registry, name):
        raise AgentSetupError(
            f"--agent {name!r} runs in tau2's solo mode (no user), which passhat does not run; "
            f"choose one of: {', '.join(runnable_agents())}"
        )


def registered_code(name: str) -> Any:
    """What tau2's registry holds for an agent: its class (26.3) or its factory (1.0.x)."""
    registry = _registry()
    if _builds_by_factory(registry):
        return registry.get_agent_factory(name)
    return registry.get_agent_constructor(name)


def build_agent(name: str, domain: Any, task_id: str, llm: str, llm_args: dict[str, Any]) -> Any:
    """The agent as tau2's run builds it: 1.0.x calls its factory with the tools, the
    policy, the model, its args and the task; 26.3 calls its class with the arguments
    its constructor takes (the task for a ground-truth agent)."""
    check_agent(name)
    registry = _registry()
    tools, policy = domain.tau2_agent_parts()
    if _builds_by_factory(registry):
        return registry.get_agent_factory(name)(
            tools=tools, domain_policy=policy, llm=llm, llm_args=dict(llm_args),
            task=domain.tau2_task(task_id), audio_native_config=None, audio_taps_dir=None,
        )
    from tau2.agent.llm_agent import LLMGTAgent

    cls = registry.get_agent_constructor(name)
    kwargs: dict[str, Any] = {"tools": tools, "domain_policy": policy}
    params = inspect.signature(cls).parameters
    takes_any = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
    if takes_any or {"llm", "llm_args"} <= set(params):
        kwargs.update(llm=llm, llm_args=dict(llm_args))
    if issubclass(cls, LLMGTAgent):
        kwargs["task"] = domain.tau2_task(task_id)
    return cls(**kwargs)


class Tau2Agent:
    """One turn of a registered agent on a tau2 domain: its construction as tau2's run
    does it, its state in and out, and the messages it is handed and returns."""

    def __init__(self, name: str, domain: Any, task_id: str, llm: str, llm_args: dict[str, Any],
                 seed: int | None):
        self.name = name
        self.agent = build_agent(name, domain, task_id, llm, llm_args)
        # tau2's orchestrator seeds the agent once per conversation, before its first
        # turn; an agent built for every turn is seeded for every turn the same way.
        if seed is not None:
            self.agent.set_seed(seed)

    def modules(self) -> list[Any]:
        """The modules whose code runs in the agent's turn (its class and bases)."""
        import sys

        return [sys.modules[c.__module__] for c in type(self.agent).__mro__ if c.__module__ in sys.modules]

    # -- state ---------------------------------------------------------------------------

    def initial_state(self, history: list[Message]) -> Any:
        """The state tau2's orchestrator starts the agent with: the conversation before
        the message of the agent's first turn (the greeting, or the task's initial
        conversation)."""
        try:  # tau2 1.0.x moved it
            from tau2.agent.base_agent import is_valid_agent_history_message
        except ImportError:  # tau2 26.3
            from tau2.agent.base import is_valid_agent_history_message

        tau2_history = [m for m in to_tau2_messages(history) if is_valid_agent_history_message(m)]
        return self.agent.get_init_state(message_history=tau2_history)

    def dump_state(self, state: Any, stop: bool = False, method: str = "generate_next_message") -> str:
        """The state as JSON text, with the class that reads it back and whether the
        agent's turn ended the conversation. A state that is not a pydantic model that
        survives the round trip is refused (AgentOutputError; `method` returned it): a
        turn could not be continued from it in another process, or after a crash."""
        from pydantic import BaseModel

        cls = type(state)
        if not isinstance(state, BaseModel):
            raise AgentOutputError(
                f"agent {self.name!r}: its state is a {cls.__module__}.{cls.__qualname__}, not a "
                "pydantic model; passhat records the state after every turn, so get_init_state "
                "and generate_next_message must return a pydantic BaseModel", "TypeError", method)
        try:
            with warnings.catch_warnings():  # pydantic warns of what the error below says
                warnings.simplefilter("ignore")
                data = state.model_dump(mode="json")
            text = json.dumps({"class": f"{cls.__module__}:{cls.__qualname__}", "state": data, "stop": stop})
            cls.model_validate(data)
        except Exception as err:  # noqa: BLE001 - whatever the model's serialisers raise
            raise AgentOutputError(
                f"agent {self.name!r}: its state ({cls.__qualname__}) cannot be recorded: "
                f"{_state_problem(state, err)}", type(err).__name__, method,
            ) from None
        return text

    @staticmethod
    def load_state_json(recorded: dict[str, Any]) -> Any:
        """A state recorded by dump_state (parsed), as its class reads it back."""
        module, _, qualname = recorded["class"].partition(":")
        try:
            cls: Any = importlib.import_module(module)
            for part in qualname.split("."):
                cls = getattr(cls, part)
            return cls.model_validate(recorded["state"])
        except Exception as err:  # noqa: BLE001 - the state's class is the plugin's
            raise AgentSetupError(
                f"the agent state recorded as {recorded['class']} cannot be read back in this "
                f"worker: {type(err).__name__}: {' '.join(str(err).split())[:300]}"
            ) from None

    # -- a turn --------------------------------------------------------------------------

    def turn(self, message: Any, state: Any) -> tuple[Any, Any, bool]:
        """(the agent's message, its new state, whether it stops), as tau2's orchestrator
        takes a turn; what the agent raises propagates."""
        from tau2.data_model.message import AssistantMessage

        reply, state = self.agent.generate_next_message(message, state)
        if not isinstance(reply, AssistantMessage):
            raise AgentOutputError(
                f"agent {self.name!r} replied with a {type(reply).__qualname__}, not tau2's "
                "AssistantMessage", "TypeError", "generate_next_message")
        try:
            reply.validate()  # tau2: an empty message ends the conversation (agent_error)
        except Exception as err:  # noqa: BLE001 - tau2's refusal of what the agent returned
            raise AgentOutputError(
                f"agent {self.name!r} replied with a message tau2 rejects: {' '.join(str(err).split())[:300]}",
                type(err).__name__, "generate_next_message") from None
        return reply, state, bool(self.agent.is_stop(reply))


def _state_problem(state: Any, err: Exception) -> str:
    """Why a state does not survive its round trip, in one line. A value its fields do
    not take (pydantic's ValidationError when it is read back) is named by where it is
    and what it is: "messages[3] is a MultiToolMessage, which the field does not take"."""
    from pydantic import ValidationError

    words = f"{type(err).__name__}: {' '.join(str(err).split())[:300]}"
    if not isinstance(err, ValidationError) or not err.errors():
        return words
    value, path = state, ""
    for part in err.errors()[0]["loc"]:
        try:
            value = value[part] if isinstance(part, int) else getattr(value, str(part))
        except (AttributeError, IndexError, KeyError, TypeError):
            break
        path += f"[{part}]" if isinstance(part, int) else f".{part}"
    if not path:
        return words
    return (f"{path.lstrip('.')} is a {type(value).__qualname__}, which the field does not take "
            f"({type(err).__name__}, {err.error_count()} error(s))")


def split_turn_input(steps: list[list[Message]]) -> tuple[list[Message], Any]:
    """(the history before the agent's input, the input as tau2 hands it) for an agent
    turn, from the conversation's recorded steps. The input is the last step's message:
    the user's text, or the answers to the agent's tool calls (several as tau2's
    MultiToolMessage). When the last step is the opening (a task's initial conversation
    that ends with a message to the agent), the input is that conversation's last message."""
    from tau2.data_model.message import MultiToolMessage

    *before, last = steps
    earlier = [m for step in before for m in step]
    if not before:  # the opening
        return earlier + last[:-1], to_tau2_messages(last[-1:])[0]
    incoming = [m for m in last if m.role != "tool" or m.requestor == "assistant"]
    tau2 = to_tau2_messages(incoming)
    if len(tau2) > 1:
        return earlier, MultiToolMessage(role="tool", tool_messages=tau2)
    return earlier, tau2[0]


def to_tau2_messages(messages: list[Message]) -> list[Any]:
    from tau2.data_model.message import AssistantMessage, ToolMessage, UserMessage

    from passhat.domains.tau2_messages import to_tau2_call

    out: list[Any] = []
    for m in messages:
        if m.role == "tool":
            out.append(ToolMessage(id=m.tool_call_id or "", role="tool", content=m.content,
                                   requestor=m.requestor or "assistant", error=m.error))
            continue
        cls = AssistantMessage if m.role == "assistant" else UserMessage
        calls = [to_tau2_call(c) for c in m.tool_calls or [] if c.invalid_arguments is None]
        out.append(cls(role=m.role, content=m.content, tool_calls=calls or None))
    return out


def from_tau2_reply(reply: Any) -> Message:
    """The agent's tau2 AssistantMessage as a recorded message."""
    calls = [ToolCall(id=c.id, name=c.name, arguments=c.arguments, requestor="assistant")
             for c in reply.tool_calls or []]
    return Message(role="assistant", content=reply.content, tool_calls=calls or None)


def to_tau2_reply(message: Message, *, cost: float = 0.0, usage: dict | None = None) -> Any:
    """A model's reply as tau2's generate returns it. Tool arguments that are not a JSON
    object raise as they do in tau2's generate (json.loads in the agent's turn)."""
    from tau2.data_model.message import AssistantMessage
    from tau2.data_model.message import ToolCall as Tau2ToolCall

    calls = [
        Tau2ToolCall(id=c.id, name=c.name,
                     arguments=json.loads(c.invalid_arguments) if c.invalid_arguments is not None
                     else c.arguments)
        for c in message.tool_calls or []
    ]
    return AssistantMessage(role="assistant", content=message.content, tool_calls=calls or None,
                            cost=cost, usage=usage)


def check_runnable(name: str, domain: Any, task_id: str, llm: str, llm_args: dict[str, Any]) -> None:
    """Build the agent and its first state on one task, and record that state, as the
    first turn will: a constructor passhat cannot call or a state it cannot record is
    refused before the run starts (AgentSetupError)."""
    if not callable(getattr(domain, "tau2_agent_parts", None)):
        raise AgentSetupError(f"--agent {name!r} needs a tau2 domain; {domain.name} is not one")
    try:
        agent = Tau2Agent(name, domain, task_id, llm, llm_args, seed=None)
        state = agent.initial_state([Message(role="assistant", content=AGENT_GREETING)])
    except AgentSetupError:
        raise
    except Exception as err:  # noqa: BLE001 - the agent's own code
        raise AgentSetupError(
            f"agent {name!r} could not be built as tau2 builds it: {type(err).__name__}: "
            f"{' '.join(str(err).split())[:300]}"
        ) from None
    try:
        agent.dump_state(state, method="get_init_state")
    except AgentOutputError as err:  # before the run: the user's to fix, not a failure
        raise AgentSetupError(str(err)) from None
