"""Model calls through litellm over real HTTP to the loopback fault server: replies are
parsed without crashing on malformed output, and provider errors are classified."""

import pytest

from passhat.infra import llm, llm_errors
from passhat.testing.fault_server import Fault, FaultServer

TOOLS = [{
    "type": "function",
    "function": {"name": "get_order", "parameters": {"type": "object", "properties": {"order_id": {"type": "string"}}}},
}]


async def call(srv, model="m", role="assistant", **args):
    return await llm.complete(
        f"openai/{model}",
        [{"role": "system", "content": "s"}, {"role": "user", "content": "hi"}],
        tools=TOOLS,
        role=role,
        model_args={"api_base": srv.url + "/v1", "api_key": "x", **args},
        metadata={},
        seed=7,
        timeout_s=args.pop("timeout", 5),
    )


async def test_tool_call_reply_is_parsed_with_usage():
    reply_msg = {"tool_calls": [{"name": "get_order", "arguments": {"order_id": "A1"}}]}
    with FaultServer(responder=lambda body: reply_msg) as srv:
        reply = await call(srv)
        assert srv.requests[0]["seed"] == 7
    assert reply.message.tool_calls[0].name == "get_order"
    assert reply.message.tool_calls[0].arguments == {"order_id": "A1"}
    assert reply.message.tool_calls[0].requestor == "assistant"
    assert reply.input_tokens > 0 and reply.output_tokens > 0
    assert reply.finish_reason == "tool_calls"


async def test_invalid_json_arguments_are_kept_not_raised():
    bad = {"tool_calls": [{"name": "get_order", "arguments": '{"order_id": "A1",'}]}
    with FaultServer(responder=lambda body: bad) as srv:
        reply = await call(srv, role="user")
    call0 = reply.message.tool_calls[0]
    assert call0.invalid_arguments == '{"order_id": "A1",'
    assert call0.requestor == "user"


async def test_empty_choices_are_an_error_as_in_tau2():
    """tau2's generate fails on `choices: []` (choices[0]) before its empty-reply check:
    a call without an answer, not the model's empty message, and not asked again."""
    with FaultServer(faults=["empty_choices"]) as srv:
        with pytest.raises(llm.ModelCallError) as raised:
            await call(srv)
        assert srv.received == 1
    err = raised.value
    assert (err.error_class, err.transient, err.model_failure) == ("EmptyChoices", False, False)
    assert str(err) == "EmptyChoices calling openai/m: the provider answered with no choices"


@pytest.mark.parametrize(
    "fault, error_class, transient, retry_after",
    [
        (Fault("429", retry_after=7), "RateLimitError", True, 7.0),
        (Fault("503", retry_after=3), "ServiceUnavailableError", True, 3.0),
        ("500", "InternalServerError", True, None),
        ("drop", "APIConnectionError", True, None),
        ("401", "AuthenticationError", False, None),
        ("400", "BadRequestError", False, None),
        ("context_window", "ContextWindowExceededError", False, None),
        # A 200 whose body is a web page: neither a 500 nor worth retrying.
        ("not_json", "InvalidResponseError", False, None),
    ],
)
async def test_provider_errors_are_classified(fault, error_class, transient, retry_after):
    with FaultServer(faults=[fault]) as srv:
        with pytest.raises(llm.ModelCallError) as info:
            await call(srv)
        assert srv.received == 1  # litellm's own retries are off: Temporal owns retrying
    err = info.value
    assert (err.error_class, err.transient, err.retry_after_s) == (error_class, transient, retry_after)
    # One clean line: the class once, a status only when a server answered with one.
    message = str(err)
    assert message.count(error_class) == 1 and "\n" not in message, message
    assert ("HTTP" in message) == (fault not in ("drop", "not_json")), message


async def test_an_error_inside_a_custom_provider_keeps_its_class(monkeypatch):
    """A custom provider's own exception is what failed, not a connection: it keeps its
    class and message, says which provider raised it, and is not retried."""
    import litellm

    class Broken(litellm.CustomLLM):
        async def acompletion(self, *args, **kwargs):
            raise KeyError("deployment 'east' is not configured")

    monkeypatch.setattr(litellm, "custom_provider_map",
                        [*litellm.custom_provider_map, {"provider": "broken", "custom_handler": Broken()}])
    with pytest.raises(llm.ModelCallError) as info:
        await llm.complete("broken/m", [{"role": "user", "content": "hi"}], tools=[], role="assistant",
                           model_args={}, metadata={}, seed=1, timeout_s=5)
    err = info.value
    assert (err.error_class, err.transient, err.status_code) == ("KeyError", False, None)
    assert str(err) == ("KeyError in provider 'broken' calling broken/m: "
                        "\"deployment 'east' is not configured\""), str(err)


@pytest.mark.parametrize(
    "headers, seconds",
    [
        ({"retry-after": "12"}, 12.0),
        ({"retry-after-ms": "1500"}, 1.5),
        ({"retry-after": "__DATE_IN_30S__"}, 30.0),
        ({"retry-after": "Wed, 21 Oct 2015 07:28:00 GMT"}, 0.0),  # in the past: now
        ({"retry-after": "soon"}, None),
    ],
)
def test_retry_after_in_seconds_milliseconds_or_http_date(headers, seconds):
    import time
    from email.utils import formatdate

    headers = {k: formatdate(time.time() + 30, usegmt=True) if v == "__DATE_IN_30S__" else v
               for k, v in headers.items()}

    class ProviderError(Exception):
        litellm_response_headers = headers

    got = llm_errors.retry_after_seconds(ProviderError())
    if seconds is None:
        assert got is None
    else:
        assert got == pytest.approx(seconds, abs=1.5)


async def test_timeout_is_transient():
    with FaultServer(faults=[Fault("timeout", seconds=30)]) as srv:
        with pytest.raises(llm.ModelCallError) as info:
            await call(srv, timeout=1)
    assert info.value.error_class == "Timeout" and info.value.transient


async def test_unknown_model_is_deterministic():
    with FaultServer() as srv:
        with pytest.raises(llm.ModelCallError) as info:
            await call(srv, model="bad-model")
    assert info.value.error_class == "NotFoundError" and not info.value.transient


@pytest.mark.parametrize(
    "model, args, error_class, names",
    [
        # openai's client finds no key and litellm reports it as an InternalServerError
        # (HTTP 500): retried, it failed the same way for 15 minutes.
        ("openai/m", {}, "MissingApiKey", "OPENAI_API_KEY is not set on this worker"),
        ("anthropic/m", {}, "MissingApiKey", "ANTHROPIC_API_KEY is not set on this worker"),
        # No provider in the model string (litellm's BadRequestError without a server).
        ("gpt-99-ultra", {"api_key": "x"}, "UnknownProvider", "provider/name"),
        # api_bases no request can be sent to, which litellm reports as connection errors.
        # (the message names the scheme; litellm 1.82's httpx error leaves out the URL)
        ("openai/m", {"api_key": "x", "api_base": "htp://127.0.0.1:{port}/v1"}, "InvalidApiBase", "htp://"),
        # ("Port out of range 0-65535" from litellm's client; the socket's "port must be
        # 0-65535", in an exception group, from httpx's)
        ("openai/m", {"api_key": "x", "api_base": "http://127.0.0.1:99999/v1"}, "InvalidApiBase", "0-65535"),
    ],
    ids=["openai-key", "anthropic-key", "no-provider", "not-http", "bad-port"],
)
@pytest.mark.parametrize("client", ["litellm's", "httpx"])
async def test_configuration_errors_are_not_retried(monkeypatch, model, args, error_class, names, client):
    """Deterministic errors litellm wraps as 500s or connection errors fail at once, in
    one line that says what to fix, and no request reaches the server: with litellm's own
    HTTP client, and with the httpx client tau2 1.0.x's llm_utils gives it when imported
    (`litellm.aclient_session`), as in every worker there."""
    import httpx
    import litellm

    for name in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(litellm, "aclient_session", httpx.AsyncClient() if client == "httpx" else None)
    litellm.in_memory_llm_clients_cache.flush_cache()  # its clients are built once per api_base
    with FaultServer() as srv:
        port = srv.url.rsplit(":", 1)[1]
        args = {k: v.replace("{port}", port) for k, v in {"api_base": srv.url + "/v1", **args}.items()}
        with pytest.raises(llm.ModelCallError) as info:
            await llm.complete(model, [{"role": "user", "content": "hi"}], tools=TOOLS, role="assistant",
                               model_args=args, metadata={}, seed=7, timeout_s=5)
        assert srv.received == 0
    err = info.value
    assert (err.error_class, err.transient, err.model_failure) == (error_class, False, False)
    message = str(err)
    assert message.startswith(f"{error_class} calling {model}: ") and "\n" not in message, message
    assert names.replace("{port}", port) in message, message


async def test_a_missing_optional_dependency_is_not_retried():
    import importlib.util

    if importlib.util.find_spec("google.auth") is not None:
        pytest.skip("google-auth is installed: vertex_ai has its dependency")
    with pytest.raises(llm.ModelCallError) as info:
        await llm.complete("vertex_ai/gemini-pro", [{"role": "user", "content": "hi"}], tools=None,
                           role="assistant", model_args={}, metadata={}, timeout_s=5)
    err = info.value
    assert (err.error_class, err.transient) == ("MissingDependency", False)
    assert str(err) == ("MissingDependency calling vertex_ai/gemini-pro: No module named 'google.auth'; "
                        "install it where the workers run")


async def test_a_refused_connection_stays_transient():
    from passhat.testing.harness import free_port

    with pytest.raises(llm.ModelCallError) as info:
        await llm.complete("openai/m", [{"role": "user", "content": "hi"}], tools=None, role="assistant",
                           model_args={"api_key": "x", "api_base": f"http://127.0.0.1:{free_port()}/v1"},
                           metadata={}, timeout_s=5)
    assert (info.value.error_class, info.value.transient) == ("APIConnectionError", True)


def test_missing_key_variables_from_litellm_or_api_key_env(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("PASSHAT_UNSET_KEY", raising=False)
    assert llm.missing_key_variables("openai/gpt-4.1", {}) == ["OPENAI_API_KEY"]
    assert llm.missing_key_variables("openai/gpt-4.1", {"api_key_env": "PASSHAT_UNSET_KEY"}) == ["PASSHAT_UNSET_KEY"]
    # A local server's provider needs no key; AWS credentials may come from a profile.
    assert llm.missing_key_variables("hosted_vllm/m", {"api_base": "http://127.0.0.1:1/v1"}) == []
    assert llm.missing_key_variables("bedrock/anthropic.claude-v2", {}) == []
    monkeypatch.setenv("OPENAI_API_KEY", "set")
    assert llm.missing_key_variables("openai/gpt-4.1", {}) == []
    monkeypatch.setenv("PASSHAT_UNSET_KEY", "")  # empty is no key
    assert llm.missing_key_variables("openai/gpt-4.1", {"api_key_env": "PASSHAT_UNSET_KEY"}) == ["PASSHAT_UNSET_KEY"]


def test_views_follow_tau2_history_rules():
    from passhat.messages import Message, ToolCall

    convo = [
        Message(role="assistant", content="Hi"),
        Message(role="user", content="help"),
        Message(role="assistant", tool_calls=[ToolCall(id="a", name="f")]),
        Message(role="tool", content="r", tool_call_id="a", requestor="assistant"),
        Message(role="user", tool_calls=[ToolCall(id="u", name="g", requestor="user")]),
        Message(role="tool", content="s", tool_call_id="u", requestor="user"),
    ]
    agent = llm.view_for("assistant", convo)
    assert [m["role"] for m in agent] == ["assistant", "user", "assistant", "tool"]
    user = llm.view_for("user", convo)
    assert [m["role"] for m in user] == ["user", "assistant", "assistant", "tool"]
    assert user[0]["content"] == "Hi" and user[2]["tool_calls"][0]["id"] == "u"


FIRST_CALL = """
import asyncio, json, sys
from passhat.infra import llm, llm_errors
from passhat.testing.fault_server import FaultServer
llm.load_client_modules()
with FaultServer() as srv:
    before = set(sys.modules)
    reply = asyncio.run(llm.complete(
        "openai/m", [{{"role": "user", "content": "hi"}}], tools={tools!r}, role="assistant",
        model_args={{"api_base": srv.url + "/v1", "api_key": "x"}}, metadata={{}}, seed=7,
    ))
    sent = srv.requests
assert reply.message.content, reply
# litellm's MCP bridge is skipped (passhat's tools are function tools), and litellm
# keeps the flag that skips it out of the request.
assert "mcp" not in sys.modules, "litellm loaded its MCP bridge"
assert len(sent) == 1 and not [k for k in sent[0] if "mcp" in k], sorted(sent[0])
print(json.dumps(sorted(set(sys.modules) - before)))
"""


def test_a_preloaded_process_imports_nothing_in_its_first_model_call():
    # Worker processes are forked after load_client_modules: whatever litellm still
    # imports in a first call, each of them imports again, every conversation's first
    # call waiting for it while the run starts (1-2 CPU s per process). Nor is litellm's
    # MCP bridge loaded, in the parent or in a call (0.6-1 CPU s of every run's start).
    import json
    import os
    import subprocess
    import sys

    out = subprocess.run(
        [sys.executable, "-c", FIRST_CALL.format(tools=TOOLS)],
        capture_output=True, text=True, timeout=300,
        env={**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"},
    )
    assert out.returncode == 0, out.stderr[-2000:]
    imported = json.loads(out.stdout.strip().splitlines()[-1])
    assert imported == [], f"imported in the first call: {imported[:20]}"
