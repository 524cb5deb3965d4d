"""The OTLP benchmark's measuring process (`python -m bench.otlp_child parse|view SPANS`): a
fresh process, so its peak memory (VmHWM) is the ingestion's own. Prints one JSON line.

- `parse`: each request's body decoded (`opentelemetry-proto`), its spans checked
  (`read_spans`) and folded into figures and error groups (`aggregate`): the floor, no database.
- `view`: each body POSTed through Django's test client to `/otlp/v1/traces` (authentication,
  the same reading, the merge into the database), on the SQLite database of DETECTIVE_DATA_DIR
  (migrated by the parent).

The bodies are made here, one at a time and outside the timed part: 512 spans each (an SDK's
batch), 128 requests of 20 routes, each a SERVER span and three children; 1 request in 50
raises one of three exceptions; 10 bodies a minute of span time.
"""

from __future__ import annotations

import json
import sys
import time
from datetime import UTC, datetime

SPANS_A_REQUEST = 512
CHILDREN = 3
ROUTES = 20
ERROR_EVERY = 50
BODIES_A_MINUTE = 10
STACK = (
    "Traceback (most recent call last):\n"
    '  File "/srv/shop/web/views.py", line 41, in {route}\n'
    "    return pricing.total(cart)\n"
    '  File "/srv/shop/shop/pricing.py", line 12, in {function}\n'
    "    unit = price / quantity\n"
    "{kind}: {message}\n"
)
EXCEPTIONS = (
    ("ZeroDivisionError", "division by zero", "line_total"),
    ("KeyError", "'sku-{n}'", "lookup"),
    ("ValueError", "invalid quantity {n}", "parse_quantity"),
)


def body(index: int, start_ns: int) -> bytes:
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
    )
    from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
    from opentelemetry.proto.trace.v1.trace_pb2 import Span, Status

    def kv(key: str, value: str | int) -> KeyValue:
        if isinstance(value, int):
            return KeyValue(key=key, value=AnyValue(int_value=value))
        return KeyValue(key=key, value=AnyValue(string_value=value))

    message = ExportTraceServiceRequest()
    resource = message.resource_spans.add()
    resource.resource.attributes.extend(
        [kv("service.name", "shop"), kv("service.version", "1.1.0")]
    )
    spans = resource.scope_spans.add().spans
    for n in range(SPANS_A_REQUEST // (CHILDREN + 1)):
        number = index * SPANS_A_REQUEST + n
        trace_id = (number + 1).to_bytes(16, "big")
        at = start_ns + n * 1_000_000
        route = f"/api/v1/resource{number % ROUTES}/{{id}}"
        failing = number % ERROR_EVERY == 0
        server = spans.add(
            trace_id=trace_id,
            span_id=(number * 4 + 1).to_bytes(8, "big"),
            name=f"GET {route}",
            kind=Span.SpanKind.SPAN_KIND_SERVER,
            start_time_unix_nano=at,
            end_time_unix_nano=at + (5 + number % 97) * 1_000_000,
            attributes=[
                kv("http.route", route),
                kv("http.request.method", "GET"),
                kv("http.response.status_code", 500 if failing else 200),
                kv("url.scheme", "https"),
                kv("user_agent.original", "Mozilla/5.0 (X11; Linux x86_64)"),
            ],
        )
        if failing:
            kind, text, function = EXCEPTIONS[number % len(EXCEPTIONS)]
            server.status.code = Status.StatusCode.STATUS_CODE_ERROR
            server.events.add(
                name="exception",
                time_unix_nano=at,
                attributes=[
                    kv("exception.type", kind),
                    kv("exception.message", text.format(n=number)),
                    kv(
                        "exception.stacktrace",
                        STACK.format(
                            route=f"resource{number % ROUTES}",
                            function=function,
                            kind=kind,
                            message=text.format(n=number),
                        ),
                    ),
                ],
            )
        for child in range(CHILDREN):
            spans.add(
                trace_id=trace_id,
                span_id=(number * 4 + 2 + child).to_bytes(8, "big"),
                parent_span_id=server.span_id,
                name=f"SELECT shop.table{child}",
                kind=Span.SpanKind.SPAN_KIND_CLIENT,
                start_time_unix_nano=at + 100_000,
                end_time_unix_nano=at + 900_000,
                attributes=[kv("db.system", "postgresql"), kv("db.operation.name", "SELECT")],
            )
    return message.SerializeToString()


def peak_mb() -> float:
    with open("/proc/self/status") as status:
        line = next(line for line in status if line.startswith("VmHWM:"))
    return int(line.split()[1]) / 1024


def main(mode: str, spans: int) -> None:
    import django

    django.setup()
    from traces.otlp.aggregate import aggregate
    from traces.otlp.reading import decode_traces
    from traces.otlp.spans import read_spans

    requests = spans // SPANS_A_REQUEST
    first_ns = (time.time_ns() // 60_000_000_000 - requests // BODIES_A_MINUTE - 60) * 60 * 10**9
    deployed_ns = first_ns + 30 * 60 * 10**9
    post = None
    if mode == "view":
        from django.test import Client

        from releases.models import Release, Service
        from sources import services as sources_services

        shop = Service.objects.create(name="shop", slug="shop")
        Release.objects.create(
            service=shop,
            version="1.1.0",
            deployed_at=datetime.fromtimestamp(deployed_ns / 1e9, UTC),
        )
        _, token = sources_services.create_token("bench", shop)
        client = Client(headers={"Authorization": f"Bearer {token}"}, HTTP_HOST="localhost")

        def post(data: bytes) -> None:
            answer = client.post("/otlp/v1/traces", data, content_type="application/x-protobuf")
            assert answer.status_code == 200 and not answer.content, answer.content[:300]

        # Once outside the measure, for another release: the imports a first request makes.
        Release.objects.create(service=shop, version="warm-up")
        warm = decode_traces(body(0, first_ns), "application/x-protobuf")
        for kv in warm.resource_spans[0].resource.attributes:
            if kv.key == "service.version":
                kv.value.string_value = "warm-up"
        post(warm.SerializeToString())

    wall = cpu = 0.0
    size = 0
    for index in range(requests):
        data = body(index, first_ns + (index // BODIES_A_MINUTE) * 60 * 10**9)
        size += len(data)
        started, started_cpu = time.perf_counter(), time.process_time()
        if post is None:
            read = read_spans(decode_traces(data, "application/x-protobuf"))
            assert not read.rejected, read.message()
            aggregate(read.spans, deployed_ns)
        else:
            post(data)
        wall += time.perf_counter() - started
        cpu += time.process_time() - started_cpu
    figures = {"spans": requests * SPANS_A_REQUEST, "seconds": wall, "cpu_seconds": cpu}
    if mode == "view":
        from django.db.models import Sum

        from traces.models import ErrorRelease, RouteMinute

        RouteMinute.objects.filter(release__version="warm-up").delete()
        kept = RouteMinute.objects.aggregate(requests=Sum("requests"), errors=Sum("errors"))
        figures |= {
            "route_minutes": RouteMinute.objects.count(),
            "requests": kept["requests"],
            "errors": kept["errors"],
            "groups": ErrorRelease.objects.filter(release__version="1.1.0").count(),
        }
    print(json.dumps({**figures, "bytes": size, "peak_mb": peak_mb()}))


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]))
