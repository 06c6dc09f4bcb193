"""Pytest fixtures for a real Temporal dev server (no mocks).

tests/conftest.py imports these so every test module can use them:

    temporal_server        session-scoped EmbeddedServer in a temp dir on free ports;
                           shared, so tests must not stop or kill it. Connect with
                           `await connect(temporal_server.address)`.
    fresh_temporal_server  function-scoped, its own database and ports; for tests that
                           SIGKILL/stop/restart the server:

        async def test_survives_kill(fresh_temporal_server):
            server = fresh_temporal_server
            ...start a workflow...
            os.kill(server.status().pid, signal.SIGKILL)
            await server.start()          # same database file: history is still there

Both are stopped (SIGTERM, then SIGKILL) at teardown, whatever state the test left.
`started_server(home, make)` starts one of a subclass (a test that needs other flags),
drawing its ports as the fixtures do; the test stops it.

`start_local_env()` is for code that wants temporalio's own WorkflowEnvironment: its
start_local() downloads a server binary by default, which fails offline, so point it at
the installed CLI.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from temporalio.testing import WorkflowEnvironment

from passhat.infra import search_attributes
from passhat.infra.temporal_server import EmbeddedServer, TemporalServerError, find_temporal_binary
from passhat.testing.harness import free_port, free_ports


async def started_server(home: Path, make=EmbeddedServer) -> EmbeddedServer:  # noqa: ANN001
    """A started server of `make(home, port=, ui_port=)` (EmbeddedServer or a subclass)."""
    # Ports free when drawn can be taken before the server binds them (another test's
    # server or connection); that is the machine's race, not the code under test, so draw
    # again rather than fail the test.
    for attempt in range(3):
        port, ui_port = free_ports(2)
        server = make(home, port=port, ui_port=ui_port)
        try:
            await server.start()
            return server
        except TemporalServerError as e:
            server.stop()
            if "already in use" not in str(e) or attempt == 2:
                raise
    raise AssertionError("unreachable")


@pytest.fixture(scope="session")
async def temporal_server(tmp_path_factory) -> AsyncIterator[EmbeddedServer]:
    server = await started_server(tmp_path_factory.mktemp("temporal"))
    yield server
    server.stop()


@pytest.fixture
async def fresh_temporal_server(tmp_path) -> AsyncIterator[EmbeddedServer]:
    server = await started_server(tmp_path / "temporal")
    yield server
    server.stop()


async def start_local_env(**kwargs) -> WorkflowEnvironment:
    """temporalio's WorkflowEnvironment on the installed `temporal` binary, with passhat's
    search attributes. Use as `async with await start_local_env() as env: env.client`."""
    kwargs.setdefault("dev_server_existing_path", str(find_temporal_binary()))
    kwargs.setdefault("search_attributes", search_attributes.ALL)
    return await WorkflowEnvironment.start_local(**kwargs)
