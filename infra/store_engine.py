"""How the results store connects: the engine for SQLite (a file under PASSHAT_HOME) or
PostgreSQL, and the creation of its tables, which several workers may attempt at once."""

from __future__ import annotations

import time
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sqlalchemy import event, text
from sqlalchemy.engine import Engine
from sqlalchemy.exc import OperationalError
from sqlalchemy.pool import StaticPool
from sqlmodel import SQLModel, create_engine

from passhat.infra.store_tables import TABLES, add_missing_columns

# How long a SQLite writer waits for another writer's lock before giving up (ms).
SQLITE_BUSY_TIMEOUT_MS = 60_000
# Execution option that marks a read-only transaction (see _on_begin).
READ_ONLY = "passhat_read_only"
# Fail fast on a PostgreSQL host that drops packets instead of refusing (s).
PG_CONNECT_TIMEOUT_S = 10
# PostgreSQL advisory-lock key that serialises schema creation (any stable number).
_SCHEMA_LOCK_KEY = zlib.crc32(b"passhat.store.schema")


def make_engine(parsed: Any, dialect: str) -> Engine:
    """The engine of a store at `parsed` (a URL): PostgreSQL with pre-ping and a connect
    timeout; SQLite in WAL mode, whose writing transactions take the lock up front."""
    if dialect == "postgresql":
        return create_engine(
            parsed,
            # Workers live for hours; a restarted server must not break them.
            pool_pre_ping=True,
            connect_args={"connect_timeout": PG_CONNECT_TIMEOUT_S},
        )
    database = parsed.database
    in_memory = not database or database == ":memory:"
    if not in_memory:
        Path(database).expanduser().parent.mkdir(parents=True, exist_ok=True)
    engine = create_engine(
        parsed,
        connect_args={
            "check_same_thread": False,
            "timeout": SQLITE_BUSY_TIMEOUT_MS / 1000,
        },
        # An in-memory database exists once per connection: share one.
        **({"poolclass": StaticPool} if in_memory else {}),
    )

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn: Any, _record: Any) -> None:
        # Let SQLAlchemy emit BEGIN itself (below) instead of sqlite3's lazy BEGIN.
        dbapi_conn.isolation_level = None
        cur = dbapi_conn.cursor()
        cur.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}")
        # WAL: readers (the CLI's progress display) never block the workers' writes.
        cur.execute("PRAGMA journal_mode=WAL")
        cur.execute("PRAGMA synchronous=NORMAL")
        cur.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Any) -> None:
        # A writing transaction takes the write lock up front (IMMEDIATE), so
        # busy_timeout applies: a deferred one that reads and then writes fails at
        # once with "database is locked" when another process wrote in between,
        # whatever the timeout. A reading one takes no lock at all: under WAL it
        # reads a snapshot, so progress displays and step lookups never queue
        # behind the workers' writes.
        reading = conn.get_execution_options().get(READ_ONLY, False)
        conn.exec_driver_sql("BEGIN" if reading else "BEGIN IMMEDIATE")

    return engine


def create_tables(engine: Engine, dialect: str) -> None:
    """The tables that are missing, and the nullable columns added since a database was
    written; nothing is dropped or rewritten."""
    def create() -> None:
        with engine.begin() as conn:
            if dialect == "postgresql":
                # Workers starting together would race on CREATE TABLE; serialise them.
                conn.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": _SCHEMA_LOCK_KEY})
            SQLModel.metadata.create_all(conn, tables=TABLES)
            add_missing_columns(conn)

    if dialect == "sqlite":
        retry_while_locked(create, SQLITE_BUSY_TIMEOUT_MS / 1000)
    else:
        create()


def retry_while_locked(attempt: Callable[[], None], within_s: float, first_wait_s: float = 0.02) -> None:
    """attempt(), again while SQLite answers "database is locked", for up to within_s.

    Worker processes started together (`passhat worker --processes N`, `run --workers N`)
    open a new database file at once. Each connection first switches it to WAL, which
    needs the exclusive lock: two connections that both hold the shared lock and want it
    would wait on each other, so SQLite answers one at once with "database is locked",
    without its busy timeout (seen on CI: a worker exited with it). Trying again is
    what the busy timeout would have done."""
    deadline = time.monotonic() + within_s
    wait = first_wait_s
    while True:
        try:
            return attempt()
        except OperationalError as err:
            if "database is locked" not in str(err) or time.monotonic() + wait > deadline:
                raise
        time.sleep(wait)
        wait = min(wait * 2, 1.0)
