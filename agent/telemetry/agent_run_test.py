from __future__ import annotations

import asyncio
import json
import logging

import pytest
from opentelemetry import trace
from opentelemetry.trace import StatusCode

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
    Usage,
)
from agent.telemetry.agent_run import SupportsSendMessage, TracedAgent
from agent.telemetry.model_calls import TracedProvider
from agent.telemetry.tool_calls import TracedToolExecutor
from agent.telemetry.trace_context import (
    current_traceparent,
    new_trace_id,
    parse_trace_id,
)
from agent.testing.telemetry import (
    CALL,
    FakeAgent,
    FakeProvider,
    FakeTools,
    Telemetry,
    parent_id,
    span_id,
    tool_result,
    trace_id,
)


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
        "openinference.span.kind": "AGENT",
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
    tools = TracedToolExecutor(FakeTools(tool_result()), tracer=otel.tracer, metrics=otel.metrics)
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
    # The run filed nothing: its output says so, the model's words quoted as its words.
    stored = "No risk report was stored by this run. The model's last answer: low risk"
    assert json.loads(str(attributes["gen_ai.output.messages"])) == [
        {
            "role": "assistant",
            "parts": [{"type": "text", "content": stored}],
            "finish_reason": "stop",
        }
    ]
    assert (attributes["output.value"], attributes["output.mime_type"]) == (stored, "text/plain")
    assert attributes["input.value"] == "assess 1.2"
    assert attributes["session.id"] == attributes["gen_ai.conversation.id"]


async def test_the_agent_spans_output_is_the_report_stored_not_the_models_claim(
    otel: Telemetry,
) -> None:
    filed = ReportFiled(release_id="1.2", severity="high", findings=["a"], report_id="r-7")
    inner = FakeAgent(
        [filed, RunFinished(reason="answered", steps=2, final_text="All done!", usage=Usage())]
    )
    await _run(TracedAgent(inner, tracer=otel.tracer, capture_content=True))
    attributes = otel.one("invoke_agent detective").attributes or {}
    output = json.loads(str(attributes["output.value"]))
    assert (output["report_id"], output["severity"], output["findings"]) == ("r-7", "high", ["a"])
    assert "All done!" not in str(attributes["gen_ai.output.messages"])
    assert attributes["output.mime_type"] == "application/json"


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
