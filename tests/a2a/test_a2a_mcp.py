"""Agents behind A2A with their tools over MCP (`--agent-tools mcp`), over real loopback
HTTP with the real a2a-sdk and mcp SDK on both sides and a real Temporal server: the
reference agent forwarding to the scripted oracle scores as the oracle does; a tool call
the agent's MCP client sends twice is executed once and answered the same; an unknown
tool or bad arguments is an MCP tool error the agent sees; the URL of a trial whose
turn is not in flight is refused."""

from __future__ import annotations

import itertools
import json

import httpx2

from passhat.testing.a2a_agents import A2AAgentServer, chat_agent, example
from passhat.testing.scripted_http import http_args
from tests.a2a.test_a2a_agent import TASKS, a2a_config, oracle_model  # noqa: F401 - a fixture
from tests.helpers import first_agent_write, tasks_with_agent_writes
from tests.runs import run_to_end


def mcp_config(agent: A2AAgentServer, **overrides):
    return a2a_config(agent, agent_tools="mcp", **overrides)


def tool_calls(store, trial_id: str) -> list:
    return [c for s in store.steps(trial_id) for m in s.message_list() for c in (m.tool_calls or [])]


async def test_the_reference_agent_over_mcp_scores_as_the_oracle_does(client, sqlite_store, oracle_model):
    agent_side = chat_agent("openai/oracle", http_args(oracle_model.url))
    with A2AAgentServer(agent_side) as agent:
        cfg = mcp_config(agent)
        assert cfg.agent_tools == "mcp"
        await run_to_end(client, sqlite_store, cfg)
    trials = sqlite_store.trials(cfg.run_id)
    assert len(trials) == len(TASKS)
    assert {(t.status, t.reward, t.termination_reason) for t in trials} == {("scored", 1.0, "user_stop")}
    # the URL came in the first message's metadata, one of its own for each trial
    assert len(set(agent_side.mcp_urls.values())) == len(trials)
    # the tools were not in the text: the agent called them over MCP, recorded as steps
    assert all('"name": "respond"' not in chat[0]["content"] for chat in agent_side.histories.values())
    calls = [c for t in trials for c in tool_calls(sqlite_store, t.trial_id)]
    assert calls and all(c.id.startswith("mcp-") for c in calls)


class SendsCallsTwice(httpx2.AsyncBaseTransport):
    """An MCP client's HTTP that sends every tools/call twice (a retry after a lost
    answer) and hands the client the second answer."""

    def __init__(self):
        self.inner = httpx2.AsyncHTTPTransport()
        self.sent_twice = 0

    async def handle_async_request(self, request):
        body = request.content if request.method == "POST" else b""
        if b'"tools/call"' in body:
            first = await self.inner.handle_async_request(request)
            await first.aread()
            await first.aclose()
            self.sent_twice += 1
        return await self.inner.handle_async_request(request)


def retrying_agent(oracle_url: str, transport: SendsCallsTwice, answers: list):
    """The reference agent whose MCP client sends each tool call twice; `answers` gets
    each tool answer it read."""
    base = example().ChatAgent

    class Retrying(base):
        def mcp_client(self, mcp_url):  # noqa: ANN001, ANN202
            from mcp import Client
            from mcp.client.streamable_http import streamable_http_client

            http = httpx2.AsyncClient(transport=transport, timeout=60)
            return Client(streamable_http_client(mcp_url, http_client=http))

        async def answer_with_tools(self, context_id, mcp_url, history, rounds=30):  # noqa: ANN001
            reply = await super().answer_with_tools(context_id, mcp_url, history, rounds)
            answers[:] = [m["content"] for m in history if m["role"] == "tool"]
            return reply

    args = http_args(oracle_url)
    import os

    args["api_key"] = os.environ[args.pop("api_key_env")]
    return Retrying("openai/oracle", args)


async def test_a_tool_call_sent_twice_is_executed_once_and_answered_the_same(client, sqlite_store, oracle_model):
    transport, answers = SendsCallsTwice(), []
    # task 2 writes (send_certificate): executed twice, the database would show it
    with A2AAgentServer(retrying_agent(oracle_model.url, transport, answers)) as agent:
        cfg = mcp_config(agent, task_ids=["2"])
        await run_to_end(client, sqlite_store, cfg)
    [trial] = sqlite_store.trials(cfg.run_id)
    calls = tool_calls(sqlite_store, trial.trial_id)
    assert transport.sent_twice == len(calls) > 0
    assert len({c.id for c in calls}) == len(calls)  # each call recorded once
    tools = [s for s in sqlite_store.steps(trial.trial_id) if s.role == "tool"]
    assert len(tools) == len(calls)
    assert [s.message_list()[0].content for s in tools] == answers  # the same answers
    assert (trial.status, trial.reward) == ("scored", 1.0)  # the write made once


_connections = itertools.count()


class Connection(httpx2.AsyncBaseTransport):
    """An MCP client's HTTP, one a connection, that notes each tools/call it sends as
    (the connection's number, its session id if the protocol has sessions)."""

    def __init__(self, sent: list):
        self.inner = httpx2.AsyncHTTPTransport()
        self.sent = sent
        self.number = next(_connections)

    async def handle_async_request(self, request):
        if request.method == "POST" and b'"tools/call"' in request.content:
            self.sent.append((self.number, request.headers.get("mcp-session-id")))
        return await self.inner.handle_async_request(request)


def reconnecting_agent(oracle_url: str, sent: list, answers: list):
    """The reference agent whose MCP client loses each tool call's answer with its
    connection, and sends the same call again from a new connection and session (a
    reconnect), reading that answer; `sent` gets each tools/call sent (Connection),
    `answers` each tool answer it read."""
    base = example().ChatAgent

    def connect(mcp_url):  # noqa: ANN001, ANN202
        from mcp import Client
        from mcp.client.streamable_http import streamable_http_client

        return Client(streamable_http_client(mcp_url, http_client=httpx2.AsyncClient(transport=Connection(sent),
                                                                                     timeout=60)))

    class Reconnecting(base):
        def mcp_client(self, mcp_url):  # noqa: ANN001, ANN202
            first = connect(mcp_url)
            lost_answer = first.call_tool

            async def call_tool(name, arguments):  # noqa: ANN001, ANN202
                await lost_answer(name, arguments)
                async with connect(mcp_url) as again:
                    result = await again.call_tool(name, arguments)
                answers.append("\n".join(b.text for b in result.content))
                return result

            first.call_tool = call_tool
            return first

    args = http_args(oracle_url)
    import os

    args["api_key"] = os.environ[args.pop("api_key_env")]
    return Reconnecting("openai/oracle", args)


async def test_a_tool_call_sent_again_from_a_new_session_is_executed_once_and_answered_the_same(
        client, sqlite_store, oracle_model):
    sent, answers = [], []
    [task] = tasks_with_agent_writes(1, prefer=("2",))  # a write executed twice shows in the database
    with A2AAgentServer(reconnecting_agent(oracle_model.url, sent, answers)) as agent:
        cfg = mcp_config(agent, task_ids=[task])
        await run_to_end(client, sqlite_store, cfg)
    [trial] = sqlite_store.trials(cfg.run_id)
    calls = tool_calls(sqlite_store, trial.trial_id)
    assert first_agent_write(task) in {c.name for c in calls}
    # each call sent twice, the second time from a connection (and session, if any) of its own
    assert len(sent) == 2 * len(calls) and len(set(sent[1::2])) == len(calls)
    assert not set(sent[::2]) & set(sent[1::2])
    tools = [s for s in sqlite_store.steps(trial.trial_id) if s.role == "tool"]
    assert len(tools) == len(calls)  # each executed once ...
    assert [s.message_list()[0].content for s in tools] == answers  # ... and answered the same
    assert (trial.status, trial.reward) == ("scored", 1.0)  # the write made once


def bad_calls_agent(seen: list):
    """An agent that calls an unknown tool and a known one with bad arguments, shows
    what it got, and answers the user."""
    base = example().ChatAgent

    class Bad(base):
        async def answer(self, context_id: str, text: str) -> str:
            from mcp import Client

            url = self.mcp_urls.get(context_id)
            if url is None:
                return "no url"
            async with Client(url) as c:
                for name, arguments in (("no_such_tool", {}), ("get_user_details", {"wrong": 1})):
                    result = await c.call_tool(name, arguments)
                    seen.append((name, result.is_error, result.content[0].text))
            return "I cannot help, sorry."

    return Bad("none")


async def test_unknown_tools_and_bad_arguments_are_the_agents_tool_errors(client, sqlite_store):
    seen: list = []
    with A2AAgentServer(bad_calls_agent(seen)) as agent:
        cfg = mcp_config(agent, task_ids=["0"], max_errors=10)
        await run_to_end(client, sqlite_store, cfg)
    [trial] = sqlite_store.trials(cfg.run_id)
    assert trial.status == "scored"  # the agent's failure to handle, not a crash
    assert [(name, is_error) for name, is_error, _ in seen[:2]] == [("no_such_tool", True), ("get_user_details", True)]
    errors = [s for s in sqlite_store.steps(trial.trial_id) if s.role == "tool"]
    assert len(errors) >= 2 and all(s.message_list()[0].error for s in errors)
    assert [text for _, _, text in seen[:2]] == [s.message_list()[0].content for s in errors[:2]]


async def test_the_url_of_a_trial_whose_turn_is_not_in_flight_is_refused(client, sqlite_store, oracle_model):
    agent_side = chat_agent("openai/oracle", http_args(oracle_model.url))
    with A2AAgentServer(agent_side) as agent:
        cfg = mcp_config(agent, task_ids=["0"])
        await run_to_end(client, sqlite_store, cfg)
    [url] = agent_side.mcp_urls.values()
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    headers = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
    async with httpx2.AsyncClient() as http:
        ended = await http.post(url, content=json.dumps(body), headers=headers)
        forged = await http.post(url.rsplit("/", 1)[0] + "/" + "0" * 40, content=json.dumps(body), headers=headers)
    assert ended.status_code == forged.status_code == 404


async def test_a_dropped_write_over_mcp_fails_with_the_diagnosis_naming_it(client, sqlite_store, oracle_model):
    # skip-write: the oracle that leaves out the task's first write (on 26.3, task 2's
    # send_certificate; 1.0.x's task 2 only reads)
    [task] = tasks_with_agent_writes(1, prefer=("2",))
    with A2AAgentServer(chat_agent("openai/skip-write", http_args(oracle_model.url))) as agent:
        cfg = mcp_config(agent, task_ids=[task])
        await run_to_end(client, sqlite_store, cfg)
    [trial] = sqlite_store.trials(cfg.run_id)
    assert (trial.status, trial.reward) == ("scored", 0.0)
    diagnosis = sqlite_store.trial_diagnosis(cfg.run_id, trial.trial_id)
    assert diagnosis["first_off_path"]["kind"] == "skipped_write"
    assert diagnosis["first_off_path"]["tool"] == first_agent_write(task)
