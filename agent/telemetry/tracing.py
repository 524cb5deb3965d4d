"""Tracing by wrapping: each traced class takes a component and is one of the same kind.

```
TracedAgent(Agent(
    provider=TracedProvider(RetryingProvider(adapter)),   span "chat {model}", child "retry"
    tools=TracedToolExecutor(registry),                   span "execute_tool {name}"
    context=TracedContextManager(manager),                span "context.fit"
))                                                        span "invoke_agent detective"
```

The loop holds no span code: these wrappers open the spans, set the GenAI semantic
convention attributes (`gen_ai.*`) and the spec's own (`detective.*`), record the metrics
and write the structured logs.

One trace per conversation. The conversation's metadata keeps `trace_id` (and `traceparent`
when a traced web request started the run); every send_message span is created in that
trace, so a conversation resumed days later, in another process, still lands in the same
trace file.

Async generators and the current span: a generator's body runs in its consumer's context,
so attaching a span across a `yield` would leak it into the consumer's code. The wrappers
attach their span only around each step of the inner iterator, which is where the inner
component's own spans (and the HTTP client's) are created.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any, Protocol

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.sdk.trace.id_generator import RandomIdGenerator
from opentelemetry.trace import (
    Link,
    NonRecordingSpan,
    Span,
    SpanContext,
    SpanKind,
    Status,
    StatusCode,
    TraceFlags,
)
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from agent.context.protocol import ContextFit, ContextManager
from agent.events import (
    AgentEvent,
    ContextTrimmed,
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
)
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
from agent.telemetry.logging import (
    conversation_scope,
    enter_conversation,
    get_logger,
    leave_conversation,
    log_context_trim,
    log_error,
    log_retry,
    log_tool_call,
    log_tool_result,
    scrub,
)
from agent.telemetry.metrics import AgentMetrics, default_metrics
from agent.telemetry.setup import (
    TRACER_NAME,
    active_telemetry,
    capture_content_default,
)
from agent.tools.protocol import ToolExecutor

AGENT_NAME = "detective"
_STATUS_DESCRIPTION_LIMIT = 500

_propagator = TraceContextTextMapPropagator()
_ids = RandomIdGenerator()

_provider_log = get_logger("agent.provider")
_tools_log = get_logger("agent.tools")
_context_log = get_logger("agent.context")
_run_log = get_logger("agent.run")


# --- workflows ---------------------------------------------------------------------------


def workflow_span(
    tracer: trace.Tracer,
    workflow: str,
    *,
    conversation_id: str,
    release_id: str,
    context: Context | None = None,
    attributes: Mapping[str, Any] | None = None,
) -> Span:
    """The root of a run's spans (an assessment, an eval trial): an `invoke_workflow` span,
    which OpenInference (Phoenix) shows as a CHAIN, with the release and the run on it.

    No `gen_ai.agent.*` attribute here: it would make viewers take the span for an agent."""
    values: dict[str, Any] = {
        "gen_ai.operation.name": "invoke_workflow",
        "gen_ai.workflow.name": workflow,
        "gen_ai.conversation.id": conversation_id,
        "session.id": conversation_id,
        "detective.run.id": conversation_id,
        "detective.release.id": release_id,
    }
    if attributes:
        values.update(attributes)
    return tracer.start_span(
        f"invoke_workflow {workflow}", context=context, kind=SpanKind.INTERNAL, attributes=values
    )


# --- trace context -----------------------------------------------------------------------


def new_trace_id() -> str:
    """A fresh W3C trace id: 32 lower-case hex digits, never all zeros."""
    return trace.format_trace_id(_ids.generate_trace_id())


def current_traceparent() -> dict[str, str]:
    """The current trace context as W3C headers (`traceparent`, and `tracestate` when
    set), for outgoing HTTP calls; empty when no span is active."""
    carrier: dict[str, str] = {}
    _propagator.inject(carrier)
    return carrier


def parse_trace_id(value: object) -> int | None:
    if not isinstance(value, str) or len(value) != 32:
        return None
    try:
        trace_id = int(value, 16)
    except ValueError:
        return None
    return trace_id or None


def conversation_parent(
    metadata: Mapping[str, Any],
) -> tuple[Context | None, list[Link]]:
    """The parent context for a span of this conversation, and links to add.

    - `traceparent` stored (a traced web request started the run): that request's span
      is the parent, as long as it belongs to the conversation's trace.
    - Otherwise the stored `trace_id`: a remote parent with that trace id and a random
      span id, so every send_message of the conversation joins the one trace.
    - Neither: None, the current context (a new trace unless a span is active).

    A traceparent from another trace than the conversation's becomes a link: the
    conversation keeps its one trace, and the request that caused the run stays findable.
    """
    trace_id = parse_trace_id(metadata.get("trace_id"))
    links: list[Link] = []
    traceparent = metadata.get("traceparent")
    if isinstance(traceparent, str) and traceparent:
        carrier = {"traceparent": traceparent}
        tracestate = metadata.get("tracestate")
        if isinstance(tracestate, str) and tracestate:
            carrier["tracestate"] = tracestate
        extracted = _propagator.extract(carrier)
        remote = trace.get_current_span(extracted).get_span_context()
        if remote.is_valid:
            if trace_id is None or remote.trace_id == trace_id:
                return extracted, links
            links.append(Link(remote, {"detective.link.reason": "traceparent"}))
    if trace_id is not None:
        parent = NonRecordingSpan(
            SpanContext(
                trace_id=trace_id,
                span_id=_ids.generate_span_id(),
                is_remote=True,
                trace_flags=TraceFlags(TraceFlags.SAMPLED),
            )
        )
        return trace.set_span_in_context(parent), links
    return None, links


async def _close(iterator: AsyncIterator[Any]) -> None:
    aclose = getattr(iterator, "aclose", None)
    if aclose is not None:
        await aclose()


@contextmanager
def _attached(ctx: Context) -> Iterator[None]:
    token = otel_context.attach(ctx)
    try:
        yield
    finally:
        otel_context.detach(token)


# --- shared helpers ----------------------------------------------------------------------


def _defaults(
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


def _abandoned(error: BaseException) -> bool:
    """The caller stopped waiting (closed the stream, cancelled the task): not a failure
    of the component, so no ERROR status."""
    return isinstance(error, GeneratorExit | asyncio.CancelledError)


def _error_type(error: BaseException) -> str:
    return type(error).__name__


def _record_error(span: Span, error: BaseException) -> None:
    # Not span.record_exception: its stack trace would carry local reprs we do not
    # control, and the message is scrubbed of secrets first.
    message = scrub(str(error))
    span.set_attribute("error.type", _error_type(error))
    span.set_status(Status(StatusCode.ERROR, message[:_STATUS_DESCRIPTION_LIMIT]))
    span.add_event(
        "exception",
        {
            "exception.type": f"{type(error).__module__}.{type(error).__qualname__}",
            "exception.message": message,
        },
    )


class _Delegating:
    """Forwards anything the wrapper does not define (an adapter's health check, the
    registry's `register`...) to the wrapped component."""

    _inner: Any

    def __getattr__(self, name: str) -> Any:
        if name == "_inner":
            raise AttributeError(name)
        return getattr(self._inner, name)


# --- provider ----------------------------------------------------------------------------


class TracedProvider(_Delegating):
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
        self._tracer, self._metrics, self._capture = _defaults(tracer, metrics, capture_content)

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
            with _attached(span_context), listening_for_retries(on_retry):
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
                if isinstance(event, StreamTextDelta | StreamToolCallDelta):
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
                await _close(events)
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
        if error is not None and not _abandoned(error):
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
        if _abandoned(error):
            span.set_attribute("detective.cancelled", True)
            span.end()
            return
        _record_error(span, error)
        span.end()
        self._metrics.record_model_call(
            provider=self._inner.name,
            request_model=self._inner.model,
            duration_s=duration_s,
            error_type=_error_type(error),
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
        with _attached(parent):
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


# --- tools -------------------------------------------------------------------------------


class TracedToolExecutor(_Delegating):
    """A ToolExecutor whose every execution is an `execute_tool {name}` span."""

    def __init__(
        self,
        inner: ToolExecutor,
        *,
        tracer: trace.Tracer | None = None,
        metrics: AgentMetrics | None = None,
        capture_content: bool | None = None,
    ) -> None:
        self._inner = inner
        self._tracer, self._metrics, self._capture = _defaults(tracer, metrics, capture_content)

    def get_tools(self) -> list[ToolDefinition]:
        return self._inner.get_tools()

    def format_for_provider(self, provider: str) -> list[dict[str, Any]]:
        return self._inner.format_for_provider(provider)

    async def execute(self, call: ToolCall) -> ToolResult:
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": call.name,
            "gen_ai.tool.call.id": call.id,
            "gen_ai.tool.type": "function",
        }
        if self._capture:
            attributes["gen_ai.tool.call.arguments"] = content.to_json(call.arguments)
        started = time.perf_counter()
        with self._tracer.start_as_current_span(
            f"execute_tool {call.name}",
            kind=SpanKind.INTERNAL,
            attributes=attributes,
            record_exception=False,
            set_status_on_exception=False,
        ) as span:
            log_tool_call(_tools_log, call, capture_content=self._capture)
            try:
                result = await self._inner.execute(call)
            except BaseException as error:
                # The executor promises results, not exceptions; if one escapes anyway
                # (a bug, a cancellation) it is still measured and shown.
                _record_error(span, error)
                span.set_attribute("detective.tool.success", False)
                self._metrics.record_tool(
                    tool_name=call.name,
                    success=False,
                    duration_s=time.perf_counter() - started,
                    error_type=_error_type(error),
                )
                if isinstance(error, Exception):
                    log_error(_tools_log, f"tool {call.name} raised", error)
                raise
            duration_s = (
                result.duration_ms / 1000
                if result.duration_ms > 0
                else time.perf_counter() - started
            )
            span.set_attributes(
                {
                    "detective.tool.success": result.success,
                    "detective.tool.duration_ms": duration_s * 1000,
                    "detective.tool.terminal": result.terminal,
                }
            )
            if not result.success:
                error_type = result.error_type or "ToolError"
                span.set_attribute("error.type", error_type)
                span.set_status(Status(StatusCode.ERROR, error_type))
            if self._capture:
                span.set_attribute("gen_ai.tool.call.result", scrub(result.content))
            self._metrics.record_tool(
                tool_name=call.name,
                success=result.success,
                duration_s=duration_s,
                error_type=result.error_type,
            )
            log_tool_result(_tools_log, result, capture_content=self._capture)
            return result


# --- context window ----------------------------------------------------------------------


class TracedContextManager(_Delegating):
    """A ContextManager whose fits are traced.

    A fit that trims the history, or fails, is a `context.fit` span; one that leaves the
    history as it is (nearly every call of an ordinary run) is a `context.fit` event on the
    current span, with the same attributes: a span per model call cost more than the fit
    itself and drew an empty row on the trace page.

    With `calls_model` (the summarisation strategy: its summariser is a model call) every
    fit is a span from the start, so that the summariser's chat span nests under it.
    Otherwise the span is made once the fit is done, from the times taken around it.
    """

    def __init__(
        self,
        inner: ContextManager,
        *,
        calls_model: bool = True,
        tracer: trace.Tracer | None = None,
        metrics: AgentMetrics | None = None,
    ) -> None:
        self._inner = inner
        self._calls_model = calls_model
        self._tracer, self._metrics, _ = _defaults(tracer, metrics, False)

    async def fit(self, system_prompt: str, messages: Sequence[Message]) -> ContextFit:
        if self._calls_model:
            return await self._fit_in_span(system_prompt, messages)
        started_ns = time.time_ns()
        try:
            fit = await self._inner.fit(system_prompt, messages)
        except BaseException as error:
            span = self._start_span(len(messages), started_ns)
            self._failed(span, error)
            span.end()
            raise
        if fit.trimmed:
            span = self._start_span(len(messages), started_ns)
            span.set_attributes(_fit_attributes(fit))
            span.end()
        else:
            trace.get_current_span().add_event(
                "context.fit", _untouched_fit_attributes(fit), timestamp=started_ns
            )
        self._observe(fit)
        return fit

    async def _fit_in_span(self, system_prompt: str, messages: Sequence[Message]) -> ContextFit:
        span = self._start_span(len(messages))
        with trace.use_span(
            span, end_on_exit=True, record_exception=False, set_status_on_exception=False
        ):
            try:
                fit = await self._inner.fit(system_prompt, messages)
            except BaseException as error:
                self._failed(span, error)
                raise
            span.set_attributes(_fit_attributes(fit))
        self._observe(fit)
        return fit

    def _start_span(self, message_count: int, start_time: int | None = None) -> Span:
        return self._tracer.start_span(
            "context.fit",
            kind=SpanKind.INTERNAL,
            attributes={"detective.context.messages_before": message_count},
            start_time=start_time,
        )

    @staticmethod
    def _failed(span: Span, error: BaseException) -> None:
        _record_error(span, error)
        if isinstance(error, Exception):
            log_error(_context_log, "fitting the context failed", error)

    def _observe(self, fit: ContextFit) -> None:
        self._metrics.record_context(utilisation=fit.utilisation, strategy=fit.strategy)
        if fit.trimmed:
            log_context_trim(
                _context_log,
                strategy=fit.strategy,
                messages_before=fit.messages_before,
                messages_after=len(fit.messages),
                tokens_before=fit.tokens_before,
                tokens_after=fit.tokens,
                budget=fit.budget,
                utilisation=fit.utilisation,
            )

    def record_usage(self, prompt_tokens: int, messages_sent: int) -> None:
        self._inner.record_usage(prompt_tokens, messages_sent)


def _untouched_fit_attributes(fit: ContextFit) -> dict[str, Any]:
    # What is left when nothing was trimmed: the rest would repeat these (after = before).
    return {
        "detective.context.messages_before": fit.messages_before,
        "detective.context.tokens_before": fit.tokens_before,
        "detective.context.budget": fit.budget,
        "detective.context.window": fit.context_window,
        "detective.context.utilisation": fit.utilisation,
        "detective.context.strategy": fit.strategy,
        "detective.context.trimmed": False,
    }


def _fit_attributes(fit: ContextFit) -> dict[str, Any]:
    return {
        "detective.context.messages_before": fit.messages_before,
        "detective.context.messages_after": len(fit.messages),
        "detective.context.messages_dropped": max(fit.messages_before - len(fit.messages), 0),
        "detective.context.tokens_before": fit.tokens_before,
        "detective.context.tokens_after": fit.tokens,
        "detective.context.budget": fit.budget,
        "detective.context.window": fit.context_window,
        "detective.context.utilisation": fit.utilisation,
        "detective.context.strategy": fit.strategy,
        "detective.context.trimmed": fit.trimmed,
    }


# --- the agent ---------------------------------------------------------------------------


class SupportsSendMessage(Protocol):
    """The agent as TracedAgent needs it (the loop's Agent; written against this so the
    telemetry package never imports the loop)."""

    conversation: Conversation

    def send_message(self, content: str, cancel: Any = None) -> AsyncIterator[AgentEvent]: ...

    def get_history(self, limit: int | None = None) -> list[Message]: ...

    def get_context(self) -> Any: ...

    def new_conversation(self) -> Any: ...


class _RunSummary:
    """What the events of one send_message said, for the span's final attributes."""

    def __init__(self) -> None:
        self.status = "incomplete"
        self.tool_calls = 0
        self.retries = 0
        self.trims = 0
        self.cost_usd: float | None = None
        self.attributes: dict[str, Any] = {}


class TracedAgent(_Delegating):
    """The agent, each send_message an `invoke_agent detective` span in the
    conversation's trace."""

    def __init__(
        self,
        inner: SupportsSendMessage,
        *,
        tracer: trace.Tracer | None = None,
        capture_content: bool | None = None,
        agent_name: str = AGENT_NAME,
    ) -> None:
        self._inner = inner
        self._tracer, _, self._capture = _defaults(tracer, None, capture_content)
        self._agent_name = agent_name

    @property
    def conversation(self) -> Conversation:
        return self._inner.conversation

    @conversation.setter
    def conversation(self, value: Conversation) -> None:
        self._inner.conversation = value

    def get_history(self, limit: int | None = None) -> list[Message]:
        if limit is None:
            return self._inner.get_history()
        return self._inner.get_history(limit)

    def get_context(self) -> Any:
        return self._inner.get_context()

    def new_conversation(self) -> Any:
        return self._inner.new_conversation()

    async def send_message(self, content: str, cancel: Any = None) -> AsyncIterator[AgentEvent]:
        conversation = self._inner.conversation
        span = self._start_span(conversation, content)
        span_context = trace.set_span_in_context(span)
        summary = _RunSummary()
        events = aiter(self._inner.send_message(content, cancel=cancel))
        error: BaseException | None = None
        try:
            while True:
                # Inline rather than two context managers: this runs for every event.
                otel_token = otel_context.attach(span_context)
                scope_token = enter_conversation(conversation.id)
                try:
                    event = await anext(events)
                except StopAsyncIteration:
                    break
                finally:
                    leave_conversation(scope_token)
                    otel_context.detach(otel_token)
                self._observe(span, summary, event)
                yield event
        except BaseException as caught:
            error = caught
            raise
        finally:
            try:
                await _close(events)
            finally:
                self._end_span(span, conversation, summary, error)

    def _start_span(self, conversation: Conversation, text: str) -> Span:
        parent, links = conversation_parent(conversation.metadata)
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.agent.name": self._agent_name,
            "gen_ai.conversation.id": conversation.id,
            # What OpenInference (Phoenix) and Langfuse group a session by.
            "session.id": conversation.id,
            "detective.conversation.message_count": len(conversation.messages),
        }
        if self._capture:
            attributes[content.INPUT_MESSAGES] = content.text_message("user", text)
        span = self._tracer.start_span(
            f"invoke_agent {self._agent_name}",
            context=parent,
            kind=SpanKind.INTERNAL,
            links=links,
            attributes=attributes,
        )
        if parse_trace_id(conversation.metadata.get("trace_id")) is None:
            span_context = span.get_span_context()
            conversation.metadata["trace_id"] = (
                trace.format_trace_id(span_context.trace_id)
                if span_context.is_valid
                # Tracing is off: the conversation still gets its id, for the day it
                # is resumed with tracing on.
                else new_trace_id()
            )
        return span

    def _observe(self, span: Span, summary: _RunSummary, event: AgentEvent) -> None:
        # Attributes are gathered and set once, when the span ends: each set_attributes call
        # takes the span's lock and checks every value again.
        if isinstance(event, RunStarted):
            summary.attributes.update(
                {
                    "gen_ai.provider.name": event.provider,
                    "gen_ai.request.model": event.model,
                    "detective.reasoning": event.reasoning,
                }
            )
            with _attached(trace.set_span_in_context(span)):
                _run_log.info(
                    "run started",
                    extra={"fields": {"event": "run_started", "model": event.model}},
                )
        elif isinstance(event, ToolCallRequested):
            summary.tool_calls += 1
        elif isinstance(event, RetryScheduled):
            summary.retries += 1
        elif isinstance(event, ContextTrimmed):
            summary.trims += 1
        elif isinstance(event, UsageReported):
            if event.estimated_cost_usd is not None:
                summary.cost_usd = (summary.cost_usd or 0.0) + event.estimated_cost_usd
        elif isinstance(event, ReportFiled):
            summary.attributes.update(
                {
                    "detective.release.id": event.release_id,
                    "detective.report.severity": event.severity,
                    "detective.report.finding_count": len(event.findings),
                }
            )
        elif isinstance(event, RunFinished):
            summary.status = "finished"
            summary.attributes.update(
                {
                    "detective.run.finish_reason": event.reason,
                    "detective.run.steps": event.steps,
                    "gen_ai.usage.input_tokens": event.usage.input_tokens,
                    "gen_ai.usage.output_tokens": event.usage.output_tokens,
                }
            )
            if self._capture:
                summary.attributes[content.OUTPUT_MESSAGES] = content.text_message(
                    "assistant", event.final_text, "stop"
                )
            span.set_status(Status(StatusCode.OK))
        elif isinstance(event, RunFailed):
            summary.status = "failed"
            message = scrub(event.message)
            summary.attributes.update(
                {"error.type": event.error_type, "detective.run.steps": event.steps}
            )
            span.set_status(Status(StatusCode.ERROR, message[:_STATUS_DESCRIPTION_LIMIT]))
        elif isinstance(event, RunCancelled):
            summary.status = "cancelled"
            summary.attributes.update(
                {
                    "detective.run.steps": event.steps,
                    "detective.run.cancel_reason": event.reason,
                }
            )

    def _end_span(
        self,
        span: Span,
        conversation: Conversation,
        summary: _RunSummary,
        error: BaseException | None,
    ) -> None:
        raised = error is not None and not _abandoned(error)
        if isinstance(error, asyncio.CancelledError):
            summary.status = "cancelled"
        elif raised:
            summary.status = "failed"
        attributes = summary.attributes
        attributes.update(
            {
                "detective.run.status": summary.status,
                "detective.run.tool_calls": summary.tool_calls,
                "detective.run.retries": summary.retries,
                "detective.run.context_trims": summary.trims,
                "detective.conversation.message_count_after": len(conversation.messages),
            }
        )
        if summary.cost_usd is not None:
            attributes["detective.usage.cost_usd"] = summary.cost_usd
        span.set_attributes(attributes)
        if raised and error is not None:
            # After the run's own attributes: the exception's error.type wins.
            _record_error(span, error)
            if isinstance(error, Exception):
                with (
                    _attached(trace.set_span_in_context(span)),
                    conversation_scope(conversation.id),
                ):
                    log_error(_run_log, "agent run raised", error)
        span.end()
