from __future__ import annotations

import time
from datetime import timedelta

import pytest
from django.core.management import call_command
from django.utils import timezone
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from releases.models import Release, Service
from sources import services as sources_services
from sources.selectors import token_for
from tests.otlp_requests import request, span
from traces import services
from traces.models import ErrorGroup, ErrorMinute, ErrorRelease, RouteMinute, TraceIntake
from traces.otlp.grouping_test import stack
from traces.otlp.spans import read_spans

pytestmark = pytest.mark.django_db
DAY_NS = 86_400 * 10**9
ERROR = ("KeyError", "'sku'", stack())


@pytest.fixture
def token() -> object:
    shop = Service.objects.create(name="shop", slug="shop")
    Release.objects.create(service=shop, version="1.0.0")
    found = token_for(sources_services.create_token("otel", shop)[1])
    assert found is not None
    return found


def test_the_retention_deletes_old_minutes_but_never_a_groups_memory(token: object) -> None:
    now = time.time_ns()
    spans = [span(1, now - 100 * DAY_NS, exception=ERROR), span(2, now - 60 * 10**9)]
    services.ingest(token, read_spans(request("shop", "1.0.0", spans)))  # type: ignore[arg-type]
    assert (RouteMinute.objects.count(), ErrorMinute.objects.count()) == (2, 1)
    call_command("purge_traces", "--days", "90", stdout=None)
    assert RouteMinute.objects.count() == 1 and not ErrorMinute.objects.exists()
    assert ErrorGroup.objects.count() == 1 and ErrorRelease.objects.count() == 1


def test_the_caps_count_what_they_drop(token: object, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(services, "MAX_ROUTES", 2)
    monkeypatch.setattr(services, "MAX_GROUPS", 1)
    now = time.time_ns() - 60 * 10**9
    other = ("ValueError", "x", stack().replace("line_total", "unit_price"))
    spans = [span(n, now + n, route=f"/r{n % 4}") for n in range(8)]
    spans += [span(20, now, exception=ERROR), span(21, now, exception=other)]
    services.ingest(token, read_spans(request("shop", "1.0.0", spans)))  # type: ignore[arg-type]
    assert RouteMinute.objects.values("route").distinct().count() == 2
    intake = TraceIntake.objects.get()
    # 5 routes of 2 requests each (/r0 to /r3, and the cart's two failures): 3 past the cap.
    assert (intake.spans, intake.routes_dropped, intake.groups_dropped) == (10, 6, 1)
    assert timezone.now() - ErrorGroup.objects.get().first_seen < timedelta(minutes=5)


def test_a_request_naming_many_releases_is_refused_past_twenty(token: object) -> None:
    message = ExportTraceServiceRequest()
    for n in range(25):
        message.resource_spans.extend(
            request("shop", f"9.{n}", [span(n, time.time_ns())]).resource_spans
        )
    read = read_spans(message)
    services.ingest(token, read)  # type: ignore[arg-type]
    # Of the twenty read, five are held for their releases (the service's cap of versions).
    assert read.rejected_count == 20
    assert read.rejected["spans refused: more than 20 releases in one request"] == 5
    assert sum(read.notes.values()) == 5
