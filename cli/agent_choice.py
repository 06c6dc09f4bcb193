"""Which agent a run measures, from its options: tau2's LLM agent with a prompt of the
user's (--agent-prompt), an agent of tau2's registry (--agent NAME), or a deployed agent
behind A2A (--agent a2a:URL, its card read before anything runs, --agent-protocol,
--agent-tools); each checked so that a mistake is one line before anything runs."""

from __future__ import annotations

import asyncio
import concurrent.futures
from typing import Any

from passhat.cli.run_options import RunOptions, UserInputError
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


def a2a_protocol_of(options: RunOptions) -> str | None:
    """For --agent a2a:URL, the convention its messages follow (--agent-protocol, or
    detected from its card), once its card is read and noted as its identity; None for
    every other agent. A URL that does not answer with a usable card is refused here,
    before anything runs."""
    from passhat.domains import a2a_protocol

    name = options.agent
    if not a2a_protocol.is_a2a(name):
        if options.agent_protocol is not None:
            raise UserInputError("--agent-protocol is for an agent behind A2A (--agent a2a:URL)")
        return None
    if options.agent_prompt is not None:
        raise UserInputError(f"--agent-prompt replaces tau2's LLM agent's prompt; --agent {name} is deployed "
                             "with its own (passhat sends it the policy in its first message)")
    chosen = options.agent_protocol
    if chosen is not None and chosen not in a2a_protocol.PROTOCOLS:
        raise UserInputError(f"--agent-protocol {chosen!r}: use one of {', '.join(a2a_protocol.PROTOCOLS)}")
    card = read_a2a_card(name)
    return chosen or a2a_protocol.detect_protocol(f"{card.name} {card.description}")


def agent_tools_of(options: RunOptions) -> str | None:
    """--agent-tools: None for text mode (the default), "mcp" for tools over MCP."""
    from passhat.domains import a2a_protocol

    chosen = options.agent_tools
    if chosen is None or chosen == "text":
        return None
    if chosen not in a2a_protocol.TOOL_MODES:
        raise UserInputError(f"--agent-tools {chosen!r}: use one of {', '.join(a2a_protocol.TOOL_MODES)}")
    if not a2a_protocol.is_a2a(options.agent):
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
