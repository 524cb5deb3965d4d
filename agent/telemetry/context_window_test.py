from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from typing import Any

import pytest
from opentelemetry.trace import StatusCode

from agent.context.protocol import ContextFit, ContextManager
from agent.errors import ServerError
from agent.messages import (
    Message,
)
from agent.telemetry.context_window import TracedContextManager
from agent.testing.telemetry import (
    FakeContext,
    Telemetry,
    span_id,
)


def _fit(**kwargs: Any) -> ContextFit:
    defaults: dict[str, Any] = {
        "messages": [Message.user("a"), Message.user("b")],
        "tokens": 600,
        "budget": 700,
        "context_window": 1000,
        "strategy": "truncation",
        "messages_before": 5,
        "tokens_before": 1400,
    }
    defaults.update(kwargs)
    return ContextFit(**defaults)


async def test_context_fit_span_and_trim_log(
    otel: Telemetry, caplog: pytest.LogCaptureFixture
) -> None:
    context = TracedContextManager(FakeContext(_fit()), tracer=otel.tracer, metrics=otel.metrics)

    with caplog.at_level(logging.INFO, "agent.context"):
        fit = await context.fit("sys", [Message.user(str(i)) for i in range(5)])

    assert len(fit.messages) == 2
    span = otel.one("context.fit")
    assert dict(span.attributes or {}) == {
        "detective.context.messages_before": 5,
        "detective.context.messages_after": 2,
        "detective.context.messages_dropped": 3,
        "detective.context.tokens_before": 1400,
        "detective.context.tokens_after": 600,
        "detective.context.budget": 700,
        "detective.context.window": 1000,
        "detective.context.utilisation": 0.6,
        "detective.context.strategy": "truncation",
        "detective.context.trimmed": True,
    }
    [(attributes, (count, total))] = otel.points("detective.context.utilisation")
    assert attributes == {"detective.context.strategy": "truncation"}
    assert (count, total) == (1, pytest.approx(0.6))
    [record] = caplog.records
    assert record.fields["event"] == "context_trimmed"  # type: ignore[attr-defined]
    assert record.fields["messages_before"] == 5  # type: ignore[attr-defined]


async def test_an_untrimmed_fit_logs_nothing(
    otel: Telemetry, caplog: pytest.LogCaptureFixture
) -> None:
    untouched = _fit(strategy="none", messages_before=2, tokens_before=600)
    context = TracedContextManager(FakeContext(untouched), tracer=otel.tracer, metrics=otel.metrics)
    with caplog.at_level(logging.INFO, "agent.context"):
        await context.fit("sys", untouched.messages)
    assert caplog.records == []
    assert (otel.one("context.fit").attributes or {})["detective.context.trimmed"] is False


async def test_context_fit_failure(otel: Telemetry) -> None:
    context = TracedContextManager(
        FakeContext(ServerError("summariser down")), tracer=otel.tracer, metrics=otel.metrics
    )
    with pytest.raises(ServerError):
        await context.fit("sys", [])
    assert otel.one("context.fit").status.status_code is StatusCode.ERROR


class SlowContext(FakeContext):
    async def fit(self, system_prompt: str, messages: Sequence[Message]) -> ContextFit:
        await asyncio.sleep(0.01)
        return await super().fit(system_prompt, messages)


async def test_without_model_calls_an_untouched_fit_is_an_event_on_the_current_span(
    otel: Telemetry,
) -> None:
    untouched = _fit(strategy="none", messages_before=2, tokens_before=600)
    context = TracedContextManager(
        FakeContext(untouched), calls_model=False, tracer=otel.tracer, metrics=otel.metrics
    )
    with otel.tracer.start_as_current_span("invoke_agent"):
        await context.fit("sys", untouched.messages)

    assert otel.finished("context.fit") == []
    [event] = otel.one("invoke_agent").events
    assert event.name == "context.fit"
    assert dict(event.attributes or {})["detective.context.utilisation"] == untouched.utilisation
    assert dict(event.attributes or {})["detective.context.trimmed"] is False
    [(_, (count, _))] = otel.points("detective.context.utilisation")
    assert count == 1


async def test_without_model_calls_a_trimming_fit_is_a_span_of_the_fits_own_time(
    otel: Telemetry, caplog: pytest.LogCaptureFixture
) -> None:
    context = TracedContextManager(
        SlowContext(_fit()), calls_model=False, tracer=otel.tracer, metrics=otel.metrics
    )
    with (
        caplog.at_level(logging.INFO, "agent.context"),
        otel.tracer.start_as_current_span("invoke_agent"),
    ):
        await context.fit("sys", [Message.user(str(i)) for i in range(5)])

    span = otel.one("context.fit")
    assert span.parent is not None and span.parent.span_id == span_id(otel.one("invoke_agent"))
    assert (span.attributes or {})["detective.context.messages_dropped"] == 3
    assert span.start_time is not None and span.end_time is not None
    assert span.end_time - span.start_time >= 10_000_000  # the fit's 10 ms, not zero
    assert otel.one("invoke_agent").events == ()
    [record] = caplog.records
    assert record.fields["event"] == "context_trimmed"  # type: ignore[attr-defined]


async def test_without_model_calls_a_failed_fit_is_an_error_span(otel: Telemetry) -> None:
    context = TracedContextManager(
        FakeContext(ServerError("boom")),
        calls_model=False,
        tracer=otel.tracer,
        metrics=otel.metrics,
    )
    with pytest.raises(ServerError):
        await context.fit("sys", [Message.user("a")])
    span = otel.one("context.fit")
    assert span.status.status_code is StatusCode.ERROR
    assert (span.attributes or {})["detective.context.messages_before"] == 1


def test_traced_context_delegates(otel: Telemetry) -> None:
    inner = FakeContext(_fit())
    context = TracedContextManager(inner, tracer=otel.tracer, metrics=otel.metrics)
    assert isinstance(context, ContextManager)
    context.record_usage(900, 4)
    assert inner.usage == [(900, 4)]
