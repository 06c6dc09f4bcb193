"""Which agent a run measures, from its options: tau2's LLM agent with a prompt of the
user's (--agent-prompt), an agent of tau2's registry (--agent NAME), or a deployed agent
behind A2A (--agent a2a:URL, its card read before anything runs, --agent-protocol,
--agent-tools; repeated for a sweep of such agents); each checked so that a mistake is one line before anything runs."""

from __future__ import annotations

import asyncio
import concurrent.futures
from dataclasses import dataclass
from typing import Any

from passhat.cli.run_options import RunOptions, UserInputError, given_agents
from passhat.contracts import DEFAULT_AGENT, POLICY_PLACEHOLDER


def read_agent_prompt(path: str) -> str:
    """The text of an agent prompt template, which must say where the policy goes."""
    from pathlib import Path

    try:
        text = Path(path).expanduser().read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        reason = err.strerror if isinstance(err, OSError) and err.strerror else str(err)
        raise UserInputError(f"agent prompt {path}: cannot read it ({reason})")
    if POLICY_PLACEHOLDER not in text:
        raise UserInputError(
            f"agent prompt {path} has no {POLICY_PLACEHOLDER} placeholder: put it where the "
            "domain's policy goes (the prompt replaces tau2's, which holds the policy)"
        )
    return text


def registered_agent(options: RunOptions) -> tuple[str | None, str | None]:
    """The run's agent (None: tau2's LLM agent, passhat's own path) and prompt text."""
    prompt = read_agent_prompt(options.agent_prompt) if options.agent_prompt is not None else None
    name = options.agent
    if name is None or name == DEFAULT_AGENT:
        return None, prompt
    if prompt is not None:
        raise UserInputError(
            f"--agent-prompt replaces the prompt of tau2's LLM agent ({DEFAULT_AGENT}); "
            f"agent {name!r} builds its own prompt"
        )
    from passhat.domains.tau2_agents import AgentSetupError, check_agent

    try:
        check_agent(name)
    except AgentSetupError as err:
        raise UserInputError(str(err))
    return name, None


@dataclass
class A2AAgents:
    """The agents behind A2A a run measures (--agent a2a:URL, once or more), each with the
    convention its messages follow, in the order given."""

    protocols: dict[str, str]

    def names(self) -> list[str]:
        return list(self.protocols)

    def sweep(self) -> dict[str, str]:
        """RunConfig.a2a_agents: empty for one agent, whose run is recorded as before."""
        return dict(self.protocols) if len(self.protocols) > 1 else {}

    def agent_models(self) -> list[str]:
        """One agent is the agent model "a2a" (its agent is RunConfig.agent); in a sweep
        each agent is an agent model of its own, its name."""
        from passhat.domains.a2a_protocol import A2A_AGENT_MODEL

        return self.names() if self.sweep() else [A2A_AGENT_MODEL]

    def agent(self) -> str | None:
        """RunConfig.agent: the one agent, or None in a sweep (each unit has its own)."""
        return None if self.sweep() else self.names()[0]

    def protocol(self) -> str | None:
        """RunConfig.agent_protocol: the one agent's, or None in a sweep."""
        return None if self.sweep() else self.protocols[self.names()[0]]


def a2a_agents_of(options: RunOptions) -> A2AAgents | None:
    """For --agent a2a:URL (repeated for a sweep), the convention each agent's messages
    follow (--agent-protocol for all, or detected from each card), once every card is
    read and noted as its agent's identity; None for every other agent. A URL that does
    not answer with a usable card is refused here, naming it, before anything runs."""
    from passhat.domains import a2a_protocol

    names = given_agents(options)
    behind = [n for n in names if a2a_protocol.is_a2a(n)]
    if len(names) > 1 and len(behind) < len(names):
        other = next(n for n in names if not a2a_protocol.is_a2a(n))
        raise UserInputError(f"--agent is repeated only for a sweep of agents behind A2A (a2a:URL each); "
                             f"{other} is not one: measure it in a run of its own")
    if not behind:
        if options.agent_protocol is not None:
            raise UserInputError("--agent-protocol is for an agent behind A2A (--agent a2a:URL)")
        return None
    if options.agent_prompt is not None:
        raise UserInputError(f"--agent-prompt replaces tau2's LLM agent's prompt; --agent {behind[0]} is deployed "
                             "with its own (passhat sends it the policy in its first message)")
    chosen = options.agent_protocol
    if chosen is not None and chosen not in a2a_protocol.PROTOCOLS:
        raise UserInputError(f"--agent-protocol {chosen!r}: use one of {', '.join(a2a_protocol.PROTOCOLS)}")
    protocols = {}
    for name in behind:
        card = read_a2a_card(name)
        protocols[name] = chosen or a2a_protocol.detect_protocol(f"{card.name} {card.description}")
    return A2AAgents(protocols)


def agent_tools_of(options: RunOptions) -> str | None:
    """--agent-tools: None for text mode (the default), "mcp" for tools over MCP."""
    from passhat.domains import a2a_protocol

    chosen = options.agent_tools
    if chosen is None or chosen == "text":
        return None
    if chosen not in a2a_protocol.TOOL_MODES:
        raise UserInputError(f"--agent-tools {chosen!r}: use one of {', '.join(a2a_protocol.TOOL_MODES)}")
    if not any(a2a_protocol.is_a2a(a) for a in given_agents(options)):
        raise UserInputError("--agent-tools is for an agent behind A2A (--agent a2a:URL)")
    return chosen


def read_a2a_card(name: str) -> Any:
    """The card of the agent `a2a:URL`, read now and noted as the agent's identity
    (UserInputError when the URL does not answer with a usable card)."""
    from passhat.domains import a2a_protocol
    from passhat.infra import a2a_client

    from passhat.cli.run_config import check_api_base  # (it imports this module)

    url = a2a_protocol.agent_url(name)
    try:
        check_api_base(url, f"--agent {name}")
    except UserInputError:
        raise UserInputError(f"--agent {name}: after a2a: comes the agent's http(s) URL, "
                             "e.g. a2a:http://localhost:9009") from None
    try:
        with concurrent.futures.ThreadPoolExecutor(1) as pool:  # its own loop: callers may run one
            card = pool.submit(asyncio.run, a2a_client.read_card(url)).result()
    except a2a_client.A2ASetupError as err:
        raise UserInputError(f"--agent {name}: {err}") from None
    a2a_protocol.note_card(name, {"card name": card.name, "card version": card.version, "card url": card.url})
    return card


def check_agent_runs(agent: str, per_domain: dict[str, list[str]], model: str, args: dict[str, Any]) -> None:
    """Build the agent on each domain's first task and record its first state, as its
    first turn will: a mistake there is the user's to fix before anything runs."""
    from passhat.domains.registry import get_domain
    from passhat.domains.tau2_agents import AgentSetupError, check_runnable

    for name, chosen in per_domain.items():
        if chosen:
            try:
                check_runnable(agent, get_domain(name), chosen[0], model, args)
            except AgentSetupError as err:
                raise UserInputError(str(err))
