"""Agents written to tau2's agent contract, registered with tau2's registry on import,
for the tests of `--agent` (a plugin module a user would write).

- notes_agent: tau2's LLM agent with a state of its own (a turn count and the tools it
  called), which it writes into its system prompt on every call: a turn that started
  from the wrong state sends a different request.
- raising_agent: raises on its second turn (the agent's own bug).
- boxed_agent: keeps its state in an object that is not a pydantic model.
- appending_agent: appends the message it is handed to its state's messages as it is, as
  docs/agents.md's example once did: the tool answers to parallel tool calls come as one
  MultiToolMessage, which its state (tau2's LLMAgentState) cannot hold, so from the turn
  after a model's parallel calls its state cannot be recorded.
- mute_agent: replies with an empty message on its second turn, which tau2 rejects.
"""

from __future__ import annotations

from pydantic import BaseModel, Field
from tau2.agent.llm_agent import LLMAgent, LLMAgentState
from tau2.data_model.message import AssistantMessage, MultiToolMessage, SystemMessage
from tau2.registry import registry
from tau2.utils.llm_utils import generate

GIVE_UP_TURN = 2


class NotesState(LLMAgentState):
    turns: int = 0
    tools_called: list[str] = Field(default_factory=list)


class NotesAgent(LLMAgent):
    def get_init_state(self, message_history=None) -> NotesState:  # noqa: ANN001
        base = super().get_init_state(message_history)
        return NotesState(system_messages=base.system_messages, messages=base.messages)

    def generate_next_message(self, message, state: NotesState):  # noqa: ANN001, ANN201
        if isinstance(message, MultiToolMessage):
            state.messages.extend(message.tool_messages)
        else:
            state.messages.append(message)
        state.turns += 1
        notes = (f"{self.system_prompt}\n<notes>turn {state.turns}; tools called so far: "
                 f"{', '.join(state.tools_called) or 'none'}</notes>")
        reply = generate(model=self.llm, tools=self.tools,
                         messages=[SystemMessage(role="system", content=notes), *state.messages],
                         **self.llm_args)
        state.tools_called += [call.name for call in reply.tool_calls or []]
        state.messages.append(reply)
        return reply, state


class RaisingAgent(NotesAgent):
    def generate_next_message(self, message, state: NotesState):  # noqa: ANN001, ANN201
        if state.turns + 1 >= GIVE_UP_TURN:
            raise RuntimeError(f"gave up on turn {state.turns + 1}")
        return super().generate_next_message(message, state)


class AppendingAgent(LLMAgent):
    def get_init_state(self, message_history=None) -> NotesState:  # noqa: ANN001
        base = super().get_init_state(message_history)
        return NotesState(system_messages=base.system_messages, messages=base.messages)

    def generate_next_message(self, message, state: NotesState):  # noqa: ANN001, ANN201
        state.messages.append(message)
        state.turns += 1
        reply = generate(model=self.llm, tools=self.tools,
                         messages=state.system_messages + state.messages, **self.llm_args)
        state.messages.append(reply)
        return reply, state


class MuteAgent(NotesAgent):
    def generate_next_message(self, message, state: NotesState):  # noqa: ANN001, ANN201
        if state.turns + 1 >= GIVE_UP_TURN:
            return AssistantMessage(role="assistant", content=None), state
        return super().generate_next_message(message, state)


class Box:
    """What tau2's LLM agent needs of a state, in a plain object."""

    def __init__(self, system_messages: list, messages: list) -> None:  # noqa: ANN001
        self.system_messages, self.messages = system_messages, messages


class BoxedAgent(LLMAgent):
    def get_init_state(self, message_history=None):  # noqa: ANN001, ANN201
        state = super().get_init_state(message_history)
        return Box(state.system_messages, state.messages)


def _factory(cls: type):  # noqa: ANN202
    """tau2 1.0.x registers an agent as a factory, called with the tools, the policy
    and the run's settings."""
    def make(tools, domain_policy, **settings):  # noqa: ANN001, ANN003, ANN202
        return cls(tools=tools, domain_policy=domain_policy, llm=settings.get("llm"),
                   llm_args=settings.get("llm_args"))

    return make


for _name, _cls in (("notes_agent", NotesAgent), ("raising_agent", RaisingAgent), ("boxed_agent", BoxedAgent),
                    ("appending_agent", AppendingAgent), ("mute_agent", MuteAgent)):
    if _name in registry.get_agents():
        continue
    if hasattr(registry, "register_agent_factory"):  # tau2 1.0.x
        registry.register_agent_factory(_factory(_cls), _name)
    else:  # tau2 26.3
        registry.register_agent(_cls, _name)
