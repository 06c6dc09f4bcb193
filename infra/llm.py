"""Every model call goes through litellm, here: message conversion, the call itself,
and token and cost accounting. Its errors are classified in passhat.infra.llm_errors
(transient: retry with backoff; deterministic: do not retry)."""

from __future__ import annotations

import json
import os
import time
from typing import Any, Literal

from pydantic import BaseModel

from passhat.messages import Message, ToolCall
from passhat.infra import secrets
from passhat.infra.llm_errors import ModelCallError, classify

Perspective = Literal["assistant", "user"]


class ModelReply(BaseModel):
    message: Message
    model: str | None = None
    input_tokens: int = 0
    output_tokens: int = 0
    cost: float = 0.0
    latency_s: float = 0.0
    finish_reason: str | None = None


# What litellm (1.106) imports lazily in its first chat call with tools: openai's client
# (about half a CPU second), and the proxy and logging helpers the call path touches.
# (Its MCP bridge, 0.6-1 CPU s more, is never loaded: see _complete_once.)
FIRST_CALL_MODULES = (
    "openai.resources",
    "litellm.proxy.openai_files_endpoints.common_utils",
    "litellm.proxy.guardrails.exception_utils",
    "litellm._service_logger",
    "litellm.llms.litellm_proxy.chat.transformation",
    "litellm.llms.openai.chat.gpt_audio_transformation",
    "litellm.llms.openai_like.dynamic_config",
    "litellm.llms.vertex_ai.vertex_ai_partner_models.anthropic.transformation",
    # what litellm 1.82 (tau2 1.0.x's pin) imports in its first call instead
    "jiter",
    "openai.resources.chat.chat",
    "openai.resources.chat.completions.completions",
    "openai.resources.chat.completions.messages",
    "openai.lib._chat_completion_resources",
    "openai.lib.streaming.chat",
    "openai.types.chat.completions",
    "litellm.litellm_core_utils.get_supported_openai_params",
    "litellm.litellm_core_utils.llm_request_utils",
    "litellm.litellm_core_utils.logging_worker",
)


def quiet_litellm():  # noqa: ANN201 - the litellm module
    """litellm, told not to print. Left alone it prints banners to stdout ("Provider List:
    ..." for a model it cannot route, "Give Feedback / Get Help" on every error), where
    `-o json` promises one JSON object and nothing else. Every use of litellm goes
    through here."""
    import litellm

    litellm.suppress_debug_info = True
    return litellm


def missing_key_variables(model: str, model_args: dict[str, Any]) -> list[str]:
    """The environment variables holding the key of `model` that are unset (or empty)
    in this process: the one `api_key_env` names, or else the key variables litellm
    knows the model's provider needs. AWS credentials are not asked for: boto finds them
    in profiles and instance roles too. A provider litellm cannot name needs nothing
    here (check_model refuses it)."""
    key_env = model_args.get(secrets.API_KEY_ENV)
    if key_env is not None:
        return [] if os.environ.get(key_env) else [str(key_env)]
    try:
        needed = quiet_litellm().validate_environment(
            model, api_base=model_args.get("api_base"), api_version=model_args.get("api_version"))
    except Exception:  # noqa: BLE001 - no provider, no known variables
        return []
    if needed.get("keys_in_environment"):
        return []
    return [name for name in needed.get("missing_keys", [])
            if secrets.is_secret_env(name) and not name.startswith("AWS_") and not os.environ.get(name)]


def load_client_modules() -> None:
    """Import what litellm otherwise imports in its first model call (1-2 CPU seconds),
    so that worker processes forked afterwards share it instead of each importing it,
    with every conversation's first call waiting, while the run starts. A module another
    litellm version lacks is skipped: this only moves work earlier."""
    import importlib

    for name in FIRST_CALL_MODULES:
        try:
            importlib.import_module(name)
        except ImportError:
            pass


def view_for(
    perspective: Perspective, messages: list[Message], *, skip_empty_text: bool = False
) -> list[dict[str, Any]]:
    """The conversation as one side sees it, in OpenAI chat format.

    The agent sees user text, its own messages and the answers to its own tool calls.
    The user simulator sees the conversation with roles flipped (it is the "assistant" of
    its own model call): agent text as user turns, its own turns and tool answers.
    This mirrors tau2's agent/user history rules, and the dicts are the ones tau2's
    to_litellm_messages builds (tool calls carry a "name" next to "function").
    `skip_empty_text`: the other side's turns without text are left out (tau2 1.0.x's
    user simulator does so; 26.3 shows them as empty turns)."""
    out: list[dict[str, Any]] = []
    for m in messages:
        own = m.role == perspective
        if m.role == "tool":
            if m.requestor == perspective:
                out.append({"role": "tool", "tool_call_id": m.tool_call_id, "content": m.content or ""})
        elif own:
            entry: dict[str, Any] = {"role": "assistant", "content": m.content}
            if m.tool_calls:
                entry["tool_calls"] = [
                    {
                        "id": c.id,
                        "name": c.name,
                        "type": "function",
                        "function": {
                            "name": c.name,
                            "arguments": c.invalid_arguments
                            if c.invalid_arguments is not None
                            else json.dumps(c.arguments),
                        },
                    }
                    for c in m.tool_calls
                ]
            out.append(entry)
        elif not m.tool_calls:  # the other side's text turns; its tool calls are private
            if skip_empty_text and not (m.content or "").strip():
                continue
            out.append({"role": "user", "content": m.content or ""})
    return out


def parse_reply(response: Any, role: Perspective) -> tuple[Message, str | None]:
    """Turn a litellm ModelResponse into our Message. Never raises on malformed output:
    arguments that are not a JSON object (tau2 parses them with json.loads, so "" is
    invalid too) are kept as text on the call, for the conversation step to judge. A
    response without choices is the caller's to refuse (complete raises on it)."""
    choices = getattr(response, "choices", None) or []
    if not choices:
        return Message(role=role, content=None), None
    choice = choices[0]
    raw = choice.message
    calls: list[ToolCall] = []
    for i, tc in enumerate(getattr(raw, "tool_calls", None) or []):
        fn = tc.function
        text = fn.arguments if isinstance(fn.arguments, str) else json.dumps(fn.arguments or {})
        call = ToolCall(id=tc.id or f"call-{i}", name=fn.name or "", requestor=role)
        try:
            args = json.loads(text)
            if not isinstance(args, dict):
                raise ValueError("arguments must be a JSON object")
            call.arguments = args
        except ValueError:
            call.invalid_arguments = text
        calls.append(call)
    message = Message(role=role, content=raw.content, tool_calls=calls or None)
    return message, getattr(choice, "finish_reason", None)


def _usage(response: Any) -> tuple[int, int]:
    usage = getattr(response, "usage", None)
    if usage is None:
        return 0, 0
    return int(usage.prompt_tokens or 0), int(usage.completion_tokens or 0)


def _cost(response: Any) -> float:
    litellm = quiet_litellm()
    try:
        return float(litellm.completion_cost(completion_response=response) or 0.0)
    except Exception:
        # Models litellm has no price for (local servers, scripted) cost nothing we know of.
        return 0.0


async def complete(
    model: str,
    messages: list[dict[str, Any]],
    *,
    tools: list[dict[str, Any]] | None,
    role: Perspective,
    model_args: dict[str, Any],
    metadata: dict[str, Any],
    seed: int | None = None,
    timeout_s: float | None = None,
    empty_retries: int = 0,
    tool_choice: str | None = None,
) -> ModelReply:
    """One model call. Retries are Temporal's job, so litellm's own are switched off. The
    request is tau2's: tools with tool_choice "auto" when the side has tools (unless the
    caller, a registered agent, chose another). As tau2's
    generate does, an empty reply (no text, no tool calls) is asked for again with the
    identical request, up to `empty_retries` times; tokens and cost add up over the
    attempts, which were all paid for."""
    async def ask() -> ModelReply:  # the same request every time
        return await _complete_once(model, messages, tools=tools, role=role, model_args=model_args,
                                    metadata=metadata, seed=seed, timeout_s=timeout_s,
                                    tool_choice=tool_choice)

    reply = await ask()
    for _ in range(empty_retries):
        if not reply.message.is_empty():
            break
        again = await ask()
        again.input_tokens += reply.input_tokens
        again.output_tokens += reply.output_tokens
        again.cost += reply.cost
        again.latency_s += reply.latency_s
        reply = again
    return reply


async def _complete_once(
    model: str,
    messages: list[dict[str, Any]],
    *,
    tools: list[dict[str, Any]] | None,
    role: Perspective,
    model_args: dict[str, Any],
    metadata: dict[str, Any],
    seed: int | None,
    timeout_s: float | None,
    tool_choice: str | None = None,
) -> ModelReply:
    litellm = quiet_litellm()
    args = dict(model_args)
    key_env = args.pop(secrets.API_KEY_ENV, None)
    if key_env is not None:
        # The key lives in this worker's environment, never in the run's configuration.
        if not os.environ.get(key_env):
            raise ModelCallError(
                f"MissingApiKey calling {model}: environment variable {key_env} (named by "
                f"{secrets.API_KEY_ENV}) is not set on this worker",
                error_class="MissingApiKey",
                transient=False,
            )
        args["api_key"] = os.environ[key_env]
    if seed is not None:
        args.setdefault("seed", seed)
    if timeout_s is not None:
        args.setdefault("timeout", timeout_s)
    args.update(num_retries=0, max_retries=0)
    start = time.monotonic()
    try:
        response = await litellm.acompletion(
            model=model,
            messages=messages,
            tools=tools or None,
            tool_choice=tool_choice or ("auto" if tools else None),
            metadata=metadata,
            drop_params=True,
            # passhat's tools are always function tools. Without this, litellm imports
            # its MCP bridge (mcp, its server, litellm's proxy types: 0.6-1 CPU s) to look
            # for litellm-proxy MCP tools in every call with tools. litellm strips the
            # flag from what it sends.
            _skip_mcp_handler=True,
            **args,
        )
    except Exception as exc:  # classified, then re-raised as ModelCallError
        raise classify(exc, model) from exc
    latency = time.monotonic() - start
    if not (getattr(response, "choices", None) or []):
        # tau2's generate takes choices[0]: an answer without any raises there, before
        # its check for an empty reply, and the simulation ends on that error, unscored.
        # So here: not the model's empty message, but a call that got no answer, which
        # tau2 does not ask again for either.
        raise ModelCallError(
            f"EmptyChoices calling {model}: the provider answered with no choices",
            error_class="EmptyChoices", transient=False,
        )
    message, finish = parse_reply(response, role)
    tokens_in, tokens_out = _usage(response)
    return ModelReply(
        message=message,
        model=getattr(response, "model", None),
        input_tokens=tokens_in,
        output_tokens=tokens_out,
        cost=_cost(response),
        latency_s=latency,
        finish_reason=finish,
    )
