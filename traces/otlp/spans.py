"""Each span of a decoded OTLP request checked and reduced to the facts kept of it, or refused
with a reason (counted into the answer's `partial_success`).

A span is refused, alone, when its ids are not the specification's lengths, its times are out
of range, it carries more attributes than any SDK's limits allow, or a text kept of it (its
route, an exception's type, message or stack trace) holds a NUL or cannot be written as UTF-8,
or its route is longer than `MAX_ROUTE`. A resource without `service.name` and
`service.version` has all its spans refused: there is no release to give them to.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

__all__ = ["ExceptionFacts", "Read", "SpanFacts", "read_spans"]

MAX_ROUTE = 200
MAX_TYPE = 200
MAX_MESSAGE = 1_000
MAX_STACKTRACE = 16_000
MAX_ATTRIBUTES = 1_000
MAX_EXCEPTIONS = 3  # exception events read per span
# Spans earlier than this or more than a day ahead of the clock are no one's release.
EARLIEST_NS = 946_684_800 * 10**9  # 2000-01-01
AHEAD_NS = 86_400 * 10**9

SERVER, CONSUMER = 2, 5
STATUS_ERROR = 2


@dataclass(frozen=True, slots=True)
class ExceptionFacts:
    type: str
    message: str
    stacktrace: str


@dataclass(frozen=True, slots=True)
class SpanFacts:
    service: str
    version: str
    environment: str
    trace_id: str
    route: str
    # A request of the service (a SERVER or CONSUMER span): counted in the route's figures.
    request: bool
    start_ns: int
    duration_ms: float
    error: bool
    exceptions: tuple[ExceptionFacts, ...] = ()
    # A log record (`/otlp/v1/logs`): its exception is an occurrence; it is no span nor request.
    log: bool = False
    # The span as decoded, read again only if it lands in a sample trace
    # (`traces.otlp.samples`): copying its ids and name here cost every span a sixth more.
    raw: Any = None


@dataclass(slots=True)
class Read:
    spans: list[SpanFacts] = field(default_factory=list)
    # What the request sent, as its refusals name it: "spans" or "log records".
    what: str = "spans"
    rejected: Counter[str] = field(default_factory=Counter)
    # Accepted, and worth saying (a warning with 0 rejected, as the specification allows):
    # spans held until their release arrives.
    notes: Counter[str] = field(default_factory=Counter)

    def reject(self, reason: str, count: int = 1) -> None:
        if count:
            self.rejected[reason] += count

    def note(self, reason: str, count: int) -> None:
        if count:
            self.notes[reason] += count

    @property
    def rejected_count(self) -> int:
        return sum(self.rejected.values())

    def message(self) -> str:
        """The reasons, most frequent first, then the notes, as the answer's `error_message`."""
        said = [*self.rejected.most_common(5), *self.notes.most_common(5)]
        return "; ".join(f"{n} {reason}" for reason, n in said)


def _value(any_value: Any) -> str | int | float | bool | None:
    kind = any_value.WhichOneof("value")
    if kind in ("string_value", "int_value", "double_value", "bool_value"):
        return getattr(any_value, kind)
    return None


def attributes_of(pairs: Iterable[Any], wanted: frozenset[str]) -> dict[str, Any]:
    return {kv.key: _value(kv.value) for kv in pairs if kv.key in wanted}


def text_ok(text: str) -> bool:
    if "\x00" in text:
        return False
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def text_of(value: Any) -> str:
    return value if isinstance(value, str) else ""


RESOURCE_KEYS = frozenset({"service.name", "service.version", "deployment.environment.name"})
SPAN_KEYS = frozenset(
    {
        "http.route",
        "http.request.method",
        "http.method",
        "http.response.status_code",
        "http.status_code",
    }
)
EXCEPTION_KEYS = frozenset({"exception.type", "exception.message", "exception.stacktrace"})


def _status_code(attributes: Mapping[str, Any]) -> int | None:
    for key in ("http.response.status_code", "http.status_code"):
        value = attributes.get(key)
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        if isinstance(value, str) and value.isdigit() and len(value) <= 3:
            return int(value)
    return None


def _route(span: Any, attributes: Mapping[str, Any]) -> str:
    route = text_of(attributes.get("http.route"))
    if route:
        method = text_of(attributes.get("http.request.method") or attributes.get("http.method"))
        return f"{method} {route}" if method and not route.startswith(method) else route
    return span.name if span.kind in (SERVER, CONSUMER) else ""


def _exceptions(span: Any) -> tuple[ExceptionFacts, ...] | None:
    """The span's exception events; None when one holds text that cannot be kept."""
    found = []
    for event in span.events:
        if event.name != "exception" or len(found) >= MAX_EXCEPTIONS:
            continue
        if len(event.attributes) > MAX_ATTRIBUTES:
            return None
        values = attributes_of(event.attributes, EXCEPTION_KEYS)
        kind = text_of(values.get("exception.type"))[:MAX_TYPE]
        message = text_of(values.get("exception.message"))[:MAX_MESSAGE]
        stack = text_of(values.get("exception.stacktrace"))[:MAX_STACKTRACE]
        if not (text_ok(kind) and text_ok(message) and text_ok(stack)):
            return None
        if kind or message:
            found.append(ExceptionFacts(kind, message, stack))
    return tuple(found)


def _span_problem(span: Any, now_ns: int) -> str | None:
    if len(span.trace_id) != 16 or not any(span.trace_id):
        return "spans refused: the trace id is not 16 bytes"
    if len(span.span_id) != 8 or not any(span.span_id):
        return "spans refused: the span id is not 8 bytes"
    start, end = span.start_time_unix_nano, span.end_time_unix_nano
    if not EARLIEST_NS <= start <= now_ns + AHEAD_NS or end < start:
        return "spans refused: the start or end time is out of range"
    if len(span.attributes) > MAX_ATTRIBUTES:
        return f"spans refused: more than {MAX_ATTRIBUTES:,} attributes"
    return None


def resource_problem(values: Mapping[str, Any], count: int, what: str = "spans") -> str | None:
    if count > MAX_ATTRIBUTES:
        return f"{what} refused: their resource has more than {MAX_ATTRIBUTES:,} attributes"
    for key in ("service.name", "service.version"):
        value = text_of(values.get(key))
        if not value:
            return f"{what} refused: their resource has no {key}"
        if len(value) > 100 or not text_ok(value):
            return f"{what} refused: their resource's {key} cannot be read"
    return None


def read_spans(request: ExportTraceServiceRequest, now_ns: int | None = None) -> Read:
    now_ns = time.time_ns() if now_ns is None else now_ns
    read = Read()
    for resource_spans in request.resource_spans:
        spans: Sequence[Any] = [s for scope in resource_spans.scope_spans for s in scope.spans]
        attributes = resource_spans.resource.attributes
        values = attributes_of(attributes, RESOURCE_KEYS)
        problem = resource_problem(values, len(attributes))
        if problem:
            read.reject(problem, len(spans))
            continue
        service, version = values["service.name"], values["service.version"]
        environment = text_of(values.get("deployment.environment.name"))[:64]
        # A span under a request (a database call, a template) belongs to its request's route.
        routes = {
            s.trace_id: _route(s, attributes_of(s.attributes, SPAN_KEYS))
            for s in spans
            if s.kind in (SERVER, CONSUMER)
        }
        for span in spans:
            problem = _span_problem(span, now_ns)
            if problem:
                read.reject(problem)
                continue
            span_values = attributes_of(span.attributes, SPAN_KEYS)
            request = span.kind in (SERVER, CONSUMER)
            route = _route(span, span_values) if request else routes.get(span.trace_id, "")
            if len(route) > MAX_ROUTE or not text_ok(route):
                read.reject(f"spans refused: a route longer than {MAX_ROUTE} or not text")
                continue
            exceptions = _exceptions(span)
            if exceptions is None:
                read.reject("spans refused: an exception's text holds a NUL or is not UTF-8")
                continue
            status = _status_code(span_values)
            read.spans.append(
                SpanFacts(
                    service=service,
                    version=version,
                    environment=environment,
                    trace_id=span.trace_id.hex(),
                    route=route,
                    request=request,
                    start_ns=span.start_time_unix_nano,
                    duration_ms=(span.end_time_unix_nano - span.start_time_unix_nano) / 1e6,
                    error=span.status.code == STATUS_ERROR or (status or 0) >= 500,
                    exceptions=exceptions,
                    raw=span,
                )
            )
    return read
