from __future__ import annotations

import time
from datetime import UTC, datetime

import pytest
from django.test import Client
from opentelemetry.proto.trace.v1.trace_pb2 import Span

from releases.models import Release, Service
from sources import services as sources_services
from sources.selectors import token_for
from tests.otlp_requests import request, span
from traces import services
from traces.otlp.grouping_test import stack
from traces.otlp.spans import read_spans

pytestmark = pytest.mark.django_db
KEY = "k" * 40
ERROR = ("ZeroDivisionError", "division by zero", stack())


def child(parent: Span, n: int, name: str, offset_ms: int, ms: int) -> Span:
    """A span inside `parent`'s request, as a database client's instrumentation writes it."""
    return Span(
        trace_id=parent.trace_id,
        span_id=(1000 + n).to_bytes(8, "big"),
        parent_span_id=parent.span_id,
        name=name,
        kind=Span.SpanKind.SPAN_KIND_CLIENT,
        start_time_unix_nano=parent.start_time_unix_nano + offset_ms * 10**6,
        end_time_unix_nano=parent.start_time_unix_nano + (offset_ms + ms) * 10**6,
    )


def test_the_drill_down_gives_the_top_groups_sample_trace_with_its_spans(settings) -> None:  # type: ignore[no-untyped-def]
    settings.DETECTIVE_API_KEY = KEY
    shop = Service.objects.create(name="shop", slug="shop")
    start = time.time_ns() - 120 * 10**9
    Release.objects.create(
        service=shop, version="1.1.0", deployed_at=datetime.fromtimestamp(start / 1e9 - 1, UTC)
    )
    token = token_for(sources_services.create_token("otel", shop)[1])
    assert token is not None
    failing = span(1, start, ms=40, exception=ERROR)
    spans = [
        child(failing, 1, "SELECT shop.cart", 2, 5),
        child(failing, 2, "GET pricing-service /rates", 9, 20),
        failing,
        span(2, start, route="/health"),
    ]
    services.ingest(token, read_spans(request("shop", "1.1.0", spans)))
    answer = Client().get(
        "/api/releases/1.1.0/traces",
        {"service": "shop"},
        headers={"Authorization": f"Bearer {KEY}"},
    )
    assert answer.status_code == 200, answer.content
    body = answer.json()
    sample = body["sample_trace"]
    assert (sample["exception_type"], sample["status"]) == ("ZeroDivisionError", "new")
    assert sample["trace_id"] == failing.trace_id.hex() and sample["spans_seen"] == 3
    root, select, rates = sample["spans"]
    assert (root["name"], root["kind"], root["status"], root["error"]) == (
        "GET /cart/{cart_id}/total",
        "server",
        "error",
        True,
    )
    assert root["exception"] == "ZeroDivisionError" and root["duration_ms"] == 40.0
    assert (select["name"], select["kind"], select["start_ms"], select["duration_ms"]) == (
        "SELECT shop.cart",
        "client",
        2.0,
        5.0,
    )
    assert select["parent_span_id"] == rates["parent_span_id"] == root["span_id"]
    # The groups themselves carry no sample in the API (the page shows each group's).
    assert "sample_trace" not in body["error_groups"][0]
