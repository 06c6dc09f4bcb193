"""A throwaway PostgreSQL server for tests that stop and start the results store.

Debian's server binaries (initdb, pg_ctl, from the `postgresql` package) are run against
a data directory of the test's own, listening on a free port on 127.0.0.1 only (no Unix
socket), with trust authentication:

    with ThrowawayPostgres() as pg:        # initdb + start + a database
        url = pg.url                       # postgresql+psycopg://postgres@127.0.0.1:PORT/passhat
        pg.stop()                          # clients now get "connection refused"
        pg.start()                         # same data directory, same port

PostgreSQL refuses to run as root: when the tests run as root, every server command runs
as the `postgres` system user (`runuser -u postgres --`) and the data directory belongs to
it. Every wait polls a condition against a deadline; nothing sleeps and hopes.
"""

from __future__ import annotations

import glob
import os
import re
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Self

import psycopg
from passhat.testing.harness import free_port

SERVER_USER = "postgres"  # who runs the server when we are root (Debian's system user)
SUPERUSER = "postgres"  # the database superuser initdb creates
POLL_S = 0.05


class PostgresUnavailable(RuntimeError):
    """The PostgreSQL server binaries (or the user to run them as) are missing."""


def find_bin_dir() -> Path:
    """The directory with initdb and pg_ctl: $PATH first, then Debian's
    /usr/lib/postgresql/<version>/bin (the newest version)."""
    initdb = shutil.which("initdb")
    if initdb and shutil.which("pg_ctl"):
        return Path(initdb).resolve().parent

    def version(path: str) -> tuple[int, ...]:
        found = re.search(r"/postgresql/([\d.]+)/bin", path)
        return tuple(int(p) for p in found.group(1).split(".") if p) if found else ()

    for candidate in sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=version, reverse=True):
        bin_dir = Path(candidate).parent
        if (bin_dir / "pg_ctl").exists():
            return bin_dir
    raise PostgresUnavailable(
        "no PostgreSQL server binaries (initdb, pg_ctl): install Debian's `postgresql` "
        "package (tests/run.sh does when it runs as root)"
    )


class ThrowawayPostgres:
    """One PostgreSQL server in a temporary directory, on a free port of 127.0.0.1."""

    def __init__(self, database: str = "passhat", timeout: float = 60) -> None:
        self.bin_dir = find_bin_dir()
        self.database = database
        self.timeout = timeout
        self.as_root = os.geteuid() == 0
        if self.as_root:
            try:
                import pwd

                entry = pwd.getpwnam(SERVER_USER)
            except KeyError:
                raise PostgresUnavailable(
                    f"running as root, and there is no `{SERVER_USER}` user to run PostgreSQL as"
                ) from None
            self._uid, self._gid = entry.pw_uid, entry.pw_gid
        # Under /tmp, not pytest's tmp_path: that is private to root (0700), and the
        # server user has to reach its data directory.
        self.root = Path(tempfile.mkdtemp(prefix="passhat-pg-"))
        self.data_dir = self.root / "data"
        self.log = self.root / "server.log"
        self.port = free_port()
        self._initialised = False

    # -------------------------------------------------------------------------------
    @property
    def admin_conninfo(self) -> str:
        return f"host=127.0.0.1 port={self.port} user={SUPERUSER} dbname=postgres connect_timeout=2"

    @property
    def url(self) -> str:
        """The SQLAlchemy URL of the test database (psycopg 3 driver)."""
        return f"postgresql+psycopg://{SUPERUSER}@127.0.0.1:{self.port}/{self.database}"

    def _cmd(self, *args: str) -> list[str]:
        return (["runuser", "-u", SERVER_USER, "--"] if self.as_root else []) + list(args)

    def _run(self, *args: str, timeout: float | None = None) -> str:
        proc = subprocess.run(
            self._cmd(*args), capture_output=True, text=True, stdin=subprocess.DEVNULL, check=False,
            timeout=timeout or self.timeout, cwd=self.root,
        )
        if proc.returncode != 0:
            raise RuntimeError(
                f"{' '.join(args[:2])} exited {proc.returncode}:\n{proc.stdout}{proc.stderr}\n"
                f"server log:\n{self.log_tail()}"
            )
        return proc.stdout

    def log_tail(self, chars: int = 3000) -> str:
        try:
            return self.log.read_text(errors="replace")[-chars:]
        except OSError:
            return "(no log)"

    def _wait(self, predicate, what: str) -> None:
        deadline = time.monotonic() + self.timeout
        while not predicate():
            if time.monotonic() >= deadline:
                raise TimeoutError(
                    f"PostgreSQL on port {self.port}: timed out after {self.timeout:.0f}s "
                    f"waiting for {what}\nserver log:\n{self.log_tail()}"
                )
            time.sleep(POLL_S)

    # -------------------------------------------------------------------------------
    def accepts_connections(self) -> bool:
        try:
            with psycopg.connect(self.admin_conninfo):
                return True
        except psycopg.OperationalError:
            return False

    def running(self) -> bool:
        """Whether a postmaster owns the data directory (its pid file exists)."""
        return (self.data_dir / "postmaster.pid").exists()

    def init(self) -> None:
        self.data_dir.mkdir(mode=0o700)
        if self.as_root:
            for path in (self.root, self.data_dir):
                os.chown(path, self._uid, self._gid)
        self._run(
            str(self.bin_dir / "initdb"), "-D", str(self.data_dir), "-U", SUPERUSER,
            "--auth=trust", "--encoding=UTF8", "--locale=C", "--no-sync", "--no-instructions",
        )
        self._initialised = True

    def start(self) -> None:
        """Start the server (initdb first, the first time) and wait until it accepts
        connections. Listens on 127.0.0.1:port only, no Unix socket."""
        if not self._initialised:
            self.init()
        options = (
            f"-c listen_addresses=127.0.0.1 -c port={self.port} -c unix_socket_directories='' "
            "-c fsync=off -c max_connections=200"
        )
        # -W: do not let pg_ctl wait; we wait for a connection ourselves, with a deadline.
        self._run(str(self.bin_dir / "pg_ctl"), "start", "-W", "-D", str(self.data_dir),
                  "-l", str(self.log), "-o", options)
        self._wait(self.accepts_connections, "the server to accept connections")

    def create_database(self) -> str:
        with psycopg.connect(self.admin_conninfo, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{self.database}"')
        return self.url

    def stop(self, mode: str = "fast") -> None:
        """Stop the server (fast: connected sessions are terminated) and wait until it has
        exited and its port refuses connections."""
        if not self.running():
            return
        self._run(str(self.bin_dir / "pg_ctl"), "stop", "-W", "-D", str(self.data_dir), "-m", mode)
        self._wait(lambda: not self.running() and not self.accepts_connections(),
                   "the server to exit")

    def cleanup(self) -> None:
        """Stop the server if it runs (immediate) and remove its directory."""
        try:
            if self.running():
                self.stop(mode="immediate")
        finally:
            shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> Self:
        try:
            self.start()
            self.create_database()
        except BaseException:
            self.cleanup()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.cleanup()
