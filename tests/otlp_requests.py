"""OTLP requests built with the real message classes, for the tests of this app and tests/."""

from __future__ import annotations

from collections.abc import Sequence

from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.logs.v1.logs_pb2 import LogRecord, SeverityNumber
from opentelemetry.proto.trace.v1.trace_pb2 import Span, Status

SERVER = Span.SpanKind.SPAN_KIND_SERVER


def attributes(**values: str | int) -> list[KeyValue]:
    found = []
    for key, value in values.items():
        any_value = (
            AnyValue(int_value=value) if isinstance(value, int) else AnyValue(string_value=value)
        )
        found.append(KeyValue(key=key.replace("__", "."), value=any_value))
    return found


def span(
    n: int,
    start_ns: int,
    *,
    route: str = "/cart/{cart_id}/total",
    ms: int = 20,
    exception: tuple[str, str, str] | None = None,
    status: int = 200,
) -> Span:
    made = Span(
        trace_id=(n + 1).to_bytes(16, "big"),
        span_id=(n + 1).to_bytes(8, "big"),
        name=f"GET {route}",
        kind=SERVER,
        start_time_unix_nano=start_ns,
        end_time_unix_nano=start_ns + ms * 1_000_000,
        attributes=attributes(
            http__route=route, http__request__method="GET", http__response__status_code=status
        ),
    )
    if exception is not None:
        kind, message, stack = exception
        made.status.code = Status.StatusCode.STATUS_CODE_ERROR
        event = made.events.add()
        event.name = "exception"
        event.time_unix_nano = start_ns
        event.attributes.extend(
            attributes(
                exception__type=kind, exception__message=message, exception__stacktrace=stack
            )
        )
    return made


def request(service: str, version: str, spans: Sequence[Span]) -> ExportTraceServiceRequest:
    message = ExportTraceServiceRequest()
    resource = message.resource_spans.add()
    resource.resource.attributes.extend(attributes(service__name=service, service__version=version))
    resource.scope_spans.add().spans.extend(spans)
    return message


def log_record(
    start_ns: int,
    *,
    exception: tuple[str, str, str] | None = None,
    route: str | None = None,
    trace: int | None = None,
) -> LogRecord:
    """A log record as an SDK's logging bridge writes `logger.exception(...)`: the exception in
    `exception.*` attributes, the trace's ids when written inside a span."""
    made = LogRecord(
        time_unix_nano=start_ns,
        observed_time_unix_nano=start_ns,
        severity_number=SeverityNumber.SEVERITY_NUMBER_ERROR,
        severity_text="ERROR",
        body=AnyValue(string_value="the request failed"),
    )
    if trace is not None:
        made.trace_id = (trace + 1).to_bytes(16, "big")
        made.span_id = (trace + 1).to_bytes(8, "big")
    if route is not None:
        made.attributes.extend(attributes(http__route=route, http__request__method="GET"))
    if exception is not None:
        kind, message, stack = exception
        made.attributes.extend(
            attributes(
                exception__type=kind, exception__message=message, exception__stacktrace=stack
            )
        )
    return made


def log_request(
    service: str, version: str, records: Sequence[LogRecord]
) -> ExportLogsServiceRequest:
    message = ExportLogsServiceRequest()
    resource = message.resource_logs.add()
    resource.resource.attributes.extend(attributes(service__name=service, service__version=version))
    resource.scope_logs.add().log_records.extend(records)
    return message
