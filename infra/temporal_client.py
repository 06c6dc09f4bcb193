"""Connecting a Temporal client: to TEMPORAL_ADDRESS, or to the embedded server
(temporal_server.py), started when needed; and the web UI's address for links."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from datetime import timedelta
from typing import Any

from temporalio.api.workflowservice.v1 import DescribeNamespaceRequest
from temporalio.client import Client, Interceptor
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.service import RPCError, RPCStatusCode

from passhat.infra import logs, settings, tracing
from passhat.infra.temporal_server import EmbeddedServer

# Bound on one connection attempt; Client.connect alone can wait forever on a port
# that accepts TCP but never speaks gRPC.
CONNECT_TIMEOUT_S = 5.0


class TemporalUnreachable(RuntimeError):
    """No Temporal frontend answers at the configured address."""


class EmbeddedServerNotRunning(TemporalUnreachable):
    """A read-only command found the embedded server stopped (and did not start it)."""


def server_gone(err: BaseException) -> bool:
    """Whether `err` says the Temporal server stopped answering (stopped, restarted for
    longer than the client's retries, or unreachable): gRPC's UNAVAILABLE, which the
    client raises once its own retries are spent ("tcp connect error", "transport
    error")."""
    return isinstance(err, RPCError) and err.status == RPCStatusCode.UNAVAILABLE


def check_address(address: str) -> None:
    """A Temporal frontend address is host:port; say so in one line otherwise."""
    host, sep, port = address.rpartition(":")
    if not sep or not host or any(c.isspace() for c in address) or "/" in address or not (
        port.isdigit() and 0 < int(port) < 65536
    ):
        raise TemporalUnreachable(
            f"TEMPORAL_ADDRESS {address!r} is not a Temporal frontend address: give host:port, "
            "e.g. localhost:7233 (no scheme), or unset it to use the embedded server"
        )


async def connect(
    address: str | None = None,
    namespace: str | None = None,
    interceptors: Sequence[Interceptor] = (),
    *,
    timeout: float = CONNECT_TIMEOUT_S,
    start: bool = True,
    **client_kwargs: Any,
) -> Client:
    """A Client for passhat's Temporal.

    address None means TEMPORAL_ADDRESS, and when that is unset too, the embedded server
    under settings.home(), started if needed unless `start` is False (read-only commands
    never start it: they raise EmbeddedServerNotRunning). namespace None means
    TEMPORAL_NAMESPACE. Extra keyword arguments (tls, api_key, data_converter,
    plugins...) go to Client.connect. Fails within about `timeout` seconds with
    TemporalUnreachable when nothing answers.
    """
    namespace = namespace or settings.temporal_namespace()
    address = address or settings.temporal_address()
    if address is not None:
        check_address(address)
    # Before the first client: Temporal's core then logs through Python logging.
    logs.forward_temporal_core_logs()
    # passhat's workflow inputs and results are pydantic models.
    client_kwargs.setdefault("data_converter", pydantic_data_converter)
    # Tracing, when OTEL_* asks for it: the interceptor serves the client and its workers.
    tracing.setup()
    interceptors = list(interceptors) or tracing.interceptors()
    if address is None:
        server = EmbeddedServer(settings.home(), namespace=namespace)
        if start:
            address = (await server.ensure_running()).address
        else:
            status = server.status()
            if not status.running:
                raise EmbeddedServerNotRunning(
                    "the embedded Temporal server is not running; `passhat server start` starts it"
                )
            address = status.address

    hint = (
        "Start the embedded server with `passhat server start` (and unset TEMPORAL_ADDRESS), "
        "or set TEMPORAL_ADDRESS to a reachable Temporal frontend (host:port)."
    )
    try:
        client = await asyncio.wait_for(
            Client.connect(
                address,
                namespace=namespace,
                interceptors=list(interceptors),
                connect_timeout=timedelta(seconds=timeout),
                **client_kwargs,
            ),
            timeout,
        )
        await client.workflow_service.describe_namespace(
            DescribeNamespaceRequest(namespace=namespace), timeout=timedelta(seconds=timeout)
        )
    except TimeoutError as err:
        raise TemporalUnreachable(
            f"no Temporal server answered at {address} within {timeout:.0f}s. {hint}"
        ) from err
    except RPCError as err:
        if err.status == RPCStatusCode.NOT_FOUND:
            raise TemporalUnreachable(
                f"the Temporal server at {address} has no namespace {namespace!r}; create it "
                f"(temporal operator namespace create -n {namespace}) or set TEMPORAL_NAMESPACE."
            ) from err
        raise
    except (RuntimeError, ValueError) as err:  # "Failed client connect: ...", a bad target
        raise TemporalUnreachable(f"cannot connect to Temporal at {address}: {err}. {hint}") from err
    return client


def ui_url() -> str | None:
    """The Temporal web UI for links: PASSHAT_TEMPORAL_UI, or the embedded server's when
    passhat uses it (no TEMPORAL_ADDRESS)."""
    if settings.temporal_ui_url():
        return settings.temporal_ui_url().rstrip("/")
    if settings.temporal_address():
        return None
    status = EmbeddedServer(settings.home()).status()
    return status.ui_url if status.running else None
