"""The agent loop (agent/loop.py): a run's events, history and store, its ends (answered,
max steps, failures, cancellation), retries relayed, the context window, conversations,
opening calls and coalesced text deltas."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import pytest

from agent.cancel import CancelToken
from agent.context.protocol import ContextFit
from agent.errors import AuthenticationError, ServerError
from agent.loop import Agent, AgentConfig
from agent.messages import Conversation, Message, ToolCall, ToolResult
from agent.providers.protocol import StreamEnd, StreamRetry, StreamTextDelta
from agent.reasoning import SelfCheckStrategy
from agent.retry import RetryingProvider
from agent.store import InMemoryStore
from agent.testing.fakes import FakeTools, PassThroughContext, ScriptedProvider, call, reply
from agent.testing.runs import SUMMARY, assessment_turns, collect, kinds, make_agent, release_tools


async def test_two_tool_assessment_events_history_and_store() -> None:
    store = InMemoryStore()
    context = PassThroughContext()
    agent, provider = make_agent(assessment_turns(), store=store, context=context)

    events = await collect(agent, "Assess the risk of release v2.1.0")

    assert kinds(events) == [
        "run_started",
        "model_request_started",
        "model_responded",
        "usage",
        "tool_call",
        "tool_result",
        "model_request_started",
        "model_responded",
        "usage",
        "tool_call",
        "tool_result",
        "report_filed",
        "run_finished",
    ]
    text = "".join(e.text for e in events if e.kind == "text_delta")
    assert text == "Fetching.High risk."
    report = next(e for e in events if e.kind == "report_filed")
    assert (report.release_id, report.severity, report.report_id) == ("v2.1.0", "high", "rep_1")
    assert report.findings == ["error_rate 0.06"]
    finished = events[-1]
    assert finished.reason == "report_filed"
    assert finished.steps == 2
    assert finished.usage.input_tokens == 400

    roles = [(m.role, m.tool_call_id) for m in agent.conversation.messages]
    assert roles == [
        ("user", None),
        ("assistant", None),
        ("tool", "c1"),
        ("assistant", None),
        ("tool", "c2"),
    ]
    # The second request carries the whole exchange, results right after their call.
    assert [m.role for m in provider.requests[1].messages] == ["user", "assistant", "tool"]
    assert provider.requests[0].system == agent.config.system_prompt
    assert {t.name for t in provider.requests[0].tools} == {
        "get_release_summary",
        "file_risk_report",
    }
    # Exact prompt sizes were handed to the context manager.
    assert context.recorded == [(100, 1), (300, 3)]

    saved = store.load(agent.conversation.id)
    assert saved.messages == agent.conversation.messages
    assert [s.event for s in store.load_events(saved.id)] == events
    assert saved.metadata["usage"]["input_tokens"] == 400
    assert agent.conversation.messages[1].metadata["step"] == 1


async def test_each_event_is_saved_before_it_is_yielded() -> None:
    store = InMemoryStore()
    agent, _ = make_agent(assessment_turns(), store=store)
    seen = 0
    async for event in agent.send_message("Assess v2.1.0"):
        seen += 1
        assert len(store.load_events(agent.conversation.id)) == seen
        assert store.load_events(agent.conversation.id)[-1].event == event


async def test_reply_without_tool_calls_answers() -> None:
    agent, _ = make_agent([reply("Hello! Ask me to assess a release.")])
    events = await collect(agent, "hi")
    assert kinds(events)[-1] == "run_finished"
    assert events[-1].reason == "answered"
    assert events[-1].final_text == "Hello! Ask me to assess a release."


async def test_max_steps_keeps_partial_work() -> None:
    turns = [reply("", call("get_release_summary", f"c{i}", release_id="v1")) for i in range(3)]
    agent, _ = make_agent(turns, max_steps=3)
    events = await collect(agent, "Assess v1")
    assert events[-1].kind == "run_finished"
    assert events[-1].reason == "max_steps"
    assert events[-1].steps == 3
    assert len(agent.conversation.messages) == 7  # user + 3 x (assistant, tool)


async def test_tool_calls_run_in_order_and_calls_after_the_report_are_skipped() -> None:
    tools = release_tools()
    turns = [
        reply(
            "",
            call("get_release_summary", "a", release_id="v1"),
            call("file_risk_report", "b", release_id="v1", severity="low", findings=[]),
            call("file_risk_report", "c", release_id="v1", severity="low", findings=[]),
        )
    ]
    agent, _ = make_agent(turns, tools)
    events = await collect(agent, "Assess v1")
    assert [c.id for c in tools.calls] == ["a", "b"]
    tool_messages = [m for m in agent.conversation.messages if m.role == "tool"]
    assert [m.tool_call_id for m in tool_messages] == ["a", "b", "c"]
    assert tool_messages[2].is_error
    assert "report was filed" in tool_messages[2].content
    assert events[-1].reason == "report_filed"


async def test_end_on_report_off_lets_the_model_answer() -> None:
    turns = [*assessment_turns(), reply("Filed a high-risk report.")]
    agent, provider = make_agent(turns, end_on_report=False)
    events = await collect(agent, "Assess v2.1.0")
    assert events[-1].reason == "answered"
    assert "report_filed" in kinds(events)
    assert provider.remaining == 0


async def test_provider_error_ends_the_run_with_run_failed() -> None:
    error = AuthenticationError("Invalid API key", provider="anthropic", status_code=401)
    agent, _ = make_agent([error])
    events = await collect(agent, "hi")
    assert kinds(events) == ["run_started", "model_request_started", "run_failed"]
    assert events[-1].error_type == "AuthenticationError"
    assert "Invalid API key" in events[-1].message
    assert "status 401" in events[-1].message


async def test_unexpected_exception_is_reported_without_details(
    caplog: pytest.LogCaptureFixture,
) -> None:
    agent, _ = make_agent([RuntimeError("secret-ish internal detail")])
    events = await collect(agent, "hi")
    assert events[-1].kind == "run_failed"
    assert events[-1].error_type == "RuntimeError"
    assert "secret-ish" not in events[-1].message
    assert "run crashed" in caplog.text


async def test_stream_without_end_fails_cleanly() -> None:
    agent, _ = make_agent([[StreamTextDelta(text="cut")]])
    events = await collect(agent, "hi")
    assert events[-1].error_type == "StreamError"


async def test_retries_are_relayed_and_discarded_text_dropped() -> None:
    final = reply("Second try.")
    turn = [
        StreamTextDelta(text="First tr"),
        StreamRetry(
            attempt=1,
            max_attempts=3,
            delay_s=0.5,
            reason="server error 529",
            error_type="ServerError",
            partial_discarded=True,
        ),
        StreamTextDelta(text="Second try."),
        StreamEnd(response=final),
    ]
    agent, _ = make_agent([turn])
    events = await collect(agent, "hi")
    retry = next(e for e in events if e.kind == "retry_scheduled")
    assert (retry.attempt, retry.delay_s, retry.partial_discarded) == (1, 0.5, True)
    assert agent.conversation.messages[-1].content == "Second try."


async def test_context_trim_is_reported() -> None:
    class Trimming(PassThroughContext):
        async def fit(self, system_prompt: str, messages: Sequence[Message]) -> ContextFit:
            return ContextFit(
                messages=list(messages)[-1:],
                tokens=50,
                budget=60,
                context_window=100,
                strategy="truncation",
                messages_before=len(messages),
                tokens_before=500,
            )

    agent, _ = make_agent([reply("ok")], context=Trimming())
    agent.conversation.messages.extend([Message.user("old"), Message.assistant("older")])
    events = await collect(agent, "new")
    trimmed = next(e for e in events if e.kind == "context_trimmed")
    assert (trimmed.messages_before, trimmed.messages_after) == (3, 1)
    assert (trimmed.tokens_before, trimmed.tokens_after, trimmed.utilisation) == (500, 50, 0.5)
    assert agent.get_context().context_window == 100


async def test_cancel_before_the_first_step() -> None:
    token = CancelToken()
    token.set("user pressed Ctrl+C")
    agent, provider = make_agent([reply("never")])
    events = await collect(agent, "hi", token)
    assert kinds(events) == ["run_started", "run_cancelled"]
    assert events[-1].reason == "user pressed Ctrl+C"
    assert provider.requests == []
    assert agent.conversation.messages[0].content == "hi"


async def test_cancel_while_streaming_closes_the_stream_and_keeps_partial_text() -> None:
    gate = asyncio.Event()
    gate.set()
    provider = ScriptedProvider([reply("Looking at the release now, " * 4)], gate=gate, chunk=10)
    # Every chunk its own event (no coalescing), so the test can stop the stream mid-way.
    agent = Agent(
        provider,
        release_tools(),
        context=PassThroughContext(),
        config=AgentConfig(delta_flush_seconds=0),
    )
    token = CancelToken()
    events = []
    async for event in agent.send_message("Assess v1", token):
        events.append(event)
        if event.kind == "text_delta" and len(events) > 3:
            gate.clear()  # the provider now stalls mid-stream
            asyncio.get_running_loop().call_later(0.01, token.set)
    assert events[-1].kind == "run_cancelled"
    assert provider.closed_streams == 1
    partial = agent.conversation.messages[-1]
    assert partial.role == "assistant"
    assert partial.metadata == {"partial": True, "cancelled": True}
    assert partial.content.startswith("Looking at")
    assert len(partial.content) < len("Looking at the release now, " * 4)


async def test_cancel_between_tool_calls_gives_every_call_a_result() -> None:
    token = CancelToken()

    def get_release_summary(release_id: str) -> dict:
        token.set()
        return SUMMARY

    tools = FakeTools({"get_release_summary": get_release_summary})
    turns = [
        reply(
            "",
            call("get_release_summary", "a", release_id="v1"),
            call("get_release_summary", "b", release_id="v2"),
        )
    ]
    agent, _ = make_agent(turns, tools)
    events = await collect(agent, "Assess", token)
    assert events[-1].kind == "run_cancelled"
    results = [m for m in agent.conversation.messages if m.role == "tool"]
    assert [(m.tool_call_id, m.is_error) for m in results] == [("a", False), ("b", True)]


async def test_strategy_with_two_calls_reports_both_and_answers_with_the_last() -> None:
    filing = call("file_risk_report", "c2", release_id="v1", severity="low", findings=["x"])
    revised = call("file_risk_report", "c3", release_id="v1", severity="high", findings=["y"])
    turns = [reply("", filing), reply("Corrected.", revised, input_tokens=999)]
    provider = ScriptedProvider(turns)
    context = PassThroughContext()
    agent = Agent(provider, release_tools(), context=context, reasoning=SelfCheckStrategy())
    events = await collect(agent, "Assess v1")
    assert kinds(events).count("model_responded") == 2
    assert events[-1].usage.input_tokens == 1099
    assert context.recorded == [(100, 1)]  # only the call whose prompt is the history
    report = next(e for e in events if e.kind == "report_filed")
    assert report.severity == "high"


async def test_history_context_and_conversations() -> None:
    store = InMemoryStore()
    agent, _ = make_agent(assessment_turns(), store=store)
    agent.conversation.metadata["trace_id"] = "abc123"
    await collect(agent, "Assess v2.1.0")

    assert len(agent.get_history()) == 5
    assert [m.role for m in agent.get_history(limit=2)] == ["assistant", "tool"]
    assert agent.get_history(limit=0) == []

    ctx = agent.get_context()
    assert ctx.message_count == 5
    assert ctx.provider == "scripted"
    assert ctx.model == "scripted-model"
    assert ctx.trace_id == "abc123"
    assert ctx.tool_calls == {"get_release_summary": 1, "file_risk_report": 1}
    assert ctx.usage.input_tokens == 400
    assert ctx.context_window == 32_000
    assert 0 < ctx.utilisation < 1
    assert ctx.reasoning == "direct"

    old_id = agent.conversation.id
    fresh = agent.new_conversation()
    assert fresh.id != old_id
    assert fresh.messages == []
    assert fresh.system_prompt == agent.config.system_prompt
    assert agent.context.resets == 1  # type: ignore[attr-defined]
    assert agent.get_context().usage.input_tokens == 0

    resumed = agent.resume(old_id)
    assert resumed.id == old_id
    assert len(agent.get_history()) == 5
    agent.resume(Conversation(id="other"))
    assert agent.conversation.id == "other"


async def test_resume_by_id_needs_a_store() -> None:
    agent, _ = make_agent([])
    with pytest.raises(Exception, match="No store"):
        agent.resume("conv_x")


async def test_server_error_after_partial_text_keeps_history_valid() -> None:
    agent, _ = make_agent([[StreamTextDelta(text="par"), ServerError("overloaded")]])
    events = await collect(agent, "hi")
    assert events[-1].kind == "run_failed"
    assert [m.role for m in agent.conversation.messages] == ["user"]


async def test_aclose_closes_the_provider_and_registered_resources() -> None:
    agent, provider = make_agent([])
    closed = []

    async def close_tools() -> None:
        closed.append("tools")

    agent.close_with(close_tools)
    await agent.aclose()
    assert provider.aclosed
    assert closed == ["tools"]


async def test_a_strategy_that_yields_nothing_fails_the_run() -> None:
    class Silent:
        name = "silent"

        async def respond(self, provider, request, cancel=None):  # type: ignore[no-untyped-def]
            return
            yield

    provider = ScriptedProvider([])
    agent = Agent(provider, release_tools(), context=PassThroughContext(), reasoning=Silent())
    events = await collect(agent, "hi")
    assert events[-1].kind == "run_failed"
    assert events[-1].error_type == "StreamError"


async def test_metadata_that_cannot_be_saved_does_not_break_the_run(
    caplog: pytest.LogCaptureFixture,
) -> None:
    from agent.store import ConversationNotFoundError

    class ForgetfulStore(InMemoryStore):
        def update_metadata(self, conversation_id: str, **metadata: object) -> None:
            raise ConversationNotFoundError("gone")

    agent, _ = make_agent([reply("ok")], store=ForgetfulStore())
    events = await collect(agent, "hi")
    assert events[-1].reason == "answered"
    assert "could not save the conversation's metadata" in caplog.text


async def test_a_cancelled_task_mid_tool_leaves_every_call_answered() -> None:
    started = asyncio.Event()

    async def get_release_summary(release_id: str) -> dict:
        started.set()
        await asyncio.sleep(10)
        return SUMMARY

    tools = FakeTools({"get_release_summary": get_release_summary})
    turns = [
        reply(
            "",
            call("get_release_summary", "a", release_id="v1"),
            call("get_release_summary", "b", release_id="v2"),
        )
    ]
    agent, _ = make_agent(turns, tools)
    task = asyncio.ensure_future(collect(agent, "Assess"))
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    results = [m for m in agent.conversation.messages if m.role == "tool"]
    assert [(m.tool_call_id, m.is_error) for m in results] == [("a", True), ("b", True)]
    assert "interrupted" in results[0].content


async def test_a_cancel_mid_tool_ends_the_run_at_once_with_every_call_answered() -> None:
    """The tool waits on a release API that is gone (the site stopping): the cancel does not
    wait for the tool's deadline."""
    token = CancelToken()

    async def get_release_summary(release_id: str) -> dict:
        asyncio.get_running_loop().call_later(0.01, token.set, "stopped with the site")
        await asyncio.sleep(30)
        return SUMMARY

    tools = FakeTools({"get_release_summary": get_release_summary})
    turns = [
        reply(
            "",
            call("get_release_summary", "a", release_id="v1"),
            call("get_release_summary", "b", release_id="v2"),
        )
    ]
    agent, _ = make_agent(turns, tools)
    events = await asyncio.wait_for(collect(agent, "Assess", token), 5)
    assert events[-1].kind == "run_cancelled"
    assert events[-1].reason == "stopped with the site"
    results = [m for m in agent.conversation.messages if m.role == "tool"]
    assert [(m.tool_call_id, m.is_error) for m in results] == [("a", True), ("b", True)]


async def test_registered_secrets_are_scrubbed_from_failures(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from agent.telemetry import logging as telemetry_logging

    monkeypatch.setattr(telemetry_logging, "_secrets", set())  # this test's own registry
    telemetry_logging.register_secret("sk-very-secret-key-0001")
    error = AuthenticationError("key sk-very-secret-key-0001 rejected", status_code=401)
    agent, _ = make_agent([error])
    events = await collect(agent, "hi")
    assert "sk-very-secret-key-0001" not in events[-1].message
    assert "[REDACTED]" in events[-1].message


async def test_retries_of_the_real_retrying_provider_become_events() -> None:
    from agent.retry import RetryPolicy

    slept: list[float] = []

    async def sleep(delay: float) -> None:
        slept.append(delay)

    scripted = ScriptedProvider([ServerError("overloaded", status_code=529), reply("Fine.")])
    provider = RetryingProvider(scripted, RetryPolicy(jitter=False), sleep=sleep)
    agent = Agent(provider, release_tools(), context=PassThroughContext())
    events = await collect(agent, "hi")
    retry = next(e for e in events if e.kind == "retry_scheduled")
    assert (retry.attempt, retry.error_type) == (1, "ServerError")
    assert slept == [1.0]
    assert events[-1].reason == "answered"


OPENING = (ToolCall(id="opening", name="get_release_summary", arguments={"release_id": "v2.1.0"}),)


async def test_opening_calls_run_before_the_first_step_and_the_model_starts_from_them() -> None:
    filing = call(
        "file_risk_report", "c2", release_id="v2.1.0", severity="high", findings=["error_rate"]
    )
    tools = release_tools()
    agent, provider = make_agent([reply("", filing)], tools, opening_calls=OPENING)

    events = await collect(agent, "Assess the risk of release v2.1.0")

    assert kinds(events)[:4] == ["run_started", "tool_call", "tool_result", "model_request_started"]
    assert [e.step for e in events if e.kind in ("tool_call", "tool_result")][:2] == [0, 0]
    assert (events[-1].reason, events[-1].steps) == ("report_filed", 1)
    # One model call: it read the summary's result in its first request.
    assert len(provider.requests) == 1
    first = provider.requests[0].messages
    assert [(m.role, m.tool_call_id) for m in first] == [
        ("user", None),
        ("assistant", None),
        ("tool", "opening"),
    ]
    assert first[1].tool_calls == list(OPENING) and first[1].metadata == {"opening": True}
    assert '"passed": 142' in first[2].content
    assert [c.name for c in tools.calls] == ["get_release_summary", "file_risk_report"]


async def test_a_terminal_failure_of_an_opening_call_ends_the_run_without_a_model_call() -> None:
    def get_release_summary(release_id: str) -> ToolResult:
        """Fetch the release summary."""
        return ToolResult(
            tool_call_id="opening",
            name="get_release_summary",
            content=f"Release {release_id!r} does not exist. No risk report was filed.",
            success=False,
            terminal=True,
        )

    tools = FakeTools({"get_release_summary": get_release_summary})
    agent, provider = make_agent([reply("Never reached.")], tools, opening_calls=OPENING)
    events = await collect(agent, "Assess v2.1.0")
    assert (events[-1].reason, events[-1].steps) == ("tool_failing", 0)
    assert events[-1].final_text.startswith("Stopped: Release 'v2.1.0' does not exist")
    assert provider.requests == []


async def test_opening_calls_are_made_once_per_conversation() -> None:
    tools = release_tools()
    turns = [reply("Noted."), reply("Still noted.")]
    agent, provider = make_agent(turns, tools, opening_calls=OPENING, max_text_only_nudges=0)
    await collect(agent, "Assess v2.1.0")
    await collect(agent, "And now?")
    assert [c.name for c in tools.calls] == ["get_release_summary"]
    assert len(provider.requests) == 2


async def test_streamed_chunks_are_coalesced_into_few_text_events() -> None:
    text = "word " * 2_000  # 10,000 characters in 8-character chunks: 1,250 chunks
    agent, _ = make_agent([reply(text)], delta_flush_chars=1_000, delta_flush_seconds=60)
    events = await collect(agent, "hi")
    deltas = [event for event in events if event.kind == "text_delta"]
    assert "".join(delta.text for delta in deltas) == text  # nothing lost
    # The first chunk goes at once (the page shows the model has started), then by size:
    # 1,000 characters each, not one event per chunk.
    assert len(deltas[0].text) == 8 and len(deltas) == 11
    assert events[-1].kind == "run_finished"


async def test_without_coalescing_every_chunk_is_an_event() -> None:
    agent, _ = make_agent([reply("a" * 80)], delta_flush_seconds=0)
    events = await collect(agent, "hi")
    assert len([event for event in events if event.kind == "text_delta"]) == 10
