"""The agent run: each send_message an `invoke_agent detective` span in the conversation's
trace, summing up what its events said (status, tool calls, retries, trims, cost) when it ends.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any, Protocol

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import Span, SpanKind, Status, StatusCode

from agent.events import (
    AgentEvent,
    ContextTrimmed,
    ModelRequestStarted,
    ModelResponded,
    ReportFiled,
    RetryScheduled,
    RunCancelled,
    RunFailed,
    RunFinished,
    RunStarted,
    TextDelta,
    ToolCallRequested,
    ToolResultReceived,
    UsageReported,
)
from agent.messages import Conversation, Message
from agent.telemetry import content
from agent.telemetry.logging import (
    conversation_scope,
    enter_conversation,
    get_logger,
    leave_conversation,
    log_error,
    scrub,
)
from agent.telemetry.trace_context import (
    INPUT_MIME_TYPE,
    INPUT_VALUE,
    JSON_MIME_TYPE,
    OPENINFERENCE_SPAN_KIND,
    OUTPUT_MIME_TYPE,
    OUTPUT_VALUE,
    conversation_parent,
    new_trace_id,
    parse_trace_id,
)
from agent.telemetry.wrapping import (
    STATUS_DESCRIPTION_LIMIT,
    Delegating,
    attached,
    close_iterator,
    component_defaults,
    is_abandoned,
    record_error,
)

AGENT_NAME = "detective"

_run_log = get_logger("agent.run")


class SupportsSendMessage(Protocol):
    """The agent as TracedAgent needs it (the loop's Agent; written against this so the
    telemetry package never imports the loop)."""

    conversation: Conversation

    def send_message(self, content: str, cancel: Any = None) -> AsyncIterator[AgentEvent]: ...

    def get_history(self, limit: int | None = None) -> list[Message]: ...

    def get_context(self) -> Any: ...

    def new_conversation(self) -> Any: ...


# The events the span takes nothing from, most of a run's: skipped with one set lookup rather
# than the chain of isinstance checks below (exact types: a subclass still goes through it).
_UNOBSERVED = frozenset({ModelRequestStarted, ModelResponded, TextDelta, ToolResultReceived})


class _RunSummary:
    """What the events of one send_message said, for the span's final attributes."""

    def __init__(self) -> None:
        self.status = "incomplete"
        self.tool_calls = 0
        self.retries = 0
        self.trims = 0
        self.cost_usd: float | None = None
        self.attributes: dict[str, Any] = {}
        # The report the API stored (its tool call succeeded), the run's real output.
        self.filed: ReportFiled | None = None


def stored_output(filed: ReportFiled | None, final_text: str) -> str:
    """The agent span's output: the report the API stored, as JSON; or, when none was,
    that fact, with the model's last words quoted as what they are."""
    if filed is not None:
        return content.to_json(
            {
                "report_id": filed.report_id,
                "release_id": filed.release_id,
                "severity": filed.severity,
                "findings": list(filed.findings),
                "summary": filed.summary,
            }
        )
    said = f" The model's last answer: {final_text.strip()}" if final_text.strip() else ""
    return f"No risk report was stored by this run.{said}"


class TracedAgent(Delegating):
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
        self._tracer, _, self._capture = component_defaults(tracer, None, capture_content)
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
                await close_iterator(events)
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
            OPENINFERENCE_SPAN_KIND: "AGENT",
        }
        if self._capture:
            attributes[content.INPUT_MESSAGES] = content.text_message("user", text)
            attributes[INPUT_VALUE] = text
            attributes[INPUT_MIME_TYPE] = "text/plain"
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
        if type(event) in _UNOBSERVED:
            return
        if isinstance(event, RunStarted):
            summary.attributes.update(
                {
                    "gen_ai.provider.name": event.provider,
                    "gen_ai.request.model": event.model,
                    "detective.reasoning": event.reasoning,
                }
            )
            with attached(trace.set_span_in_context(span)):
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
            summary.filed = event
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
                # What was stored, not what the model says it did ("The risk report has been
                # filed." on a run whose filing was refused).
                stored = stored_output(summary.filed, event.final_text)
                summary.attributes[content.OUTPUT_MESSAGES] = content.text_message(
                    "assistant", stored, "stop"
                )
                summary.attributes[OUTPUT_VALUE] = stored
                summary.attributes[OUTPUT_MIME_TYPE] = (
                    JSON_MIME_TYPE if summary.filed is not None else "text/plain"
                )
            span.set_status(Status(StatusCode.OK))
        elif isinstance(event, RunFailed):
            summary.status = "failed"
            message = scrub(event.message)
            summary.attributes.update(
                {"error.type": event.error_type, "detective.run.steps": event.steps}
            )
            span.set_status(Status(StatusCode.ERROR, message[:STATUS_DESCRIPTION_LIMIT]))
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
        raised = error is not None and not is_abandoned(error)
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
            record_error(span, error)
            if isinstance(error, Exception):
                with (
                    attached(trace.set_span_in_context(span)),
                    conversation_scope(conversation.id),
                ):
                    log_error(_run_log, "agent run raised", error)
        span.end()
