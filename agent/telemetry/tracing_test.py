from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator, Iterator, Sequence
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from agent.context.protocol import ContextFit, ContextManager
from agent.errors import ServerError
from agent.events import (
    AgentEvent,
    ReportFiled,
    RetryScheduled,
    RunCancelled,
    RunFailed,
    RunFinished,
    RunStarted,
    ToolCallRequested,
    UsageReported,
)
from agent.messages import (
    Conversation,
    Message,
    ToolCall,
    ToolDefinition,
    ToolResult,
    Usage,
)
from agent.providers.protocol import (
    ModelRequest,
    ModelResponse,
    Provider,
    ProviderCapabilities,
    StreamEnd,
    StreamEvent,
    StreamRetry,
    StreamTextDelta,
    StreamToolCallDelta,
)
from agent.retry import RetryingProvider
from agent.telemetry.logging import get_logger, register_secret
from agent.telemetry.metrics import AgentMetrics
from agent.telemetry.tracing import (
    SupportsSendMessage,
    TracedAgent,
    TracedContextManager,
    TracedProvider,
    TracedToolExecutor,
    conversation_parent,
    current_traceparent,
    new_trace_id,
    parse_trace_id,
)
from agent.tools.protocol import ToolExecutor

# --- fixtures ----------------------------------------------------------------------------


class Telemetry:
    def __init__(self) -> None:
        self.spans = InMemorySpanExporter()
        self.tracer_provider = TracerProvider()
        self.tracer_provider.add_span_processor(SimpleSpanProcessor(self.spans))
        self.tracer = self.tracer_provider.get_tracer("test")
        self.reader = InMemoryMetricReader()
        self.meter_provider = MeterProvider(metric_readers=[self.reader])
        self.metrics = AgentMetrics(self.meter_provider.get_meter("test"))

    def finished(self, name: str | None = None) -> list[ReadableSpan]:
        return [s for s in self.spans.get_finished_spans() if name is None or s.name == name]

    def one(self, name: str) -> ReadableSpan:
        [span] = self.finished(name)
        return span

    def points(self, metric: str) -> list[tuple[dict[str, Any], Any]]:
        data = self.reader.get_metrics_data()
        found: list[tuple[dict[str, Any], Any]] = []
        if data is None:
            return found
        for resource in data.resource_metrics:
            for scope in resource.scope_metrics:
                for item in scope.metrics:
                    if item.name == metric:
                        for point in item.data.data_points:
                            value = getattr(point, "value", None)
                            if value is None:
                                value = (point.count, point.sum)
                            found.append((dict(point.attributes or {}), value))
        return found


@pytest.fixture
def otel() -> Iterator[Telemetry]:
    telemetry = Telemetry()
    yield telemetry
    telemetry.tracer_provider.shutdown()
    telemetry.meter_provider.shutdown()


def span_id(span: ReadableSpan | trace.Span) -> int:
    context = span.get_span_context()
    assert context is not None
    return context.span_id


def trace_id(span: ReadableSpan | trace.Span) -> int:
    context = span.get_span_context()
    assert context is not None
    return context.trace_id


def parent_id(span: ReadableSpan) -> int | None:
    return span.parent.span_id if span.parent else None


# --- fakes -------------------------------------------------------------------------------


def _response(text: str = "hello", **kwargs: Any) -> ModelResponse:
    defaults: dict[str, Any] = {
        "usage": Usage(input_tokens=120, output_tokens=30, cached_input_tokens=20),
        "finish_reason": "stop",
        "model": "gpt-4o-2024-08-06",
        "request_id": "req_1",
    }
    defaults.update(kwargs)
    return ModelResponse(message=Message.assistant(text, response_id="chatcmpl-1"), **defaults)


class FakeProvider:
    """Plays back a script of stream events; an exception in the script is raised."""

    def __init__(
        self,
        script: Sequence[StreamEvent | BaseException] = (),
        *,
        model: str = "gpt-4o",
        tracer: trace.Tracer | None = None,
    ) -> None:
        self.script = list(script) or [
            StreamTextDelta(text="hello"),
            StreamEnd(response=_response()),
        ]
        self._model = model
        self.tracer = tracer
        self.closed = False
        self.streams_closed = 0
        self.health = "ok"
        self.current_span_seen: list[trace.Span] = []

    @property
    def name(self) -> str:
        return "openai"

    @property
    def model(self) -> str:
        return self._model

    async def complete(self, request: ModelRequest) -> ModelResponse:
        self.current_span_seen.append(trace.get_current_span())
        for item in self.script:
            if isinstance(item, BaseException):
                raise item
        end = self.script[-1]
        assert isinstance(end, StreamEnd)
        return end.response

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        try:
            for item in self.script:
                self.current_span_seen.append(trace.get_current_span())
                if self.tracer is not None:
                    with self.tracer.start_as_current_span("POST /v1/chat/completions"):
                        pass
                if isinstance(item, BaseException):
                    raise item
                await asyncio.sleep(0)
                yield item
        finally:
            self.streams_closed += 1

    def estimate_tokens(self, messages: Sequence[Message], system: str = "") -> int:
        return 7 * len(messages)

    def capabilities(self) -> ProviderCapabilities:
        return ProviderCapabilities(context_window=1000)

    async def aclose(self) -> None:
        self.closed = True


def _request(**kwargs: Any) -> ModelRequest:
    defaults: dict[str, Any] = {
        "system": "You are a detective.",
        "messages": [Message.user("assess release 1.2")],
        "tools": [ToolDefinition(name="t", description="d", parameters={"type": "object"})],
        "temperature": 0.2,
        "max_tokens": 512,
    }
    defaults.update(kwargs)
    return ModelRequest(**defaults)


async def _drain(stream: AsyncIterator[StreamEvent]) -> list[StreamEvent]:
    return [event async for event in stream]


class FakeTools:
    def __init__(self, result: ToolResult | BaseException) -> None:
        self.result = result
        self.registered: list[str] = []

    def get_tools(self) -> list[ToolDefinition]:
        return [ToolDefinition(name="get_release_summary", description="d", parameters={})]

    def format_for_provider(self, provider: str) -> list[dict[str, Any]]:
        return [{"provider": provider}]

    async def execute(self, call: ToolCall) -> ToolResult:
        if isinstance(self.result, BaseException):
            raise self.result
        return self.result

    def register(self, name: str) -> None:
        self.registered.append(name)


class FakeContext:
    def __init__(self, fit: ContextFit | BaseException) -> None:
        self.fit_result = fit
        self.usage: list[tuple[int, int]] = []

    async def fit(self, system_prompt: str, messages: Sequence[Message]) -> ContextFit:
        if isinstance(self.fit_result, BaseException):
            raise self.fit_result
        return self.fit_result

    def record_usage(self, prompt_tokens: int, messages_sent: int) -> None:
        self.usage.append((prompt_tokens, messages_sent))


class FakeAgent:
    """Yields scripted events; optionally calls traced components, as the loop would."""

    def __init__(
        self,
        events: Sequence[AgentEvent | BaseException] | None = None,
        *,
        provider: Provider | None = None,
        tools: ToolExecutor | None = None,
    ) -> None:
        self.conversation = Conversation(system_prompt="sys")
        self.events = events
        self.provider = provider
        self.tools = tools
        self.closed = 0
        self.cancel_seen: list[Any] = []
        self.log = get_logger("agent.loop.fake")

    async def send_message(self, content: str, cancel: Any = None) -> AsyncIterator[AgentEvent]:
        self.cancel_seen.append(cancel)
        try:
            yield RunStarted(
                conversation_id=self.conversation.id,
                provider="openai",
                model="gpt-4o",
                trace_id=self.conversation.trace_id,
            )
            self.conversation.messages.append(Message.user(content))
            self.log.info("inside the run")
            if self.provider is not None:
                async for _ in self.provider.stream(_request()):
                    pass
            if self.tools is not None:
                await self.tools.execute(ToolCall(id="c1", name="get_release_summary"))
            for event in self.events or [
                RunFinished(reason="answered", final_text="low risk", steps=1, usage=Usage())
            ]:
                if isinstance(event, BaseException):
                    raise event
                yield event
        finally:
            self.closed += 1

    def get_history(self, limit: int | None = None) -> list[Message]:
        messages = list(self.conversation.messages)
        if limit is None:
            return messages
        return messages[-limit:] if limit > 0 else []

    def get_context(self) -> dict[str, Any]:
        return {"trace_id": self.conversation.trace_id}

    def new_conversation(self) -> Conversation:
        self.conversation = Conversation(system_prompt="sys")
        return self.conversation


# --- trace context helpers ---------------------------------------------------------------


def test_new_trace_id_is_32_hex_digits() -> None:
    ids = {new_trace_id() for _ in range(20)}
    assert len(ids) == 20
    assert all(parse_trace_id(value) for value in ids)


@pytest.mark.parametrize("value", [None, 12, "abc", "0" * 32, "z" * 32, "a" * 31])
def test_parse_trace_id_rejects_what_is_not_a_trace_id(value: object) -> None:
    assert parse_trace_id(value) is None


def test_current_traceparent(otel: Telemetry) -> None:
    assert current_traceparent() == {}
    with otel.tracer.start_as_current_span("request") as span:
        headers = current_traceparent()
    tid = trace.format_trace_id(trace_id(span))
    sid = trace.format_span_id(span_id(span))
    assert list(headers) == ["traceparent"]
    version, header_trace, header_span, flags = headers["traceparent"].split("-")
    assert (version, header_trace, header_span) == ("00", tid, sid)
    assert int(flags, 16) & 1  # sampled


def test_conversation_parent_without_ids_is_the_current_context() -> None:
    assert conversation_parent({}) == (None, [])


def test_conversation_parent_ignores_an_invalid_traceparent() -> None:
    stored = new_trace_id()
    parent, links = conversation_parent({"trace_id": stored, "traceparent": "garbage"})
    assert parent is not None
    assert links == []
    remote = trace.get_current_span(parent).get_span_context()
    assert trace.format_trace_id(remote.trace_id) == stored
    assert remote.is_remote


# --- provider ----------------------------------------------------------------------------


async def test_complete_span_carries_the_genai_attributes(otel: Telemetry) -> None:
    inner = FakeProvider()
    provider = TracedProvider(inner, tracer=otel.tracer, metrics=otel.metrics)

    response = await provider.complete(_request())

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
    await provider.complete(_request())

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
        await provider.complete(_request())

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
    end = StreamEnd(response=_response("hi there", finish_reason="tool_calls"))
    script: list[StreamEvent | BaseException] = [
        StreamTextDelta(text="hi "),
        StreamToolCallDelta(index=0, id="c1", name="t", arguments_fragment="{}"),
        StreamTextDelta(text="there"),
        end,
    ]
    provider = TracedProvider(FakeProvider(script), tracer=otel.tracer, metrics=otel.metrics)

    received = []
    async for event in provider.stream(_request()):
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
        await _drain(provider.stream(_request()))

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
        StreamEnd(response=_response("full answer")),
    ]
    provider = TracedProvider(FakeProvider(script), tracer=otel.tracer, metrics=otel.metrics)

    retry_open_while_waiting = None
    with caplog.at_level(logging.WARNING, "agent.provider"):
        async for event in provider.stream(_request()):
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
        return _response()


async def _no_sleep(_: float) -> None:
    return None


async def test_the_retries_of_a_complete_call_are_child_spans_too(otel: Telemetry) -> None:
    inner = RetryingProvider(
        FlakyProvider(ServerError("overloaded", status_code=529), ServerError("again")),
        sleep=_no_sleep,
        random=lambda: 0.0,
    )
    provider = TracedProvider(inner, tracer=otel.tracer, metrics=otel.metrics)
    await provider.complete(_request())

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
        await provider.complete(_request())
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
        await _drain(provider.stream(_request()))

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

    stream = provider.stream(_request())
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
        await _drain(provider.stream(_request()))

    chat = otel.one("chat gpt-4o")
    assert chat.status.status_code is StatusCode.UNSET
    assert chat.attributes is not None
    assert chat.attributes["detective.cancelled"] is True


async def test_content_is_not_recorded_by_default(otel: Telemetry) -> None:
    provider = TracedProvider(
        FakeProvider(), tracer=otel.tracer, metrics=otel.metrics, capture_content=False
    )
    await _drain(provider.stream(_request()))
    await provider.complete(_request())
    for span in otel.finished():
        assert span.events == ()
        assert not any("assess release" in str(v) for v in (span.attributes or {}).values())


async def test_content_is_recorded_when_enabled(otel: Telemetry) -> None:
    provider = TracedProvider(
        FakeProvider(), tracer=otel.tracer, metrics=otel.metrics, capture_content=True
    )
    await _drain(provider.stream(_request()))

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
    request = _request(system="", messages=[Message.assistant("", [call]), Message.tool(result)])
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
    request = _request(messages=[Message.user("my key is sk-live-0123456789abcdef")])
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
    end = StreamEnd(response=_response(model=None))
    provider = TracedProvider(
        FakeProvider([end], model="mystery-7b"), tracer=otel.tracer, metrics=otel.metrics
    )
    await _drain(provider.stream(_request()))
    attributes = otel.one("chat mystery-7b").attributes or {}
    assert attributes["gen_ai.response.model"] == "mystery-7b"
    assert "detective.usage.cost_usd" not in attributes
    assert otel.points("detective.usage.cost") == []


async def test_cost_falls_back_to_the_request_model(otel: Telemetry) -> None:
    end = StreamEnd(response=_response(model="some-deployment-alias"))
    provider = TracedProvider(FakeProvider([end]), tracer=otel.tracer, metrics=otel.metrics)
    await _drain(provider.stream(_request()))
    attributes = otel.one("chat gpt-4o").attributes or {}
    assert attributes["detective.usage.cost_usd"] > 0


# --- tools -------------------------------------------------------------------------------


def _result(**kwargs: Any) -> ToolResult:
    defaults: dict[str, Any] = {
        "tool_call_id": "c1",
        "name": "get_release_summary",
        "content": '{"version": "1.2"}',
        "success": True,
        "duration_ms": 42.0,
    }
    defaults.update(kwargs)
    return ToolResult(**defaults)


CALL = ToolCall(id="c1", name="get_release_summary", arguments={"release_id": "1.2"})


async def test_tool_span(otel: Telemetry, caplog: pytest.LogCaptureFixture) -> None:
    tools = TracedToolExecutor(FakeTools(_result()), tracer=otel.tracer, metrics=otel.metrics)

    with caplog.at_level(logging.INFO, "agent.tools"):
        result = await tools.execute(CALL)

    assert result.success
    span = otel.one("execute_tool get_release_summary")
    assert span.status.status_code is StatusCode.UNSET
    assert dict(span.attributes or {}) == {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "get_release_summary",
        "gen_ai.tool.call.id": "c1",
        "gen_ai.tool.type": "function",
        "detective.tool.success": True,
        "detective.tool.duration_ms": 42.0,
        "detective.tool.terminal": False,
    }
    [(attributes, count)] = otel.points("detective.tool.calls")
    assert (attributes, count) == (
        {"gen_ai.tool.name": "get_release_summary", "detective.tool.success": True},
        1,
    )
    [(_, (n, seconds))] = otel.points("detective.tool.duration")
    assert (n, seconds) == (1, pytest.approx(0.042))
    call_record, result_record = caplog.records
    assert call_record.fields == {  # type: ignore[attr-defined]
        "event": "tool_call",
        "tool": "get_release_summary",
        "tool_call_id": "c1",
    }
    assert result_record.fields["success"] is True  # type: ignore[attr-defined]
    assert "content" not in result_record.fields  # type: ignore[attr-defined]


async def test_a_failed_tool_is_an_error_span(otel: Telemetry) -> None:
    failed = _result(
        success=False, error_type="ToolTimeoutError", content="timed out", duration_ms=0
    )
    tools = TracedToolExecutor(FakeTools(failed), tracer=otel.tracer, metrics=otel.metrics)

    await tools.execute(CALL)

    span = otel.one("execute_tool get_release_summary")
    assert span.status.status_code is StatusCode.ERROR
    assert span.attributes is not None
    assert span.attributes["error.type"] == "ToolTimeoutError"
    assert span.attributes["detective.tool.success"] is False
    assert span.attributes["detective.tool.duration_ms"] >= 0
    [(attributes, _)] = otel.points("detective.tool.calls")
    assert attributes["error.type"] == "ToolTimeoutError"
    assert attributes["detective.tool.success"] is False


async def test_a_tool_that_raises_is_recorded_and_re_raised(otel: Telemetry) -> None:
    tools = TracedToolExecutor(
        FakeTools(RuntimeError("bug")), tracer=otel.tracer, metrics=otel.metrics
    )
    with pytest.raises(RuntimeError):
        await tools.execute(CALL)
    span = otel.one("execute_tool get_release_summary")
    assert span.status.status_code is StatusCode.ERROR
    assert span.attributes is not None
    assert span.attributes["error.type"] == "RuntimeError"
    [(attributes, _)] = otel.points("detective.tool.calls")
    assert attributes["detective.tool.success"] is False


async def test_tool_content_only_when_enabled(
    otel: Telemetry, caplog: pytest.LogCaptureFixture
) -> None:
    quiet = TracedToolExecutor(
        FakeTools(_result()), tracer=otel.tracer, metrics=otel.metrics, capture_content=False
    )
    loud = TracedToolExecutor(
        FakeTools(_result()), tracer=otel.tracer, metrics=otel.metrics, capture_content=True
    )
    with caplog.at_level(logging.INFO, "agent.tools"):
        await quiet.execute(CALL)
        await loud.execute(CALL)

    quiet_span, loud_span = otel.finished()
    assert "gen_ai.tool.call.arguments" not in (quiet_span.attributes or {})
    assert loud_span.attributes is not None
    assert loud_span.attributes["gen_ai.tool.call.arguments"] == '{"release_id": "1.2"}'
    assert loud_span.attributes["gen_ai.tool.call.result"] == '{"version": "1.2"}'
    fields = [r.fields for r in caplog.records]  # type: ignore[attr-defined]
    assert "arguments" not in fields[0]
    assert fields[2]["arguments"] == {"release_id": "1.2"}
    assert fields[3]["content"] == '{"version": "1.2"}'


def test_traced_tools_delegate(otel: Telemetry) -> None:
    inner = FakeTools(_result())
    tools = TracedToolExecutor(inner, tracer=otel.tracer, metrics=otel.metrics)
    assert isinstance(tools, ToolExecutor)
    assert [t.name for t in tools.get_tools()] == ["get_release_summary"]
    assert tools.format_for_provider("anthropic") == [{"provider": "anthropic"}]
    tools.register("extra")  # type: ignore[attr-defined]
    assert inner.registered == ["extra"]


# --- context -----------------------------------------------------------------------------


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


# --- agent -------------------------------------------------------------------------------


async def _run(agent: TracedAgent, content: str = "assess 1.2") -> list[AgentEvent]:
    return [event async for event in agent.send_message(content)]


async def test_send_message_span(otel: Telemetry) -> None:
    events: list[AgentEvent | BaseException] = [
        ToolCallRequested(step=1, tool_call=CALL),
        RetryScheduled(
            attempt=1, max_attempts=3, delay_s=0.5, reason="429", error_type="RateLimitError"
        ),
        UsageReported(step=1, usage=Usage(), total=Usage(), estimated_cost_usd=0.25),
        UsageReported(step=2, usage=Usage(), total=Usage(), estimated_cost_usd=0.5),
        ReportFiled(release_id="1.2", severity="high", findings=["a", "b"]),
        RunFinished(
            reason="report_filed",
            steps=2,
            usage=Usage(input_tokens=900, output_tokens=80),
        ),
    ]
    inner = FakeAgent(events)
    agent = TracedAgent(inner, tracer=otel.tracer)

    received = await _run(agent)

    assert [e.kind for e in received] == [
        "run_started",
        "tool_call",
        "retry_scheduled",
        "usage",
        "usage",
        "report_filed",
        "run_finished",
    ]
    span = otel.one("invoke_agent detective")
    assert span.status.status_code is StatusCode.OK
    assert dict(span.attributes or {}) == {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.agent.name": "detective",
        "gen_ai.conversation.id": inner.conversation.id,
        "session.id": inner.conversation.id,
        "gen_ai.provider.name": "openai",
        "gen_ai.request.model": "gpt-4o",
        "gen_ai.usage.input_tokens": 900,
        "gen_ai.usage.output_tokens": 80,
        "detective.reasoning": "direct",
        "detective.conversation.message_count": 0,
        "detective.conversation.message_count_after": 1,
        "detective.release.id": "1.2",
        "detective.report.severity": "high",
        "detective.report.finding_count": 2,
        "detective.run.finish_reason": "report_filed",
        "detective.run.steps": 2,
        "detective.run.status": "finished",
        "detective.run.tool_calls": 1,
        "detective.run.retries": 1,
        "detective.run.context_trims": 0,
        "detective.usage.cost_usd": 0.75,
    }
    assert inner.closed == 1


async def test_run_started_already_carries_the_trace_id(otel: Telemetry) -> None:
    agent = TracedAgent(FakeAgent(), tracer=otel.tracer)
    started, _ = await _run(agent)
    assert isinstance(started, RunStarted)
    span = otel.one("invoke_agent detective")
    assert started.trace_id == trace.format_trace_id(trace_id(span))


async def test_one_trace_per_conversation(otel: Telemetry) -> None:
    inner = FakeAgent()
    agent = TracedAgent(inner, tracer=otel.tracer)
    assert "trace_id" not in inner.conversation.metadata

    await _run(agent, "first")
    stored = inner.conversation.metadata["trace_id"]
    await _run(agent, "second")

    first, second = otel.finished("invoke_agent detective")
    assert trace.format_trace_id(trace_id(first)) == stored
    assert trace.format_trace_id(trace_id(second)) == stored
    assert first.parent is None  # the first message starts the trace
    assert second.parent is not None
    assert second.parent.is_remote
    assert inner.conversation.metadata["trace_id"] == stored


async def test_a_stored_trace_id_is_joined(otel: Telemetry) -> None:
    inner = FakeAgent()
    stored = new_trace_id()
    inner.conversation.metadata["trace_id"] = stored
    agent = TracedAgent(inner, tracer=otel.tracer)

    # Even inside some unrelated span, the run joins the conversation's trace.
    with otel.tracer.start_as_current_span("unrelated"):
        await _run(agent)

    span = otel.one("invoke_agent detective")
    assert trace.format_trace_id(trace_id(span)) == stored
    assert inner.conversation.metadata["trace_id"] == stored


async def test_the_traceparent_is_the_parent(otel: Telemetry) -> None:
    with otel.tracer.start_as_current_span("POST /releases/1.2/reassess") as request:
        headers = current_traceparent()
    inner = FakeAgent()
    inner.conversation.metadata.update(
        trace_id=trace.format_trace_id(trace_id(request)),
        traceparent=headers["traceparent"],
    )
    agent = TracedAgent(inner, tracer=otel.tracer)

    await _run(agent)

    span = otel.one("invoke_agent detective")
    assert trace_id(span) == trace_id(request)
    assert parent_id(span) == span_id(request)


async def test_a_traceparent_alone_also_sets_the_trace_id(otel: Telemetry) -> None:
    with otel.tracer.start_as_current_span("request") as request:
        headers = current_traceparent()
    inner = FakeAgent()
    inner.conversation.metadata["traceparent"] = headers["traceparent"]

    await _run(TracedAgent(inner, tracer=otel.tracer))

    assert inner.conversation.metadata["trace_id"] == trace.format_trace_id(trace_id(request))
    assert parent_id(otel.one("invoke_agent detective")) == span_id(request)


async def test_a_traceparent_of_another_trace_becomes_a_link(otel: Telemetry) -> None:
    with otel.tracer.start_as_current_span("later request") as request:
        headers = current_traceparent()
    inner = FakeAgent()
    stored = new_trace_id()
    inner.conversation.metadata.update(trace_id=stored, traceparent=headers["traceparent"])

    await _run(TracedAgent(inner, tracer=otel.tracer))

    span = otel.one("invoke_agent detective")
    assert trace.format_trace_id(trace_id(span)) == stored
    [link] = span.links
    assert link.context.span_id == span_id(request)


async def test_the_traceparent_tracestate_is_kept(otel: Telemetry) -> None:
    with otel.tracer.start_as_current_span("request") as request:
        headers = current_traceparent()
    inner = FakeAgent()
    inner.conversation.metadata.update(traceparent=headers["traceparent"], tracestate="k=v")
    await _run(TracedAgent(inner, tracer=otel.tracer))
    span = otel.one("invoke_agent detective")
    assert span.context is not None
    assert span.context.trace_state.get("k") == "v"
    assert trace_id(span) == trace_id(request)


async def test_component_spans_nest_under_the_agent_span(otel: Telemetry) -> None:
    provider = TracedProvider(FakeProvider(), tracer=otel.tracer, metrics=otel.metrics)
    tools = TracedToolExecutor(FakeTools(_result()), tracer=otel.tracer, metrics=otel.metrics)
    agent = TracedAgent(FakeAgent(provider=provider, tools=tools), tracer=otel.tracer)

    await _run(agent)

    root = otel.one("invoke_agent detective")
    chat = otel.one("chat gpt-4o")
    tool = otel.one("execute_tool get_release_summary")
    assert parent_id(chat) == span_id(root)
    assert parent_id(tool) == span_id(root)
    assert {trace_id(chat), trace_id(tool)} == {trace_id(root)}


async def test_logs_inside_a_run_carry_the_conversation_and_trace(
    otel: Telemetry, caplog: pytest.LogCaptureFixture
) -> None:
    inner = FakeAgent()
    agent = TracedAgent(inner, tracer=otel.tracer)
    with caplog.at_level(logging.INFO):
        await _run(agent)
    [record] = [r for r in caplog.records if r.getMessage() == "inside the run"]
    assert record.conversation_id == inner.conversation.id  # type: ignore[attr-defined]
    assert record.trace_id == inner.conversation.metadata["trace_id"]  # type: ignore[attr-defined]
    assert record.span_id == trace.format_span_id(  # type: ignore[attr-defined]
        span_id(otel.one("invoke_agent detective"))
    )


async def test_a_failed_run(otel: Telemetry) -> None:
    failed = RunFailed(error_type="AuthenticationError", message="bad key", steps=1)
    await _run(TracedAgent(FakeAgent([failed]), tracer=otel.tracer))
    span = otel.one("invoke_agent detective")
    assert span.status.status_code is StatusCode.ERROR
    assert span.status.description == "bad key"
    assert span.attributes is not None
    assert span.attributes["error.type"] == "AuthenticationError"
    assert span.attributes["detective.run.status"] == "failed"


async def test_a_cancelled_run(otel: Telemetry) -> None:
    cancelled = RunCancelled(reason="user pressed ctrl-c", steps=2)
    await _run(TracedAgent(FakeAgent([cancelled]), tracer=otel.tracer))
    span = otel.one("invoke_agent detective")
    assert span.status.status_code is StatusCode.UNSET
    assert span.attributes is not None
    assert span.attributes["detective.run.status"] == "cancelled"
    assert span.attributes["detective.run.cancel_reason"] == "user pressed ctrl-c"


async def test_a_run_that_raises(otel: Telemetry, caplog: pytest.LogCaptureFixture) -> None:
    inner = FakeAgent([RuntimeError("loop bug")])
    with caplog.at_level(logging.ERROR, "agent.run"), pytest.raises(RuntimeError):
        await _run(TracedAgent(inner, tracer=otel.tracer))
    span = otel.one("invoke_agent detective")
    assert span.status.status_code is StatusCode.ERROR
    assert span.attributes is not None
    assert span.attributes["detective.run.status"] == "failed"
    [record] = caplog.records
    assert record.conversation_id == inner.conversation.id  # type: ignore[attr-defined]


async def test_a_run_cancelled_by_its_task(otel: Telemetry) -> None:
    inner = FakeAgent([asyncio.CancelledError()])
    with pytest.raises(asyncio.CancelledError):
        await _run(TracedAgent(inner, tracer=otel.tracer))
    span = otel.one("invoke_agent detective")
    assert span.status.status_code is StatusCode.UNSET
    assert (span.attributes or {})["detective.run.status"] == "cancelled"


async def test_a_run_abandoned_by_its_consumer(otel: Telemetry) -> None:
    inner = FakeAgent()
    agent = TracedAgent(inner, tracer=otel.tracer)
    stream = agent.send_message("hi")
    async for _ in stream:
        break
    await stream.aclose()  # type: ignore[attr-defined]
    span = otel.one("invoke_agent detective")
    assert (span.attributes or {})["detective.run.status"] == "incomplete"
    assert inner.closed == 1


async def test_run_content_only_when_enabled(otel: Telemetry) -> None:
    await _run(TracedAgent(FakeAgent(), tracer=otel.tracer, capture_content=False))
    await _run(TracedAgent(FakeAgent(), tracer=otel.tracer, capture_content=True))
    quiet, loud = otel.finished("invoke_agent detective")
    assert quiet.events == ()
    assert "gen_ai.input.messages" not in (quiet.attributes or {})
    assert "gen_ai.output.messages" not in (quiet.attributes or {})
    attributes = loud.attributes or {}
    assert json.loads(str(attributes["gen_ai.input.messages"])) == [
        {"role": "user", "parts": [{"type": "text", "content": "assess 1.2"}]}
    ]
    assert json.loads(str(attributes["gen_ai.output.messages"])) == [
        {
            "role": "assistant",
            "parts": [{"type": "text", "content": "low risk"}],
            "finish_reason": "stop",
        }
    ]
    assert attributes["session.id"] == attributes["gen_ai.conversation.id"]


async def test_without_an_sdk_the_conversation_still_gets_a_trace_id() -> None:
    inner = FakeAgent()
    tracer = trace.NoOpTracerProvider().get_tracer("none")
    await _run(TracedAgent(inner, tracer=tracer))
    assert parse_trace_id(inner.conversation.metadata["trace_id"]) is not None


async def test_traced_agent_delegates(otel: Telemetry) -> None:
    inner = FakeAgent()
    agent = TracedAgent(inner, tracer=otel.tracer)
    checked: SupportsSendMessage = agent
    assert checked is agent
    token = object()

    events = [e async for e in agent.send_message("one", cancel=token)]
    assert inner.cancel_seen == [token]
    assert isinstance(events[-1], RunFinished)
    assert [m.content for m in agent.get_history()] == ["one"]
    assert agent.get_history(0) == []
    assert agent.get_context() == {"trace_id": inner.conversation.trace_id}
    assert agent.events is None  # type: ignore[attr-defined]

    fresh = agent.new_conversation()
    assert agent.conversation is fresh is inner.conversation
    other = Conversation()
    agent.conversation = other
    assert inner.conversation is other
