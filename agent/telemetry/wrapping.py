"""What the traced wrappers share: each takes a component and is one of the same kind,
forwarding what it does not trace; errors are recorded the same way on every span.

Async generators and the current span: a generator's body runs in its consumer's context,
so attaching a span across a `yield` would leak it into the consumer's code. The wrappers
attach their span only around each step of the inner iterator, which is where the inner
component's own spans (and the HTTP client's) are created.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.trace import Span, Status, StatusCode

from agent.telemetry.logging import scrub
from agent.telemetry.metrics import AgentMetrics, default_metrics
from agent.telemetry.setup import TRACER_NAME, active_telemetry, capture_content_default

STATUS_DESCRIPTION_LIMIT = 500


async def close_iterator(iterator: AsyncIterator[Any]) -> None:
    aclose = getattr(iterator, "aclose", None)
    if aclose is not None:
        await aclose()


@contextmanager
def attached(ctx: Context) -> Iterator[None]:
    token = otel_context.attach(ctx)
    try:
        yield
    finally:
        otel_context.detach(token)


def component_defaults(
    tracer: trace.Tracer | None,
    metrics: AgentMetrics | None,
    capture_content: bool | None,
) -> tuple[trace.Tracer, AgentMetrics, bool]:
    """Explicit arguments first, then what `configure_telemetry` set up, then the
    OpenTelemetry globals."""
    active = active_telemetry()
    if tracer is None:
        tracer = active.tracer if active else trace.get_tracer(TRACER_NAME)
    if metrics is None:
        metrics = active.metrics if active else default_metrics()
    if capture_content is None:
        capture_content = capture_content_default()
    return tracer, metrics, capture_content


def is_abandoned(error: BaseException) -> bool:
    """The caller stopped waiting (closed the stream, cancelled the task): not a failure
    of the component, so no ERROR status."""
    return isinstance(error, GeneratorExit | asyncio.CancelledError)


def error_type_of(error: BaseException) -> str:
    return type(error).__name__


def record_error(span: Span, error: BaseException) -> None:
    # Not span.record_exception: its stack trace would carry local reprs we do not
    # control, and the message is scrubbed of secrets first.
    message = scrub(str(error))
    span.set_attribute("error.type", error_type_of(error))
    span.set_status(Status(StatusCode.ERROR, message[:STATUS_DESCRIPTION_LIMIT]))
    span.add_event(
        "exception",
        {
            "exception.type": f"{type(error).__module__}.{type(error).__qualname__}",
            "exception.message": message,
        },
    )


class Delegating:
    """Forwards anything the wrapper does not define (an adapter's health check, the
    registry's `register`...) to the wrapped component."""

    _inner: Any

    def __getattr__(self, name: str) -> Any:
        if name == "_inner":
            raise AttributeError(name)
        return getattr(self._inner, name)
