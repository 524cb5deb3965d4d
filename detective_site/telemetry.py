"""Tracing for the web process: the agent's telemetry set-up, Django's request spans and a
span per websocket handshake.

`instrument_web` is called once from asgi.py before the application is built (the
instrumentor adds its middleware to the settings). Request spans continue an incoming
`traceparent` header, so the API calls the agent's tools make during a run land in the run's
trace. DETECTIVE_TELEMETRY=off turns it all off (the test suite does).

Only requests that do something are traced by default: the release API (the agent's tools),
Reassess and Cancel (they start and stop runs), and websocket handshakes. Page views, static
files, the admin and the login page would be most of the traces, each of one empty span.
DETECTIVE_TRACE_PAGES=true traces every request; OTEL_PYTHON_DJANGO_EXCLUDED_URLS (or
OTEL_PYTHON_EXCLUDED_URLS), when set, is the instrumentor's own list and replaces ours.
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from opentelemetry import trace
from opentelemetry.trace import Span, SpanKind

TRACE_PAGES_ENV = "DETECTIVE_TRACE_PAGES"
EXCLUDED_URLS_ENVS = ("OTEL_PYTHON_DJANGO_EXCLUDED_URLS", "OTEL_PYTHON_EXCLUDED_URLS")
# Matched against the request's absolute URL without its query: everything but the API,
# Reassess and Cancel.
DEFAULT_EXCLUDED_URLS = r"^[a-z]+://[^/]+/(?!api/|releases/[^/]+/reassess$|runs/[^/]+/cancel$)"

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

_done = False
_tracer = trace.get_tracer("detective.web")


def excluded_urls(environ: MutableMapping[str, str] | None = None) -> str | None:
    """What the Django instrumentor leaves out: None lets it read its own variables."""
    env = os.environ if environ is None else environ
    if any(env.get(name, "").strip() for name in EXCLUDED_URLS_ENVS):
        return None
    if env.get(TRACE_PAGES_ENV, "").strip().lower() in {"1", "true", "yes", "on"}:
        return ""
    return DEFAULT_EXCLUDED_URLS


def instrument_web() -> None:
    global _done
    if _done:
        return
    _done = True
    from opentelemetry.instrumentation.django import DjangoInstrumentor

    from releases.runner import configure_process_telemetry, telemetry_enabled

    if not telemetry_enabled():
        return
    configure_process_telemetry()
    instrumentor = DjangoInstrumentor()
    if not instrumentor.is_instrumented_by_opentelemetry:
        instrumentor.instrument(excluded_urls=excluded_urls())


def trace_websockets(app: ASGIApp) -> ASGIApp:
    """`app` with a span per websocket handshake, when telemetry is on."""
    from releases.runner import telemetry_enabled

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
