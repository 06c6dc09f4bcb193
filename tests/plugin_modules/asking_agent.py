"""asking_agent: tau2's LLM agent that works as a careful human agent does: it first asks
the customer for their details, and asks "Shall I go ahead?" before its first tool call,
which it makes only once the customer says yes. Registered with tau2's registry on
import (a plugin module, as passhat_test_agents is).

With `scripted/oracle` as the user it gets nowhere (that user stops at the first message
that does not ask it to act); with `scripted/customer` it gets the answers it asks for.
"""

from __future__ import annotations

from typing import Any, Optional

from tau2.agent.llm_agent import LLMAgent, LLMAgentState
from tau2.data_model.message import AssistantMessage, MultiToolMessage
from tau2.registry import registry
from tau2.utils.llm_utils import generate

ASK_DETAILS = "Before I start: could you give me your name and your id?"


class AskingState(LLMAgentState):
    asked_details: bool = False
    confirmed: bool = False
    held: Optional[dict[str, Any]] = None  # the first tool call, until the customer says yes


class AskingAgent(LLMAgent):
    def get_init_state(self, message_history=None) -> AskingState:  # noqa: ANN001
        base = super().get_init_state(message_history)
        return AskingState(system_messages=base.system_messages, messages=base.messages)

    def generate_next_message(self, message, state: AskingState):  # noqa: ANN001, ANN201
        if isinstance(message, MultiToolMessage):
            state.messages.extend(message.tool_messages)
        else:
            state.messages.append(message)
        if not state.asked_details:
            state.asked_details = True
            return self._say(state, ASK_DETAILS)
        if state.held is not None:
            if "yes" not in str(getattr(message, "content", "") or "").lower():
                return self._say(state, "I need your yes to go on. Shall I go ahead?")
            reply = AssistantMessage.model_validate(state.held)
            state.held, state.confirmed = None, True
        else:
            reply = generate(model=self.llm, tools=self.tools,
                             messages=state.system_messages + state.messages, **self.llm_args)
            if reply.tool_calls and not state.confirmed:
                state.held = reply.model_dump(mode="json")
                return self._say(state, f"Shall I go ahead with {reply.tool_calls[0].name}?")
        state.messages.append(reply)
        return reply, state

    @staticmethod
    def _say(state: AskingState, text: str):  # noqa: ANN205
        reply = AssistantMessage(role="assistant", content=text)
        state.messages.append(reply)
        return reply, state


if "asking_agent" not in registry.get_agents():
    if hasattr(registry, "register_agent_factory"):  # tau2 1.0.x
        registry.register_agent_factory(
            lambda tools, domain_policy, **run: AskingAgent(tools=tools, domain_policy=domain_policy,
                                                            llm=run.get("llm"), llm_args=run.get("llm_args")),
            "asking_agent")
    else:
        registry.register_agent(AskingAgent, "asking_agent")
