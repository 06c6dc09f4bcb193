"""Warm start, the command's side: hand a run's command to the warm process
(passhat.cli.warm_server) and wait for its exit status, or say it must run here.

A fresh interpreter spends seconds of CPU importing litellm and tau2 before its first
model call, far more than the rest of a run's start-up. On the embedded default the
warm process has imported them already, and forks a copy of itself for each command;
this module keeps to the standard library and passhat.infra.settings/secrets, so the
hand-over costs a few milliseconds. docs/architecture.md ("Warm start") tells the whole
design; PASSHAT_WARM_START=0 turns it off."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

from passhat.infra import secrets, settings

# The commands that execute runs, and so import litellm and tau2 before their first call.
WARM_COMMANDS = {"run", "demo", "resume", "gate"}
SOCKET_NAME = "warm.sock"
LOG_NAME = "warm.log"
# Passed on to the command with the request: standard input, output and error.
STANDARD_FDS = (0, 1, 2)
# The environment this process started with, before passhat's own settings (loguru's,
# say) are added to it: what a command brings and what a warm process starts with.
STARTED_WITH = dict(os.environ)


def socket_path() -> Path:
    return settings.home() / SOCKET_NAME


def enabled() -> bool:
    """Warm start serves the embedded default only: its lifetime follows the embedded
    Temporal server's (a cluster has no such server on this machine to follow). It
    needs Linux's process descriptors (os.pidfd_open) to follow its commands."""
    return (os.environ.get("PASSHAT_WARM_START", "1") != "0" and settings.temporal_address() is None
            and hasattr(os, "pidfd_open"))


def command_name(args: list[str]) -> str | None:
    """The command of a `passhat` command line (its first word after the global
    options), or None when it asks for help."""
    if "--help" in args or "-h" in args:
        return None
    return next((a for a in args if not a.startswith("-")), None)


def run_warm(argv: list[str]) -> int | None:
    """Run `argv` in the warm process and return its exit status, or None when it must
    run in this process: not a run's command, warm start off, no warm process ready, or
    one started with other code or another environment (it then makes way for a new one)."""
    if command_name(argv[1:]) not in WARM_COMMANDS or not enabled():
        return None
    try:
        conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        conn.connect(str(socket_path()))
    except (OSError, ValueError):
        start_warm_process()
        return None
    with conn, _Forwarding() as forwarding:
        try:
            request = json.dumps({"argv": argv, "env": STARTED_WITH, "cwd": os.getcwd(),
                                  "path0": sys.path[0]}).encode()
            socket.send_fds(conn, [len(request).to_bytes(4, "big") + request], list(STANDARD_FDS))
            reply = _read_reply(conn)
        except OSError:
            reply = None
        if reply is None or "stale" in reply:
            if forwarding.pending:  # Ctrl-C'd during the hand-over: nothing started
                return 128 + forwarding.pending[0]
            start_warm_process()
            return None
        forwarding.to(reply["started"])
        try:
            reply = _read_reply(conn)
        except OSError:
            reply = None
    if reply is None or "exit" not in reply:
        print("passhat: the warm process ended before the command did; "
              f"see {settings.home() / 'logs' / LOG_NAME}, or set PASSHAT_WARM_START=0", file=sys.stderr)
        return 1
    return int(reply["exit"])


class _Forwarding:
    """While a command runs in the warm process, the signals a terminal or a supervisor
    sends this process (Ctrl-C, a SIGTERM) go to the command's process group, as if it
    ran here; one that comes before the group exists waits for it."""

    SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT)

    def __init__(self) -> None:
        self.pid: int | None = None
        self.pending: list[int] = []

    def __enter__(self) -> "_Forwarding":
        self.saved = {s: signal.signal(s, self._forward) for s in self.SIGNALS}
        return self

    def __exit__(self, *exc: object) -> None:
        for signum, handler in self.saved.items():
            signal.signal(signum, handler)

    def to(self, pid: int) -> None:
        self.pid = pid
        for signum in self.pending:
            self._send(signum)

    def _forward(self, signum: int, _frame: object) -> None:
        if self.pid is None:
            self.pending.append(signum)
        else:
            self._send(signum)

    def _send(self, signum: int) -> None:
        try:
            os.killpg(self.pid, signum)
        except ProcessLookupError:
            pass


def _read_reply(conn: socket.socket) -> dict | None:
    """One JSON line from the warm process; None at end of stream."""
    line = b""
    while not line.endswith(b"\n"):
        chunk = conn.recv(4096)
        if not chunk:
            return None
        line += chunk
    return json.loads(line)


def start_warm_process() -> None:
    """Start a warm process for this PASSHAT_HOME in the background, unless one is
    there, when the embedded Temporal server runs (so no command that fails before any
    run starts leaves one). Its environment is this one without keys: it never holds a
    secret, and each command brings its own. A second one started meanwhile finds the
    first's lock and ends."""
    if not enabled() or warm_process_answers() or not embedded_server_answers():
        return
    env = {k: v for k, v in STARTED_WITH.items() if not secrets.is_secret_env(k)}
    logs = settings.home() / "logs"
    try:
        logs.mkdir(parents=True, exist_ok=True)
        with open(logs / LOG_NAME, "ab") as log:
            # -P: the folder it is started in is never on its import path, as `python -m`
            # would put it first; from the folder holding a checkout named `passhat`, that
            # would import the folder as a namespace package. Its first import path is
            # this command's (the `passhat` script's folder). It keeps this folder as its
            # working directory: a relative PASSHAT_HOME or store URL means what it means
            # here (each command runs in its own caller's folder all the same).
            subprocess.Popen([sys.executable, "-P", "-m", "passhat.cli.warm_server", sys.path[0]], env=env,
                             stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                             start_new_session=True, close_fds=True)
    except OSError:
        pass  # the command runs here all the same


def warm_process_answers() -> bool:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
        try:
            probe.connect(str(socket_path()))
            return True
        except (OSError, ValueError):
            return False


def warm_process_pid() -> int | None:
    """The pid of the warm process that serves this PASSHAT_HOME, if one does."""
    if not warm_process_answers():
        return None
    try:
        return int((settings.home() / "warm.lock").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def stop_warm_process() -> bool:
    """Ask this PASSHAT_HOME's warm process to end; whether one was there."""
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
            conn.connect(str(socket_path()))
            request = json.dumps({"stop": True}).encode()
            conn.sendall(len(request).to_bytes(4, "big") + request)
            return _read_reply(conn) is not None
    except OSError:
        return False


def embedded_server_answers() -> bool:
    """Whether this PASSHAT_HOME's embedded Temporal server runs, on whichever ports it
    was started (imports Temporal's client: only off a warm command's path)."""
    from passhat.infra.temporal_server import EmbeddedServer

    try:
        return EmbeddedServer(settings.home()).status().running
    except (OSError, ValueError):
        return False


def receive_request(conn: socket.socket) -> tuple[dict | None, list[int]]:
    """The warm process's side of send_fds above: the request and the descriptors that
    came with it (none for a stop request); None for a probe (a connection closed
    without a word: is a warm process there?)."""
    data, fds, _flags, _addr = socket.recv_fds(conn, 65536, len(STANDARD_FDS))
    if not data:
        return None, list(fds)
    while len(data) < 4 or len(data) < 4 + int.from_bytes(data[:4], "big"):
        chunk = conn.recv(65536)
        if not chunk:
            raise ConnectionError("the request was cut short")
        data += chunk
    return json.loads(data[4:4 + int.from_bytes(data[:4], "big")]), list(fds)


def send_reply(conn: socket.socket, reply: dict) -> None:
    conn.sendall(json.dumps(reply).encode() + b"\n")

