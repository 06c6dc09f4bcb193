"""Deployed agents' trials that lose a turn: the agent behind A2A with its tools over MCP
(`--agent-tools mcp`) whose worker is SIGKILLed while the agent calls those tools, and a
plain-message agent whose turns' outcome is never known, restarted until the bound.

passhat runs as real processes (`run --detach`, `passhat worker`) on a Temporal server
of the test's own, exporting its traces over OTLP/HTTP to a receiver the test starts;
the agent is the reference agent (examples/a2a_agent, the real a2a-sdk and mcp client)
in front of the scripted oracle over HTTP, served in this process over loopback."""

from __future__ import annotations

import asyncio
import json
import os
import threading
from pathlib import Path

import httpx
import pytest

from passhat.domains import a2a_protocol as protocol
from passhat.domains.registry import get_domain
from passhat.infra.store import Store
from passhat.infra.temporal_client import connect
from passhat.testing.a2a_agents import A2AAgentServer, dropping_follow_ups, example
from passhat.testing.harness import rewards, run_result, until
from passhat.testing.scripted_http import http_args
from tests.helpers import first_agent_write, tasks_with_agent_writes
from tests.otlp_receiver import OtlpReceiver


@pytest.fixture
def traced(monkeypatch):
    """The passhat processes' spans (their environment is this process's)."""
    with OtlpReceiver() as receiver:
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.endpoint)
        monkeypatch.setenv("OTEL_SERVICE_NAME", "passhat-test")
        yield receiver


def holding_mcp_agent(model_args: dict, reply_as: str, write: str, hold: str, wrote: threading.Event,
                      release: threading.Event):
    """The reference agent with its tools over MCP that, at its first call of `write`,
    sets `wrote` and waits (bounded: 120 s) until `release` is set: `before` sending the
    call (then sent to the URL it was given), or `after` its answer (then it goes on
    with its turn: its next call, or its reply)."""
    args = {**model_args, "api_key": os.environ[model_args["api_key_env"]]}
    args.pop("api_key_env")

    class Holding(example().ChatAgent):
        def mcp_client(self, mcp_url):  # noqa: ANN001, ANN202
            client = super().mcp_client(mcp_url)
            call = client.call_tool

            async def call_tool(name, arguments):  # noqa: ANN001, ANN202
                held = name == write and not wrote.is_set()
                if held and hold == "before":
                    wrote.set()
                    await asyncio.to_thread(release.wait, 120)
                result = await call(name, arguments)
                if held and hold == "after":
                    wrote.set()
                    await asyncio.to_thread(release.wait, 120)
                return result

            client.call_tool = call_tool
            return client

    return Holding("openai/oracle", args, reply_as=reply_as)


def token_of(url: str) -> str:
    return url.rstrip("/").rsplit("/", 1)[1]


async def history_bytes(client, workflow_id: str) -> bytes:  # noqa: ANN001
    history = await client.get_workflow_handle(workflow_id).fetch_history()
    return history.to_json().encode()


@pytest.mark.parametrize("reply_as, hold", [("task", "before"), ("message", "after")])
async def test_a_worker_killed_while_the_agent_calls_its_mcp_tools(passhat_procs, model_server, traced, reply_as,
                                                                   hold):
    """The worker dies while the agent, mid-turn, calls its tools over MCP, just before
    its write (an agent that answers with a task: following the task would leave it
    calling a dead URL, its failure counted as its own) or just after it (the write
    made in the attempt set aside): the MCP URL the agent holds died with the worker,
    so the trial restarts in a fresh context (counted and shown); no A2A message reaches the agent twice, the conversation scored executed
    each of its writes once (the database is the oracle's: reward 1), and the trial's
    MCP URLs appear in no log, trace, record, history or output of passhat's, and
    answer 404 once the trial is over."""
    ph, srv = passhat_procs, model_server
    run_id = f"a2a-mcp-kill-{reply_as}"
    [task] = tasks_with_agent_writes(1, prefer=("2",))
    write = first_agent_write(task)
    wrote, release = threading.Event(), threading.Event()
    agent_side = holding_mcp_agent(http_args(srv.url), reply_as, write, hold, wrote, release)
    try:
        with A2AAgentServer(agent_side) as agent:
            started = ph.cli("run", "--domain", "airline", "--task", task, "--agent", f"a2a:{agent.url}",
                             "--agent-tools", "mcp", "--user-model", "scripted/oracle", "--trials", "1",
                             "--run-id", run_id, "--detach")
            assert started.returncode == 0, started.stderr
            worker = ph.start_worker()
            await worker.ready()
            store, trial_id = Store(ph.db_url), f"{run_id}/a2a/airline/{task}/trial-0"
            client = await connect(ph.temporal_address)
            await until(wrote.is_set, "the agent's write over MCP", 180)
            worker.kill()  # mid-turn: the agent holds on to the rest of its turn
            worker = ph.start_worker()
            await worker.ready()
            release.set()
            await run_result(client, run_id, timeout=300)
            received = agent.received
            await until(lambda: any(s.name.startswith("invoke_agent") for s in traced.spans),
                        "the worker's spans of the agent's turns", 60)
            urls = list(dict.fromkeys(agent_side.mcp_urls.values()))
    finally:
        release.set()
    assert rewards(store, run_id) == {trial_id: 1.0}
    assert store.set_aside_ending(run_id, protocol.RESTART) == {trial_id: 1}
    assert len(received) == len(set(received))  # no message twice
    assert len(urls) == 2  # the dead worker's, then the fresh context's
    # the conversation scored made the gold writes, each once
    kinds = get_domain("airline").tool_kinds()
    gold = [a.name for a in get_domain("airline").task(task).gold_actions
            if a.requestor == "assistant" and kinds.get(a.name) == "write"]
    made = [c.name for s in store.steps(trial_id) for m in s.message_list() for c in (m.tool_calls or [])
            if kinds.get(c.name) == "write"]
    assert sorted(made) == sorted(gold) and write in made
    shown = ph.cli("show", trial_id)
    assert "restarted 1 time in a fresh A2A context" in shown.stdout, shown.stdout
    # the URLs are capabilities: nowhere passhat writes, and gone with the trial
    outputs = [shown.stdout, shown.stderr, ph.cli("report", run_id).stdout,
               ph.cli("show", trial_id, "-o", "json").stdout,
               *(Path(log).read_text(errors="replace") for log in [*ph.logs, *(ph.home / "logs").glob("*")]),
               json.dumps([s.attributes for s in traced.spans], default=str)]
    db = Path(ph.db_url.removeprefix("sqlite:///"))
    records = [*(f.read_bytes() for f in db.parent.glob(db.name + "*")),  # with its WAL
               await history_bytes(client, trial_id), await history_bytes(client, run_id)]
    assert ph.logs
    refused = []
    async with httpx.AsyncClient() as http:
        for url in urls:
            token = token_of(url)
            assert not [o for o in outputs if token in o]
            assert not [r for r in records if token.encode() in r]
            body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
            try:
                gone = await http.post(url, json=body, headers={"accept": "application/json, text/event-stream"})
            except httpx.ConnectError:
                continue  # the killed worker's server
            assert gone.status_code == 404 and token not in gone.text and "trial" not in gone.text
            refused.append(url)
    assert refused == urls[1:]  # the live worker's URL of the ended trial


async def test_a_trial_whose_turns_outcome_is_never_known_is_given_up_after_3_restarts(passhat_procs, model_server):
    """An agent that answers with plain Messages (no task to follow) and whose server
    drops the connection mid-reply to every message that continues a context: each time
    the turn's outcome is not known (the agent got the message), and the trial restarts
    in a fresh context; after 3 restarts it is not evaluable, and `show` and `report`
    say how often it restarted."""
    ph, srv = passhat_procs, model_server
    run_id = "a2a-restart-bound"
    args = {**http_args(srv.url)}
    args["api_key"] = os.environ[args.pop("api_key_env")]
    agent_side = example().ChatAgent("openai/oracle", args, reply_as="message")
    with A2AAgentServer(agent_side, wrap=dropping_follow_ups) as agent:
        started = ph.cli("run", "--domain", "airline", "--task", "4", "--agent", f"a2a:{agent.url}",
                         "--user-model", "scripted/oracle", "--trials", "1", "--run-id", run_id, "--detach")
        assert started.returncode == 0, started.stderr
        worker = ph.start_worker()
        await worker.ready()
        store, trial_id = Store(ph.db_url), f"{run_id}/a2a/airline/4/trial-0"
        client = await connect(ph.temporal_address)
        await run_result(client, run_id, timeout=300)
        received = agent.received
    [trial] = store.trials(run_id)
    assert trial.status == "not_evaluable" and trial.reward is None
    assert trial.error_class == protocol.RESTART
    assert f"restarted {protocol.MAX_RESTARTS} times in a fresh A2A context" in trial.error
    assert store.set_aside_ending(run_id, protocol.RESTART) == {trial_id: protocol.MAX_RESTARTS}
    # each attempt: the first message, answered, and the second, whose answer was lost
    attempts = protocol.MAX_RESTARTS + 1
    assert len(received) == len(set(received)) == 2 * attempts
    assert len(agent_side.histories) == attempts  # a fresh context each time
    shown = ph.cli("show", trial_id)
    assert f"restarted {protocol.MAX_RESTARTS} times in a fresh A2A context" in shown.stdout, shown.stdout
    assert json.loads(ph.cli("show", trial_id, "-o", "json").stdout)["a2a_restarts"] == protocol.MAX_RESTARTS
    report = ph.cli("report", run_id)
    assert f"A2A restarts: {protocol.MAX_RESTARTS} in 1 trial(s)" in report.stdout, report.stdout
    assert json.loads(ph.cli("report", run_id, "-o", "json").stdout)["runs"][0]["a2a_restarts"] == {
        trial_id: protocol.MAX_RESTARTS}
