from __future__ import annotations

import asyncio
from typing import Any

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind

from detective_site.telemetry import TracedWebsockets

RUN = "6de67372-e5cb-4bf3-a8fc-b03854186fb9"


class _Spans:
    def __init__(self) -> None:
        self.exporter = InMemorySpanExporter()
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(self.exporter))
        self.tracer = provider.get_tracer("test")


def _drive(app: Any, path: str, incoming: list[dict[str, Any]]) -> list[dict[str, Any]]:
    sent: list[dict[str, Any]] = []
    messages = list(incoming)

    async def receive() -> dict[str, Any]:
        if messages:
            return messages.pop(0)
        await asyncio.sleep(0)
        return {"type": "websocket.disconnect", "code": 1001}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    asyncio.run(app({"type": "websocket", "path": path, "scheme": "ws"}, receive, send))
    return sent


def test_a_websocket_handshake_is_a_span_that_ends_once_it_is_handled() -> None:
    spans = _Spans()
    seen_open: list[bool] = []

    async def consumer(scope: Any, receive: Any, send: Any) -> None:
        assert (await receive())["type"] == "websocket.connect"
        await send({"type": "websocket.accept"})
        await receive()  # the page's first message: the handshake is over by now
        seen_open.append(bool(spans.exporter.get_finished_spans()))
        await send({"type": "websocket.close", "code": 1000})

    app = TracedWebsockets(consumer, tracer=spans.tracer)
    _drive(app, f"/ws/runs/{RUN}/", [{"type": "websocket.connect"}, {"type": "websocket.receive"}])

    [span] = spans.exporter.get_finished_spans()
    assert seen_open == [True]
    assert span.name == "WS ws/runs/<uuid:run_id>/"
    assert span.kind is SpanKind.SERVER
    attributes = dict(span.attributes or {})
    assert attributes["http.route"] == "ws/runs/<uuid:run_id>/"
    assert attributes["url.path"] == f"/ws/runs/{RUN}/"
    assert attributes["detective.websocket.accepted"] is True
    # The close long after the handshake is not the handshake's.
    assert "detective.websocket.close_code" not in attributes


def test_a_refused_websocket_records_its_close_code() -> None:
    spans = _Spans()

    async def consumer(scope: Any, receive: Any, send: Any) -> None:
        await receive()
        await send({"type": "websocket.accept"})
        await send({"type": "websocket.close", "code": 4403})

    _drive(
        TracedWebsockets(consumer, tracer=spans.tracer),
        "/ws/evals/runs/7/",
        [{"type": "websocket.connect"}],
    )
    [span] = spans.exporter.get_finished_spans()
    assert span.name == "WS ws/evals/runs/<int:pk>/"
    assert (span.attributes or {})["detective.websocket.close_code"] == 4403


def test_http_passes_through_untraced() -> None:
    spans = _Spans()
    called: list[str] = []

    async def app(scope: Any, receive: Any, send: Any) -> None:
        called.append(scope["type"])

    asyncio.run(TracedWebsockets(app, tracer=spans.tracer)({"type": "http"}, None, None))  # type: ignore[arg-type]
    assert called == ["http"]
    assert spans.exporter.get_finished_spans() == ()
