"""Test doubles for the telemetry wrappers' tests: in-memory spans and metrics, and fake
components (a provider playing back a script, tools, a context manager, an agent)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from typing import Any

from opentelemetry import trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from agent.context.protocol import ContextFit
from agent.events import (
    AgentEvent,
    RunFinished,
    RunStarted,
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
    StreamTextDelta,
)
from agent.telemetry.logging import get_logger
from agent.telemetry.metrics import AgentMetrics
from agent.tools.protocol import ToolExecutor


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


def model_response(text: str = "hello", **kwargs: Any) -> ModelResponse:
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
            StreamEnd(response=model_response()),
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


def model_request(**kwargs: Any) -> ModelRequest:
    defaults: dict[str, Any] = {
        "system": "You are a detective.",
        "messages": [Message.user("assess release 1.2")],
        "tools": [ToolDefinition(name="t", description="d", parameters={"type": "object"})],
        "temperature": 0.2,
        "max_tokens": 512,
    }
    defaults.update(kwargs)
    return ModelRequest(**defaults)


async def drain(stream: AsyncIterator[StreamEvent]) -> list[StreamEvent]:
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
                async for _ in self.provider.stream(model_request()):
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


def tool_result(**kwargs: Any) -> ToolResult:
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
