"""A span per websocket handshake, for the web process (asgi.py wraps its websocket routes).

The rest of the web process's tracing (the agent's telemetry set-up, Django's request spans)
is every process's: `assessments/runner/process.py`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from opentelemetry import trace
from opentelemetry.trace import Span, SpanKind

from assessments.runner.process import telemetry_enabled

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

_tracer = trace.get_tracer("detective.web")


def trace_websockets(app: ASGIApp) -> ASGIApp:
    """`app` with a span per websocket handshake, when telemetry is on."""
    return TracedWebsockets(app) if telemetry_enabled() else app


class TracedWebsockets:
    """ASGI middleware: a SERVER span per websocket handshake, from the connect message
    until the application has handled it (it asks for the next message, or closes). Not the
    connection's whole life: a page stays connected for as long as it is open.

    The span is never made current: the connection's later work is not part of it."""

    def __init__(self, app: ASGIApp, tracer: trace.Tracer | None = None) -> None:
        self.app = app
        self.tracer = tracer or _tracer
        self._routes: Any = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope.get("type") != "websocket":
            await self.app(scope, receive, send)
            return
        path = str(scope.get("path") or "/")
        route = self._route(path)
        span = self.tracer.start_span(
            f"WS {route}" if route else "WS connect",
            kind=SpanKind.SERVER,
            attributes={
                "network.protocol.name": "websocket",
                "url.path": path,
                "url.scheme": str(scope.get("scheme") or "ws"),
                **({"http.route": route} if route else {}),
            },
        )
        handshake = _Handshake(span)

        async def traced_receive() -> Message:
            handshake.received()
            return await receive()

        async def traced_send(message: Message) -> None:
            handshake.sent(message)
            await send(message)

        try:
            await self.app(scope, traced_receive, traced_send)
        finally:
            handshake.end()

    def _route(self, path: str) -> str:
        from django.urls import Resolver404
        from django.urls.resolvers import RegexPattern, URLResolver

        if self._routes is None:
            from detective_site.routing import websocket_urlpatterns

            self._routes = URLResolver(RegexPattern(r"^/"), websocket_urlpatterns)
        try:
            return str(self._routes.resolve(path).route)
        except Resolver404:
            return ""


class _Handshake:
    def __init__(self, span: Span) -> None:
        self.span = span
        self.receives = 0
        self.ended = False

    def received(self) -> None:
        self.receives += 1
        if self.receives > 1:  # the connect message was handled
            self.end()

    def sent(self, message: Message) -> None:
        if self.ended:
            return
        kind = message.get("type")
        if kind == "websocket.accept":
            self.span.set_attribute("detective.websocket.accepted", True)
        elif kind == "websocket.close":
            code = int(message.get("code") or 1000)
            # A refusal (4401, 4403, 4404) is the client's problem, not a server error: no
            # ERROR status, as for an HTTP 4xx.
            self.span.set_attribute("detective.websocket.close_code", code)
            self.end()

    def end(self) -> None:
        if not self.ended:
            self.ended = True
            self.span.end()
