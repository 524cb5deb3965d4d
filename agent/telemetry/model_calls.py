"""Model calls: a `chat {model}` span per call of the provider, with a `retry` child span
for each retry the retrying provider inside makes; GenAI attributes, token and cost metrics,
and, when content capture is on, the messages (`content.py`)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Sequence
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.trace import Span, SpanKind

from agent.messages import Message
from agent.pricing import estimate_cost
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
from agent.retry import listening_for_retries
from agent.telemetry import content
from agent.telemetry.logging import get_logger, log_error, log_retry, scrub
from agent.telemetry.metrics import AgentMetrics
from agent.telemetry.wrapping import (
    Delegating,
    attached,
    close_iterator,
    component_defaults,
    error_type_of,
    is_abandoned,
    record_error,
)

_provider_log = get_logger("agent.provider")
# A tuple: `A | B` would build a union on every chunk.
_CHUNKS = (StreamTextDelta, StreamToolCallDelta)


class TracedProvider(Delegating):
    """A Provider whose every call is a `chat {model}` span, with a `retry` child span for
    each StreamRetry the retrying provider inside yields."""

    def __init__(
        self,
        inner: Provider,
        *,
        tracer: trace.Tracer | None = None,
        metrics: AgentMetrics | None = None,
        capture_content: bool | None = None,
    ) -> None:
        self._inner = inner
        self._tracer, self._metrics, self._capture = component_defaults(
            tracer, metrics, capture_content
        )

    @property
    def name(self) -> str:
        return self._inner.name

    @property
    def model(self) -> str:
        return self._inner.model

    def estimate_tokens(self, messages: Sequence[Message], system: str = "") -> int:
        return self._inner.estimate_tokens(messages, system)

    def capabilities(self) -> ProviderCapabilities:
        return self._inner.capabilities()

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def complete(self, request: ModelRequest) -> ModelResponse:
        span = self._start_span(request, stream=False)
        span_context = trace.set_span_in_context(span)
        started = time.perf_counter()
        # A retry span lasts from the failed attempt to the next attempt's start, as in stream.
        retry_spans: list[Span] = []

        def on_retry(retry: StreamRetry) -> None:
            if retry_spans:
                retry_spans[-1].end()
            retry_spans.append(self._retry_span(span_context, retry))

        try:
            with attached(span_context), listening_for_retries(on_retry):
                response = await self._inner.complete(request)
        except BaseException as error:
            self._end_retries(retry_spans)
            span.set_attribute("detective.retry.count", len(retry_spans))
            self._failed(span, error, time.perf_counter() - started)
            raise
        self._end_retries(retry_spans)
        self._succeeded(span, response, time.perf_counter() - started, len(retry_spans))
        return response

    @staticmethod
    def _end_retries(retry_spans: list[Span]) -> None:
        if retry_spans:
            retry_spans[-1].end()

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        span = self._start_span(request, stream=True)
        span_context = trace.set_span_in_context(span)
        started = time.perf_counter()
        events = aiter(self._inner.stream(request))
        retry_span: Span | None = None
        retries = 0
        first_chunk = True
        response: ModelResponse | None = None
        error: BaseException | None = None
        try:
            while True:
                # attach/detach inline rather than through _attached: this runs once per
                # streamed chunk.
                token = otel_context.attach(span_context)
                try:
                    event = await anext(events)
                except StopAsyncIteration:
                    break
                finally:
                    otel_context.detach(token)
                if retry_span is not None:
                    retry_span.end()
                    retry_span = None
                if isinstance(event, _CHUNKS):
                    if first_chunk:
                        first_chunk = False
                        span.set_attribute(
                            "gen_ai.response.time_to_first_chunk",
                            time.perf_counter() - started,
                        )
                elif isinstance(event, StreamRetry):
                    retries += 1
                    retry_span = self._retry_span(span_context, event)
                    # The next attempt starts over: its first chunk is the one to time.
                    first_chunk = True
                elif isinstance(event, StreamEnd):
                    response = event.response
                yield event
        except BaseException as caught:
            error = caught
            raise
        finally:
            if retry_span is not None:
                retry_span.end()
            try:
                await close_iterator(events)
            finally:
                self._end_stream_span(span, response, error, retries, started)

    def _end_stream_span(
        self,
        span: Span,
        response: ModelResponse | None,
        error: BaseException | None,
        retries: int,
        started: float,
    ) -> None:
        duration = time.perf_counter() - started
        if error is None and response is not None:
            self._succeeded(span, response, duration, retries)
            return
        span.set_attribute("detective.retry.count", retries)
        if error is not None and not is_abandoned(error):
            self._failed(span, error, duration)
        elif response is not None:
            self._succeeded(span, response, duration, retries)
        else:
            # The consumer stopped early or was cancelled: no response to
            # describe, and no error either.
            span.set_attribute("detective.stream.incomplete", True)
            if isinstance(error, asyncio.CancelledError):
                span.set_attribute("detective.cancelled", True)
            span.end()

    # A chat span's life: _start_span, then exactly one of _succeeded, _failed or the
    # incomplete ending above; each ends the span.

    def _start_span(self, request: ModelRequest, *, stream: bool) -> Span:
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": self._inner.name,
            "gen_ai.request.model": self._inner.model,
            "gen_ai.request.max_tokens": request.max_tokens,
            "gen_ai.request.stream": stream,
            "detective.request.message_count": len(request.messages),
            "detective.request.tool_count": len(request.tools),
        }
        if request.temperature is not None:
            attributes["gen_ai.request.temperature"] = request.temperature
        if self._capture:
            attributes[content.INPUT_MESSAGES] = content.input_messages(request.messages)
            if request.system:
                attributes[content.SYSTEM_INSTRUCTIONS] = content.system_instructions(
                    request.system
                )
        return self._tracer.start_span(
            f"chat {self._inner.model}", kind=SpanKind.CLIENT, attributes=attributes
        )

    def _succeeded(
        self, span: Span, response: ModelResponse, duration_s: float, retries: int
    ) -> None:
        usage = response.usage
        response_model = response.model or self._inner.model
        cost = estimate_cost(response_model, usage, self._inner.name)
        if cost is None and response_model != self._inner.model:
            cost = estimate_cost(self._inner.model, usage, self._inner.name)
        attributes: dict[str, Any] = {
            "gen_ai.response.model": response_model,
            "gen_ai.usage.input_tokens": usage.input_tokens,
            "gen_ai.usage.output_tokens": usage.output_tokens,
            "detective.response.tool_call_count": len(response.message.tool_calls),
            # With the others: one set_attributes call per model call.
            "detective.retry.count": retries,
        }
        if response.finish_reason:
            attributes["gen_ai.response.finish_reasons"] = [response.finish_reason]
        response_id = response.message.metadata.get("response_id")
        if isinstance(response_id, str) and response_id:
            attributes["gen_ai.response.id"] = response_id
        if response.request_id:
            attributes["detective.response.request_id"] = response.request_id
        if usage.cached_input_tokens is not None:
            attributes["gen_ai.usage.cache_read.input_tokens"] = usage.cached_input_tokens
        if cost is not None:
            attributes["detective.usage.cost_usd"] = cost
        if self._capture:
            attributes[content.OUTPUT_MESSAGES] = content.output_messages(
                response.message, response.finish_reason
            )
        span.set_attributes(attributes)
        span.end()
        self._metrics.record_model_call(
            provider=self._inner.name,
            request_model=self._inner.model,
            response_model=response_model,
            duration_s=duration_s,
            usage=usage,
            cost_usd=cost,
        )

    def _failed(self, span: Span, error: BaseException, duration_s: float) -> None:
        if is_abandoned(error):
            span.set_attribute("detective.cancelled", True)
            span.end()
            return
        record_error(span, error)
        span.end()
        self._metrics.record_model_call(
            provider=self._inner.name,
            request_model=self._inner.model,
            duration_s=duration_s,
            error_type=error_type_of(error),
        )
        if isinstance(error, Exception):
            log_error(
                _provider_log,
                f"model call to {self._inner.name} failed",
                error,
                model=self._inner.model,
            )

    def _retry_span(self, parent: Context, event: StreamRetry) -> Span:
        reason = scrub(event.reason)
        retry_span = self._tracer.start_span(
            "retry",
            context=parent,
            attributes={
                "detective.retry.attempt": event.attempt,
                "detective.retry.max_attempts": event.max_attempts,
                "detective.retry.backoff_s": event.delay_s,
                "detective.retry.reason": reason,
                "detective.retry.partial_discarded": event.partial_discarded,
                "error.type": event.error_type,
            },
        )
        self._metrics.record_retry(
            provider=self._inner.name,
            request_model=self._inner.model,
            error_type=event.error_type,
        )
        with attached(parent):
            log_retry(
                _provider_log,
                attempt=event.attempt,
                max_attempts=event.max_attempts,
                delay_s=event.delay_s,
                reason=reason,
                error_type=event.error_type,
                provider=self._inner.name,
                model=self._inner.model,
            )
        return retry_span
