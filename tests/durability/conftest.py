"""Fixtures for the durability tests: the scripted model over HTTP (a FaultServer with a
ScriptedResponder), passhat processes on a Temporal server of the test's own, and
teardown of every process a test started."""

from __future__ import annotations

import pytest

from passhat.testing.harness import Passhat, stopping_workers
from passhat.testing.fault_server import FaultServer
from passhat.testing.scripted_http import ScriptedResponder

@pytest.fixture
def responder():
    return ScriptedResponder(["airline"], latency=0.3)


@pytest.fixture
def model_server(responder):
    """The scripted model on loopback HTTP; the test sets its faults."""
    with FaultServer(responder=responder, timeout_hold=30) as srv:
        yield srv
    # Held requests are released by stop(); anything the responder raised is a test bug.
    assert not srv.errors, srv.errors[:3]


@pytest.fixture
def passhat_procs(fresh_temporal_server, tmp_path):
    """passhat processes on the test's own Temporal server; workers it started are
    stopped at teardown whatever state the test left them in."""
    yield from stopping_workers(
        Passhat(home=tmp_path / "home", temporal_address=fresh_temporal_server.address)
    )




@pytest.fixture
async def client(temporal_server):
    """A client on the session's shared dev server (tests using it pick their own queue)."""
    from passhat.infra.temporal_client import connect

    return await connect(temporal_server.address)


@pytest.fixture
def sqlite_store(tmp_path):
    from passhat.infra.store import Store

    s = Store(f"sqlite:///{tmp_path / 'results.db'}")
    yield s
    s.close()
