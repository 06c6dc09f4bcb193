"""The fault server, driven through litellm's real HTTP path.

Besides checking the server, these tests pin down how litellm 1.106 reports each
failure (exception class, status code, where Retry-After lives). The lead's
error classification relies on exactly this, so a litellm upgrade that changes
any of it should fail here first.
"""

from __future__ import annotations

import asyncio
import os
import socket
import time

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # no internet: skip the price-list download

import litellm
import openai
import pytest

from passhat.testing.fault_server import Fault, FaultServer, RandomFaults, SubprocessFaultServer

TOOLS = [{
    "type": "function",
    "function": {
        "name": "get_order",
        "description": "Look up an order.",
        "parameters": {"type": "object", "properties": {"order_id": {"type": "string"}}, "required": ["order_id"]},
    },
}]
MESSAGES = [{"role": "user", "content": "hi"}]


def _kwargs(srv, model="test-model", tools=True, **extra):
    # num_retries=0 / max_retries=0: one HTTP request per call, so the server's
    # counters and the raised exception map 1:1 to the planned fault.
    kw = dict(model=f"openai/{model}", api_base=srv.url + "/v1", api_key="x", messages=MESSAGES,
              num_retries=0, max_retries=0)
    if tools:
        kw["tools"] = TOOLS
    kw.update(extra)
    return kw


async def acall(srv, **kw):
    return await litellm.acompletion(**_kwargs(srv, **kw))


async def araises(srv, **kw) -> Exception:
    with pytest.raises(Exception) as info:
        await acall(srv, **kw)
    return info.value


# --------------------------------------------------------------------------- normal answers


async def test_ok_response_shape_and_request_passthrough():
    async with FaultServer() as srv:
        r = await acall(srv, seed=7, temperature=0)
        assert r.choices[0].message.content == "ok"
        assert r.choices[0].finish_reason == "stop"
        assert r.id.startswith("chatcmpl-")
        assert r.model == "test-model"
        assert r.usage.prompt_tokens > 0 and r.usage.completion_tokens > 0
        assert r.usage.total_tokens == r.usage.prompt_tokens + r.usage.completion_tokens
        # The responder sees what litellm actually sent.
        body = srv.requests[0]
        assert body["model"] == "test-model" and body["seed"] == 7
        assert body["tools"][0]["function"]["name"] == "get_order"
        assert (srv.received, srv.served, srv.counts) == (1, 1, {"ok": 1})


async def test_responder_tool_calls_and_invalid_json_arguments_kept_verbatim():
    def responder(body):
        return {"content": None, "tool_calls": [
            {"name": "get_order", "arguments": '{"order_id": "A1",'},  # truncated JSON on purpose
            {"name": "get_order", "arguments": {"order_id": "B2"}},     # dict: server JSON-encodes it
        ]}

    async with FaultServer(responder=responder) as srv:
        r = await acall(srv)
        msg = r.choices[0].message
        assert r.choices[0].finish_reason == "tool_calls"
        assert msg.content is None
        assert [c.function.name for c in msg.tool_calls] == ["get_order", "get_order"]
        # litellm does not parse or repair arguments: the invalid string comes back as is.
        assert isinstance(msg.tool_calls[0].function.arguments, str)
        assert msg.tool_calls[0].function.arguments == '{"order_id": "A1",'
        assert msg.tool_calls[1].function.arguments == '{"order_id": "B2"}'
        assert all(c.id and c.type == "function" for c in msg.tool_calls)


async def test_async_responder_and_responder_errors():
    async def responder(body):
        await asyncio.sleep(0)
        if body["messages"][-1]["content"] == "boom":
            raise ValueError("scripted failure")
        return "hello"

    async with FaultServer(responder=responder) as srv:
        assert (await acall(srv)).choices[0].message.content == "hello"
        # A broken responder surfaces as a 500 and is recorded, not swallowed.
        e = await araises(srv, messages=[{"role": "user", "content": "boom"}])
        assert type(e) is litellm.InternalServerError
        assert isinstance(srv.errors[0], ValueError)


async def test_delay_then_answers():
    async with FaultServer(faults=[Fault("delay", seconds=0.3)]) as srv:
        t = time.monotonic()
        r = await acall(srv)
        assert time.monotonic() - t >= 0.3
        assert r.choices[0].message.content == "ok"
        assert (srv.served, srv.counts) == (1, {"delay": 1})


# --------------------------------------------------------------------------- how litellm reports each fault

# (fault, model, exception class, status_code, Retry-After value or None)
STATUS_FAULTS = [
    (Fault("429", retry_after=7), "test-model", litellm.RateLimitError, 429, "7"),
    (Fault("503", retry_after=3), "test-model", litellm.ServiceUnavailableError, 503, "3"),
    (Fault("503"), "test-model", litellm.ServiceUnavailableError, 503, None),
    (Fault("500"), "test-model", litellm.InternalServerError, 500, None),
    (Fault("401"), "test-model", litellm.AuthenticationError, 401, None),
    (Fault("400"), "test-model", litellm.BadRequestError, 400, None),
    (Fault("404"), "test-model", litellm.NotFoundError, 404, None),
    (Fault("context_window"), "test-model", litellm.ContextWindowExceededError, 400, None),
    (None, "bad-model", litellm.NotFoundError, 404, None),  # per-model behaviour
]


@pytest.mark.parametrize("tools", [True, False], ids=["tools", "no-tools"])
@pytest.mark.parametrize("fault,model,exc,status,retry_after", STATUS_FAULTS,
                         ids=[f"{f.kind if f else m}{'-ra' if ra else ''}" for f, m, _, _, ra in STATUS_FAULTS])
async def test_http_error_mapping(fault, model, exc, status, retry_after, tools):
    async with FaultServer(faults=[fault]) as srv:
        e = await araises(srv, model=model, tools=tools)
        assert type(e) is exc  # exact class, not just a base
        assert e.status_code == status
        assert e.llm_provider == "openai"
        # e.response is an httpx.Response litellm builds itself: the status is
        # right but it carries NO headers from the server.
        assert e.response.status_code == status
        assert "retry-after" not in e.response.headers
        # The server's real headers are on e.litellm_response_headers (httpx.Headers,
        # case-insensitive); that is the only place Retry-After can be read.
        assert e.litellm_response_headers is not None
        assert e.litellm_response_headers.get("retry-after") == retry_after
        assert (srv.received, srv.served) == (1, 0)  # no hidden retries


def test_context_window_is_a_bad_request():
    # Classification must test ContextWindowExceededError before BadRequestError.
    assert issubclass(litellm.ContextWindowExceededError, litellm.BadRequestError)


async def test_drop_raises_internal_server_error_without_headers():
    async with FaultServer(faults=["drop"]) as srv:
        e = await araises(srv)
        # Not litellm.APIConnectionError: litellm maps the connection error to a 500.
        assert type(e) is litellm.InternalServerError
        assert not isinstance(e, openai.APIConnectionError)
        assert e.status_code == 500
        assert "Connection error" in str(e)
        # What tells it apart from a real HTTP 500: no response headers at all.
        assert e.litellm_response_headers is None
        assert (srv.received, srv.served, srv.counts) == (1, 0, {"drop": 1})


async def test_connection_refused_looks_like_drop():
    with socket.socket() as s:  # grab a free port, then close it so nothing listens
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(Exception) as info:
        await litellm.acompletion(model="openai/m", api_base=f"http://127.0.0.1:{port}/v1", api_key="x",
                                  messages=MESSAGES, num_retries=0, max_retries=0, timeout=5)
    e = info.value
    assert type(e) is litellm.InternalServerError
    assert e.status_code == 500 and "Connection error" in str(e)
    assert e.litellm_response_headers is None


async def test_timeout_raises_litellm_timeout():
    async with FaultServer(faults=["timeout"]) as srv:
        t = time.monotonic()
        e = await araises(srv, timeout=1)
        assert time.monotonic() - t < 5
        assert type(e) is litellm.Timeout
        assert e.status_code == 408
        # litellm.Timeout subclasses openai.APITimeoutError -> openai.APIConnectionError,
        # but not litellm.APIConnectionError.
        assert isinstance(e, openai.APITimeoutError) and isinstance(e, openai.APIConnectionError)
        assert not isinstance(e, litellm.APIConnectionError)
        assert not hasattr(e, "response")  # unlike the HTTP errors: accessing it raises AttributeError
        assert e.litellm_response_headers is None
        assert srv.counts == {"timeout": 1}


async def test_empty_choices_is_returned_not_raised():
    async with FaultServer(faults=["empty_choices"]) as srv:
        r = await acall(srv)
        assert isinstance(r, litellm.ModelResponse)
        assert r.choices == []  # the caller must check; r.choices[0] would IndexError
        assert r.usage.completion_tokens == 0
        assert (srv.received, srv.served) == (1, 0)  # not counted as served


@pytest.mark.parametrize("fault,exc,status", [
    (Fault("429", retry_after=2), litellm.RateLimitError, 429),
    (Fault("timeout", seconds=10), litellm.Timeout, 408),
    (Fault("drop"), litellm.InternalServerError, 500),
    (Fault("context_window"), litellm.ContextWindowExceededError, 400),
])
def test_sync_completion_maps_the_same(fault, exc, status):
    # Sync litellm.completion goes through httpx, async through litellm's aiohttp
    # transport; both must give the same classes.
    with FaultServer(faults=[fault]) as srv:
        with pytest.raises(Exception) as info:
            litellm.completion(**_kwargs(srv, timeout=1))
        e = info.value
        assert type(e) is exc and e.status_code == status
        if fault.kind == "429":
            assert e.litellm_response_headers["Retry-After"] == "2"


async def test_default_client_retries_without_retry_args():
    # Documents why every call must pass num_retries=0 or max_retries=0: without
    # them the OpenAI SDK inside litellm retries a 429 twice on its own.
    async with FaultServer(faults=[Fault("429", retry_after=0)] * 5) as srv:
        with pytest.raises(litellm.RateLimitError):
            await litellm.acompletion(model="openai/m", api_base=srv.url + "/v1", api_key="x", messages=MESSAGES)
        assert srv.received == 3
    for arg in ("num_retries", "max_retries"):  # either one alone disables it
        async with FaultServer(faults=[Fault("429", retry_after=0)] * 5) as srv:
            with pytest.raises(litellm.RateLimitError):
                await litellm.acompletion(model="openai/m", api_base=srv.url + "/v1", api_key="x",
                                          messages=MESSAGES, **{arg: 0})
            assert srv.received == 1


def test_litellm_should_retry_status_codes():
    # litellm's own (private) notion of retryable statuses, pinned for reference.
    assert {c: litellm._should_retry(c) for c in (400, 401, 404, 408, 409, 429, 500, 503)} == {
        400: False, 401: False, 404: False, 408: True, 409: True, 429: True, 500: True, 503: True}


# --------------------------------------------------------------------------- fault plans and counters


async def test_sequence_plan_and_reset():
    async with FaultServer(faults=["500", None, "429"]) as srv:
        outcomes = []
        for _ in range(4):
            try:
                await acall(srv)
                outcomes.append("ok")
            except Exception as e:
                outcomes.append(e.status_code)
        assert outcomes == [500, "ok", 429, "ok"]  # past the end of the list: no fault
        assert (srv.received, srv.served) == (4, 2)
        assert srv.counts == {"500": 1, "ok": 2, "429": 1}
        srv.reset()
        assert (srv.received, srv.served, srv.counts, srv.requests) == (0, 0, {}, [])
        with pytest.raises(litellm.InternalServerError):  # plan restarted at request 0
            await acall(srv)


async def test_callable_plan_sees_request_number_and_body():
    seen = []

    def plan(n, body):
        seen.append((n, body["model"]))
        return "503" if body["model"] == "flaky" else None

    async with FaultServer(faults=plan) as srv:
        await acall(srv, model="steady")
        with pytest.raises(litellm.ServiceUnavailableError):
            await acall(srv, model="flaky")
        assert seen == [(0, "steady"), (1, "flaky")]


def test_random_plan_is_seeded_and_roughly_at_rate():
    def draw(seed):
        plan = RandomFaults(rate=0.25, kinds=["429", "500", "503", "drop"], seed=seed)
        return [f.kind if f else None for f in (plan(i, {}) for i in range(400))]

    a = draw(1)
    assert a == draw(1) and a != draw(2)
    faults = [k for k in a if k]
    assert 60 < len(faults) < 140
    assert set(faults) == {"429", "500", "503", "drop"}


def test_random_plan_per_request_ignores_arrival_order():
    """With key=, each request's m-th sending draws its own fault: two runs that send the
    same requests (each three times) in different orders fault the same sendings."""
    def draw(order):
        plan = RandomFaults(rate=0.5, kinds=["429", "500", "503", "drop"], seed=1, key=lambda b: b["id"])
        seen = {}
        for i, rid in enumerate(order):
            f = plan(i, {"id": rid})
            seen.setdefault(rid, []).append(f.kind if f else None)
        return seen

    ids = [f"req-{i}" for i in range(40)]
    forward = draw([r for r in ids for _ in range(3)])
    backward = draw([r for _ in range(3) for r in reversed(ids)])
    assert forward == backward
    faulted = [k for kinds in forward.values() for k in kinds if k]
    assert 30 < len(faulted) < 90  # about half of the 120 sendings
    assert any(len(set(kinds)) > 1 for kinds in forward.values())  # sendings differ


async def test_concurrent_requests_counted_consistently():
    n = 60
    async with FaultServer(faults=RandomFaults(rate=0.25, kinds=["429", "500", "empty_choices"], seed=3)) as srv:
        results = await asyncio.gather(*(acall(srv, tools=False) for _ in range(n)), return_exceptions=True)
        ok = [r for r in results if not isinstance(r, Exception) and r.choices]
        counts = srv.counts
        assert srv.received == n
        assert sum(counts.values()) == n
        assert srv.served == counts["ok"] == len(ok)
        assert sum(isinstance(r, Exception) for r in results) == counts.get("429", 0) + counts.get("500", 0)


def test_unknown_fault_kind_rejected():
    with pytest.raises(ValueError):
        FaultServer(faults=["418"])


async def test_subprocess_server():
    config = {"faults": [{"kind": "429", "retry_after": 4}, None], "responder": {"content": "from child"}}
    with SubprocessFaultServer(config, cwd=os.path.dirname(os.path.dirname(__file__))) as srv:
        assert srv.url.startswith("http://127.0.0.1:")
        e = await araises(srv)
        assert type(e) is litellm.RateLimitError and e.litellm_response_headers["retry-after"] == "4"
        r = await acall(srv)
        assert r.choices[0].message.content == "from child"
        assert srv.stats() == {"received": 2, "served": 1, "counts": {"429": 1, "ok": 1}}
        srv.reset()
        assert srv.stats()["received"] == 0
    assert srv.proc.returncode is not None
