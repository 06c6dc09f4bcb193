"""OpenTelemetry tracing: Temporal's interceptor plus passhat's spans for model calls,
tool calls and scoring, exported over OTLP as configured by the standard OTEL_*
variables (OTEL_EXPORTER_OTLP_ENDPOINT, OTEL_SERVICE_NAME, ...).

Each trial is one trace. Its trace id and root span id are derived from the trial id, so
every worker that runs a step of the trial (after a crash, a retry or a resume) puts its
spans into the same trace, and the trace id can be stored on the trial record before the
trial ends. The root span itself is emitted when the trial is recorded, with the derived
ids, covering the trial from start to end.

With no OTLP endpoint configured nothing is installed: spans go to OpenTelemetry's no-op
tracer and Temporal gets no interceptor, so tracing costs nothing.
"""

from __future__ import annotations

import contextvars
import hashlib
import os
from contextlib import contextmanager
from datetime import datetime
from typing import Any, Iterator

from opentelemetry import trace
from opentelemetry.trace import SpanKind, Status, StatusCode
from temporalio import workflow
from temporalio.contrib.opentelemetry import TracingInterceptor, TracingWorkflowInboundInterceptor

TRACER_NAME = "passhat"
TRIAL_WORKFLOW = "TrialWorkflow"

_enabled = False
# Set only while the trial's root span is created, to give it its derived ids.
_forced_ids: contextvars.ContextVar[tuple[int, int] | None] = contextvars.ContextVar(
    "passhat_forced_ids", default=None
)


def configured() -> bool:
    """Whether the environment asks for traces to be exported."""
    if os.environ.get("OTEL_SDK_DISABLED", "").lower() == "true":
        return False
    if os.environ.get("OTEL_TRACES_EXPORTER", "otlp").lower() == "none":
        return False
    return bool(
        os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT")
        or os.environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
    )


def setup(service_name: str = "passhat") -> bool:
    """Install the SDK tracer provider with an OTLP/HTTP exporter, once per process.
    Returns whether tracing is on."""
    global _enabled
    if _enabled or not configured():
        return _enabled
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor
    from opentelemetry.sdk.trace.id_generator import RandomIdGenerator

    class TrialIdGenerator(RandomIdGenerator):
        def generate_trace_id(self) -> int:
            forced = _forced_ids.get()
            return forced[0] if forced else super().generate_trace_id()

        def generate_span_id(self) -> int:
            forced = _forced_ids.get()
            return forced[1] if forced else super().generate_span_id()

    resource = Resource.create({"service.name": os.environ.get("OTEL_SERVICE_NAME", service_name)})
    provider = TracerProvider(resource=resource, id_generator=TrialIdGenerator())
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    trace.set_tracer_provider(provider)
    _enabled = True
    return True


def enabled() -> bool:
    return _enabled


def shutdown() -> None:
    """Export what is buffered and stop; for processes that end without atexit."""
    provider = trace.get_tracer_provider()
    if _enabled and hasattr(provider, "shutdown"):
        provider.shutdown()


def interceptors() -> list:
    """Temporal's OpenTelemetry interceptor (for client and worker), when tracing is on."""
    if not _enabled:
        return []
    return [PasshatTracingInterceptor()]


def trial_ids(trial_id: str) -> tuple[int, int]:
    """(trace id, root span id) of a trial, derived from its id."""
    digest = hashlib.sha256(f"passhat-trace:{trial_id}".encode()).digest()
    trace_id = int.from_bytes(digest[:16], "big") or 1
    span_id = int.from_bytes(digest[16:24], "big") or 1
    return trace_id, span_id


def trace_id_hex(trial_id: str) -> str:
    return f"{trial_ids(trial_id)[0]:032x}"


def _trial_traceparent(trial_id: str) -> str:
    trace_id, span_id = trial_ids(trial_id)
    return f"00-{trace_id:032x}-{span_id:016x}-01"


def trial_context(trial_id: str):  # noqa: ANN201 - an opentelemetry Context
    """Context whose parent is the trial's root span, wherever the code runs."""
    trace_id, span_id = trial_ids(trial_id)
    parent = trace.SpanContext(
        trace_id=trace_id,
        span_id=span_id,
        is_remote=True,
        trace_flags=trace.TraceFlags(trace.TraceFlags.SAMPLED),
    )
    return trace.set_span_in_context(trace.NonRecordingSpan(parent))


@contextmanager
def span(
    name: str,
    trial_id: str,
    attributes: dict[str, Any],
    kind: SpanKind = SpanKind.INTERNAL,
    *,
    start_time: int | None = None,
    end_time: int | None = None,
) -> Iterator[trace.Span]:
    """A span in the trial's trace (times in ns since the epoch; default: now). An
    exception sets the span's error status and is recorded, then re-raised."""
    tracer = trace.get_tracer(TRACER_NAME)
    current = trace.get_current_span().get_span_context()
    # Inside Temporal's RunActivity span (already in the trial's trace) nest under it;
    # elsewhere hang directly under the trial's root.
    in_trial = current.is_valid and current.trace_id == trial_ids(trial_id)[0]
    s = tracer.start_span(
        name, context=None if in_trial else trial_context(trial_id), kind=kind,
        attributes=_clean(attributes), start_time=start_time,
    )
    try:
        with trace.use_span(s, end_on_exit=False, record_exception=False, set_status_on_exception=False):
            yield s
    except BaseException as err:
        s.set_status(Status(StatusCode.ERROR, str(err)[:500]))
        s.record_exception(err)
        s.set_attribute("error.type", getattr(err, "error_class", type(err).__name__))
        raise
    finally:
        s.end(end_time=end_time)


def record_trial_root(
    trial_id: str, started: datetime | None, attributes: dict[str, Any], error: str | None
) -> None:
    """Emit the trial's root span, with its derived ids, from start to now."""
    if not _enabled:
        return
    tracer = trace.get_tracer(TRACER_NAME)
    token = _forced_ids.set(trial_ids(trial_id))
    try:
        start_ns = int(started.timestamp() * 1e9) if started else None
        root = tracer.start_span(
            f"trial {trial_id}", context=trace.set_span_in_context(trace.INVALID_SPAN),
            kind=SpanKind.INTERNAL, attributes=_clean(attributes), start_time=start_ns,
        )
    finally:
        _forced_ids.reset(token)
    if error:
        root.set_status(Status(StatusCode.ERROR, error[:500]))
    root.end()


def trial_attributes(spec) -> dict[str, Any]:  # noqa: ANN001 - a TrialSpec
    """passhat's own span attributes naming the trial."""
    return {
        "passhat.run_id": spec.run_id,
        "passhat.trial_id": spec.trial_id,
        "passhat.agent_model": spec.agent_model,
        "passhat.user_model": spec.user_model,
        "passhat.domain": spec.domain,
        "passhat.task_id": spec.task_id,
        "passhat.trial_index": spec.trial_index,
    }


def _clean(attributes: dict[str, Any]) -> dict[str, Any]:
    """OpenTelemetry attributes cannot be None."""
    return {k: v for k, v in attributes.items() if v is not None}


class TrialTraceInboundInterceptor(TracingWorkflowInboundInterceptor):
    """A trial workflow's spans go to the trial's own trace, not the run's: its context
    is derived from its workflow id, so it is the same on every replay and worker."""

    def _load_workflow_context_carrier(self):  # noqa: ANN202
        info = workflow.info()
        if info.workflow_type == TRIAL_WORKFLOW:
            return {"traceparent": _trial_traceparent(info.workflow_id)}
        return super()._load_workflow_context_carrier()


class PasshatTracingInterceptor(TracingInterceptor):
    def workflow_interceptor_class(self, input):  # noqa: ANN001, ANN202
        super().workflow_interceptor_class(input)  # registers the span extern function
        return TrialTraceInboundInterceptor
