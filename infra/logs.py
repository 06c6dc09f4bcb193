"""Where passhat's diagnostics go: everything to a log file under PASSHAT_HOME, redacted;
on the console only what the user asked for.

The console is for the command's own output (a progress bar, one line per trial that
could not be evaluated, a result). What libraries say on the side goes to
`PASSHAT_HOME/logs/passhat.log`: Temporal's Python SDK (activity failures with their
tracebacks), Temporal's core (forwarded to Python logging instead of printed with
colour codes), tau2's loguru messages and litellm's. `-v` shows them on the console too.

Every line, in the file and on the console, goes through infra.secrets.redact.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import threading
from pathlib import Path

from passhat.infra import secrets, settings

LOG_NAME = "passhat.log"
# Verbosity: 0 shows passhat's own warnings (one line each); 1 shows every library's
# warnings and passhat's info, with tracebacks; 2 and more shows debug output too.
_CONSOLE_LEVELS = {0: logging.WARNING, 1: logging.INFO}
FORMAT = "%(asctime)s %(process)d %(levelname)s %(name)s: %(message)s"
# Loggers that attach their own console handler at import; they go through ours instead.
_SELF_PRINTING = ("LiteLLM", "LiteLLM Router", "LiteLLM Proxy")
# The Python logger Temporal's core (Rust) logs are forwarded to.
TEMPORAL_CORE_LOGGER = "temporalio.core"

_lock = threading.Lock()
_core_forwarded = False


def log_path() -> Path:
    return settings.home() / "logs" / LOG_NAME


class RedactingFormatter(logging.Formatter):
    """A formatter whose output (message, arguments and traceback) holds no secret."""

    def __init__(self, fmt: str | None = FORMAT, *, tracebacks: bool = True) -> None:
        super().__init__(fmt)
        self.tracebacks = tracebacks

    def format(self, record: logging.LogRecord) -> str:
        if self.tracebacks:
            return secrets.redact(super().format(record))
        # One line: the message without exc_info / stack_info.
        saved = record.exc_info, record.exc_text, record.stack_info
        record.exc_info = record.exc_text = record.stack_info = None
        try:
            return secrets.redact(" ".join(super().format(record).split()))
        finally:
            record.exc_info, record.exc_text, record.stack_info = saved


class LogFile(logging.Handler):
    """Appends to the log file, creating its folder on the first record. A file that
    cannot be written (PASSHAT_HOME under a file, a full disk) drops records silently:
    the command's own error says what is wrong with PASSHAT_HOME."""

    def __init__(self, path: Path) -> None:
        super().__init__(logging.DEBUG)
        self.path = path
        self._stream = None
        self._broken = False
        self.setFormatter(RedactingFormatter())

    def emit(self, record: logging.LogRecord) -> None:
        if self._broken:
            return
        # workflow.logger records are emitted inside Temporal's workflow sandbox, which
        # forbids open() and reading the environment (redaction does): this handler is
        # not workflow code, so it steps outside for the write.
        with _outside_workflow_sandbox():
            self._write(record)

    def _write(self, record: logging.LogRecord) -> None:
        try:
            line = self.format(record) + "\n"
            if self._stream is None:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                self._stream = open(self.path, "a", encoding="utf-8")  # noqa: SIM115
            # One write per record: several processes append to the same file.
            self._stream.write(line)
            self._stream.flush()
        except (OSError, ValueError):
            self._broken = True

    def close(self) -> None:
        if self._stream is not None:
            self._stream.close()
            self._stream = None
        super().close()


class Console(logging.Handler):
    """Writes to whatever sys.stderr is at the time (a progress display replaces it to
    keep its bar below what is printed)."""

    def emit(self, record: logging.LogRecord) -> None:
        with _outside_workflow_sandbox():
            try:
                sys.stderr.write(self.format(record) + "\n")
                sys.stderr.flush()
            except (OSError, ValueError):
                pass


def _outside_workflow_sandbox() -> contextlib.AbstractContextManager:
    workflow = sys.modules.get("temporalio.workflow")  # loaded wherever workflows run
    if workflow is not None and workflow.in_workflow():
        return workflow.unsafe.sandbox_unrestricted()
    return contextlib.nullcontext()


class _PasshatOnly(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return record.name == "passhat" or record.name.startswith("passhat.")


def setup(verbose: int = 0) -> None:
    """Configure the root logger for a passhat process: the log file gets INFO and up
    (DEBUG with -vv), the console what `verbose` asks for. Cheap: imports nothing."""
    root = logging.getLogger()
    for handler in list(root.handlers):
        if isinstance(handler, (LogFile, Console)):
            root.removeHandler(handler)
            handler.close()
    level = logging.DEBUG if verbose >= 2 else logging.INFO
    root.setLevel(level)
    root.addHandler(LogFile(log_path()))
    console = Console(_CONSOLE_LEVELS.get(verbose, logging.DEBUG))
    console.setFormatter(RedactingFormatter("%(levelname)s %(name)s: %(message)s", tracebacks=verbose > 0)
                         if verbose else RedactingFormatter("%(message)s", tracebacks=False))
    if not verbose:
        console.addFilter(_PasshatOnly())
    root.addHandler(console)
    # Python warnings (temporalio's, litellm's) are records of logger "py.warnings".
    logging.captureWarnings(True)
    _route_self_printing_loggers(verbose)
    # tau2 logs through loguru, whose default sink prints everything to stderr; without
    # it loguru prints nothing until route_loguru() gives it one (child processes inherit).
    os.environ["LOGURU_AUTOINIT"] = "False"


def _route_self_printing_loggers(verbose: int) -> None:
    """litellm attaches a stream handler to its loggers when imported; drop it (now, or
    as it is attached) so their records reach the root logger's handlers only."""
    for name in _SELF_PRINTING:
        logger = logging.getLogger(name)
        # Its INFO is a line per model call; the file gets it with -vv only.
        logger.setLevel(logging.NOTSET if verbose >= 2 else logging.WARNING)
        for handler in list(logger.handlers):
            logger.removeHandler(handler)
        logger.propagate = True
        # An instance attribute shadows Logger.addHandler for this logger only.
        logger.addHandler = _ignore_handler  # type: ignore[method-assign]


def _ignore_handler(handler: logging.Handler) -> None:
    return None


_LOGURU_LEVELS = {"TRACE": logging.DEBUG, "DEBUG": logging.DEBUG, "INFO": logging.INFO,
                  "SUCCESS": logging.INFO, "WARNING": logging.WARNING, "ERROR": logging.ERROR,
                  "CRITICAL": logging.CRITICAL}


def route_loguru() -> None:
    """Send loguru's records (tau2's) to Python logging, hence to the log file. Call it
    before tau2 is imported to catch what tau2 says at import; it imports loguru."""
    from loguru import logger

    tau2_logger = logging.getLogger("tau2")

    def sink(message) -> None:  # noqa: ANN001 - a loguru Message
        record = message.record
        level = _LOGURU_LEVELS.get(record["level"].name, logging.INFO)
        tau2_logger.log(level, "%s:%s %s", record["name"], record["line"], record["message"])

    logger.remove()
    logger.add(sink, level="INFO", format="{message}")


def forward_temporal_core_logs() -> None:
    """Temporal's core (its Rust part) prints its warnings itself, with colour codes and
    to stdout; make it hand them to Python logging instead. Must run before the first
    client or worker is created in this process: they keep the runtime they started with."""
    global _core_forwarded
    with _lock:
        if _core_forwarded:
            return
        from temporalio.runtime import (
            LogForwardingConfig,
            LoggingConfig,
            Runtime,
            TelemetryConfig,
            TelemetryFilter,
        )

        Runtime.set_default(
            Runtime(telemetry=TelemetryConfig(logging=LoggingConfig(
                filter=TelemetryFilter(core_level="WARN", other_level="ERROR"),
                forwarding=LogForwardingConfig(logger=logging.getLogger(TEMPORAL_CORE_LOGGER)),
            ))),
            error_if_already_set=False,
        )
        _core_forwarded = True
