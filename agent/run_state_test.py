"""The rules a run's state decides (agent/run_state.py), through the loop that applies them:
when a text-only reply is nudged, when the same failing call ends the run, an answer cut off
at the output limit, the run's caps, and the report event made from a filing."""

from __future__ import annotations

import pytest

from agent.messages import Message, ToolCall, ToolResult, Usage
from agent.providers.protocol import ModelResponse
from agent.providers.wire import RAW_ARGUMENTS_KEY
from agent.store import InMemoryStore
from agent.testing.fakes import FakeTools, call, reply
from agent.testing.runs import SUMMARY, assessment_turns, collect, kinds, make_agent, release_tools


async def test_announced_action_is_nudged_once_then_continues() -> None:
    turns = [
        reply("I will now fetch the summary."),
        *assessment_turns(),
    ]
    agent, provider = make_agent(turns)
    events = await collect(agent, "Assess v2.1.0")
    assert events[-1].reason == "report_filed"
    nudge = agent.conversation.messages[2]
    assert nudge.role == "user"
    assert nudge.metadata == {"nudge": True}
    assert "file_risk_report" in nudge.content
    assert provider.requests[1].messages[-1] == nudge


async def test_nudges_are_limited_per_run() -> None:
    turns = [reply("Let me fetch it."), reply("I'll fetch it now.")]
    agent, provider = make_agent(turns)
    events = await collect(agent, "Assess v2.1.0")
    assert events[-1].reason == "answered"
    assert provider.remaining == 0
    assert sum(1 for m in agent.conversation.messages if m.metadata.get("nudge")) == 1


async def test_assessment_written_instead_of_filed_is_nudged() -> None:
    turns = [
        reply("", call("get_release_summary", "c1", release_id="v2.1.0")),
        reply("This release looks high risk because of the error rate."),
        reply(
            "",
            call("file_risk_report", "c2", release_id="v2.1.0", severity="high", findings=[]),
        ),
    ]
    agent, _ = make_agent(turns)
    events = await collect(agent, "Assess v2.1.0")
    assert events[-1].reason == "report_filed"


async def test_no_nudge_after_a_failed_tool() -> None:
    tools = release_tools(summary=LookupError("release v9 not found"))
    turns = [
        reply("", call("get_release_summary", "c1", release_id="v9")),
        reply("Release v9 does not exist, so I cannot file a report."),
    ]
    agent, provider = make_agent(turns, tools)
    events = await collect(agent, "Assess v9")
    assert events[-1].reason == "answered"
    failed = next(e for e in events if e.kind == "tool_result")
    assert not failed.result.success
    assert provider.remaining == 0


async def test_no_nudge_without_tools_or_when_disabled() -> None:
    agent, _ = make_agent([reply("I will think about it.")], FakeTools({}))
    assert (await collect(agent, "hi"))[-1].reason == "answered"
    agent, _ = make_agent([reply("I will fetch it.")], max_text_only_nudges=0)
    assert (await collect(agent, "Assess v1"))[-1].reason == "answered"


async def test_follow_up_question_after_a_filed_report_is_not_nudged() -> None:
    turns = [
        *assessment_turns(),
        reply("", call("get_release_summary", "c3", release_id="v2.1.0")),
        reply("It changed payment processing."),
    ]
    agent, provider = make_agent(turns)
    await collect(agent, "Assess v2.1.0")
    events = await collect(agent, "What changed?")
    assert events[-1].reason == "answered"
    assert provider.remaining == 0


async def test_failed_tool_result_is_not_a_report() -> None:
    def file_risk_report(**_: object) -> ToolResult:
        return ToolResult(
            tool_call_id="",
            name="",
            content="refused: wrong release",
            success=False,
            terminal=False,
        )

    tools = FakeTools({"file_risk_report": file_risk_report}, terminal=["file_risk_report"])
    turns = [
        reply("", call("file_risk_report", "c1", release_id="other")),
        reply("I could not file the report."),
    ]
    agent, _ = make_agent(turns, tools)
    events = await collect(agent, "Assess v1")
    assert "report_filed" not in kinds(events)
    assert events[-1].reason == "answered"


async def test_report_findings_given_as_text_become_a_list() -> None:
    def file_risk_report(**arguments: object) -> ToolResult:
        return ToolResult(
            tool_call_id="",
            name="",
            content="filed",
            success=True,
            terminal=True,
            data={"severity": "low", "findings": "all tests pass", "release_id": "v1"},
        )

    tools = FakeTools({"file_risk_report": file_risk_report})
    agent, _ = make_agent([reply("", call("file_risk_report", "c1", release_id="v1"))], tools)
    events = await collect(agent, "Assess v1")
    report = next(e for e in events if e.kind == "report_filed")
    assert report.findings == ["all tests pass"]
    assert report.report_id is None


def _lookups(*release_ids: str) -> list:
    return [
        reply("", call("get_release_summary", f"c{i}", release_id=release_id))
        for i, release_id in enumerate(release_ids)
    ] + [reply("Never reached.")]


async def test_the_same_call_failing_the_same_way_three_times_ends_the_run() -> None:
    tools = release_tools(LookupError("Release 'v9' does not exist"))
    agent, _ = make_agent(_lookups("v9", "v9", "v9", "v9"), tools)
    events = await collect(agent, "Assess v9")
    finished = events[-1]
    assert finished.kind == "run_finished" and finished.reason == "tool_failing"
    assert finished.steps == 3 and len(tools.calls) == 3
    assert finished.final_text.startswith("Stopped: get_release_summary kept failing")
    assert "Release 'v9' does not exist" in finished.final_text


async def test_failures_that_differ_or_a_success_in_between_do_not_end_the_run() -> None:
    seen: list[str] = []

    def get_release_summary(release_id: str) -> dict:
        """Fetch the release summary."""
        seen.append(release_id)
        if release_id == "ok":
            return SUMMARY
        raise LookupError(f"no release {release_id}")

    tools = FakeTools({"get_release_summary": get_release_summary})
    # v1 fails twice, a success resets the count, then v1 twice more and v2 once: never three.
    agent, _ = make_agent(_lookups("v1", "v1", "ok", "v1", "v1", "v2"), tools, max_steps=10)
    events = await collect(agent, "Assess v1")
    assert events[-1].reason == "answered"
    assert seen == ["v1", "v1", "ok", "v1", "v1", "v2"]


async def test_the_same_refusal_with_other_arguments_is_told_more_then_ends_the_run() -> None:
    def file_risk_report(release_id: str, severity: str, findings: list[str]) -> dict:
        """File the report."""
        raise ValueError("findings.0: String should have at most 1000 characters")

    tools = FakeTools({"file_risk_report": file_risk_report})
    turns = [
        reply(
            "",
            call(
                "file_risk_report",
                f"c{n}",
                release_id="v1",
                severity="high",
                findings=["x" * (1500 + n)],
            ),
        )
        for n in range(5)
    ]
    agent, provider = make_agent(turns, tools, max_steps=12)
    events = await collect(agent, "Assess v1")

    results = [e.result.content for e in events if e.kind == "tool_result"]
    assert len(results) == 3 and provider.remaining == 2  # steps 4 to 12 never spent
    assert "second time" not in results[0]
    assert "second time file_risk_report was refused for this same reason" in results[1]
    assert "at most 1000 characters" in results[1]
    assert "A call that passes looks like this: file_risk_report(" in results[1]
    assert (events[-1].reason, events[-1].steps) == ("tool_failing", 3)


async def test_an_assessment_answered_in_words_before_any_tool_is_nudged_once() -> None:
    turns = [reply("214 failed tests, so the risk is high."), *assessment_turns()]
    agent, provider = make_agent(turns, assessing=True)
    events = await collect(agent, "Assess v2.1.0")
    assert events[-1].reason == "report_filed"
    nudges = [m for m in agent.conversation.messages if m.metadata.get("nudge")]
    assert len(nudges) == 1 and provider.requests[1].messages[-1] == nudges[0]
    # Without a release under assessment (a chat), the same words are an answer.
    chat, _ = make_agent([reply("214 failed tests, so the risk is high.")])
    assert (await collect(chat, "How did the tests go?"))[-1].reason == "answered"


async def test_the_limit_of_repeated_failures_is_configurable() -> None:
    tools = release_tools(LookupError("down"))
    agent, _ = make_agent(_lookups("v9", "v9", "v9"), tools, max_repeated_tool_failures=1)
    events = await collect(agent, "Assess v9")
    assert events[-1].reason == "tool_failing" and events[-1].steps == 1


async def test_a_tool_failure_marked_terminal_ends_the_run_with_its_message() -> None:
    def get_release_summary(release_id: str) -> ToolResult:
        """Fetch the release summary."""
        return ToolResult(
            tool_call_id="c0",
            name="get_release_summary",
            content="Release 'v9' does not exist. No risk report was filed.",
            success=False,
            error_type="InvalidArgumentsError",
            terminal=True,
        )

    tools = FakeTools({"get_release_summary": get_release_summary})
    turns = [
        reply(
            "",
            call("get_release_summary", "c0", release_id="v9"),
            call("file_risk_report", "c1", release_id="v9", severity="low", findings=["x"]),
        ),
        reply("Never reached."),
    ]
    agent, provider = make_agent(turns, tools)
    events = await collect(agent, "Assess v9")
    finished = events[-1]
    assert (finished.kind, finished.reason, finished.steps) == ("run_finished", "tool_failing", 1)
    assert finished.final_text == "Stopped: Release 'v9' does not exist. No risk report was filed."
    # The call after it never ran, yet has its result, so the history stays valid.
    assert [c.name for c in tools.calls] == ["get_release_summary"]
    skipped = agent.conversation.messages[-1]
    assert (skipped.role, skipped.tool_call_id) == ("tool", "c1")
    assert skipped.content.startswith("Not run")
    assert len(provider.requests) == 1


def cut_off_turn(call_id: str) -> ModelResponse:
    """A tool call cut off at the output limit: its arguments never parsed."""
    cut = ToolCall(
        id=call_id,
        name="file_risk_report",
        arguments={RAW_ARGUMENTS_KEY: '{"release_id": "v2.1.0", "findings": ["The summary'},
    )
    return ModelResponse(
        message=Message.assistant("The summary says " * 50, [cut]),
        usage=Usage(input_tokens=300, output_tokens=1024),
        finish_reason="length",
    )


async def test_an_answer_cut_off_at_the_output_limit_is_asked_once_briefly_then_ends() -> None:
    turns = [
        reply("Fetching.", call("get_release_summary", "c1", release_id="v2.1.0")),
        cut_off_turn("c2"),
        cut_off_turn("c3"),
        cut_off_turn("c4"),
    ]
    agent, provider = make_agent(turns)

    events = await collect(agent, "Assess the risk of release v2.1.0")

    end = events[-1]
    assert end.kind == "run_finished" and end.reason == "output_limit"
    assert "cut off at the output limit (1024 tokens)" in end.final_text
    # Not retried identically: the second request carries the short instruction; no third.
    assert len(provider.requests) == 3
    last_user = [m for m in provider.requests[2].messages if m.role == "user"][-1]
    assert "cut off at the output limit" in last_user.content
    assert "no summary" in last_user.content
    # The broken calls never ran; each has its "not run" result, so the history stays valid.
    results = [m for m in agent.conversation.messages if m.role == "tool"]
    assert [r.tool_call_id for r in results] == ["c1", "c2", "c3"]
    assert all("cut off" in r.content for r in results[1:])
    assert "tool_call" not in [e.kind for e in events if getattr(e, "step", 0) >= 2]


async def test_a_cut_off_answer_then_a_filing_ends_with_the_report() -> None:
    turns = [
        reply("Fetching.", call("get_release_summary", "c1", release_id="v2.1.0")),
        cut_off_turn("c2"),
        reply(
            "",
            call("file_risk_report", "c3", release_id="v2.1.0", severity="high", findings=["x"]),
        ),
    ]
    agent, _ = make_agent(turns)

    events = await collect(agent, "Assess the risk of release v2.1.0")

    assert events[-1].kind == "run_finished" and events[-1].reason == "report_filed"


async def test_a_complete_call_at_the_output_limit_still_runs() -> None:
    complete = ModelResponse(
        message=Message.assistant(
            "",
            [
                ToolCall(
                    id="c2",
                    name="file_risk_report",
                    arguments={"release_id": "v2.1.0", "severity": "low", "findings": ["x"]},
                )
            ],
        ),
        usage=Usage(input_tokens=300, output_tokens=1024),
        finish_reason="length",
    )
    turns = [reply("", call("get_release_summary", "c1", release_id="v2.1.0")), complete]
    agent, _ = make_agent(turns)

    events = await collect(agent, "Assess the risk of release v2.1.0")

    assert events[-1].reason == "report_filed"


@pytest.mark.parametrize(
    ("config", "cap"),
    [
        ({"max_text_chars": 500}, "DETECTIVE_MAX_RUN_TEXT_CHARS"),
        ({"max_output_chars": 500}, "DETECTIVE_MAX_RUN_OUTPUT_CHARS"),
        ({"max_events": 10, "delta_flush_seconds": 0}, "DETECTIVE_MAX_RUN_EVENTS"),
    ],
)
async def test_a_run_past_a_cap_is_stopped_saying_which(config: dict, cap: str) -> None:
    store = InMemoryStore()
    agent, _ = make_agent([reply("flood " * 1_000)], store=store, **config)
    events = await collect(agent, "hi")
    assert events[-1].kind == "run_failed"
    assert events[-1].error_type == "RunLimitExceeded"
    assert cap in events[-1].message and "Stopped" in events[-1].message
    # The flood was not kept: at most the cap's worth of text was saved.
    saved = sum(len(event.text) for event in events if event.kind == "text_delta")
    assert saved <= 520
