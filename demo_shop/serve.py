"""One deployed version of the demo shop, run as its own process: the shop's Django app
served on a free local port, instrumented by `opentelemetry-instrumentation-django`, its spans
exported by the SDK's `OTLPSpanExporter` configured only by the SDK's environment variables
(OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES, OTEL_EXPORTER_OTLP_ENDPOINT,
OTEL_EXPORTER_OTLP_HEADERS), as docs/using/errors-and-traces.md tells a user. It sends itself a
burst of requests over HTTP, flushes the exporter and prints what it served and exported as one
JSON line; it exits 1 when an export failed.

    python -m demo_shop.serve --code <deploy dir> --requests 60
"""

from __future__ import annotations

import argparse
import json
import logging
import secrets
import sys
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, make_server

import httpx
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

# The paths the burst asks for, each `requests` times: one cart id per request, so that one
# in six carts (catalogue.cart) holds an emptied line.
ROUTES = ("/products", "/cart/{n}/total", "/health")


@dataclass
class Exported(SpanExporter):
    """The OTLP exporter, counting what it sent and what failed (the SDK logs a failure and
    goes on; the demo says it)."""

    inner: OTLPSpanExporter
    sent: int = 0
    failed: int = 0
    results: list[str] = field(default_factory=list)

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        result = self.inner.export(spans)
        if result == SpanExportResult.SUCCESS:
            self.sent += len(spans)
        else:
            self.failed += len(spans)
        return result

    def shutdown(self) -> None:
        self.inner.shutdown()

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        return self.inner.force_flush(timeout_millis)


class _Quiet(WSGIRequestHandler):
    """No line per request on the console."""

    def log_message(self, format: str, *args: Any) -> None:
        pass


def _django(code: Path, provider: TracerProvider) -> Any:
    """The shop's WSGI application, with the Django instrumentation's middleware in front."""
    sys.path.insert(0, str(code))
    from django.conf import settings

    settings.configure(
        DEBUG=False,
        SECRET_KEY=secrets.token_urlsafe(32),
        ALLOWED_HOSTS=["127.0.0.1"],
        ROOT_URLCONF="shop.urls",
        MIDDLEWARE=[],
        INSTALLED_APPS=[],
        USE_TZ=True,
    )
    from opentelemetry.instrumentation.django import DjangoInstrumentor

    # Before the handler loads the middleware: the instrumentor adds its own to MIDDLEWARE.
    DjangoInstrumentor().instrument(tracer_provider=provider)
    from django.core.wsgi import get_wsgi_application

    application = get_wsgi_application()
    # A 500's traceback is the span's to carry; the console stays readable.
    logging.getLogger("django.request").setLevel(logging.CRITICAL)
    return application


def run(code: Path, requests: int) -> dict[str, Any]:
    exporter = Exported(OTLPSpanExporter())
    # Resource.create() reads OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES.
    provider = TracerProvider(resource=Resource.create())
    provider.add_span_processor(BatchSpanProcessor(exporter))
    server = make_server("127.0.0.1", 0, _django(code, provider), handler_class=_Quiet)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    statuses: dict[str, int] = {}
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{server.server_port}", timeout=30) as web:
            for n in range(1, requests + 1):
                for route in ROUTES:
                    status = web.get(route.format(n=n)).status_code
                    statuses[str(status)] = statuses.get(str(status), 0) + 1
    finally:
        server.shutdown()
        server.server_close()
    flushed = provider.force_flush()
    provider.shutdown()
    resource = dict(provider.resource.attributes)
    return {
        "service": resource.get("service.name"),
        "version": resource.get("service.version"),
        "requests": sum(statuses.values()),
        "statuses": statuses,
        "spans_exported": exporter.sent,
        "spans_failed": exporter.failed,
        "flushed": flushed,
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--code", type=Path, required=True, help="The deployed shop's folder.")
    parser.add_argument("--requests", type=int, default=60, help="Requests of each route.")
    options = parser.parse_args(argv)
    summary = run(options.code, options.requests)
    print(json.dumps(summary), flush=True)
    return 1 if summary["spans_failed"] or not summary["flushed"] else 0


if __name__ == "__main__":
    sys.exit(main())
