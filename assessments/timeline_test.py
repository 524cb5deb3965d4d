"""The timeline: the folded page and the live fragments agree, and everything is escaped."""

from __future__ import annotations

import re
from collections.abc import Callable

import pytest

from assessments import services, tasks, timeline
from releases.models import AgentEvent, Conversation, Release

pytestmark = pytest.mark.django_db

EVIL = "<img src=x onerror=alert(1)>"


@pytest.fixture
def run(make_release: Callable[..., Release]) -> Conversation:
    return services.start_assessment(make_release(), None, enqueue=tasks.enqueue_assessment)


def save(run: Conversation, kind: str, **payload: object) -> AgentEvent:
    return services.append_event(run, kind=kind, payload={"kind": kind, **payload})


def test_a_step_streams_then_shows_the_whole_response(run: Conversation) -> None:
    save(run, "model_request_started", step=1, message_count=1, estimated_input_tokens=10)
    save(run, "text_delta", step=1, text="Hel")
    save(run, "text_delta", step=1, text=f"lo {EVIL}")
    live = timeline.render_live(list(run.events.all()))
    assert 'hx-swap-oob="beforeend:#step-1-text"' in live
    assert '<span data-seq="3">lo &lt;img src=x onerror=alert(1)&gt;</span>' in live
    assert EVIL not in live
    page = "".join(item.render() for item in timeline.build(run.events.all()))
    assert 'id="step-1-text" data-seq="3">Hello &lt;img' in page
    save(run, "model_responded", step=1, text="Hello.", tool_call_count=0, duration_ms=1500)
    page = "".join(item.render() for item in timeline.build(run.events.all()))
    assert 'id="step-1-text" data-seq="4">Hello.</div>' in page


def test_a_retry_that_discarded_text_empties_the_step(run: Conversation) -> None:
    save(run, "model_request_started", step=2, message_count=3, estimated_input_tokens=10)
    save(run, "text_delta", step=2, text="partial")
    retry = save(
        run,
        "retry_scheduled",
        attempt=1,
        max_attempts=3,
        delay_s=2.0,
        reason="overloaded",
        error_type="ServerError",
        partial_discarded=True,
    )
    live = timeline.render_live([retry])
    assert '<div class="tl-text" id="step-2-text" data-seq="3" hx-swap-oob="true"></div>' in live
    # The retry is drawn inside the step it interrupted, with its wait.
    assert (
        '<div hx-swap-oob="beforeend:#step-2-notes"><li data-seq="3" class="tl-note-retry"' in live
    )
    assert "attempt 1 of 3 failed (overloaded) · retrying in 2.0 s" in live and "discarded" in live
    built = timeline.build(run.events.all())
    assert [item.partial for item in built] == ["step"]
    page = "".join(item.render() for item in built)
    assert "partial" not in page
    assert '<ul class="tl-notes" id="step-2-notes"><li data-seq="3" class="tl-note-retry"' in page


def test_a_tool_call_card_gets_its_result(run: Conversation) -> None:
    call = {"id": f"c1 {EVIL}", "name": "get_release_summary", "arguments": {"release_id": EVIL}}
    save(run, "tool_call", step=1, tool_call=call)
    result = {
        "tool_call_id": call["id"],
        "name": call["name"],
        "success": False,
        "content": f"Release {EVIL} does not exist",
        "error_type": "InvalidArgumentsError",
    }
    event = save(run, "tool_result", step=1, result=result)
    key = timeline.tool_key(1, call["id"])
    assert re.fullmatch(r"[0-9a-f]{12}", key)
    live = timeline.render_live([event])
    # The result itself replaces the card's placeholder: one element with that id, not two.
    assert live.count(f'id="tool-{key}-result"') == 1
    assert 'data-kind="tool_result" hx-swap-oob="outerHTML"' in live
    assert "Failed" in live and EVIL not in live
    page = "".join(item.render() for item in timeline.build(run.events.all()))
    assert "does not exist" in page and "running…" not in page


def test_a_call_made_for_the_model_before_its_first_step_says_so(run: Conversation) -> None:
    opening = {"id": "o", "name": "get_release_summary", "arguments": {"release_id": "v1"}}
    own = {"id": "c1", "name": "file_risk_report", "arguments": {"release_id": "v1"}}
    live = timeline.render_live(
        [
            save(run, "tool_call", step=0, tool_call=opening),
            save(run, "tool_call", step=1, tool_call=own),
        ]
    )
    page = "".join(item.render() for item in timeline.build(run.events.all()))
    for html in (live, page):
        heads = re.findall(r'<p class="tl-head">(.*?)</p>', html)
        assert [re.sub(r"<[^>]+>", "", head) for head in heads] == [
            "Read for the model before its first step: get_release_summary",
            "Called file_risk_report",
        ]


def test_a_tool_calls_arguments_read_the_same_whatever_order_the_database_keeps(
    run: Conversation,
) -> None:
    arguments = {"summary": "s", "release_id": "v1", "severity": "low"}
    card = save(
        run, "tool_call", step=1, tool_call={"id": "c1", "name": "f", "arguments": arguments}
    )
    reordered = dict(reversed(arguments.items()))
    again = save(
        run, "tool_call", step=2, tool_call={"id": "c1", "name": "f", "arguments": reordered}
    )
    first, second = (
        re.findall(r"<dt>(\w+)</dt>", timeline.render_live([e])) for e in (card, again)
    )
    assert first == second == ["release_id", "severity", "summary"]


def test_the_start_of_a_run_sets_the_status_and_the_model_in_the_header(run: Conversation) -> None:
    event = save(run, "run_started", conversation_id=str(run.pk), provider="openai", model=EVIL)
    live = timeline.render_live([event])
    assert 'id="run-status" class="status status-running" data-status="running"' in live
    assert '<span id="run-model" data-seq="1" hx-swap-oob="true">&lt;img' in live
    assert "(openai)</span>" in live and EVIL not in live


def test_the_end_of_a_run_sets_the_status_and_says_why_it_failed(run: Conversation) -> None:
    event = save(
        run, "run_failed", error_type="AuthenticationError", message="Incorrect API key", steps=1
    )
    live = timeline.render_live([event])
    assert 'id="run-status" class="status status-failed" data-status="failed"' in live
    assert (
        "The model provider refused the credentials (check the API key): Incorrect API key" in live
    )
    assert (
        '<div id="run-actions" class="run-actions" data-seq="1" hx-swap-oob="true"></div>' in live
    )
    # The page then fetches its own body: the duration, transcript, trace and report.
    assert (
        f'<div id="run-refresh" hx-swap-oob="true" data-seq="1" hx-get="/runs/{run.pk}/" '
        'hx-trigger="load" hx-target="#run" hx-swap="outerHTML"></div>' in live
    )


@pytest.mark.parametrize(
    ("kind", "payload", "status"),
    [
        ("run_finished", {"reason": "report_filed"}, "succeeded"),
        ("run_finished", {"reason": "answered"}, "succeeded"),
        ("run_finished", {"reason": "max_steps", "steps": 8}, "failed"),
        ("run_finished", {"reason": "tool_failing", "final_text": "Stopped: ..."}, "failed"),
        ("run_cancelled", {}, "cancelled"),
        ("run_failed", {"error_type": "NetworkError", "message": "refused"}, "failed"),
    ],
)
def test_outcomes(kind: str, payload: dict[str, object], status: str) -> None:
    assert timeline.outcome(kind, payload)[0] == status


def test_a_step_says_how_full_the_context_window_is(run: Conversation) -> None:
    save(
        run,
        "model_request_started",
        step=1,
        message_count=3,
        estimated_input_tokens=3120,
        context_window=8192,
    )
    save(run, "model_request_started", step=2, message_count=5, estimated_input_tokens=900)
    first, older = (item.render() for item in timeline.build(run.events.all()))
    assert "3,120 / 8,192 tokens (38 % of the context window)" in first
    # A run recorded before the window was: the estimate alone.
    assert "about 900 tokens" in older and "context window" not in older
