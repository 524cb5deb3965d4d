from __future__ import annotations

import asyncio
import json
import logging

import pytest
from opentelemetry import trace
from opentelemetry.trace import SpanKind, StatusCode

from agent.errors import ServerError
from agent.messages import (
    Message,
    ToolCall,
    ToolResult,
)
from agent.providers.protocol import (
    ModelRequest,
    ModelResponse,
    Provider,
    StreamEnd,
    StreamEvent,
    StreamRetry,
    StreamTextDelta,
    StreamToolCallDelta,
)
from agent.retry import RetryingProvider
from agent.telemetry.logging import register_secret
from agent.telemetry.model_calls import TracedProvider
from agent.testing.telemetry import (
    FakeProvider,
    Telemetry,
    drain,
    model_request,
    model_response,
    parent_id,
    span_id,
    trace_id,
)


async def test_complete_span_carries_the_genai_attributes(otel: Telemetry) -> None:
    inner = FakeProvider()
    provider = TracedProvider(inner, tracer=otel.tracer, metrics=otel.metrics)

    response = await provider.complete(model_request())

    assert response.message.content == "hello"
    span = otel.one("chat gpt-4o")
    assert span.kind is SpanKind.CLIENT
    assert span.status.status_code is StatusCode.UNSET
    attributes = dict(span.attributes or {})
    assert attributes == {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "openai",
        "gen_ai.request.model": "gpt-4o",
        "gen_ai.request.temperature": 0.2,
        "gen_ai.request.max_tokens": 512,
        "gen_ai.request.stream": False,
        "gen_ai.response.model": "gpt-4o-2024-08-06",
        "gen_ai.response.id": "chatcmpl-1",
        "gen_ai.response.finish_reasons": ("stop",),
        "gen_ai.usage.input_tokens": 120,
        "gen_ai.usage.output_tokens": 30,
        "gen_ai.usage.cache_read.input_tokens": 20,
        "detective.request.message_count": 1,
        "detective.request.tool_count": 1,
        "detective.response.tool_call_count": 0,
        "detective.response.request_id": "req_1",
        "detective.usage.cost_usd": pytest.approx((100 * 2.5 + 20 * 1.25 + 30 * 10) / 1e6),
        "detective.retry.count": 0,
    }
    # The inner provider ran with the chat span current, so HTTP spans nest under it.
    assert span_id(inner.current_span_seen[0]) == span_id(span)


async def test_complete_records_call_metrics(otel: Telemetry) -> None:
    provider = TracedProvider(FakeProvider(), tracer=otel.tracer, metrics=otel.metrics)
    await provider.complete(model_request())

    [(attributes, (count, total))] = otel.points("gen_ai.client.operation.duration")
    assert count == 1
    assert total >= 0
    assert attributes == {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "openai",
        "gen_ai.request.model": "gpt-4o",
        "gen_ai.response.model": "gpt-4o-2024-08-06",
    }
    tokens = {a["gen_ai.token.type"]: v for a, v in otel.points("gen_ai.client.token.usage")}
    assert tokens == {"input": (1, 120), "output": (1, 30)}
    [(_, cost)] = otel.points("detective.usage.cost")
    assert cost == pytest.approx((100 * 2.5 + 20 * 1.25 + 30 * 10) / 1e6)


async def test_complete_failure_sets_error_status(
    otel: Telemetry, caplog: pytest.LogCaptureFixture
) -> None:
    error = ServerError("overloaded", provider="openai", status_code=529)
    provider = TracedProvider(FakeProvider([error]), tracer=otel.tracer, metrics=otel.metrics)

    with caplog.at_level(logging.ERROR, "agent.provider"), pytest.raises(ServerError):
        await provider.complete(model_request())

    span = otel.one("chat gpt-4o")
    assert span.status.status_code is StatusCode.ERROR
    assert span.attributes is not None
    assert span.attributes["error.type"] == "ServerError"
    assert "gen_ai.response.model" not in span.attributes
    [exception] = span.events
    assert exception.name == "exception"
    assert exception.attributes is not None
    assert exception.attributes["exception.type"] == "agent.errors.ServerError"
    [(attributes, count)] = otel.points("detective.client.errors")
    assert count == 1
    assert attributes["error.type"] == "ServerError"
    assert attributes["gen_ai.provider.name"] == "openai"
    [record] = caplog.records
    assert record.fields["status_code"] == 529  # type: ignore[attr-defined]


async def test_stream_span_covers_the_whole_iteration(otel: Telemetry) -> None:
    end = StreamEnd(response=model_response("hi there", finish_reason="tool_calls"))
    script: list[StreamEvent | BaseException] = [
        StreamTextDelta(text="hi "),
        StreamToolCallDelta(index=0, id="c1", name="t", arguments_fragment="{}"),
        StreamTextDelta(text="there"),
        end,
    ]
    provider = TracedProvider(FakeProvider(script), tracer=otel.tracer, metrics=otel.metrics)

    received = []
    async for event in provider.stream(model_request()):
        # Between events the chat span is not the consumer's current span.
        assert trace.get_current_span() is trace.INVALID_SPAN
        assert otel.finished("chat gpt-4o") == []
        received.append(event)

    assert received == script
    span = otel.one("chat gpt-4o")
    assert span.attributes is not None
    assert span.attributes["gen_ai.request.stream"] is True
    assert span.attributes["gen_ai.response.finish_reasons"] == ("tool_calls",)
    assert span.attributes["gen_ai.usage.output_tokens"] == 30
    assert span.attributes["gen_ai.response.time_to_first_chunk"] >= 0
    assert span.attributes["detective.retry.count"] == 0


async def test_spans_inside_the_stream_are_children_of_the_chat_span(otel: Telemetry) -> None:
    inner = FakeProvider(tracer=otel.tracer)
    provider = TracedProvider(inner, tracer=otel.tracer, metrics=otel.metrics)
    with otel.tracer.start_as_current_span("invoke_agent detective") as root:
        await drain(provider.stream(model_request()))

    chat = otel.one("chat gpt-4o")
    assert parent_id(chat) == span_id(root)
    http = otel.finished("POST /v1/chat/completions")
    assert len(http) == 2
    assert all(parent_id(span) == span_id(chat) for span in http)


async def test_a_retry_is_a_child_span_covering_the_backoff(
    otel: Telemetry, caplog: pytest.LogCaptureFixture
) -> None:
    script: list[StreamEvent | BaseException] = [
        StreamTextDelta(text="par"),
        StreamRetry(
            attempt=1,
            max_attempts=3,
            delay_s=1.5,
            reason="server overloaded (529)",
            error_type="ServerError",
            partial_discarded=True,
        ),
        StreamTextDelta(text="full answer"),
        StreamEnd(response=model_response("full answer")),
    ]
    provider = TracedProvider(FakeProvider(script), tracer=otel.tracer, metrics=otel.metrics)

    retry_open_while_waiting = None
    with caplog.at_level(logging.WARNING, "agent.provider"):
        async for event in provider.stream(model_request()):
            if isinstance(event, StreamRetry):
                retry_open_while_waiting = otel.finished("retry") == []
            elif event == StreamTextDelta(text="full answer"):
                # The next event arrived: the backoff is over and so is the span.
                assert len(otel.finished("retry")) == 1

    assert retry_open_while_waiting is True
    chat = otel.one("chat gpt-4o")
    retry = otel.one("retry")
    assert parent_id(retry) == span_id(chat)
    assert trace_id(retry) == trace_id(chat)
    assert dict(retry.attributes or {}) == {
        "detective.retry.attempt": 1,
        "detective.retry.max_attempts": 3,
        "detective.retry.backoff_s": 1.5,
        "detective.retry.reason": "server overloaded (529)",
        "detective.retry.partial_discarded": True,
        "error.type": "ServerError",
    }
    assert chat.attributes is not None
    assert chat.attributes["detective.retry.count"] == 1
    [(attributes, count)] = otel.points("detective.client.retries")
    assert count == 1
    assert attributes["error.type"] == "ServerError"
    [record] = caplog.records
    assert record.fields["event"] == "retry"  # type: ignore[attr-defined]
    assert record.fields["reason"] == "server overloaded (529)"  # type: ignore[attr-defined]
    assert record.trace_id == trace.format_trace_id(trace_id(chat))  # type: ignore[attr-defined]


class FlakyProvider(FakeProvider):
    """`complete` fails with the given errors first, then answers."""

    def __init__(self, *failures: BaseException) -> None:
        super().__init__()
        self.failures = list(failures)

    async def complete(self, request: ModelRequest) -> ModelResponse:
        if self.failures:
            raise self.failures.pop(0)
        return model_response()


async def _no_sleep(_: float) -> None:
    return None


async def test_the_retries_of_a_complete_call_are_child_spans_too(otel: Telemetry) -> None:
    inner = RetryingProvider(
        FlakyProvider(ServerError("overloaded", status_code=529), ServerError("again")),
        sleep=_no_sleep,
        random=lambda: 0.0,
    )
    provider = TracedProvider(inner, tracer=otel.tracer, metrics=otel.metrics)
    await provider.complete(model_request())

    chat = otel.one("chat gpt-4o")
    retries = otel.finished("retry")
    assert [span.attributes["detective.retry.attempt"] for span in retries] == [1, 2]
    assert all(parent_id(span) == span_id(chat) for span in retries)
    assert chat.attributes is not None
    assert chat.attributes["detective.retry.count"] == 2
    assert chat.status.status_code is not StatusCode.ERROR


async def test_a_complete_call_that_fails_after_retries_ends_its_retry_span(
    otel: Telemetry,
) -> None:
    inner = RetryingProvider(
        FlakyProvider(ServerError("one"), ServerError("two"), ServerError("three")),
        sleep=_no_sleep,
    )
    provider = TracedProvider(inner, tracer=otel.tracer, metrics=otel.metrics)
    with pytest.raises(ServerError):
        await provider.complete(model_request())
    chat = otel.one("chat gpt-4o")
    assert chat.status.status_code is StatusCode.ERROR
    assert len(otel.finished("retry")) == 2
    assert chat.attributes is not None and chat.attributes["detective.retry.count"] == 2


async def test_a_stream_that_fails_after_retries_ends_both_spans_with_the_error(
    otel: Telemetry,
) -> None:
    script: list[StreamEvent | BaseException] = [
        StreamRetry(attempt=1, max_attempts=2, delay_s=0.1, reason="503", error_type="ServerError"),
        ServerError("unavailable", provider="openai", status_code=503),
    ]
    provider = TracedProvider(FakeProvider(script), tracer=otel.tracer, metrics=otel.metrics)

    with pytest.raises(ServerError):
        await drain(provider.stream(model_request()))

    chat = otel.one("chat gpt-4o")
    assert chat.status.status_code is StatusCode.ERROR
    assert chat.attributes is not None
    assert chat.attributes["error.type"] == "ServerError"
    assert otel.one("retry").end_time is not None
    [(attributes, _)] = otel.points("gen_ai.client.operation.duration")
    assert attributes["error.type"] == "ServerError"


async def test_a_stream_closed_early_ends_its_span_without_error(otel: Telemetry) -> None:
    inner = FakeProvider([StreamTextDelta(text="a"), StreamTextDelta(text="b")])
    provider = TracedProvider(inner, tracer=otel.tracer, metrics=otel.metrics)

    stream = provider.stream(model_request())
    async for _ in stream:
        break
    await stream.aclose()  # type: ignore[attr-defined]

    chat = otel.one("chat gpt-4o")
    assert chat.status.status_code is StatusCode.UNSET
    assert chat.attributes is not None
    assert chat.attributes["detective.stream.incomplete"] is True
    assert inner.streams_closed == 1
    assert otel.points("detective.client.errors") == []


async def test_a_cancelled_stream_is_not_an_error(otel: Telemetry) -> None:
    inner = FakeProvider([StreamTextDelta(text="a"), asyncio.CancelledError()])
    provider = TracedProvider(inner, tracer=otel.tracer, metrics=otel.metrics)

    with pytest.raises(asyncio.CancelledError):
        await drain(provider.stream(model_request()))

    chat = otel.one("chat gpt-4o")
    assert chat.status.status_code is StatusCode.UNSET
    assert chat.attributes is not None
    assert chat.attributes["detective.cancelled"] is True


async def test_content_is_not_recorded_by_default(otel: Telemetry) -> None:
    provider = TracedProvider(
        FakeProvider(), tracer=otel.tracer, metrics=otel.metrics, capture_content=False
    )
    await drain(provider.stream(model_request()))
    await provider.complete(model_request())
    for span in otel.finished():
        assert span.events == ()
        assert not any("assess release" in str(v) for v in (span.attributes or {}).values())


async def test_content_is_recorded_when_enabled(otel: Telemetry) -> None:
    provider = TracedProvider(
        FakeProvider(), tracer=otel.tracer, metrics=otel.metrics, capture_content=True
    )
    await drain(provider.stream(model_request()))

    span = otel.one("chat gpt-4o")
    # Attributes, not events: viewers read attributes.
    assert span.events == ()
    attributes = span.attributes or {}
    assert json.loads(str(attributes["gen_ai.system_instructions"])) == [
        {"type": "text", "content": "You are a detective."}
    ]
    assert json.loads(str(attributes["gen_ai.input.messages"])) == [
        {"role": "user", "parts": [{"type": "text", "content": "assess release 1.2"}]}
    ]
    [output] = json.loads(str(attributes["gen_ai.output.messages"]))
    assert output["role"] == "assistant"
    assert output["parts"][0] == {"type": "text", "content": "hello"}
    assert output["finish_reason"] in {"stop", "tool_call", "length"}


async def test_captured_content_includes_tool_calls_and_results(otel: Telemetry) -> None:
    provider = TracedProvider(
        FakeProvider(), tracer=otel.tracer, metrics=otel.metrics, capture_content=True
    )
    call = ToolCall(id="c1", name="get_release_summary", arguments={"release_id": "1.2"})
    result = ToolResult(tool_call_id="c1", name="get_release_summary", content="ok", success=True)
    request = model_request(
        system="", messages=[Message.assistant("", [call]), Message.tool(result)]
    )
    await provider.complete(request)

    attributes = otel.one("chat gpt-4o").attributes or {}
    assert "gen_ai.system_instructions" not in attributes
    assert json.loads(str(attributes["gen_ai.input.messages"])) == [
        {
            "role": "assistant",
            "parts": [
                {
                    "type": "tool_call",
                    "id": "c1",
                    "name": "get_release_summary",
                    "arguments": {"release_id": "1.2"},
                }
            ],
        },
        {"role": "tool", "parts": [{"type": "tool_call_response", "id": "c1", "response": "ok"}]},
    ]


async def test_captured_content_is_scrubbed(otel: Telemetry) -> None:
    register_secret("sk-live-0123456789abcdef")
    provider = TracedProvider(
        FakeProvider(), tracer=otel.tracer, metrics=otel.metrics, capture_content=True
    )
    request = model_request(messages=[Message.user("my key is sk-live-0123456789abcdef")])
    await provider.complete(request)
    text = str((otel.one("chat gpt-4o").attributes or {})["gen_ai.input.messages"])
    assert "sk-live-0123456789abcdef" not in text
    assert "my key is" in text


async def test_traced_provider_is_a_provider_and_delegates(otel: Telemetry) -> None:
    inner = FakeProvider(model="claude-sonnet-4")
    provider = TracedProvider(inner, tracer=otel.tracer, metrics=otel.metrics)

    assert isinstance(provider, Provider)
    assert provider.name == "openai"
    assert provider.model == "claude-sonnet-4"
    assert provider.estimate_tokens([Message.user("x")]) == 7
    assert provider.capabilities().context_window == 1000
    assert provider.health == "ok"  # type: ignore[attr-defined]
    await provider.aclose()
    assert inner.closed


async def test_unknown_model_has_no_cost(otel: Telemetry) -> None:
    end = StreamEnd(response=model_response(model=None))
    provider = TracedProvider(
        FakeProvider([end], model="mystery-7b"), tracer=otel.tracer, metrics=otel.metrics
    )
    await drain(provider.stream(model_request()))
    attributes = otel.one("chat mystery-7b").attributes or {}
    assert attributes["gen_ai.response.model"] == "mystery-7b"
    assert "detective.usage.cost_usd" not in attributes
    assert otel.points("detective.usage.cost") == []


async def test_cost_falls_back_to_the_request_model(otel: Telemetry) -> None:
    end = StreamEnd(response=model_response(model="some-deployment-alias"))
    provider = TracedProvider(FakeProvider([end]), tracer=otel.tracer, metrics=otel.metrics)
    await drain(provider.stream(model_request()))
    attributes = otel.one("chat gpt-4o").attributes or {}
    assert attributes["detective.usage.cost_usd"] > 0
