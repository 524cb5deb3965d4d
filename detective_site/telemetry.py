"""Tracing for the web process: the agent's telemetry set-up, and Django's request spans.

Called once from asgi.py before the application is built (the instrumentor adds its
middleware to the settings). Request spans continue an incoming `traceparent` header, so the
API calls the agent's tools make during a run land in the run's trace. DETECTIVE_TELEMETRY=off
turns it off (the test suite does).
"""

from __future__ import annotations

_done = False


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
        instrumentor.instrument()
