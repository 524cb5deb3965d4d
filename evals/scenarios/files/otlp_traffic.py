"""The spans of the scenarios made of files that have traces: what the running version served,
as its OpenTelemetry SDK's OTLP exporter sends it (OTLP/JSON), for `make_files.py`.

Deterministic as the rest: ids hashed from the release, the route and the request's number,
durations from a seeded generator, times from the release's deploy.
"""

from __future__ import annotations

import hashlib
import json
import random
from dataclasses import dataclass
from datetime import datetime, timedelta

__all__ = ["PRICING_ERROR", "SHOP_ROUTES", "Traffic", "otlp_json"]

SHOP_ROUTES = ("/cart/{cart_id}/total", "/products", "/health")
# Python's own traceback, as the service's OpenTelemetry instrumentation records it: the
# deploy path /srv/shop, a framework frame, then the service's own two.
PRICING_ERROR = (
    "ZeroDivisionError",
    "float division by zero",
    "Traceback (most recent call last):\n"
    '  File "/srv/shop/.venv/lib/python3.12/site-packages/flask/app.py", line 880, in '
    "full_dispatch_request\n"
    "    rv = self.dispatch_request()\n"
    '  File "/srv/shop/shop/cart.py", line 41, in cart_total\n'
    "    return sum(line_total(item.price, item.quantity) for item in cart.items)\n"
    '  File "/srv/shop/shop/pricing.py", line 14, in line_total\n'
    "    unit = price / quantity\n"
    "ZeroDivisionError: float division by zero\n",
)


@dataclass
class Traffic:
    """What the running version served from its deploy: `requests` of each route (SERVER spans
    of the service `shop`), one every `every_seconds`, and 1 in `failing_every` of
    `failing_route`'s raising `exception` (type, message, Python stack trace), recorded on its
    span; `slow_route`'s requests taking `slow_ms` where the others take 20-90 ms."""

    routes: tuple[str, ...]
    requests: int = 60
    failing_route: str | None = None
    failing_every: int = 0
    exception: tuple[str, str, str] | None = None
    # A request of each route every this many seconds.
    every_seconds: int = 20
    # One route slower than the others: its requests take `slow_ms` (low, high) ms.
    slow_route: str | None = None
    slow_ms: tuple[float, float] = (20.0, 90.0)


def _sha(*parts: str) -> str:
    return hashlib.sha1("\0".join(parts).encode()).hexdigest()


def _attribute(key: str, value: str | int) -> dict[str, object]:
    # OTLP/JSON writes a 64-bit integer as a string.
    kind = {"intValue": str(value)} if isinstance(value, int) else {"stringValue": value}
    return {"key": key, "value": kind}


def otlp_json(version: str, traffic: Traffic, deployed_at: datetime) -> str:
    """A release's spans as an OTLP exporter sends them in OTLP/JSON (an
    ExportTraceServiceRequest: ids in hex, kinds and status codes as integers, times as
    strings of nanoseconds)."""
    rng = random.Random(f"traces {version}")
    spans = []
    for n in range(traffic.requests):
        for index, route in enumerate(traffic.routes):
            start = deployed_at + timedelta(seconds=5 + n * traffic.every_seconds + index)
            start_ns = int(start.timestamp()) * 10**9
            trace = _sha("trace", version, route, str(n))
            took = traffic.slow_ms if route == traffic.slow_route else (20, 90)
            failing = (
                route == traffic.failing_route
                and traffic.failing_every
                and n % traffic.failing_every == traffic.failing_every - 1
            )
            span: dict[str, object] = {
                "traceId": trace[:32],
                "spanId": trace[32:40] + "00000001",
                "name": f"GET {route}",
                "kind": 2,
                "startTimeUnixNano": str(start_ns),
                "endTimeUnixNano": str(start_ns + int(rng.uniform(*took) * 1e6)),
                "attributes": [
                    _attribute("http.request.method", "GET"),
                    _attribute("http.route", route),
                    _attribute("http.response.status_code", 500 if failing else 200),
                ],
                "status": {},
            }
            if failing and traffic.exception is not None:
                kind, message, stack = traffic.exception
                span["status"] = {"code": 2, "message": message}
                span["events"] = [
                    {
                        "timeUnixNano": str(start_ns + 10**6),
                        "name": "exception",
                        "attributes": [
                            _attribute("exception.type", kind),
                            _attribute("exception.message", message),
                            _attribute("exception.stacktrace", stack),
                        ],
                    }
                ]
            spans.append(span)
    resource = [_attribute("service.name", "shop"), _attribute("service.version", version)]
    document = {
        "resourceSpans": [
            {
                "resource": {"attributes": resource},
                "scopeSpans": [
                    {"scope": {"name": "opentelemetry.instrumentation.flask"}, "spans": spans}
                ],
            }
        ]
    }
    # One span a line: readable in a diff, a third of the size indented.
    text = json.dumps(document, separators=(",", ":"))
    return text.replace(',{"traceId"', ',\n{"traceId"') + "\n"
