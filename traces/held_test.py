from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta

import pytest
from django.core.management import call_command
from django.utils import timezone
from opentelemetry.proto.trace.v1.trace_pb2 import Span

from releases.models import Release, Service
from sources import services as sources_services
from sources.models import IngestionToken
from sources.selectors import token_for
from tests.otlp_requests import request, span
from traces import held, services
from traces.models import (
    ErrorGroup,
    ErrorMinute,
    ErrorRelease,
    HeldError,
    HeldRouteMinute,
    HeldVersion,
    RouteMinute,
    TraceIntake,
)
from traces.otlp.grouping_test import stack
from traces.otlp.spans import Read, read_spans

pytestmark = pytest.mark.django_db
MINUTE_NS = 60 * 10**9
# The start of a minute twenty minutes ago: the deploy time below is ten minutes later.
T0 = (time.time_ns() // MINUTE_NS - 20) * MINUTE_NS
ERROR = ("ZeroDivisionError", "division by zero", stack())


@pytest.fixture
def shop() -> Service:
    service = Service.objects.create(name="shop", slug="shop")
    Release.objects.create(service=service, version="1.0.0")
    return service


@pytest.fixture
def token(shop: Service) -> IngestionToken:
    found = token_for(sources_services.create_token("otel", shop)[1])
    assert found is not None
    return found


def send(token: IngestionToken, version: str, spans: list[Span]) -> Read:
    read = read_spans(request("shop", version, spans))
    services.ingest(token, read)
    return read


def make_release(version: str, deployed_ns: int | None) -> Release:
    deployed = datetime.fromtimestamp(deployed_ns / 1e9, UTC) if deployed_ns else None
    release, created = sources_services.upsert_release(
        sources_services.ReleaseFields(version=version, service="shop", deployed_at=deployed),
        sources_services.Origin("api"),
    )
    assert created
    return release


def test_spans_of_a_version_not_sent_yet_are_held_then_become_its_release(
    token: IngestionToken,
) -> None:
    before = [span(n, T0 + n * 10**9) for n in range(4)]  # minute 0: before the deploy
    after = [
        span(10 + n, T0 + 12 * MINUTE_NS + n * 10**9, exception=ERROR if n < 2 else None)
        for n in range(6)
    ]
    read = send(token, "2.0.0", before + after)
    assert read.rejected_count == 0
    assert "10 spans of version 2.0.0, which has no release yet, held for up to 24 h" in (
        read.message()
    )
    assert not RouteMinute.objects.exists() and not ErrorGroup.objects.exists()
    version = HeldVersion.objects.get()
    assert (version.spans, version.rows) == (10, 3)  # two route minutes, one error minute
    # A second request adds to what is held: one row per route and minute.
    send(token, "2.0.0", [span(30, T0 + 12 * MINUTE_NS + 30 * 10**9, exception=ERROR)])
    late = HeldRouteMinute.objects.get(minute__gt=datetime.fromtimestamp(T0 / 1e9, UTC))
    assert late.requests == 7
    assert HeldError.objects.get().counts == [
        ["GET /cart/{cart_id}/total", T0 // MINUTE_NS + 12, 3]
    ]

    release = make_release("2.0.0", T0 + 10 * MINUTE_NS)

    assert not HeldVersion.objects.exists() and not HeldRouteMinute.objects.exists()
    windows = dict(RouteMinute.objects.filter(release=release).values_list("window", "requests"))
    assert windows == {"baseline": 4, "release": 7}
    group = ErrorGroup.objects.get()
    assert group.first_release == release and group.exception_type == "ZeroDivisionError"
    minute = ErrorMinute.objects.get()
    assert (minute.release, minute.window, minute.count) == (release, "release", 3)
    here = ErrorRelease.objects.get(release=release)
    assert len(here.exemplars) == 3
    assert here.sample_traces[0]["spans"][0]["exception"] == "ZeroDivisionError"
    assert TraceIntake.objects.get(release=release).spans == 11
    # Spans sent once the release exists add to it as before.
    send(token, "2.0.0", [span(40, T0 + 13 * MINUTE_NS)])
    assert TraceIntake.objects.get(release=release).spans == 12


def test_held_spans_past_their_time_are_dropped_on_the_next_write_and_by_the_purge(
    token: IngestionToken, shop: Service
) -> None:
    send(token, "2.0.0", [span(1, T0, exception=ERROR)])
    send(token, "3.0.0", [span(2, T0)])
    HeldVersion.objects.filter(version="2.0.0").update(
        expires_at=timezone.now() - timedelta(minutes=1)
    )
    # The service's next write (here a hold of another version) drops what expired.
    send(token, "3.0.0", [span(3, T0)])
    assert list(HeldVersion.objects.values_list("version", flat=True)) == ["3.0.0"]
    assert not HeldError.objects.exists()
    # A release arriving after its spans expired gets none of them.
    HeldVersion.objects.update(expires_at=timezone.now() - timedelta(minutes=1))
    release = make_release("3.0.0", T0)
    assert not RouteMinute.objects.filter(release=release).exists()
    # The daily purge drops what no write came for.
    send(token, "4.0.0", [span(4, T0)])
    HeldVersion.objects.update(expires_at=timezone.now() - timedelta(minutes=1))
    call_command("purge_traces", stdout=None)
    assert not HeldVersion.objects.exists() and not HeldRouteMinute.objects.exists()
    assert held.expire(shop) == (0, 0)


def test_past_a_cap_the_batch_is_refused_with_the_reason_and_nothing_of_it_held(
    token: IngestionToken, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(held, "MAX_HELD_ROWS", 3)
    send(token, "2.0.0", [span(1, T0, route="/a"), span(2, T0, route="/b")])
    read = send(token, "2.0.0", [span(3, T0, route="/a"), span(4, T0, route="/c", ms=5)])
    assert read.rejected_count == 0  # one new row: 3 of 3
    read = send(token, "2.0.0", [span(5, T0, route="/a"), span(6, T0, route="/d")])
    assert read.rejected_count == 2
    assert "at their cap (3 route and error minutes)" in read.message()
    routes = dict(HeldRouteMinute.objects.values_list("route", "requests"))
    assert routes == {"GET /a": 2, "GET /b": 1, "GET /c": 1}
    assert HeldVersion.objects.get().spans == 4

    monkeypatch.setattr(held, "MAX_HELD_ROWS", 100)
    monkeypatch.setattr(held, "MAX_HELD_GROUPS", 1)
    send(token, "2.0.0", [span(7, T0, exception=ERROR)])
    other = ("ValueError", "x", stack().replace("line_total", "unit_price"))
    read = send(token, "2.0.0", [span(8, T0, exception=other)])
    assert "held error groups are at their cap (1)" in read.message()
    assert HeldError.objects.get().exception_type == "ZeroDivisionError"

    monkeypatch.setattr(held, "MAX_HELD_VERSIONS", 1)
    read = send(token, "5.0.0", [span(9, T0)])
    assert read.rejected_count == 1
    assert "1 versions of this service already wait for their release" in read.message()
    assert not HeldVersion.objects.filter(version="5.0.0").exists()


def test_a_token_sends_only_its_own_service_held_or_not(token: IngestionToken) -> None:
    Service.objects.create(name="billing", slug="billing")
    read = read_spans(request("billing", "9.0.0", [span(1, T0)]))
    services.ingest(token, read)
    assert read.rejected_count == 1 and "may not send" in read.message()
    assert not HeldVersion.objects.exists()


def test_with_no_hold_time_spans_of_an_unknown_version_are_refused(
    token: IngestionToken, settings: pytest.FixtureRequest
) -> None:
    settings.DETECTIVE_OTLP_HOLD_HOURS = 0  # type: ignore[attr-defined]
    read = send(token, "2.0.0", [span(1, T0)])
    assert read.rejected_count == 1
    assert "no release of their service.version yet" in read.message()
    assert not HeldVersion.objects.exists()
