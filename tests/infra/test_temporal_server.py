"""The embedded Temporal dev server, against the real `temporal` binary."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import time
import urllib.request
from datetime import timedelta

import pytest
from temporalio import activity, workflow
from temporalio.api.enums.v1 import IndexedValueType
from temporalio.api.operatorservice.v1 import RemoveSearchAttributesRequest
from temporalio.client import Client, WorkflowExecutionStatus
from temporalio.common import SearchAttributePair, TypedSearchAttributes
from temporalio.worker import UnsandboxedWorkflowRunner, Worker

from passhat.infra import search_attributes as sa
from passhat.infra.temporal_client import connect
from passhat.infra.temporal_server import EmbeddedServer, TemporalServerError, find_temporal_binary

from tests.fixtures_temporal import free_port, start_local_env, started_server


async def _start_idle_workflow(client: Client, workflow_id: str, run: str = "r1"):
    """A workflow nobody executes (no worker on its queue): it just stays RUNNING."""
    return await client.start_workflow(
        "Idle",
        id=workflow_id,
        task_queue="no-worker-here",
        search_attributes=TypedSearchAttributes([
            SearchAttributePair(sa.RUN, run),
            SearchAttributePair(sa.DOMAIN, "airline"),
            SearchAttributePair(sa.OUTCOME, "running"),
        ]),
    )


async def _list_ids(client: Client, query: str, expect: int, timeout: float = 10.0) -> list[str]:
    """Visibility is written asynchronously: poll until `expect` rows or the deadline."""
    deadline = time.monotonic() + timeout
    while True:
        ids = [wf.id async for wf in client.list_workflows(query)]
        if len(ids) >= expect or time.monotonic() > deadline:
            return ids
        await asyncio.sleep(0.1)


def test_search_attribute_flags():
    flags = sa.start_dev_flags()
    assert flags[:2] == ["--search-attribute", "PasshatRun=Keyword"]
    assert flags[1::2] == [
        "PasshatRun=Keyword", "PasshatAgentModel=Keyword", "PasshatDomain=Keyword",
        "PasshatTask=Keyword", "PasshatOutcome=Keyword",
    ]


def test_binary_is_found():
    assert find_temporal_binary().name == "temporal"


async def test_running_server_answers(temporal_server: EmbeddedServer):
    st = temporal_server.status()
    assert st.running and st.pid
    assert st.address == f"127.0.0.1:{temporal_server.port}"
    assert st.ui_url == f"http://127.0.0.1:{temporal_server.ui_port}"

    state = json.loads(temporal_server.state_path.read_text())
    assert state["pid"] == st.pid == int(temporal_server.pid_path.read_text())
    assert state["address"] == st.address

    client = await connect(st.address)
    assert client.namespace == "default"
    assert await client.service_client.check_health()
    registered = await sa.registered(client, "default")
    for key in sa.ALL:
        assert registered[key.name] == IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD

    # The web UI is served too.
    with urllib.request.urlopen(st.ui_url, timeout=10) as resp:
        assert resp.status == 200


@activity.defn
async def _noop() -> None:
    return None


@workflow.defn(sandboxed=False)
class _Sequential:
    @workflow.run
    async def run(self, calls: int) -> None:
        for _ in range(calls):
            await workflow.execute_activity(_noop, start_to_close_timeout=timedelta(seconds=30))


class _MeteredServer(EmbeddedServer):
    """The embedded server's own command, with its /metrics served as well."""

    def __init__(self, *args, metrics_port: int, **kwargs):
        super().__init__(*args, **kwargs)
        self.metrics_port = metrics_port

    def command(self) -> list[str]:
        return super().command() + ["--metrics-port", str(self.metrics_port)]


def _metric(text: str, name: str, **labels: str) -> float:
    total = 0.0
    for line in text.splitlines():
        if line.startswith(name + "{") and all(f'{k}="{v}"' in line for k, v in labels.items()):
            total += float(line.rsplit(" ", 1)[1])
    return total


async def test_activities_start_eagerly(tmp_path):
    """An activity a workflow task schedules on the worker's own queue starts in the
    worker that completed that task, in the same request, rather than through the queue
    and a poll (the dev server's default): the server's own counters say so."""
    metrics_port = free_port()
    server = await started_server(
        tmp_path, lambda home, **ports: _MeteredServer(home, metrics_port=metrics_port, **ports)
    )
    try:
        client = await connect(server.address)
        async with Worker(client, task_queue="eager", workflows=[_Sequential], activities=[_noop],
                          workflow_runner=UnsandboxedWorkflowRunner()):
            await client.execute_workflow(_Sequential.run, 10, id="eager", task_queue="eager",
                                          execution_timeout=timedelta(seconds=120))
        # The server publishes its counters about once a second: wait for them.
        deadline = time.monotonic() + 30
        while True:
            with urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=10) as resp:
                eager = _metric(resp.read().decode(), "activity_eager_execution", taskqueue="eager")
            if eager >= 10 or time.monotonic() > deadline:
                break
            await asyncio.sleep(0.2)
    finally:
        server.stop()
    assert eager == 10


async def test_register_is_idempotent(temporal_server: EmbeddedServer):
    client = await connect(temporal_server.address)
    await sa.register(client, "default")
    await sa.register(client, "default")
    assert {k.name for k in sa.ALL} <= set(await sa.registered(client, "default"))


async def test_workflows_survive_sigkill(fresh_temporal_server: EmbeddedServer):
    server = fresh_temporal_server
    client = await connect(server.address)
    await _start_idle_workflow(client, "before-kill")
    assert await _list_ids(client, 'PasshatRun="r1"', 1) == ["before-kill"]

    pid = server.status().pid
    os.kill(pid, signal.SIGKILL)
    # Not running any more, although the pid file is still there.
    deadline = time.monotonic() + 10
    while server.status().running and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    assert not server.status().running

    st = await server.start()  # stale pid file, same database file
    assert st.running and st.pid != pid

    client = await connect(server.address)
    desc = await client.get_workflow_handle("before-kill").describe()
    assert desc.status == WorkflowExecutionStatus.RUNNING
    assert desc.typed_search_attributes.get(sa.RUN) == "r1"
    assert await _list_ids(client, 'PasshatRun="r1" AND PasshatOutcome="running"', 1) == [
        "before-kill"
    ]
    # And the restarted server takes new work.
    await _start_idle_workflow(client, "after-restart")
    assert sorted(await _list_ids(client, 'PasshatRun="r1"', 2)) == ["after-restart", "before-kill"]


async def test_restart_reregisters_missing_search_attributes(fresh_temporal_server):
    # The dev server ignores --search-attribute on an existing database, so an old
    # database lacking one must get it from register() at start.
    server = fresh_temporal_server
    client = await connect(server.address)
    await client.operator_service.remove_search_attributes(
        RemoveSearchAttributesRequest(namespace="default", search_attributes=[sa.TASK.name])
    )
    assert sa.TASK.name not in await sa.registered(client, "default")
    server.stop()
    await server.start()
    client = await connect(server.address)
    assert sa.TASK.name in await sa.registered(client, "default")


async def test_stop(fresh_temporal_server: EmbeddedServer):
    server = fresh_temporal_server
    pid = server.status().pid
    assert server.stop() is True
    assert not server.pid_path.exists() and not server.state_path.exists()
    st = server.status()
    assert not st.running and st.pid is None
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
    assert server.stop() is False


async def test_ensure_running_reuses_live_server(temporal_server: EmbeddedServer):
    pid = temporal_server.status().pid
    # Another command on the same home, asking for other ports: it gets the live server.
    other = EmbeddedServer(temporal_server.home, port=free_port(), ui_port=free_port())
    st = await other.ensure_running()
    assert st.pid == pid and st.running
    assert st.address == temporal_server.address and other.port == temporal_server.port


async def test_ensure_running_starts_when_down(fresh_temporal_server: EmbeddedServer):
    server = fresh_temporal_server
    old = server.status().pid
    os.kill(old, signal.SIGKILL)
    st = await server.ensure_running()
    assert st.running and st.pid != old


async def test_start_refuses_when_already_running(temporal_server: EmbeddedServer):
    with pytest.raises(TemporalServerError, match="already runs"):
        await temporal_server.start()


async def test_port_taken_by_another_program(tmp_path):
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", 0))
        squatter.listen()
        port = squatter.getsockname()[1]
        server = EmbeddedServer(tmp_path, port=port, ui_port=free_port())
        with pytest.raises(TemporalServerError, match=f"127.0.0.1:{port} is already in use"):
            await server.start()
    assert not server.pid_path.exists()


async def test_early_exit_reports_log(tmp_path):
    (tmp_path / "temporal.db").write_text("this is not a sqlite database\n" * 100)
    server = EmbeddedServer(tmp_path, port=free_port(), ui_port=free_port())
    with pytest.raises(TemporalServerError, match="exited before answering") as err:
        await server.start()
    assert "temporal.log" in str(err.value)
    assert not server.status().running and not server.pid_path.exists()


async def test_workflow_environment_on_installed_binary():
    async with await start_local_env() as env:
        assert await env.client.service_client.check_health()
        registered = await sa.registered(env.client, "default")
        assert {k.name for k in sa.ALL} <= set(registered)
