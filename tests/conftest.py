"""Shared fixtures."""

from __future__ import annotations

import os
import signal
import uuid

import psycopg
import pytest
from sqlalchemy.engine import make_url
from temporalio.service import RPCError

from passhat.infra.store import Store
from passhat.infra.temporal_client import connect
from passhat.testing.scripted_http import TEST_KEY_ENV

# Runs name the loopback servers' key by its variable (a run's settings never hold a
# key); test processes and the workers they start get it from here.
os.environ.setdefault(TEST_KEY_ENV, "loopback-test-key")
# Commands run in the test's own processes: a warm process (passhat.cli.warm_server) per
# test home would outlive the test by its idle time. tests/cli/test_warm_start.py turns
# it on where it is what is tested.
os.environ.setdefault("PASSHAT_WARM_START", "0")
# pytest-xdist's worker processes (tests/run.sh) have COLUMNS=80 set, which every command a
# test starts would inherit and wrap its piped output at; a user's pipe has no such width.
os.environ.pop("COLUMNS", None)
# A suite a shell started in the background without job control (`... &`) has SIGINT
# ignored, and so would every command a test starts; the tests that press Ctrl-C need it
# as a terminal leaves it (a handled signal is the default again after exec).
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)
from tests.fixtures_temporal import fresh_temporal_server, temporal_server  # noqa: F401

# Server on which throwaway test databases are created; override for another PostgreSQL.
PG_ADMIN_URL = make_url(
    os.environ.get("PASSHAT_TEST_PG_URL", "postgresql://postgres@127.0.0.1:5432/test")
)


@pytest.fixture(params=["sqlite", "postgres"])
def db_url(request, tmp_path):
    """A results-store URL for an empty database, on each back end in turn.
    PostgreSQL gets a fresh database per test, dropped afterwards, so concurrent test
    runs never see each other's rows."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'results.db'}"
        return
    admin_url = PG_ADMIN_URL.set(drivername="postgresql").render_as_string(
        hide_password=False
    )
    try:
        admin = psycopg.connect(admin_url, autocommit=True, connect_timeout=5)
    except psycopg.OperationalError as e:
        # PostgreSQL is part of the supported stack: its tests fail rather than skip.
        pytest.fail(f"PostgreSQL not reachable at {PG_ADMIN_URL!r}: {e}")
    name = f"passhat_test_{uuid.uuid4().hex[:12]}"
    with admin:
        admin.execute(f'CREATE DATABASE "{name}"')
        try:
            yield PG_ADMIN_URL.set(
                drivername="postgresql+psycopg", database=name
            ).render_as_string(hide_password=False)
        finally:
            # FORCE: a store the test left open must not keep the database alive.
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture
async def client(temporal_server):
    return await connect(temporal_server.address)


@pytest.fixture
def store(db_url):
    s = Store(db_url)
    yield s
    s.close()


@pytest.fixture
def sqlite_store(tmp_path):
    s = Store(f"sqlite:///{tmp_path / 'results.db'}")
    yield s
    s.close()


@pytest.fixture(autouse=True)
async def no_run_outlives_its_test(request):
    """Terminate whatever a test left running on the session's Temporal server. The
    server and its `passhat` task queue are shared by every test, each with its own store:
    a run left behind (a Ctrl-C test's slow run, say) would otherwise be picked up by the
    next test's worker and written into that test's store."""
    yield
    if "temporal_server" not in request.fixturenames:
        return
    server = request.getfixturevalue("temporal_server")
    client = await connect(server.address)
    async for execution in client.list_workflows('ExecutionStatus="Running"'):
        try:
            await client.get_workflow_handle(execution.id, run_id=execution.run_id).terminate(
                reason="the test that started it has ended"
            )
        except RPCError:
            pass  # it ended on its own meanwhile
