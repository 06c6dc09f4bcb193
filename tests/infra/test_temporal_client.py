"""Connecting a client: to TEMPORAL_ADDRESS or the embedded server, failing in one line."""

from __future__ import annotations

import json
import socket
import time

import pytest

from passhat.infra.temporal_client import TemporalUnreachable, connect
from passhat.infra.temporal_server import EmbeddedServer

from tests.fixtures_temporal import free_port


async def test_unreachable_address_fails_fast_and_clearly():
    address = f"127.0.0.1:{free_port()}"  # nothing listens: connection refused
    started = time.monotonic()
    with pytest.raises(TemporalUnreachable) as err:
        await connect(address)
    assert time.monotonic() - started < 10
    assert address in str(err.value)
    assert "passhat server start" in str(err.value) and "TEMPORAL_ADDRESS" in str(err.value)


async def test_silent_port_fails_within_timeout():
    # Accepts TCP but never speaks gRPC: Client.connect alone would wait forever.
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        address = f"127.0.0.1:{silent.getsockname()[1]}"
        started = time.monotonic()
        with pytest.raises(TemporalUnreachable, match=address):
            await connect(address, timeout=2)
        assert time.monotonic() - started < 5


async def test_unknown_namespace(temporal_server: EmbeddedServer):
    with pytest.raises(TemporalUnreachable, match="no namespace 'nope'"):
        await connect(temporal_server.address, namespace="nope")


async def test_connect_without_address_uses_embedded_server(
    temporal_server: EmbeddedServer, monkeypatch
):
    # No TEMPORAL_ADDRESS: connect() finds (ensure_running) the server of PASSHAT_HOME.
    monkeypatch.delenv("TEMPORAL_ADDRESS", raising=False)
    monkeypatch.delenv("TEMPORAL_NAMESPACE", raising=False)
    monkeypatch.setenv("PASSHAT_HOME", str(temporal_server.home))
    client = await connect()
    assert client.service_client.config.target_host == temporal_server.address
    assert temporal_server.status().pid == json.loads(temporal_server.state_path.read_text())["pid"]


async def test_connect_uses_temporal_address(temporal_server: EmbeddedServer, monkeypatch):
    monkeypatch.setenv("TEMPORAL_ADDRESS", temporal_server.address)
    client = await connect()
    assert client.service_client.config.target_host == temporal_server.address
