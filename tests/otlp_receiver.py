"""A small OTLP/HTTP receiver for tests: what an OpenTelemetry collector (or a viewer such as
Phoenix or Langfuse) receives from Detective, decoded with the protobuf types that come with
the OTLP exporter (`opentelemetry-proto`).

`POST /v1/traces` and `POST /v1/metrics` take `application/x-protobuf` bodies (gzip or not)
and answer 200; anything else 404. Spans and metric points are kept decoded, as plain Python
values, with the request headers they came with.

Also a stand-in viewer: `uv run python -m tests.otlp_receiver --port 4318` prints one line per
span it receives (see docs/operating/observability.md).
"""

from __future__ import annotations

import contextlib
import gzip
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any

from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span as SpanProto
from opentelemetry.proto.trace.v1.trace_pb2 import Status as StatusProto


def any_value(value: AnyValue) -> Any:
    kind = value.WhichOneof("value")
    if kind == "array_value":
        return [any_value(item) for item in value.array_value.values]
    if kind == "kvlist_value":
        return attributes(value.kvlist_value.values)
    if kind is None:
        return None
    return getattr(value, kind)


def attributes(pairs: Any) -> dict[str, Any]:
    return {pair.key: any_value(pair.value) for pair in pairs if isinstance(pair, KeyValue)}


@dataclass(frozen=True)
class ReceivedSpan:
    name: str
    kind: str  # SERVER, CLIENT, INTERNAL ...
    trace_id: str
    span_id: str
    parent_span_id: str | None
    attributes: dict[str, Any]
    resource: dict[str, Any]
    status: str  # UNSET, OK, ERROR
    scope: str


@dataclass(frozen=True)
class ReceivedPoint:
    metric: str
    attributes: dict[str, Any]
    value: float  # a sum's value, a histogram's sum
    count: int | None  # a histogram's count


@dataclass
class _Store:
    spans: list[ReceivedSpan] = field(default_factory=list)
    # One list of points per metrics export (the exports are cumulative).
    metric_exports: list[list[ReceivedPoint]] = field(default_factory=list)
    headers: list[dict[str, str]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)


def _span(span: SpanProto, resource: dict[str, Any], scope: str) -> ReceivedSpan:
    return ReceivedSpan(
        name=span.name,
        kind=SpanProto.SpanKind.Name(span.kind).removeprefix("SPAN_KIND_"),
        trace_id=span.trace_id.hex(),
        span_id=span.span_id.hex(),
        parent_span_id=span.parent_span_id.hex() or None,
        attributes=attributes(span.attributes),
        resource=resource,
        status=StatusProto.StatusCode.Name(span.status.code).removeprefix("STATUS_CODE_"),
        scope=scope,
    )


def _points(request: ExportMetricsServiceRequest) -> list[ReceivedPoint]:
    points: list[ReceivedPoint] = []
    for resource_metrics in request.resource_metrics:
        for scope_metrics in resource_metrics.scope_metrics:
            for metric in scope_metrics.metrics:
                data = metric.WhichOneof("data")
                if data == "histogram":
                    for point in metric.histogram.data_points:
                        points.append(
                            ReceivedPoint(
                                metric.name, attributes(point.attributes), point.sum, point.count
                            )
                        )
                elif data == "sum":
                    for point in metric.sum.data_points:
                        value = point.as_double if point.HasField("as_double") else point.as_int
                        points.append(
                            ReceivedPoint(metric.name, attributes(point.attributes), value, None)
                        )
    return points


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if self.headers.get("Content-Encoding") == "gzip":
            body = gzip.decompress(body)
        store = self.server.store
        if self.path == "/v1/traces":
            request = ExportTraceServiceRequest.FromString(body)
            spans = [
                _span(span, attributes(rs.resource.attributes), ss.scope.name)
                for rs in request.resource_spans
                for ss in rs.scope_spans
                for span in ss.spans
            ]
            with store.lock:
                store.spans.extend(spans)
                store.headers.append(dict(self.headers.items()))
            if self.server.on_span is not None:
                for span in spans:
                    self.server.on_span(span)
        elif self.path == "/v1/metrics":
            points = _points(ExportMetricsServiceRequest.FromString(body))
            with store.lock:
                store.metric_exports.append(points)
                store.headers.append(dict(self.headers.items()))
        else:
            self.send_response(404)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: object) -> None:
        pass


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(
        self, port: int = 0, on_span: Callable[[ReceivedSpan], None] | None = None
    ) -> None:
        super().__init__(("127.0.0.1", port), _Handler)
        self.store = _Store()
        self.on_span = on_span


class OtlpReceiver:
    """The receiver on a free loopback port, in a background thread; a context manager."""

    def __init__(
        self, port: int = 0, on_span: Callable[[ReceivedSpan], None] | None = None
    ) -> None:
        self._server = _Server(port, on_span)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    @property
    def spans(self) -> list[ReceivedSpan]:
        with self._server.store.lock:
            return list(self._server.store.spans)

    @property
    def metric_exports(self) -> list[list[ReceivedPoint]]:
        with self._server.store.lock:
            return list(self._server.store.metric_exports)

    @property
    def headers(self) -> list[dict[str, str]]:
        with self._server.store.lock:
            return list(self._server.store.headers)

    def wait_for(self, check: Callable[[OtlpReceiver], bool], timeout_s: float = 20.0) -> bool:
        deadline = time.monotonic() + timeout_s
        while not check(self):
            if time.monotonic() > deadline:
                return False
            time.sleep(0.1)
        return True

    def __enter__(self) -> OtlpReceiver:
        self._thread.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self._server.shutdown()
        self._server.server_close()


_SHOWN = (
    "gen_ai.request.model",
    "gen_ai.usage.input_tokens",
    "gen_ai.usage.output_tokens",
    "gen_ai.tool.name",
    "detective.release.id",
    "session.id",
)


def _print_span(span: ReceivedSpan) -> None:
    shown = " ".join(f"{k}={span.attributes[k]}" for k in _SHOWN if k in span.attributes)
    content = [k for k in span.attributes if k.startswith("gen_ai.") and "messages" in k]
    line = f"{span.trace_id[:8]} {span.kind:<8} {span.name}  {shown}"
    if content:
        line += f"  (+{', '.join(content)})"
    print(line, flush=True)


def main() -> None:
    import argparse

    parser = argparse.ArgumentParser(description="Print the spans sent over OTLP/HTTP.")
    parser.add_argument("--port", type=int, default=4318)
    port = parser.parse_args().port
    with OtlpReceiver(port, on_span=_print_span) as receiver:
        print(f"OTLP/HTTP receiver on {receiver.url} (Ctrl+C stops it)", flush=True)
        with contextlib.suppress(KeyboardInterrupt):
            threading.Event().wait()


if __name__ == "__main__":
    main()
