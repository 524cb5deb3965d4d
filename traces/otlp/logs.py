"""Each log record of a decoded OTLP logs request (`/otlp/v1/logs`) that carries an exception
(`exception.type` or `exception.message`, with `exception.stacktrace`: what an SDK's logging
bridge writes for `logger.exception(...)`) reduced to the same facts as a span's exception
event, so that it becomes an occurrence of the same error group, fingerprinted the same way.

A record without an exception is accepted and not kept (Detective keeps errors, not logs). It
counts in no route's requests: a log record is not a request; its route is its own
`http.route` attribute when it has one (a web framework's log records usually do not), else
none. Refused, alone, as a span would be: ids of the wrong length, a time out of range, more
attributes than any SDK's limits, text with a NUL or not UTF-8, a route too long; a resource
without `service.name` and `service.version` has all its records refused.
"""

from __future__ import annotations

import time
from typing import Any

from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest

from traces.otlp.spans import (
    AHEAD_NS,
    EARLIEST_NS,
    EXCEPTION_KEYS,
    MAX_ATTRIBUTES,
    MAX_MESSAGE,
    MAX_ROUTE,
    MAX_STACKTRACE,
    MAX_TYPE,
    RESOURCE_KEYS,
    SPAN_KEYS,
    ExceptionFacts,
    Read,
    SpanFacts,
    attributes_of,
    resource_problem,
    text_of,
    text_ok,
)

__all__ = ["read_logs"]

WHAT = "log records"


def _record_problem(record: Any, at_ns: int, now_ns: int) -> str | None:
    # Both ids are optional on a log record (one written outside any trace has neither).
    if record.trace_id and (len(record.trace_id) != 16 or not any(record.trace_id)):
        return f"{WHAT} refused: the trace id is not 16 bytes"
    if record.span_id and (len(record.span_id) != 8 or not any(record.span_id)):
        return f"{WHAT} refused: the span id is not 8 bytes"
    if not EARLIEST_NS <= at_ns <= now_ns + AHEAD_NS:
        return f"{WHAT} refused: the time is out of range"
    if len(record.attributes) > MAX_ATTRIBUTES:
        return f"{WHAT} refused: more than {MAX_ATTRIBUTES:,} attributes"
    return None


def read_logs(request: ExportLogsServiceRequest, now_ns: int | None = None) -> Read:
    """The log records with an exception, as facts `traces.services.ingest` merges; the
    others accepted and dropped; the refused counted with their reasons."""
    now_ns = time.time_ns() if now_ns is None else now_ns
    read = Read(what=WHAT)
    for resource_logs in request.resource_logs:
        records = [r for scope in resource_logs.scope_logs for r in scope.log_records]
        attributes = resource_logs.resource.attributes
        values = attributes_of(attributes, RESOURCE_KEYS)
        problem = resource_problem(values, len(attributes), WHAT)
        if problem:
            read.reject(problem, len(records))
            continue
        service, version = values["service.name"], values["service.version"]
        environment = text_of(values.get("deployment.environment.name"))[:64]
        for record in records:
            # The specification's rule: the event's time, else when the SDK observed it.
            at_ns = record.time_unix_nano or record.observed_time_unix_nano
            problem = _record_problem(record, at_ns, now_ns)
            if problem:
                read.reject(problem)
                continue
            found = attributes_of(record.attributes, EXCEPTION_KEYS | SPAN_KEYS)
            kind = text_of(found.get("exception.type"))[:MAX_TYPE]
            message = text_of(found.get("exception.message"))[:MAX_MESSAGE]
            stack = text_of(found.get("exception.stacktrace"))[:MAX_STACKTRACE]
            route = text_of(found.get("http.route"))
            method = text_of(found.get("http.request.method") or found.get("http.method"))
            if route and method and not route.startswith(method):
                route = f"{method} {route}"
            if not all(text_ok(t) for t in (kind, message, stack, route)):
                read.reject(f"{WHAT} refused: an exception's text holds a NUL or is not UTF-8")
                continue
            if len(route) > MAX_ROUTE:
                read.reject(f"{WHAT} refused: a route longer than {MAX_ROUTE}")
                continue
            if not (kind or message):
                continue
            read.spans.append(
                SpanFacts(
                    service=service,
                    version=version,
                    environment=environment,
                    trace_id=record.trace_id.hex(),
                    route=route,
                    request=False,
                    start_ns=at_ns,
                    duration_ms=0.0,
                    error=True,
                    exceptions=(ExceptionFacts(kind, message, stack),),
                    log=True,
                )
            )
    return read
