"""More worker processes: one Python process runs on one core, so a machine's cores are
used by running more workers on the same task queue. Temporal spreads the workflow and
activity tasks over every poller; nothing here schedules work.

The extra workers are forked from the process that starts them, once it has imported
litellm and tau2 and loaded the run's domains: a fresh interpreter spends seconds of CPU
on that, more than a whole conversation's work. The fork happens before this process
has a Temporal client, an event loop or a second thread; each child makes its own."""

from __future__ import annotations

import asyncio
import ctypes
import gc
import os
import signal
import sys
import threading
import time
import traceback
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import NoReturn

from passhat.contracts import ProviderLimit
from passhat.infra import settings
from passhat.workflows.worker import serve

_PR_SET_PDEATHSIG = 1  # linux/prctl.h


def default_process_count() -> int:
    return os.cpu_count() or 1


def start_worker_processes(
    n: int, *, max_concurrent_activities: int, provider_limits: dict[str, ProviderLimit] | None = None,
    plugins: list[str] | None = None,
) -> list[int]:
    """Fork n worker processes on the task queue of the runs that need `plugins` (and
    the capped providers' queues); the caller has imported the plugins, so the children
    have them without importing anything. They share this process's environment (results store, Temporal address,
    provider keys) and end with it. Their output goes to worker-<pid>-<i>.log files in
    PASSHAT_HOME/logs, removed at exit when nothing was written. Returns their pids."""
    if n <= 0:
        return []
    if threading.active_count() > 1:  # a thread's locks would stay locked in the child
        raise RuntimeError("worker processes must be forked before any thread starts")
    logs = settings.home() / "logs"
    try:
        logs.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        from passhat.cli.run_options import UserInputError

        raise UserInputError(f"cannot create the worker log folder {logs}: {err.strerror}; "
                             "check PASSHAT_HOME") from None
    parent = os.getpid()
    sys.stdout.flush()
    sys.stderr.flush()
    # What is loaded now stays shared with the children: the collector never scans it
    # (a scan would write to, and so copy, every page it visits).
    gc.freeze()
    pids = []
    for i in range(n):
        pid = os.fork()
        if pid == 0:
            _worker_child(logs / f"worker-{parent}-{i}.log", parent, max_concurrent_activities,
                          provider_limits or {}, plugins or [])
        pids.append(pid)
    return pids


def _worker_child(log: Path, parent: int, max_concurrent_activities: int,
                  provider_limits: dict[str, ProviderLimit], plugins: list[str]) -> NoReturn:
    status = 1
    try:
        fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        os.close(fd)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.close(null)
        if sys.platform.startswith("linux"):  # end with the parent, even a SIGKILLed one
            ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
        if os.getppid() != parent:  # it ended before the line above
            os._exit(0)
        # Stopped (by the parent, or the parent's death): send the spans still buffered,
        # such as the root spans of trials this process scored, then end at once.
        signal.signal(signal.SIGTERM, lambda *_: _flush_and_exit(log, 0))
        asyncio.run(serve(max_concurrent_activities=max_concurrent_activities,
                          provider_limits=provider_limits, plugins=plugins))
        status = 0
    except KeyboardInterrupt:
        status = 0  # Ctrl-C reaches the whole process group: the parent says what to do
    except BaseException:  # noqa: BLE001 - into the worker's log, then out
        traceback.print_exc()
    finally:
        _flush_and_exit(log, status)  # never return into the parent's code


def _flush_and_exit(log: Path, status: int) -> NoReturn:
    from passhat.infra import tracing

    tracing.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    # Most workers never print a line (their records go to passhat.log): an empty log
    # would only pile up, one per worker process of every run.
    try:
        if log.stat().st_size == 0:
            log.unlink()
    except OSError:
        pass
    os._exit(status)


def stop_worker_processes(pids: list[int], grace_s: float = 10.0) -> None:
    """SIGTERM, then SIGKILL whatever is still running after grace_s; reap them all."""
    for pid in pids:
        _signal(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    left = set(pids)
    while left:
        for pid in list(left):
            try:
                done, _ = os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                done = pid
            if done:
                left.discard(pid)
        if left and time.monotonic() >= deadline:
            for pid in left:
                _signal(pid, signal.SIGKILL)
                try:
                    os.waitpid(pid, 0)
                except ChildProcessError:
                    pass
            return
        if left:
            time.sleep(0.05)


def _signal(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        pass


@contextmanager
def worker_processes(
    n: int, *, max_concurrent_activities: int, provider_limits: dict[str, ProviderLimit] | None = None,
    plugins: list[str] | None = None,
) -> Iterator[list[int]]:
    pids = start_worker_processes(
        n, max_concurrent_activities=max_concurrent_activities, provider_limits=provider_limits,
        plugins=plugins,
    )
    try:
        yield pids
    finally:
        stop_worker_processes(pids)
