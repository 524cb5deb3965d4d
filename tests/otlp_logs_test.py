"""Log records from the real OpenTelemetry Python SDK (its Logs SDK's `Logger.emit(...,
exception=...)`, which writes the `exception.*` attributes) through its real OTLP/HTTP log
exporter (`OTLPLogExporter`, configured by the SDK's own environment variables) to a live
site's `POST /otlp/v1/logs`: the exceptions become occurrences of an error group with their
route, their traces' ids as exemplars and the commit that changed the failing line as its first
suspect, beside the route figures the same requests' spans gave. Then hostile logs bodies: each
a 4xx or a partial success refusing the records, never a 5xx, and nothing of them stored."""

from __future__ import annotations

import gzip
import json
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import ModuleType

import httpx
import pytest
from django.db.models import Sum
from google.protobuf import json_format
from opentelemetry._logs import SeverityNumber
from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceResponse
from opentelemetry.proto.common.v1.common_pb2 import KeyValue
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import (
    InMemoryLogRecordExporter,
    LogRecordExportResult,
    SimpleLogRecordProcessor,
)
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, Status, StatusCode

from releases.models import Release, Service
from sources import services as sources_services
from sources.judging import judge_release
from tests.live_site import LiveSite
from tests.otlp_requests import log_record, log_request
from tests.otlp_traces_test import culprit_commit, shop_module
from traces.models import ErrorGroup, ErrorMinute, ErrorRelease, RouteMinute, TraceIntake

pytestmark = pytest.mark.django_db(transaction=True)
API_KEY = "l" * 40
CART_ROUTE = "/cart/{cart_id}/total"
CART = f"GET {CART_ROUTE}"
PROTOBUF = "application/x-protobuf"
JSON = "application/json"


def serve(pricing: ModuleType) -> tuple[list, list]:  # type: ignore[type-arg]
    """60 requests of two routes as spans; 1 in 6 of the cart's divide by zero, which the
    service logs with `exception=` inside the request's span (the span itself records no
    exception event: the log record is the only place the exception is sent)."""
    resource = Resource.create({"service.name": "shop", "service.version": "1.1.0"})
    spans, records = InMemorySpanExporter(), InMemoryLogRecordExporter()
    tracing = TracerProvider(resource=resource)
    tracing.add_span_processor(SimpleSpanProcessor(spans))
    logging = LoggerProvider(resource=resource)
    logging.add_log_record_processor(SimpleLogRecordProcessor(records))
    tracer, logger = tracing.get_tracer("shop.web"), logging.get_logger("shop.web")
    for n in range(60):
        for route in (CART_ROUTE, "/products"):
            with tracer.start_as_current_span(
                f"GET {route}",
                kind=SpanKind.SERVER,
                attributes={"http.route": route, "http.request.method": "GET"},
            ) as span:
                status = 200
                if route == CART_ROUTE:
                    try:
                        pricing.line_total(12.5, 0 if n % 6 == 0 else 2)
                    except ZeroDivisionError as exc:
                        logger.emit(
                            severity_number=SeverityNumber.ERROR,
                            body="cart total failed",
                            attributes={"http.route": route, "http.request.method": "GET"},
                            exception=exc,
                        )
                        span.set_status(Status(StatusCode.ERROR, str(exc)))
                        status = 500
                span.set_attribute("http.response.status_code", status)
    tracing.shutdown()
    logging.shutdown()
    return list(spans.get_finished_spans()), list(records.get_finished_logs())


def hostile_cases(now: int) -> list[tuple[str, bytes, str, dict[str, str], set[int]]]:
    """(what, body, content type, headers, the statuses it may get: 200 means a partial
    success refusing every record)."""
    short = log_record(now, exception=("ValueError", "bad", ""))
    short.trace_id = b"\x01" * 5
    nul = log_record(now, exception=("ValueError", "bad\x00", ""))
    ancient = log_record(0, exception=("ValueError", "bad", ""))
    ancient.observed_time_unix_nano = 0
    many = log_record(now, exception=("ValueError", "bad", ""))
    many.attributes.extend(KeyValue(key="a") for _ in range(1_000_001))
    long_route = log_record(now, exception=("ValueError", "bad", ""), route="/" + "r" * 100_000)
    no_version = log_request("shop", "1.1.0", [log_record(now, exception=("ValueError", "b", ""))])
    del no_version.resource_logs[0].resource.attributes[1]
    bad_utf8 = log_request("shop", "1.1.0", [log_record(now, exception=("MARKER", "b", ""))])
    hex_document = json_format.MessageToDict(
        log_request("shop", "1.1.0", [log_record(now, exception=("ValueError", "b", ""))])
    )
    hex_document["resourceLogs"][0]["scopeLogs"][0]["logRecords"][0]["traceId"] = "not hex!"

    def one(record: object) -> bytes:
        return log_request("shop", "1.1.0", [record]).SerializeToString()  # type: ignore[list-item]

    return [
        ("invalid protobuf", b"\xff\xff\xff\xff\x0f", PROTOBUF, {}, {400}),
        (
            "JSON nested 100,000 deep",
            b'{"resourceLogs":' + b"[" * 100_000 + b"]" * 100_000 + b"}",
            JSON,
            {},
            {400},
        ),
        ("a body of 5 MB", b"\x0a" * (5 * 1024 * 1024), PROTOBUF, {}, {413}),
        (
            "a gzip bomb (64 MB of zeros)",
            gzip.compress(b"\0" * (64 * 1024 * 1024)),
            PROTOBUF,
            {"Content-Encoding": "gzip"},
            {413},
        ),
        ("a trace id of 5 bytes", one(short), PROTOBUF, {}, {200}),
        ("a NUL in an exception's message", one(nul), PROTOBUF, {}, {200}),
        ("a time of 0", one(ancient), PROTOBUF, {}, {200}),
        (
            "a million attributes",
            gzip.compress(one(many)),
            PROTOBUF,
            {"Content-Encoding": "gzip"},
            {200},
        ),
        ("a route of 100 KB", one(long_route), PROTOBUF, {}, {200}),
        ("no service.version", no_version.SerializeToString(), PROTOBUF, {}, {200}),
        (
            "invalid UTF-8 in a protobuf string",
            bad_utf8.SerializeToString().replace(b"MARKER", b"\xff\xfeRKER"),
            PROTOBUF,
            {},
            {400},
        ),
        ("invalid UTF-8 in JSON", b'{"resourceLogs": "\xff"}', JSON, {}, {400}),
        ("a JSON id that is not hex", json.dumps(hex_document).encode(), JSON, {}, {400}),
        ("another content type", b"<xml/>", "text/xml", {}, {415}),
    ]


def test_real_sdk_log_records_become_an_error_group_and_hostile_ones_store_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pricing = shop_module(tmp_path)
    shop = Service.objects.create(name="shop", slug="shop")
    _, token = sources_services.create_token("otel of shop", shop)
    now = datetime.now(UTC)
    Release.objects.create(
        service=shop,
        version="1.0.0",
        test_results={"passed": 40, "failed": 0, "skipped": 0},
        deployed_at=now - timedelta(days=2),
    )
    after = Release.objects.create(
        service=shop,
        version="1.1.0",
        test_results={"passed": 40, "failed": 0, "skipped": 0},
        deployment_metrics={"error_rate": 0.004, "response_time_p95": 120.0},
        deployed_at=now - timedelta(hours=1),
    )
    sha = culprit_commit(after)
    spans, records = serve(pricing)
    assert len(records) == 10
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_HEADERS", f"Authorization=Bearer%20{token}")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_COMPRESSION", "gzip")
    with LiveSite(tmp_path / "logs", {"DETECTIVE_API_TOKEN": API_KEY}, workers=0) as site:
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", f"{site.url}/otlp")
        span_exporter, log_exporter = OTLPSpanExporter(), OTLPLogExporter()
        try:
            assert span_exporter.export(spans) == SpanExportResult.SUCCESS, site.log_text()
            assert log_exporter.export(records) == LogRecordExportResult.SUCCESS, site.log_text()
        finally:
            span_exporter.shutdown()
            log_exporter.shutdown()
        drilled = httpx.get(
            f"{site.url}/api/releases/1.1.0/traces",
            params={"service": "shop"},
            headers={"Authorization": f"Bearer {API_KEY}"},
            timeout=30,
        ).json()
        stored = (
            ErrorGroup.objects.count(),
            ErrorMinute.objects.count(),
            RouteMinute.objects.count(),
        )

        seen = []
        for what, body, content_type, headers, allowed in hostile_cases(time.time_ns() - 10**9):
            answer = httpx.post(
                f"{site.url}/otlp/v1/logs",
                content=body,
                headers={
                    "Authorization": f"Bearer {token}",
                    "Content-Type": content_type,
                    **headers,
                },
                timeout=60,
            )
            seen.append((what, answer.status_code))
            assert answer.status_code in allowed, (what, answer.status_code, answer.text[:300])
            if answer.status_code == 200:
                message = ExportLogsServiceResponse()
                if content_type == JSON:
                    json_format.Parse(answer.text, message)
                else:
                    message.ParseFromString(answer.content)
                assert message.partial_success.rejected_log_records >= 1, what
                assert "log records refused" in message.partial_success.error_message, what
        print(seen)

    # The exception, read from the log records alone, is a new group of the cart's route.
    [new] = drilled["error_groups"]
    assert (new["status"], new["exception_type"], new["count"]) == ("new", "ZeroDivisionError", 10)
    assert new["routes"] == {CART: 10}
    assert new["suspect"]["sha"] == sha
    group = ErrorGroup.objects.get()
    assert group.frames[-1][0].endswith("shop/pricing.py") and group.frames[-1][2] == "line_total"
    # The records were written inside the requests' spans: their trace ids are the exemplars.
    failing = {f"{s.context.trace_id:032x}" for s in spans if not s.status.is_ok}
    exemplars = ErrorRelease.objects.get(release=after).exemplars
    assert len(exemplars) == 5 and set(exemplars) <= failing
    intake = TraceIntake.objects.get(release=after)
    assert (intake.spans, intake.log_records) == (120, 10)
    totals = RouteMinute.objects.filter(release=after, route=CART).aggregate(
        requests=Sum("requests"), errors=Sum("errors")
    )
    assert (totals["requests"], totals["errors"]) == (60, 10)
    evidence = " ".join(judge_release(after).verdict.evidence())
    assert "ZeroDivisionError in shop/pricing.py `line_total`: 10 of 60 requests" in evidence
    # Nothing of the hostile bodies was kept.
    assert (
        ErrorGroup.objects.count(),
        ErrorMinute.objects.count(),
        RouteMinute.objects.count(),
    ) == stored
    assert TraceIntake.objects.get(release=after).log_records == 10
