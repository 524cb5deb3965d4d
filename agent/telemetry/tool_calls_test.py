from __future__ import annotations

import logging

import pytest
from opentelemetry.trace import StatusCode

from agent.telemetry.tool_calls import TracedToolExecutor
from agent.testing.telemetry import (
    CALL,
    FakeTools,
    Telemetry,
    tool_result,
)
from agent.tools.protocol import ToolExecutor


async def test_tool_span(otel: Telemetry, caplog: pytest.LogCaptureFixture) -> None:
    tools = TracedToolExecutor(FakeTools(tool_result()), tracer=otel.tracer, metrics=otel.metrics)

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
        # OpenInference's names: Phoenix shows the call as a TOOL step.
        "openinference.span.kind": "TOOL",
        "tool.name": "get_release_summary",
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
    failed = tool_result(
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
        FakeTools(tool_result()), tracer=otel.tracer, metrics=otel.metrics, capture_content=False
    )
    loud = TracedToolExecutor(
        FakeTools(tool_result()), tracer=otel.tracer, metrics=otel.metrics, capture_content=True
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
    inner = FakeTools(tool_result())
    tools = TracedToolExecutor(inner, tracer=otel.tracer, metrics=otel.metrics)
    assert isinstance(tools, ToolExecutor)
    assert [t.name for t in tools.get_tools()] == ["get_release_summary"]
    assert tools.format_for_provider("anthropic") == [{"provider": "anthropic"}]
    tools.register("extra")  # type: ignore[attr-defined]
    assert inner.registered == ["extra"]
