from __future__ import annotations

import gzip
import json
import time
from datetime import UTC, datetime, timedelta

import pytest
from django.db import OperationalError
from django.test import Client
from google.protobuf import json_format
from google.rpc.status_pb2 import Status
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceResponse
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse

from releases.models import Release, Service
from sources import services as sources_services
from tests.otlp_requests import log_record, log_request, request, span
from traces import services
from traces.models import ErrorGroup, ErrorMinute, HeldVersion, RouteMinute, TraceIntake
from traces.otlp.grouping_test import stack
from traces.services import load_sketch
from traces.shedding import in_flight

pytestmark = pytest.mark.django_db
PROTOBUF = "application/x-protobuf"
# A second into a minute ten minutes ago: a test's spans never straddle two minutes.
NOW = (time.time_ns() // (60 * 10**9) - 10) * 60 * 10**9 + 10**9


@pytest.fixture
def shop() -> Service:
    service = Service.objects.create(name="shop", slug="shop")
    Release.objects.create(
        service=service, version="1.1.0", deployed_at=datetime.fromtimestamp(NOW / 1e9, UTC)
    )
    return service


@pytest.fixture
def token(shop: Service) -> str:
    return sources_services.create_token("otel", shop)[1]


def post(body: bytes, token: str, content_type: str = PROTOBUF, **headers: str):  # type: ignore[no-untyped-def]
    return Client().post(
        "/otlp/v1/traces",
        body,
        content_type=content_type,
        headers={"Authorization": f"Bearer {token}", **headers},
    )


def answer(response) -> ExportTraceServiceResponse:  # type: ignore[no-untyped-def]
    message = ExportTraceServiceResponse()
    message.ParseFromString(response.content)
    return message


ERROR = ("ZeroDivisionError", "division by zero", stack())


def test_protobuf_spans_become_route_minutes_and_an_error_group(token: str) -> None:
    spans = [span(n, NOW + n * 10**8, exception=ERROR if n % 6 == 0 else None) for n in range(12)]
    spans.append(span(99, NOW - 120 * 10**9, route="/health"))  # before the deploy: baseline
    response = post(request("shop", "1.1.0", spans).SerializeToString(), token)
    assert response.status_code == 200, response.content
    assert response["Content-Type"] == PROTOBUF
    assert not answer(response).HasField("partial_success")
    row = RouteMinute.objects.get(route="GET /cart/{cart_id}/total")
    assert (row.requests, row.errors, row.window) == (12, 2, "release")
    assert load_sketch(row.sketch).count == 12  # type: ignore[attr-defined]
    assert RouteMinute.objects.get(route="GET /health").window == "baseline"
    group = ErrorGroup.objects.get()
    assert group.exception_type == "ZeroDivisionError"
    assert group.frames[-1][2] == "line_total"
    assert sum(ErrorMinute.objects.values_list("count", flat=True)) == 2
    assert TraceIntake.objects.get().spans == 13
    # The same again adds up: one row per route and minute, counts doubled.
    post(request("shop", "1.1.0", spans).SerializeToString(), token)
    row.refresh_from_db()
    assert row.requests == 24 and load_sketch(row.sketch).count == 24  # type: ignore[attr-defined]


def test_json_with_hex_ids_gzip_and_a_json_answer(token: str) -> None:
    message = request("shop", "1.1.0", [span(1, NOW, exception=ERROR)])
    document = json_format.MessageToDict(message)
    trace = document["resourceSpans"][0]["scopeSpans"][0]["spans"][0]
    trace["traceId"], trace["spanId"] = "0" * 31 + "2", "0" * 15 + "2"
    trace["kind"] = 2  # enums as integers, as OTLP/JSON writes them
    body = gzip.compress(json.dumps(document).encode())
    response = post(body, token, "application/json", **{"Content-Encoding": "gzip"})
    assert response.status_code == 200, response.content
    assert response.json() == {}
    assert RouteMinute.objects.get().requests == 1


def test_unknown_versions_are_held_and_said_and_unknown_services_refused(token: str) -> None:
    body = request("shop", "9.9.9", [span(1, NOW), span(2, NOW)]).SerializeToString()
    partial = answer(post(body, token)).partial_success
    # Accepted with a warning, as the specification allows: 0 rejected and a message.
    assert partial.rejected_spans == 0
    assert partial.error_message.startswith(
        "2 spans of version 9.9.9, which has no release yet, held for up to 24 h"
    )
    assert HeldVersion.objects.get().spans == 2
    other = request("billing", "1.0.0", [span(1, NOW)]).SerializeToString()
    assert (
        "no service of that service.name"
        in answer(post(other, token)).partial_success.error_message
    )
    assert not RouteMinute.objects.exists()


def test_a_token_of_another_service_sends_nothing_of_this_one(shop: Service) -> None:
    billing = Service.objects.create(name="billing", slug="billing")
    secret = sources_services.create_token("billing", billing)[1]
    body = request("shop", "1.1.0", [span(1, NOW)]).SerializeToString()
    partial = answer(post(body, secret)).partial_success
    assert partial.rejected_spans == 1 and "may not send" in partial.error_message
    assert not RouteMinute.objects.exists()


def test_tokens(token: str, settings) -> None:  # type: ignore[no-untyped-def]
    body = request("shop", "1.1.0", [span(1, NOW)]).SerializeToString()
    missing = Client().post("/otlp/v1/traces", body, content_type=PROTOBUF)
    assert missing.status_code == 401 and missing["WWW-Authenticate"]
    status = Status()
    status.ParseFromString(missing.content)
    assert "ingestion token" in status.message
    assert post(body, "wrong").status_code == 401
    settings.DETECTIVE_API_KEY = "k" * 40
    assert post(body, "k" * 40).status_code == 403
    assert Client().get("/otlp/v1/traces").status_code == 405
    assert not RouteMinute.objects.exists()


def test_the_deploy_time_splits_baseline_from_release(token: str, shop: Service) -> None:
    release = Release.objects.get(version="1.1.0")
    release.deployed_at = datetime.fromtimestamp(NOW / 1e9, UTC) + timedelta(minutes=5)
    release.save()
    post(request("shop", "1.1.0", [span(1, NOW, exception=ERROR)]).SerializeToString(), token)
    assert ErrorMinute.objects.get().window == "baseline"


def test_a_database_that_does_not_answer_is_a_503_with_retry_after(
    token: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    def down(*args: object) -> None:
        raise OperationalError("database is locked")

    monkeypatch.setattr(services, "ingest", down)
    response = post(request("shop", "1.1.0", [span(1, NOW)]).SerializeToString(), token)
    assert response.status_code == 503 and response["Retry-After"] == "5"
    status = Status()
    status.ParseFromString(response.content)
    assert status.code == 14 and "send again later" in status.message


def test_past_the_in_flight_bound_a_request_is_shed_with_429_and_nothing_stored(
    token: str, settings: pytest.FixtureRequest
) -> None:
    settings.DETECTIVE_OTLP_MAX_IN_FLIGHT = 2  # type: ignore[attr-defined]
    data = request("shop", "1.1.0", [span(1, NOW, exception=ERROR)]).SerializeToString()
    # Two requests being ingested elsewhere in this process hold both slots.
    with in_flight.slot() as first, in_flight.slot() as second:
        assert first and second
        shed = post(data, token)
        logs = Client().post(
            "/otlp/v1/logs",
            log_request("shop", "1.1.0", [log_record(NOW, exception=ERROR)]).SerializeToString(),
            content_type=PROTOBUF,
            headers={"Authorization": f"Bearer {token}"},
        )
    for response in (shed, logs):
        assert response.status_code == 429 and response["Retry-After"] == "5"
        status = Status()
        status.ParseFromString(response.content)
        assert status.code == 8 and "Retry-After" in status.message
    assert not RouteMinute.objects.exists() and not ErrorGroup.objects.exists()
    # A slot given back, the same body is taken.
    assert post(data, token).status_code == 200
    assert RouteMinute.objects.get().requests == 1


def post_logs(body: bytes, token: str, content_type: str = PROTOBUF, **headers: str):  # type: ignore[no-untyped-def]
    return Client().post(
        "/otlp/v1/logs",
        body,
        content_type=content_type,
        headers={"Authorization": f"Bearer {token}", **headers},
    )


def test_log_records_with_an_exception_join_the_spans_error_group(token: str) -> None:
    post(request("shop", "1.1.0", [span(1, NOW, exception=ERROR)]).SerializeToString(), token)
    records = [
        log_record(NOW + n, exception=ERROR, route="/cart/{cart_id}/total") for n in range(3)
    ]
    records.append(log_record(NOW))  # no exception: accepted, not kept
    response = post_logs(
        gzip.compress(log_request("shop", "1.1.0", records).SerializeToString()),
        token,
        **{"Content-Encoding": "gzip"},
    )
    assert response.status_code == 200, response.content
    message = ExportLogsServiceResponse()
    message.ParseFromString(response.content)
    assert not message.HasField("partial_success")
    group = ErrorGroup.objects.get()
    assert sum(ErrorMinute.objects.filter(group=group).values_list("count", flat=True)) == 4
    intake = TraceIntake.objects.get()
    assert (intake.spans, intake.log_records) == (1, 3)
    # Log records are no requests: the route's figures are the span's alone.
    assert RouteMinute.objects.get().requests == 1


def test_log_records_of_an_unknown_release_are_held_with_a_warning_in_json(token: str) -> None:
    document = json_format.MessageToDict(
        log_request("shop", "9.9.9", [log_record(NOW, exception=ERROR, trace=1)])
    )
    written = document["resourceLogs"][0]["scopeLogs"][0]["logRecords"][0]
    written.update({"traceId": "ab" * 16, "spanId": "cd" * 8})
    response = post_logs(json.dumps(document).encode(), token, "application/json")
    assert response.status_code == 200 and response["Content-Type"] == "application/json"
    partial = json.loads(response.content)["partialSuccess"]
    assert "rejectedLogRecords" not in partial  # 0, held
    assert "1 log records of version 9.9.9, which has no release yet" in partial["errorMessage"]
    assert not ErrorGroup.objects.exists()
    assert HeldVersion.objects.get().log_records == 1


def test_logs_need_an_ingestion_token() -> None:
    response = post_logs(b"", "nope")
    assert response.status_code == 401 and "Bearer" in response["WWW-Authenticate"]


def test_a_request_naming_two_releases_is_stored_whole_or_not_at_all(
    token: str, shop: Service, monkeypatch: pytest.MonkeyPatch
) -> None:
    Release.objects.create(service=shop, version="1.2.0")
    message = request("shop", "1.1.0", [span(1, NOW), span(2, NOW)])
    message.resource_spans.extend(request("shop", "1.2.0", [span(3, NOW)]).resource_spans)
    body = message.SerializeToString()
    merge = services._merge
    calls: list[str] = []

    def second_fails(release: Release, batch: object) -> None:
        calls.append(release.version)
        if len(calls) == 2:
            raise OperationalError("the connection was lost")
        merge(release, batch)  # type: ignore[arg-type]

    monkeypatch.setattr(services, "_merge", second_fails)
    assert post(body, token).status_code == 503
    assert calls == ["1.1.0", "1.2.0"]
    # The first release's merge went back with the second's: the exporter's retry counts once.
    assert not RouteMinute.objects.exists() and not TraceIntake.objects.exists()
    monkeypatch.setattr(services, "_merge", merge)
    assert post(body, token).status_code == 200
    requests = dict(RouteMinute.objects.values_list("release__version", "requests"))
    assert requests == {"1.1.0": 2, "1.2.0": 1}
    assert sorted(TraceIntake.objects.values_list("spans", flat=True)) == [1, 2]
