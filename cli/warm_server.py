"""Warm start, the warm process's side: a process that has imported what a run needs
(litellm, tau2, Temporal's worker, passhat's workflows and the tau2 domains' data) and
forks a copy of itself for each command passhat.cli.warm_start hands it. The copy takes
the command's standard input, output and error, working directory and environment (its
keys included), then runs it exactly as `passhat` would have; this process reports the
copy's exit status to the command's side, and ends the copy if that side goes away.

It serves one PASSHAT_HOME (its socket and lock are there) and ends on its own: after
IDLE_S without a command, once the embedded Temporal server stops answering, when
`passhat server stop` asks, or at the first command whose passhat code, installed
packages or environment (keys and per-shell variables aside) differ from what it
started with; the next command then runs the usual way and starts a new one.

Run as `python -P -m passhat.cli.warm_server`; nothing of the command line (its consoles
read the terminal when imported) is imported here before a fork."""

from __future__ import annotations

import fcntl
import gc
import hashlib
import importlib.util
import os
import select
import signal
import socket
import sys
import threading
import time
from pathlib import Path
from typing import NoReturn

from passhat.cli.warm_start import (
    STANDARD_FDS,
    embedded_server_answers,
    receive_request,
    send_reply,
    socket_path,
)
from passhat.infra import secrets, settings

def _idle_s() -> float:
    try:
        return float(os.environ.get("PASSHAT_WARM_IDLE_S", ""))
    except ValueError:
        return 900.0  # 15 minutes


IDLE_S = _idle_s()
CHECK_S = 5.0  # how often, when idle, it checks whether the Temporal server still answers
# Variables that differ from one shell or invocation to the next and that nothing
# imported here reads: they do not make the warm process stale. passhat reads its own
# PASSHAT_* variables when a command needs them (passhat.infra.settings), never at import.
PER_SHELL = {"PWD", "OLDPWD", "SHLVL", "_", "COLUMNS", "LINES", "TERM", "COLORTERM", "WINDOWID", "GPG_TTY"}
PER_TERMINAL = ("SSH_", "TMUX", "TERM_", "ITERM_", "VSCODE_", "WT_SESSION", "XDG_SESSION")
_lock = None  # warm.lock, open (and locked) in this process only: each fork closes it
_terminated, _wake = -1, -1  # the pipe a SIGTERM wakes the loop with (read end, write end)
# The import path before preload(): what a `passhat` process starts with. Imports may add
# to it (litellm 1.82, tau2 1.0.x's pin, appends the working directory, the folder this
# process was started in), and a command's process imports its plugins before litellm.
_start_path: list[str] = []
PACKAGES = ("passhat", "passhat.cli", "passhat.workflows", "passhat.activities",
            "passhat.domains", "passhat.infra", "passhat.results", "passhat.testing")


def fingerprint(env: dict[str, str]) -> str:
    """What a command's process must share with the warm process for a fork of it to
    be that process: passhat's source files, the installed packages, the interpreter
    and the environment without keys, per-shell and passhat's own variables. A digest, so no value
    of the environment is kept."""
    digest = hashlib.sha256(f"{sys.executable} {sys.version}".encode())
    for name in PACKAGES:
        for folder in importlib.util.find_spec(name).submodule_search_locations or []:
            for source in sorted(Path(folder).glob("*.py")):
                stat = source.stat()
                digest.update(f"{source} {stat.st_mtime_ns} {stat.st_size}".encode())
    for entry in sys.path:  # pip adds or removes entries in site-packages: its mtime moves
        if entry.endswith("-packages") and os.path.isdir(entry):
            digest.update(f"{entry} {os.stat(entry).st_mtime_ns}".encode())
    for key in sorted(env):
        if (key not in PER_SHELL and not key.startswith(("PASSHAT_", *PER_TERMINAL))
                and not secrets.is_secret_env(key)):
            digest.update(f"{key}={env[key]}\0".encode())
    return digest.hexdigest()


def preload() -> None:
    """Import what a run imports before its first model call, and load the tau2
    domains' data, as the command's own process would (passhat.workflows.worker.preload)."""
    from passhat.infra import logs

    logs.route_loguru()  # tau2's messages at import go to the log file, as in a command
    from passhat.domains.registry import domain_names
    from passhat.infra import store, temporal_client  # noqa: F401 - imported for the commands
    from passhat.workflows import client, worker  # noqa: F401 - imported for the commands

    worker.preload(domain_names())


def main() -> NoReturn:
    if len(sys.argv) > 1:  # what a `passhat` command has first on its import path
        sys.path.insert(0, sys.argv[1])  # started with -P: nothing of its folder is there
    _start_path[:] = sys.path
    home = settings.home()
    home.mkdir(parents=True, exist_ok=True)
    global _lock
    lock = _lock = open(home / "warm.lock", "a+")  # noqa: SIM115 - held, locked, for this process's life
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        sys.exit(0)  # another warm process serves this home
    lock.truncate(0)
    lock.write(f"{os.getpid()}\n")  # who serves it, for `ps` and the throughput bench
    lock.flush()
    started_as = fingerprint(dict(os.environ))  # before the imports: a file edited meanwhile makes it stale
    before = dict(os.environ)
    preload()
    # tau2 loads a .env file into the environment when imported; a command's process
    # would have its values too, where its own environment lacks them.
    from_dotenv = {k: v for k, v in os.environ.items() if k not in before}
    if threading.active_count() > 1:  # a fork would copy a lock some thread holds
        print("warm start: a thread was started while importing; not serving", file=sys.stderr)
        sys.exit(1)
    gc.freeze()  # what is loaded now stays shared with every fork
    path = socket_path()
    path.unlink(missing_ok=True)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    old_umask = os.umask(0o077)  # the socket is the user's alone: requests carry keys
    try:
        listener.bind(str(path))
    finally:
        os.umask(old_umask)
    listener.listen(16)
    print(f"warm start: pid {os.getpid()} serving {path}", file=sys.stderr, flush=True)
    _serve(listener, path, started_as, from_dotenv)


class _Command:
    """A command this process forked: its process, and the connection its `passhat`
    process waits on."""

    def __init__(self, pid: int, conn: socket.socket):
        self.pid = pid
        self.conn = conn
        self.exited = os.pidfd_open(pid)  # readable once the process has ended
        self.caller_gone = False


def _serve(listener: socket.socket, path: Path, started_as: str, from_dotenv: dict[str, str]) -> NoReturn:
    """Take commands until told to stop, made stale, idle or left without its Temporal
    server; the commands still running then are seen to their end first. A SIGTERM
    passes on to the commands running (as if sent to their processes) and ends it."""
    global _terminated, _wake
    _terminated, _wake = os.pipe()
    os.set_blocking(_wake, False)
    signal.set_wakeup_fd(_wake)  # a SIGTERM makes select() return: _terminated is readable
    signal.signal(signal.SIGTERM, lambda *_: None)
    commands: list[_Command] = []
    last_active = time.monotonic()
    while True:
        watched = [_terminated, *([listener] if listener else []), *(c.exited for c in commands),
                   *(c.conn for c in commands if not c.caller_gone)]
        ready, _, _ = select.select(watched, [], [], CHECK_S)
        for command in [c for c in commands if c.exited in ready]:
            _report_exit(command)
            commands.remove(command)
            last_active = time.monotonic()
        for command in commands:
            if command.conn in ready and _caller_gone(command.conn):
                # The `passhat` process went away (killed, say): end what it started, as
                # its own process group would have ended with it.
                command.caller_gone = True
                _signal_group(command.pid, signal.SIGTERM)
        if _terminated in ready:
            os.read(_terminated, 512)
            for command in commands:
                _signal_group(command.pid, signal.SIGTERM)
            if listener:
                listener = _stop_listening(listener, path)
        if listener and listener in ready:
            conn, _ = listener.accept()
            outcome = _take(conn, listener, commands, started_as, from_dotenv)
            if isinstance(outcome, _Command):
                commands.append(outcome)
            elif outcome == "end":
                listener = _stop_listening(listener, path)
        if listener and not ready and not commands and (
                time.monotonic() - last_active > IDLE_S or not embedded_server_answers()):
            listener = _stop_listening(listener, path)
        if listener is None and not commands:
            os._exit(0)


def _caller_gone(conn: socket.socket) -> bool:
    """The caller sends nothing after its request: its connection turns readable when
    it closes (the process ended)."""
    try:
        return not conn.recv(1)
    except OSError:
        return True


def _stop_listening(listener: socket.socket, path: Path) -> None:
    listener.close()
    path.unlink(missing_ok=True)


def _take(conn: socket.socket, listener: socket.socket, commands: list[_Command], started_as: str,
          from_dotenv: dict[str, str]) -> _Command | str | None:
    """Read one request and act on it: a _Command started, "end" (stop asked, or the
    command needs other code or another environment), or None (unreadable)."""
    try:
        request, fds = receive_request(conn)
    except (OSError, ValueError) as err:
        print(f"warm start: a request could not be read ({err})", file=sys.stderr, flush=True)
        conn.close()
        return None
    if request is None:  # a probe
        conn.close()
        return None
    if request.get("stop") or not _same_as(request["env"], started_as):
        # The socket goes first, so the command's side, told, starts a new one that binds it.
        socket_path().unlink(missing_ok=True)
        _reply_and_close(conn, {"stopping": True} if request.get("stop") else {"stale": True})
        return "end"
    pid = os.fork()
    if pid == 0:
        listener.close()
        _lock.close()  # a long run must not keep the next warm process from the lock
        signal.set_wakeup_fd(-1)
        os.close(_terminated)
        os.close(_wake)
        for other in commands:
            other.conn.close()
            os.close(other.exited)
        conn.close()
        _command(fds, request, from_dotenv)
    os.setpgid(pid, pid)  # the child does it too: whichever runs first, the group exists
    for fd in fds:
        os.close(fd)
    command = _Command(pid, conn)
    try:
        send_reply(conn, {"started": pid})
    except OSError:
        command.caller_gone = True
        _signal_group(pid, signal.SIGTERM)
    return command


def _same_as(env: dict[str, str], started_as: str) -> bool:
    try:
        return fingerprint(env) == started_as
    except Exception:  # noqa: BLE001 - passhat's files moved or went: stale all the same
        return False


def _report_exit(command: _Command) -> None:
    status = os.waitstatus_to_exitcode(os.waitpid(command.pid, 0)[1])
    os.close(command.exited)
    _reply_and_close(command.conn, {"exit": status if status >= 0 else 128 - status})


def _reply_and_close(conn: socket.socket, reply: dict) -> None:
    try:
        send_reply(conn, reply)
    except OSError:
        pass  # the command's side is gone
    conn.close()


def _signal_group(pid: int, signum: int) -> None:
    try:
        os.killpg(pid, signum)
    except ProcessLookupError:
        pass


def _command(fds: list[int], request: dict, from_dotenv: dict[str, str]) -> NoReturn:
    """The command's process: the command's descriptors, directory and environment,
    then passhat's usual entry point (which ends the process)."""
    try:
        os.setpgid(0, 0)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        for target, fd in zip(STANDARD_FDS, fds):
            os.dup2(fd, target)
        for fd in fds:
            if fd not in STANDARD_FDS:
                os.close(fd)
        sys.stdout.reconfigure(line_buffering=sys.stdout.isatty())
        os.chdir(request["cwd"])
        sys.path[:] = _start_path or sys.path  # never what this process's imports added
        sys.path[0] = request.get("path0", sys.path[0])
        env = request["env"]
        os.environ.clear()
        os.environ.update({**{k: v for k, v in from_dotenv.items() if k not in env}, **env})
        sys.argv = request["argv"]
    except BaseException as err:  # noqa: BLE001 - said on the command's terminal
        print(f"passhat: the warm process could not take the command ({err}); "
              "set PASSHAT_WARM_START=0 to run without it", file=sys.stderr, flush=True)
        os._exit(1)
    from passhat.cli.common import startup_mark
    from passhat.cli.main import main as passhat_main

    startup_mark("warm process took it")
    passhat_main()
    os._exit(0)


if __name__ == "__main__":
    main()
