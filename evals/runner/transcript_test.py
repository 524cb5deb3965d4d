from __future__ import annotations

from datetime import UTC, datetime, timedelta

from agent.events import (
    ReportFiled,
    RunCancelled,
    RunFailed,
    RunFinished,
    RunStarted,
    ToolCallRequested,
    ToolResultReceived,
    UsageReported,
)
from agent.messages import Message, ToolCall, ToolResult, Usage
from evals.runner.transcript import FiledReport, RunError, Transcript

T0 = datetime(2025, 6, 1, 10, 0, tzinfo=UTC)

CALL = ToolCall(id="c1", name="file_risk_report", arguments={
    "release_id": "v1.0.0", "severity": "medium", "findings": ["a"], "summary": "s",
})  # fmt: skip


def _messages(*, ok: bool = True) -> list[Message]:
    return [
        Message.user("Assess the risk of release v1.0.0"),
        Message.assistant("Filing.", tool_calls=[CALL]),
        Message.tool(ToolResult(tool_call_id="c1", name=CALL.name, content="filed", success=ok)),
    ]


def test_tool_calls_come_from_messages_when_there_are_no_tool_events() -> None:
    transcript = Transcript(messages=_messages())
    (inv,) = transcript.invocations()
    assert inv.name == "file_risk_report" and inv.succeeded
    assert transcript.tool_names() == ["file_risk_report"]


def test_tool_events_win_over_messages() -> None:
    other = ToolCall(id="e1", name="get_release_summary", arguments={"release_id": "v1.0.0"})
    events = [
        ToolCallRequested(step=1, tool_call=other),
        ToolResultReceived(
            step=1,
            result=ToolResult(tool_call_id="e1", name=other.name, content="{}", success=False),
        ),
    ]
    transcript = Transcript(messages=_messages(), events=events)
    (inv,) = transcript.invocations()
    assert inv.name == "get_release_summary" and not inv.succeeded


def test_a_call_without_a_result_is_not_a_success() -> None:
    transcript = Transcript(messages=_messages()[:2])
    (inv,) = transcript.invocations()
    assert inv.result is None and not inv.succeeded
    assert transcript.filed_report() is None


def test_the_filed_report_prefers_the_stored_one_then_the_event_then_the_call() -> None:
    from_call = Transcript(messages=_messages())
    report = from_call.filed_report()
    assert report == FiledReport(
        release_id="v1.0.0", severity="medium", findings=["a"], summary="s"
    )
    assert report.text == "a\ns"
    event = ReportFiled(release_id="v1.0.0", severity="high", findings=["b"], report_id="r9")
    from_event = Transcript(messages=_messages(), events=[event])
    assert from_event.filed_report() == FiledReport(
        release_id="v1.0.0", severity="high", findings=["b"], report_id="r9"
    )
    stored = FiledReport(release_id="v1.0.0", severity="low", findings=["c"])
    assert Transcript(messages=_messages(), events=[event], report=stored).filed_report() == stored
    assert Transcript(messages=_messages(ok=False)).filed_report() is None


def test_final_text_prefers_the_run_finished_event() -> None:
    messages = [*_messages(), Message.assistant("From the messages.")]
    assert Transcript(messages=messages).final_text() == "From the messages."
    finished = RunFinished(reason="answered", final_text="From the event.")
    assert Transcript(messages=messages, events=[finished]).final_text() == "From the event."


def test_errors_are_categorised() -> None:
    failed = Transcript(events=[RunFailed(error_type="RateLimitError", message="429")])
    error = failed.run_error()
    assert error is not None and error.resolved_category == "provider" and failed.errored
    assert not error.is_agent_fault
    crashed = Transcript(events=[RunFailed(error_type="KeyError", message="boom")])
    assert crashed.run_error().is_agent_fault  # type: ignore[union-attr]
    cancelled = Transcript(events=[RunCancelled(reason="user")])
    assert cancelled.run_error().resolved_category == "cancelled"  # type: ignore[union-attr]
    explicit = RunError(error_type="Whatever", category="infrastructure")
    assert Transcript(error=explicit).run_error() == explicit
    assert RunError(error_type="ConfigurationError").resolved_category == "infrastructure"
    assert RunError(error_type="StreamError").resolved_category == "provider"
    assert Transcript(messages=_messages()).run_error() is None


def test_finish_reason() -> None:
    assert Transcript(events=[RunFinished(reason="max_steps")]).finish_reason() == "max_steps"
    assert (
        Transcript(
            events=[RunStarted(conversation_id="c", provider="p", model="m")]
        ).finish_reason()
        is None
    )
    assert Transcript(messages=_messages()).finish_reason() == "report_filed"
    answered = [Message.user("x"), Message.assistant("Release not found.")]
    assert Transcript(messages=answered).finish_reason() == "answered"
    assert Transcript(messages=_messages()[:2]).finish_reason() is None


def test_metrics_from_events_or_from_the_runner() -> None:
    events = [
        RunStarted(conversation_id="c", provider="p", model="m", timestamp=T0),
        UsageReported(
            step=1,
            usage=Usage(input_tokens=10, output_tokens=1),
            total=Usage(input_tokens=10, output_tokens=1),
            estimated_cost_usd=0.5,
            timestamp=T0 + timedelta(seconds=1),
        ),
        UsageReported(
            step=2,
            usage=Usage(input_tokens=20, output_tokens=2),
            total=Usage(input_tokens=30, output_tokens=3),
            estimated_cost_usd=0.25,
            timestamp=T0 + timedelta(seconds=2),
        ),
        RunFailed(
            error_type="ServerError", message="", steps=2, timestamp=T0 + timedelta(seconds=3)
        ),
    ]
    metrics = Transcript(events=events).metrics()
    assert (metrics.input_tokens, metrics.output_tokens, metrics.total_tokens) == (30, 3, 33)
    assert metrics.cost_usd == 0.75
    assert metrics.latency_ms == 3000
    assert metrics.steps == 2
    given = Transcript(
        events=events, usage=Usage(input_tokens=1), cost_usd=9.0, duration_ms=5.0
    ).metrics()
    assert (given.input_tokens, given.cost_usd, given.latency_ms) == (1, 9.0, 5.0)
    assert Transcript().metrics().cost_usd is None


def test_a_transcript_round_trips_through_json() -> None:
    transcript = Transcript(
        scenario_id="s",
        messages=_messages(),
        events=[ReportFiled(release_id="v1.0.0", severity="high", findings=["b"])],
        error=RunError(error_type="X"),
    )
    assert Transcript.model_validate_json(transcript.model_dump_json()) == transcript
