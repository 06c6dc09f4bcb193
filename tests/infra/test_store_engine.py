"""Opening the results store while other processes open it: SQLite may answer "database
is locked" at once, busy timeout or not (two connections switching a new file to WAL),
and the store tries again rather than failing the worker (infra/store_engine.py)."""

from __future__ import annotations

import sqlite3

import pytest
from sqlalchemy import create_engine
from sqlalchemy.exc import OperationalError

from passhat.infra.store_engine import retry_while_locked


@pytest.fixture
def locked_db(tmp_path):
    """A database file another connection holds the exclusive lock of, and an engine that
    never waits for a lock (timeout 0): every write answers "database is locked" at once
    until the holder lets go."""
    path = tmp_path / "results.db"
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("CREATE TABLE t (x INTEGER)")
    holder.execute("BEGIN EXCLUSIVE")
    engine = create_engine(f"sqlite:///{path}", connect_args={"timeout": 0})
    yield holder, engine
    engine.dispose()
    holder.close()


def write(engine) -> None:  # noqa: ANN001
    with engine.begin() as conn:
        conn.exec_driver_sql("INSERT INTO t VALUES (1)")


def test_a_locked_database_is_tried_again_until_the_lock_is_gone(locked_db):
    holder, engine = locked_db
    attempts = []

    def attempt() -> None:
        attempts.append(1)
        if len(attempts) == 3:
            holder.execute("COMMIT")  # the other process is done with the file
        write(engine)

    retry_while_locked(attempt, within_s=30, first_wait_s=0.001)
    assert len(attempts) == 3
    with engine.connect() as conn:
        assert conn.exec_driver_sql("SELECT count(*) FROM t").scalar() == 1


def test_a_lock_that_stays_fails_once_the_time_is_up(locked_db):
    _, engine = locked_db
    with pytest.raises(OperationalError, match="database is locked"):
        retry_while_locked(lambda: write(engine), within_s=0.05, first_wait_s=0.001)


def test_another_error_is_not_tried_again(tmp_path):
    engine = create_engine(f"sqlite:///{tmp_path / 'empty.db'}")
    attempts = []

    def attempt() -> None:
        attempts.append(1)
        write(engine)  # no table t: not a lock

    with pytest.raises(OperationalError, match="no such table"):
        retry_while_locked(attempt, within_s=30)
    assert attempts == [1]
    engine.dispose()
