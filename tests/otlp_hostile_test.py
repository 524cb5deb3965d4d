"""Hostile OTLP bodies against the live web server: each gets a 4xx or a 200 whose
partial_success refuses the spans, never a 5xx, and nothing of them is stored."""

from __future__ import annotations

import gzip
import json
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import pytest
from google.protobuf import json_format
from google.protobuf.internal.encoder import _VarintBytes
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue

from releases.models import Release, Service
from sources import services as sources_services
from tests.live_site import LiveSite
from tests.otlp_requests import attributes, request, span
from traces.models import ErrorGroup, ErrorMinute, RouteMinute

pytestmark = pytest.mark.django_db(transaction=True)
PROTOBUF = "application/x-protobuf"
JSON = "application/json"
NOW = time.time_ns() - 60 * 10**9
ERROR = ("ValueError", "bad", 'Traceback (most recent call last):\n  File "/srv/a/x.py", line 1')


def body(*spans: object, version: str = "1.0.0") -> bytes:
    return request("shop", version, list(spans)).SerializeToString()  # type: ignore[arg-type]


def field(number: int, payload: bytes) -> bytes:
    """One length-delimited field in protobuf's wire format (the message classes themselves
    refuse to build what is this deep)."""
    return bytes([number << 3 | 2]) + _VarintBytes(len(payload)) + payload


def deep_protobuf(depth: int) -> bytes:
    """A resource attribute whose value is a key-value list `depth` levels deep."""
    value = AnyValue(string_value="x").SerializeToString()
    for _ in range(depth):
        pair = field(1, b"k") + field(2, value)  # KeyValue: key, value
        value = field(6, field(1, pair))  # AnyValue.kvlist_value: KeyValueList.values
    pair = field(1, b"deep") + field(2, value)
    return field(1, field(1, field(1, pair)))  # request.resource_spans.resource.attributes


def wrong_ids() -> bytes:
    made = span(1, NOW)
    made.trace_id = b"\x01" * 5
    short_span = span(2, NOW)
    short_span.span_id = b"\x02" * 3
    return body(made, short_span)


def times(start: int) -> bytes:
    made = span(1, NOW)
    made.start_time_unix_nano = start
    return body(made)


def json_body(change: dict[str, str]) -> bytes:
    document = json_format.MessageToDict(request("shop", "1.0.0", [span(1, NOW)]))
    written = document["resourceSpans"][0]["scopeSpans"][0]["spans"][0]
    # OTLP/JSON's ids are hex, not protobuf's JSON mapping's base64.
    written.update({"traceId": "0" * 31 + "2", "spanId": "0" * 15 + "2", **change})
    return json.dumps(document).encode()


def invalid_utf8() -> bytes:
    raw = body(span(1, NOW, route="/ROUTE_MARK"))
    return raw.replace(b"ROUTE_MARK", b"\xff\xfeUTE_MARK")


def million_attributes() -> bytes:
    made = span(1, NOW)
    made.attributes.extend(KeyValue(key="a") for _ in range(1_000_001))
    return gzip.compress(body(made))


def no_version() -> bytes:
    message = ExportTraceServiceRequest()
    resource = message.resource_spans.add()
    resource.resource.attributes.extend(attributes(service__name="shop"))
    resource.scope_spans.add().spans.append(span(1, NOW))
    return message.SerializeToString()


# (what, body, content type, extra headers, the statuses it may get: 200 means a partial
# success refusing every span)
CASES: list[tuple[str, bytes | None, str, dict[str, str], set[int]]] = [
    ("invalid protobuf", b"\xff\xff\xff\xff\x0f", PROTOBUF, {}, {400}),
    ("protobuf nested 200 deep", None, PROTOBUF, {}, {400}),
    (
        "JSON nested 100,000 deep",
        b'{"resourceSpans":' + b"[" * 100_000 + b"]" * 100_000 + b"}",
        JSON,
        {},
        {400},
    ),
    ("a route of 1 MB", None, PROTOBUF, {}, {200}),
    ("a body of 5 MB", b"\x0a" * (5 * 1024 * 1024), PROTOBUF, {}, {413}),
    ("a NUL in the route", None, PROTOBUF, {}, {200}),
    ("a NUL in an exception's message", None, PROTOBUF, {}, {200}),
    ("a NUL in JSON", None, JSON, {}, {200}),
    ("invalid UTF-8 in a protobuf string", None, PROTOBUF, {}, {400}),
    ("invalid UTF-8 in JSON", b'{"resourceSpans": "\xff"}', JSON, {}, {400}),
    ("ids of the wrong length", None, PROTOBUF, {}, {200}),
    ("a JSON id that is not hex", None, JSON, {}, {400}),
    ("a JSON id of the wrong length", None, JSON, {}, {200}),
    ("a start time of 0", None, PROTOBUF, {}, {200}),
    ("a start time in 2554", None, PROTOBUF, {}, {200}),
    (
        "a gzip bomb (64 MB of zeros)",
        gzip.compress(b"\0" * (64 * 1024 * 1024)),
        PROTOBUF,
        {"Content-Encoding": "gzip"},
        {413},
    ),
    (
        "a gzip body cut short",
        gzip.compress(body(span(1, NOW)))[:-12],
        PROTOBUF,
        {"Content-Encoding": "gzip"},
        {400},
    ),
    ("a million attributes", None, PROTOBUF, {"Content-Encoding": "gzip"}, {200}),
    ("no service.version", None, PROTOBUF, {}, {200}),
    ("another content type", b"<xml/>", "text/xml", {}, {415}),
    ("another encoding", b"x", PROTOBUF, {"Content-Encoding": "br"}, {415}),
]


def built(what: str) -> bytes:
    return {
        "protobuf nested 200 deep": lambda: deep_protobuf(200),
        "a route of 1 MB": lambda: body(span(1, NOW, route="/" + "r" * 1_000_000)),
        "a NUL in the route": lambda: body(span(1, NOW, route="/cart\x00")),
        "a NUL in an exception's message": lambda: body(
            span(1, NOW, exception=("ValueError", "bad\x00", ERROR[2]))
        ),
        "a NUL in JSON": lambda: json_body(
            {"attributes": [{"key": "http.route", "value": {"stringValue": "/x\u0000"}}]}
        ),
        "invalid UTF-8 in a protobuf string": invalid_utf8,
        "ids of the wrong length": wrong_ids,
        "a JSON id that is not hex": lambda: json_body({"traceId": "not hex!"}),
        "a JSON id of the wrong length": lambda: json_body({"traceId": "abcd"}),
        "a start time of 0": lambda: times(0),
        "a start time in 2554": lambda: times(2**64 - 1),
        "a million attributes": million_attributes,
        "no service.version": no_version,
    }[what]()


def test_hostile_bodies_get_a_4xx_or_a_refusal_and_store_nothing(tmp_path: Path) -> None:
    shop = Service.objects.create(name="shop", slug="shop")
    Release.objects.create(
        service=shop, version="1.0.0", deployed_at=datetime.now(UTC) - timedelta(hours=1)
    )
    _, token = sources_services.create_token("otel", shop)
    seen = []
    with LiveSite(tmp_path / "logs", {}, workers=0) as site:
        for what, raw, content_type, headers, allowed in CASES:
            data = raw if raw is not None else built(what)
            answer = httpx.post(
                f"{site.url}/otlp/v1/traces",
                content=data,
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
                message = ExportTraceServiceResponse()
                if content_type == JSON:
                    json_format.Parse(answer.text, message)
                else:
                    message.ParseFromString(answer.content)
                assert message.partial_success.rejected_spans >= 1, what
                assert message.partial_success.error_message, what
        # A good body after them all is still taken.
        good = httpx.post(
            f"{site.url}/otlp/v1/traces",
            content=body(span(1, NOW)),
            headers={"Authorization": f"Bearer {token}", "Content-Type": PROTOBUF},
            timeout=60,
        )
        assert good.status_code == 200 and good.content == b""
    print(seen)
    assert not ErrorGroup.objects.exists() and not ErrorMinute.objects.exists()
    assert list(RouteMinute.objects.values_list("route", "requests")) == [
        ("GET /cart/{cart_id}/total", 1)
    ]
