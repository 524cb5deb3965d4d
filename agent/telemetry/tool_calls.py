"""Tool calls: an `execute_tool {name}` span per execution, with its outcome, duration and,
when content capture is on, the arguments and the result; named both as the GenAI semantic
conventions and as OpenInference (a TOOL span, `input.value`, `output.value`) name them, so
that Phoenix shows each drill-down as a step of the run."""

from __future__ import annotations

import time
from typing import Any

from opentelemetry import trace
from opentelemetry.trace import SpanKind, Status, StatusCode

from agent.messages import ToolCall, ToolDefinition, ToolResult
from agent.telemetry import content
from agent.telemetry.logging import get_logger, log_error, log_tool_call, log_tool_result, scrub
from agent.telemetry.metrics import AgentMetrics
from agent.telemetry.trace_context import (
    INPUT_MIME_TYPE,
    INPUT_VALUE,
    JSON_MIME_TYPE,
    OPENINFERENCE_SPAN_KIND,
    OUTPUT_VALUE,
)
from agent.telemetry.wrapping import Delegating, component_defaults, error_type_of, record_error
from agent.tools.protocol import ToolExecutor

_tools_log = get_logger("agent.tools")


class TracedToolExecutor(Delegating):
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
        self._tracer, self._metrics, self._capture = component_defaults(
            tracer, metrics, capture_content
        )

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
            OPENINFERENCE_SPAN_KIND: "TOOL",
            "tool.name": call.name,
        }
        if self._capture:
            arguments = content.to_json(call.arguments)
            attributes["gen_ai.tool.call.arguments"] = arguments
            attributes[INPUT_VALUE] = arguments
            attributes[INPUT_MIME_TYPE] = JSON_MIME_TYPE
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
                record_error(span, error)
                span.set_attribute("detective.tool.success", False)
                self._metrics.record_tool(
                    tool_name=call.name,
                    success=False,
                    duration_s=time.perf_counter() - started,
                    error_type=error_type_of(error),
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
                shown = scrub(result.content)
                span.set_attributes({"gen_ai.tool.call.result": shown, OUTPUT_VALUE: shown})
            self._metrics.record_tool(
                tool_name=call.name,
                success=result.success,
                duration_s=duration_s,
                error_type=result.error_type,
            )
            log_tool_result(_tools_log, result, capture_content=self._capture)
            return result
